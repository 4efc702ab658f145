"""The release spec: a YAML file validated with pydantic; every error names its field."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mechanisms.errors import DPReleaseError
from mechanisms.gates import GATEABLE, GATES_STAGE, GATES_WEIGHT, NOT_GATEABLE, gate_sensitivities
from mechanisms.registry import MECHANISMS
from mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from mechanisms.synthesizer import Sensitivity

__all__ = ["ContinuousSpec", "EngineSpec", "ReleaseSpec", "SpecError", "load_spec"]


class SpecError(DPReleaseError):
    """The release spec is invalid; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ContinuousSpec(_Strict):
    """``out_of_bounds``: ``reject`` (default) refuses a value outside the bounds (±inf
    included); ``clip`` moves it to the nearer declared bound before validation. A
    missing value (empty, NA, NaN) is an error under both."""

    type: Literal["continuous"]
    bounds: tuple[float, float]
    integer: bool = False
    transform: Literal["none", "log"] = "none"
    out_of_bounds: Literal["reject", "clip"] = "reject"

    @field_validator("bounds")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(math.isfinite(b) for b in v) or not v[0] < v[1]:
            raise ValueError(f"bounds ({list(v)}) must be two finite numbers, lower < upper")
        return v


def _other_declared(other: str | None, info: ValidationInfo, values: str) -> str | None:
    """``other`` is needed by, and only by, ``unknown: other``, and must be declared."""
    unknown, declared = info.data.get("unknown"), info.data.get(values)
    if unknown == "other" and other is None:
        raise ValueError(f"unknown: other needs other: <token>, one of the declared {values}")
    if other is not None and unknown == "reject":
        raise ValueError(f"other ({other!r}) is used only with unknown: other")
    if other is not None and declared is not None and other not in declared:
        raise ValueError(f"other ({other!r}) must be one of the declared {values}: {declared}")
    return other


class OrdinalSpec(_Strict):
    """``unknown``: ``reject`` (default) refuses a value that is not a declared level;
    ``other`` maps it to the declared level ``other`` before validation. A missing cell is
    governed by ``missing`` alone, never mapped to ``other``."""

    type: Literal["ordinal"]
    levels: list[str] = Field(min_length=2)
    missing: str | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: str | None = Field(default=None, validate_default=True)

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "levels")


class NominalSpec(_Strict):
    """``unknown``/``other`` as for ordinal columns, over the declared categories."""

    type: Literal["nominal"]
    categories: list[str] = Field(min_length=2)
    missing: str | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: str | None = Field(default=None, validate_default=True)

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "categories")


ColumnSpec = Annotated[ContinuousSpec | OrdinalSpec | NominalSpec, Field(discriminator="type")]


class DatasetSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    path: Path


