"""The release spec's sections other than the schema: dataset, privacy budget,
mechanism, checks and gates, engine, outputs. Each validates its own fields."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dprelease.mechanisms.auto import AUTO, AUTO_PARAMS
from dprelease.mechanisms.gates import GATEABLE, NOT_GATEABLE
from dprelease.mechanisms.periods import Period, PeriodBudget
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.value_grid import grid_columns
from dprelease.spec.columns import Strict
from dprelease.spec.text import Label, PathText

__all__ = [
    "MAX_NAME",
    "MAX_PERIOD_YEARS",
    "NEEDS_POLICY",
    "RELEASE_ID_LENGTH",
    "STAMP",
    "ChecksSpec",
    "DatasetSpec",
    "EngineSpec",
    "GateSpec",
    "MechanismSpec",
    "OutputSpec",
    "PeriodSpec",
    "PrivacySpec",
    "ResourcesSpec",
]


RELEASE_ID_LENGTH = 80
"""A release id names a folder: at most this many characters."""
STAMP = "%Y%m%dt%H%M%Sz"
"""The UTC time that ends a release id the spec does not declare: ``<dataset.name>-<STAMP>``."""
DISCOVERY = "-schema-"
"""What names a schema discovery's release: ``<dataset.name>-schema-<STAMP>`` (``dprelease discover``)."""
MAX_NAME = RELEASE_ID_LENGTH - len(DISCOVERY + datetime(2000, 1, 1).strftime(STAMP))
"""The longest ``dataset.name`` whose release ids, a discovery's included, fit ``RELEASE_ID_LENGTH`` (56)."""


class DatasetSpec(Strict):
    name: Label = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    path: PathText

    @field_validator("name")
    @classmethod
    def _fits_a_release_id(cls, v: str) -> str:
        if len(v) > MAX_NAME:
            raise ValueError(
                f"name must be at most {MAX_NAME} characters: a release is named <name>-<UTC time> (a schema "
                f"discovery <name>{DISCOVERY}<UTC time>), a folder name of at most {RELEASE_ID_LENGTH}"
            )
        return v


MAX_PERIOD_YEARS = 100
"""The longest ``privacy.period.length``, in years (P100Y, P1200M, P5217W; P9999D, the longest
count, is 27 years): a budget over a longer window is a lifetime budget
(``privacy.lifetime_epsilon``). A window must also end within the dates the ledger can name
(Python's year 9999: P8030Y, from 1970, would not)."""
_UNIT_YEARS = {"D": 1 / 365.25, "W": 7 / 365.25, "M": 1 / 12, "Y": 1.0}

NEEDS_POLICY = (
    "privacy.period (e.g. {length: P1M, epsilon: 1.0, delta: 1e-6}) or privacy.lifetime_epsilon must be "
    "set: a scheduled release (a run of a deployment) needs a budget policy, so that its repeated releases "
    "compose under a stated cap. Nothing was read or spent; add one of them to the spec"
)
"""Why a deployment's run without a budget policy is refused (``PrivacySpec.has_policy``)."""


class PeriodSpec(Strict):
    """A period budget: ``epsilon`` (and ``delta``, default the release's) per ``length``
    window of UTC calendar time (``mechanisms.periods``)."""

    length: Label
    epsilon: float = Field(strict=True, gt=0, le=1000, allow_inf_nan=False)
    delta: float | None = Field(strict=True, default=None, ge=0, lt=1, allow_inf_nan=False)
    disjoint: bool = Field(strict=True, default=False)
    """The steward's declaration that no person's row is in two periods' tables (e.g. one
    cohort per month): the periods then compose in parallel, and a person's all-time guarantee
    is the largest period's composed spend, not the sum over periods."""

    @field_validator("length")
    @classmethod
    def _one_unit(cls, v: str) -> str:
        period = Period.parse(v)
        if period.count * _UNIT_YEARS[period.unit] > MAX_PERIOD_YEARS:
            raise ValueError(
                f"length ({v!r}) must be at most {MAX_PERIOD_YEARS} years (P{MAX_PERIOD_YEARS}Y, "
                f"P{12 * MAX_PERIOD_YEARS}M, P{int(MAX_PERIOD_YEARS * 365.25 / 7)}W); for one budget "
                "over all time, set privacy.lifetime_epsilon instead of a period"
            )
        return v