class PrivacySpec(_Strict):
    epsilon: float = Field(gt=0, le=100, allow_inf_nan=False)
    delta: float = Field(default=1e-6, ge=0, lt=1, allow_inf_nan=False)
    accountant: Literal["zcdp", "pure"] = "zcdp"
    allow_non_dp: bool = False
    lifetime_epsilon: float | None = Field(default=None, gt=0, le=1000, allow_inf_nan=False)
    lifetime_delta: float | None = Field(default=None, ge=0, lt=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _delta_fits(self) -> PrivacySpec:
        if self.accountant == "pure" and self.delta != 0:
            raise ValueError("delta must be 0 with accountant 'pure' (pure ε-DP has no δ)")
        if self.accountant == "zcdp" and self.delta == 0:
            raise ValueError("delta must be > 0 with accountant 'zcdp'")
        if self.lifetime_delta is not None and self.lifetime_epsilon is None:
            raise ValueError("lifetime_delta needs lifetime_epsilon")
        if self.lifetime_epsilon is not None:
            if self.allow_non_dp:
                raise ValueError(
                    "a release with allow_non_dp cannot be charged to a lifetime budget (its cost is "
                    "not a guarantee); remove lifetime_epsilon for comparison runs"
                )
            if self.epsilon > self.lifetime_epsilon:
                raise ValueError(
                    f"epsilon ({self.epsilon}) must not exceed lifetime_epsilon ({self.lifetime_epsilon})"
                )
            lifetime_delta = self.delta if self.lifetime_delta is None else self.lifetime_delta
            if self.delta > lifetime_delta:
                raise ValueError(f"delta ({self.delta}) must not exceed lifetime_delta ({lifetime_delta})")
        return self

    @property
    def lifetime(self) -> tuple[float, float] | None:
        """(ε, δ) that all releases of the dataset together may spend; δ defaults to this
        release's δ (zCDP histories compose in ρ and convert once, at that δ)."""
        if self.lifetime_epsilon is None:
            return None
        return self.lifetime_epsilon, self.delta if self.lifetime_delta is None else self.lifetime_delta


class MechanismSpec(_Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known(self) -> MechanismSpec:
        if self.name not in MECHANISMS:
            raise ValueError(f"name ({self.name!r}) must be one of {sorted(MECHANISMS)}")
        fields = {f.name for f in dataclasses.fields(MECHANISMS[self.name].params_type)}
        unknown = sorted(set(self.params) - fields)
        if unknown:
            raise ValueError(f"params {unknown} are not parameters of {self.name}: {sorted(fields)}")
        return self


class GateSpec(_Strict):
    min: float | None = Field(default=None, allow_inf_nan=False)
    max: float | None = Field(default=None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _some_bound(self) -> GateSpec:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class ChecksSpec(_Strict):
    """Post-release checks: advisory internal reports, and the gates that can stop a
    release. A gate is a DP mechanism (``mechanisms.gates``): only metrics with a bounded
    sensitivity can gate, and their noise is charged to the ``gates`` stage of the plan.
    ``sample_rows``: under a streaming engine the checks run on a uniform sample of at most
    this many fitted, held-out and synthetic rows each (the memory engine uses all rows)."""

    enabled: bool = True
    target: str | None = None
    holdout_fraction: float = Field(default=0.0, ge=0.0, le=0.5)
    sample_rows: int = Field(default=50_000, ge=100, le=5_000_000)
    gates: dict[str, GateSpec] = Field(default_factory=dict)

    @field_validator("gates")
    @classmethod
    def _known_metrics(cls, v: dict[str, GateSpec]) -> dict[str, GateSpec]:
        refused = [
            f"gate '{name}' cannot stop a release: {NOT_GATEABLE[name]}. It stays in the internal "
            "report as an advisory check"
            for name in v
            if name in NOT_GATEABLE
        ]
        if refused:
            raise ValueError(
                "; ".join(refused) + f". A gate must be a differentially private test: use {list(GATEABLE)}"
            )
        unknown = sorted(set(v) - set(GATEABLE))
        if unknown:
            raise ValueError(f"gates {unknown} must be among {list(GATEABLE)}")
        return v


class EngineSpec(_Strict):
    """Where the data passes run.

    ``memory`` (default): the table is read into memory; every mechanism. ``local``: two
    streaming passes over chunks of about ``chunk_rows`` rows on this machine (pass 1: GX
    validation and the histograms; pass 2: the latent second-moment sum); memory grows
    with the chunk, not with n. ``dask``: the same passes on a Dask cluster, at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``) or, without it, on a LocalCluster of
    ``workers`` processes. The noise is drawn once, on the machine running the flow.
    """

    name: Literal["memory", "local", "dask"] = "memory"
    chunk_rows: int = Field(default=250_000, ge=1_000, le=20_000_000)
    scheduler: str | None = Field(default=None, min_length=1)
    workers: int | None = Field(default=None, ge=1, le=256)

    @model_validator(mode="after")
    def _dask_only(self) -> EngineSpec:
        if self.name != "dask" and (self.scheduler is not None or self.workers is not None):
            raise ValueError("scheduler and workers apply only to name: dask")
        if self.scheduler is not None and self.workers is not None:
            raise ValueError("workers sets the size of a LocalCluster; a scheduler's cluster has its own")
        return self

    @property
    def streaming(self) -> bool:
        return self.name != "memory"


class OutputSpec(_Strict):
    """``formats``: the synthetic data files, ``synthetic.csv`` and/or ``synthetic.parquet``;
    default CSV under the memory engine, Parquet (written chunk by chunk) when streaming."""

    formats: list[Literal["csv", "parquet"]] | None = Field(default=None, min_length=1)

    @field_validator("formats")
    @classmethod
    def _once(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"formats ({v}) must name each format once")
        return v


class ReleaseSpec(_Strict):
    release_id: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=80)
    dataset: DatasetSpec
    columns: dict[str, ColumnSpec] = Field(alias="schema", min_length=1)
    privacy: PrivacySpec
    mechanism: MechanismSpec = MechanismSpec(name="factor_gauss")
    allocation: dict[str, float] = Field(default_factory=dict)
    synthetic_rows: int | None = Field(default=None, gt=0)
    checks: ChecksSpec = ChecksSpec()
    engine: EngineSpec = EngineSpec()
    output: OutputSpec = OutputSpec()
    base_dir: Path = Path(".")

    @model_validator(mode="after")
    def _consistent(self) -> ReleaseSpec:
        synth = MECHANISMS[self.mechanism.name]
        if self.privacy.accountant not in synth.notions:
            raise ValueError(
                f"privacy.accountant {self.privacy.accountant!r} is not supported by {synth.name}; "
                f"use one of {list(synth.notions)}"
            )
        params = self.mechanism_params()  # raises on bad parameter values
        schema = self.public_schema()  # raises on inconsistent columns
        try:
            synth.check(schema, params)
        except ValueError as e:
            raise ValueError(f"mechanism.{e}") from None
        defects = synth.defects(params)
        if defects and not self.privacy.allow_non_dp:
            raise ValueError(
                f"mechanism {synth.name} with these params is NOT differentially private "
                f"({'; '.join(defects)}); set privacy.allow_non_dp: true to run it for comparison only "
                "(the bundle is then marked not differentially private)"
            )
        if defects and getattr(params, "variant", None) == "paper" and self.privacy.accountant != "pure":
            raise ValueError(
                "a paper-literal variant reproduces a pure ε-DP paper; use privacy.accountant: pure"
            )
        weights = self._default_weights()
        unknown = sorted(set(self.allocation) - set(weights))
        if unknown:
            raise ValueError(f"allocation stages {unknown} must be among {sorted(weights)}")
        bad = {k: w for k, w in self.allocation.items() if not (math.isfinite(w) and w > 0)}
        if bad:
            raise ValueError(f"allocation weights {bad} must be finite numbers > 0")
        if synth.keeps_row_order and self.synthetic_rows is not None:
            raise ValueError(
                f"synthetic_rows cannot be set for {synth.name}: it releases exactly one row per "
                "fitted input row; remove synthetic_rows"
            )
        self._check_checks()
        if self.engine.streaming and synth.streaming is None:
            streamable = sorted(name for name, m in MECHANISMS.items() if m.streaming is not None)
            raise ValueError(
                f"engine.name {self.engine.name!r} streams the data in two passes (histograms, then a "
                f"statistic summed over chunks), which only {streamable} can use; "
                f"{synth.name} needs every row in memory: use engine.name: memory"
            )
        return self

    def _check_checks(self) -> None:
        c = self.checks
        if c.target is not None and c.target not in self.columns:
            raise ValueError(f"checks.target ({c.target!r}) must be a column of the schema")
        gates = set(c.gates)
        if not c.enabled and gates:
            raise ValueError("checks.gates need checks.enabled: true")
        if "wasserstein_max" in gates and not any(
            isinstance(col, ContinuousSpec) for col in self.columns.values()
        ):
            raise ValueError("gate wasserstein_max needs a continuous column in the schema")

    @property
    def output_formats(self) -> list[str]:
        if self.output.formats is not None:
            return list(self.output.formats)
        return ["parquet"] if self.engine.streaming else ["csv"]

    @property
    def data_path(self) -> Path:
        return self.dataset.path if self.dataset.path.is_absolute() else self.base_dir / self.dataset.path

    def resolved_release_id(self, now: datetime | None = None) -> str:
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dt%H%M%Sz")
        return self.release_id or f"{self.dataset.name}-{stamp}"

    def _default_weights(self) -> dict[str, float]:
        """The mechanism's default stage weights, and the ``gates`` stage (``GATES_WEIGHT``
        of the mechanism's total) when the spec declares gates."""
        synth = MECHANISMS[self.mechanism.name]
        weights = synth.stage_weights(self.public_schema(), self.mechanism_params())
        if self.checks.gates:
            weights[GATES_STAGE] = GATES_WEIGHT * (math.fsum(weights.values()) or 1.0)
        return weights

    def stage_weights(self) -> dict[str, float]:
        return {**self._default_weights(), **self.allocation}

    def sensitivities(
        self, n_fitted: int, facts: dict[str, Any], compared_rows: int | None
    ) -> dict[str, Sensitivity]:
        """Every noisy statistic of a release of this spec, with its Δ, from public facts
        only: the mechanism's ``sensitivities`` (schema, parameters, the fitted rows n, the
        stages' public facts) and the gates' (on ``compared_rows`` rows)."""
        synth = MECHANISMS[self.mechanism.name]
        out = dict(synth.sensitivities(self.public_schema(), self.mechanism_params(), n_fitted, facts))
        if self.checks.gates:
            if compared_rows is None:
                raise ValueError("the gates' sensitivity needs the number of compared rows")
            out.update(gate_sensitivities(list(self.checks.gates), compared_rows))
        return out

    def mechanism_params(self) -> Any:
        try:
            return MECHANISMS[self.mechanism.name].params_type(**self.mechanism.params)
        except (TypeError, ValueError) as e:
            raise ValueError(f"mechanism.{e}") from None

    def missing_tokens(self) -> dict[str, str]:
        return {
            name: c.missing
            for name, c in self.columns.items()
            if not isinstance(c, ContinuousSpec) and c.missing is not None
        }

    def clip_columns(self) -> list[str]:
        """Continuous columns whose out-of-bounds values are clipped to the declared bounds."""
        return [
            n for n, c in self.columns.items() if isinstance(c, ContinuousSpec) and c.out_of_bounds == "clip"
        ]

    def other_tokens(self) -> dict[str, str]:
        """Nominal and ordinal columns that map undeclared values to their ``other`` token."""
        return {
            n: c.other
            for n, c in self.columns.items()
            if not isinstance(c, ContinuousSpec) and c.unknown == "other" and c.other is not None
        }

    def public_schema(self) -> Schema:
        """The public schema; a declared ``missing`` token is one more category/level
        (for ordinal columns, the lowest)."""
        cols: list[Continuous | Ordinal | Nominal] = []
        for name, c in self.columns.items():
            if isinstance(c, ContinuousSpec):
                transform: Literal["identity", "log"] = "log" if c.transform == "log" else "identity"
                cols.append(Continuous(name, c.bounds[0], c.bounds[1], c.integer, transform))
            elif isinstance(c, OrdinalSpec):
                extra = [c.missing] if c.missing is not None and c.missing not in c.levels else []
                cols.append(Ordinal(name, tuple(extra + c.levels)))
            else:
                extra = [c.missing] if c.missing is not None and c.missing not in c.categories else []
                cols.append(Nominal(name, tuple(c.categories + extra)))
        return Schema(tuple(cols))

    def public_dict(self) -> dict:
        """The spec as published: schema, privacy, mechanism; never the data path or the
        Dask scheduler's address."""
        d = self.model_dump(mode="json", by_alias=True, exclude={"base_dir", "dataset"})
        d["dataset"] = {"name": self.dataset.name}
        if self.engine.scheduler is not None:  # infrastructure, like the data path
            d["engine"]["scheduler"] = "set (address not published)"
        return d


def _field(loc: tuple) -> str:
    return ".".join(str(p) for p in loc if not str(p).endswith("Spec"))


def load_spec(path: str | Path) -> ReleaseSpec:
    """Read and validate a YAML spec; relative dataset paths resolve against its folder."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file '{path}' does not exist; pass the path of a release YAML")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SpecError(f"spec file '{path}' is not UTF-8 text; save the release YAML as UTF-8") from None
    except yaml.YAMLError as e:
        raise SpecError(f"spec file '{path}' is not valid YAML: {e}") from None
    except RecursionError:
        raise SpecError(f"spec file '{path}' is nested too deeply to be a release spec") from None
    if not isinstance(raw, dict):
        raise SpecError(f"spec file '{path}' must contain a YAML mapping")
    if "base_dir" in raw:  # set by the loader, never by the file
        raise SpecError(
            f"invalid release spec '{path}':\n  spec field 'base_dir': not a spec field (a relative "
            "dataset.path resolves against the spec's folder); remove it"
        )
    try:  # model_validate, not **raw: YAML keys need not be strings, and pydantic names them
        return ReleaseSpec.model_validate({**raw, "base_dir": path.resolve().parent})
    except ValidationError as e:
        lines = [f"spec field '{_field(err['loc']) or '(top level)'}': {err['msg']}" for err in e.errors()]
        raise SpecError(f"invalid release spec '{path}':\n  " + "\n  ".join(lines)) from None
    except (TypeError, ValueError) as e:
        raise SpecError(f"invalid release spec '{path}': {e}") from None