class PrivacySpec(Strict):
    epsilon: float = Field(strict=True, gt=0, le=100, allow_inf_nan=False)
    delta: float = Field(strict=True, default=1e-6, ge=0, lt=1, allow_inf_nan=False)
    accountant: Literal["zcdp", "pure"] = "zcdp"
    allow_non_dp: bool = False
    lifetime_epsilon: float | None = Field(strict=True, default=None, gt=0, le=1000, allow_inf_nan=False)
    lifetime_delta: float | None = Field(strict=True, default=None, ge=0, lt=1, allow_inf_nan=False)
    period: PeriodSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _disjoint_is_a_period_field(cls, data: Any) -> Any:
        if isinstance(data, dict) and "disjoint" in data:
            raise ValueError(
                "disjoint must be set under privacy.period (privacy.period.disjoint): it declares that "
                "the periods' tables hold different people, and a lifetime budget has no periods"
            )
        return data

    @model_validator(mode="after")
    def _delta_fits(self) -> PrivacySpec:
        if self.accountant == "pure" and self.delta != 0:
            raise ValueError("delta must be 0 with accountant 'pure' (pure ε-DP has no δ)")
        if self.accountant == "zcdp" and self.delta == 0:
            raise ValueError("delta must be > 0 with accountant 'zcdp'")
        if self.period is not None:
            self._period_fits(self.period)
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

    def _period_fits(self, period: PeriodSpec) -> None:
        """One policy (a lifetime or a period), which a DP release's own (ε, δ) fits."""
        if self.lifetime_epsilon is not None or self.lifetime_delta is not None:
            raise ValueError(
                "period and lifetime_epsilon/lifetime_delta are two budget policies: state one, "
                "period (a budget per calendar period) or lifetime_epsilon (one budget for all time)"
            )
        if self.allow_non_dp:
            raise ValueError(
                "a release with allow_non_dp cannot be charged to a period budget (its cost is not a "
                "guarantee); remove period for comparison runs"
            )
        if self.epsilon > period.epsilon:
            raise ValueError(f"epsilon ({self.epsilon}) must not exceed period.epsilon ({period.epsilon})")
        if period.delta is not None and self.delta > period.delta:
            raise ValueError(f"delta ({self.delta}) must not exceed period.delta ({period.delta})")

    @property
    def lifetime(self) -> tuple[float, float] | None:
        """(ε, δ) that all releases of the dataset together may spend; δ defaults to this
        release's δ (zCDP histories compose in ρ and convert once, at that δ)."""
        if self.lifetime_epsilon is None:
            return None
        return self.lifetime_epsilon, self.delta if self.lifetime_delta is None else self.lifetime_delta

    @property
    def period_budget(self) -> PeriodBudget | None:
        """(ε, δ) per period window (``period``); δ defaults to this release's δ."""
        if self.period is None:
            return None
        delta = self.delta if self.period.delta is None else self.period.delta
        return PeriodBudget(
            Period.parse(self.period.length), self.period.epsilon, delta, self.period.disjoint
        )

    @property
    def has_policy(self) -> bool:
        """Whether a budget policy (a lifetime or a period) caps the dataset's releases."""
        return self.lifetime_epsilon is not None or self.period is not None


class MechanismSpec(Strict):
    """``value_grid``: also measure, at stage ``grid``, which values of its public grid each
    continuous column with ``decimals`` (or integer intervals) takes, and move synthetic
    values onto them inside their cells (``mechanisms.value_grid``)."""

    name: Label
    params: dict[Label, Any] = Field(default_factory=dict)
    value_grid: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _known(self) -> MechanismSpec:
        if self.name == AUTO:
            unknown = sorted(set(self.params) - set(AUTO_PARAMS))
            if unknown:
                raise ValueError(
                    f"params {unknown} are not parameters of {AUTO}: {list(AUTO_PARAMS)}; to set another "
                    "mechanism's parameters, name that mechanism"
                )
            return self
        if self.name not in MECHANISMS:
            raise ValueError(f"name ({self.name!r}) must be {AUTO!r} or one of {sorted(MECHANISMS)}")
        fields = {f.name for f in dataclasses.fields(MECHANISMS[self.name].params_type)}
        unknown = sorted(set(self.params) - fields)
        if unknown:
            raise ValueError(f"params {unknown} are not parameters of {self.name}: {sorted(fields)}")
        return self


def check_value_grid(mechanism: MechanismSpec, schema: Schema) -> None:
    """``mechanism.value_grid`` needs a column with a public grid (``value_grid.grid_columns``)."""
    if mechanism.value_grid and not grid_columns(schema):
        raise ValueError(
            "mechanism.value_grid needs a continuous column with a public grid: declare decimals "
            "(or integer: true with bounds spanning more than 128 integers) on one, or remove value_grid"
        )


class GateSpec(Strict):
    min: float | None = Field(strict=True, default=None, allow_inf_nan=False)
    max: float | None = Field(strict=True, default=None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _some_bound(self) -> GateSpec:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class ChecksSpec(Strict):
    """Post-release checks: advisory internal reports, and the gates that can stop a
    release. A gate is a DP mechanism (``mechanisms.gates``): only metrics with a bounded
    sensitivity can gate, and their noise is charged to the ``gates`` stage of the plan.
    ``sample_rows``: under a streaming engine the checks run on a uniform sample of at most
    this many fitted, held-out and synthetic rows each (the memory engine uses all rows)."""

    enabled: bool = True
    target: Label | None = None
    holdout_fraction: float = Field(strict=True, default=0.0, ge=0.0, le=0.5)
    sample_rows: int = Field(strict=True, default=50_000, ge=100, le=5_000_000)
    gates: dict[Label, GateSpec] = Field(default_factory=dict)

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


class EngineSpec(Strict):
    """Where the data passes run.

    ``memory`` (default): the table is read into memory; every mechanism. ``local``: two
    streaming passes over chunks of about ``chunk_rows`` rows on this machine (pass 1: GX
    validation and the histograms; pass 2: the latent second-moment sum); memory grows
    with the chunk, not with n. ``dask``: the same passes on a Dask cluster, at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``) or, without it, on a LocalCluster of
    ``workers`` processes. The noise is drawn once, on the machine running the flow.
    """

    name: Literal["memory", "local", "dask"] = "memory"
    chunk_rows: int = Field(strict=True, default=250_000, ge=1_000, le=20_000_000)
    scheduler: Label | None = Field(default=None, min_length=1)
    workers: int | None = Field(strict=True, default=None, ge=1, le=256)

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


class OutputSpec(Strict):
    """``formats``: the synthetic data files, ``synthetic.csv`` and/or ``synthetic.parquet``;
    default CSV under the memory engine, Parquet (written chunk by chunk) when streaming."""

    formats: list[Literal["csv", "parquet"]] | None = Field(default=None, min_length=1)

    @field_validator("formats")
    @classmethod
    def _once(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"formats ({v}) must name each format once")
        return v


class ResourcesSpec(Strict):
    """Ceilings on what a release of this spec may need on the machine that runs it: the
    forecast peak memory (GB, 2³⁰ bytes) and time (seconds) of its rehearsal and of the
    release itself (``spec.resources``, from public facts only). A spec forecast above
    either is refused before the rehearsal and before any budget is reserved. Unset: the
    defaults, the smaller of 8 GB and ¾ of this machine's memory, and one hour. The
    command line's ``--max-memory`` and ``--max-seconds`` (or ``DPRELEASE_MAX_MEMORY_GB``,
    ``DPRELEASE_MAX_SECONDS``) override them."""

    max_memory_gb: float | None = Field(default=None, gt=0, le=4096, allow_inf_nan=False)
    max_seconds: float | None = Field(default=None, gt=0, le=30 * 86400, allow_inf_nan=False)

    @field_validator("max_memory_gb", "max_seconds", mode="before")
    @classmethod
    def _a_number(cls, v: Any) -> Any:
        if isinstance(v, bool) or not (v is None or isinstance(v, int | float)):
            raise ValueError(f"({v!r}) must be a number, e.g. 16 or 7200")
        return v
