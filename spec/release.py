"""The release spec: a YAML file validated with pydantic; every error names its field."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from dprelease.mechanisms.accounting import BudgetPlan, plan_budget
from dprelease.mechanisms.auto import AUTO, AUTO_PARAMS, CANDIDATES, AutoChoice, candidate_params, choose
from dprelease.mechanisms.errors import SpecError
from dprelease.mechanisms.gates import GATES_STAGE, GATES_WEIGHT, gate_sensitivities
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import Sensitivity
from dprelease.mechanisms.value_grid import GRID_STAGE, GRID_WEIGHT, grid_sensitivities
from dprelease.spec.columns import (
    ColumnSpec,
    ContinuousSpec,
    DateSpec,
    DerivedSpec,
    DropSpec,
    IdSpec,
    Label,
    NominalSpec,
    OneHotSpec,
    OrdinalSpec,
    Strict,
)
from dprelease.spec.draft import DraftSpec
from dprelease.spec.sections import (
    RELEASE_ID_LENGTH,
    STAMP,
    ChecksSpec,
    DatasetSpec,
    EngineSpec,
    MechanismSpec,
    OutputSpec,
    PrivacySpec,
    ResourcesSpec,
    check_value_grid,
)

__all__ = [
    "MAX_SYNTHETIC_ROWS",
    "RELEASE_ID",
    "ContinuousSpec",
    "EngineSpec",
    "ReleaseSpec",
    "SpecError",
]

MAX_SYNTHETIC_ROWS = 10**9
"""The most rows a spec may ask for (``synthetic_rows``), whatever the machine: more than
any population register or census file holds (the largest national censuses count about
1.4·10⁹ people, and their microdata samples a few percent of them), and, at the 8 bytes
per cell the decoders work in, 8 GB per column before a row is written. Below it, the
resource forecast (``spec.resources``) weighs the rows against the machine's ceiling."""

RELEASE_ID = re.compile(rf"[a-z0-9][a-z0-9-]{{0,{RELEASE_ID_LENGTH - 1}}}")
"""A release id: it names a folder, so lowercase letters, digits and '-', at most 80."""


class ReleaseSpec(Strict):
    release_id: Label | None = Field(default=None, pattern=rf"^{RELEASE_ID.pattern}$")
    dataset: DatasetSpec
    columns: dict[Label, ColumnSpec] = Field(alias="schema", min_length=1)
    privacy: PrivacySpec
    mechanism: MechanismSpec = MechanismSpec(name="factor_gauss")
    allocation: dict[Label, float] = Field(default_factory=dict)
    synthetic_rows: int | None = Field(default=None, gt=0, strict=True)
    checks: ChecksSpec = ChecksSpec()
    engine: EngineSpec = EngineSpec()
    output: OutputSpec = OutputSpec()
    resources: ResourcesSpec = ResourcesSpec()
    draft: DraftSpec | None = None
    base_dir: Path = Path(".")

    _choice: AutoChoice | None = PrivateAttr(default=None)

    @field_validator("synthetic_rows")
    @classmethod
    def _not_beyond_any_table(cls, v: int | None) -> int | None:
        if v is not None and v > MAX_SYNTHETIC_ROWS:
            raise ValueError(
                f"synthetic_rows ({v:.3g}) must be at most {MAX_SYNTHETIC_ROWS:.0e} (more rows than any "
                "population holds); lower it, or leave it out to release as many rows as the input has"
            )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ReleaseSpec:
        self._one_target()
        if self.mechanism.name == AUTO:
            if self.allocation:
                raise ValueError(
                    "allocation names the stages of one mechanism: with mechanism 'auto', leave it out or "
                    "name the mechanism"
                )
            self.auto_candidates()  # raises when neither candidate can run this spec
        else:
            self._check_mechanism(self.mechanism.name, self.mechanism.params)
        self._check_checks()
        self._check_structure()
        check_value_grid(self.mechanism, self.public_schema())
        return self

    def _one_target(self) -> None:
        """``checks.target`` is the mechanism's target too, where the mechanism takes one and
        its params name none: a nominal or ordinal checks target sets ``mechanism.params.target``
        (the 2-way tables with it that refine the model: issue 40, following spec.md's example
        set only the checks' key and lost them). ``params.target: null`` keeps it off; a
        continuous checks target (R²) is no mechanism target."""
        target, params = self.checks.target, self.mechanism.params
        if target is None or "target" in params:
            return
        name = self.mechanism.name
        takes: tuple[str, ...]
        if name == AUTO:
            takes = AUTO_PARAMS
        else:
            takes = tuple(f.name for f in dataclasses.fields(MECHANISMS[name].params_type))
        if "target" not in takes:
            return
        declared = self.columns.get(target)
        if isinstance(declared, NominalSpec | OrdinalSpec):
            params["target"] = target

    def _check_mechanism(self, name: str, given: dict[str, Any]) -> None:
        """What mechanism ``name`` with parameters ``given`` needs of this spec."""
        synth = MECHANISMS[name]
        if self.privacy.accountant not in synth.notions:
            raise ValueError(
                f"privacy.accountant {self.privacy.accountant!r} is not supported by {synth.name}; "
                f"use one of {list(synth.notions)}"
            )
        params = _params(name, given)  # raises on bad parameter values
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
        weights = self._weights(name, params)
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
        empty = [
            n
            for n, c in self.columns.items()
            if isinstance(c, ContinuousSpec | DateSpec) and c.missing == "allowed"
        ]
        if empty and not synth.models_missing:
            models = sorted(name for name, m in MECHANISMS.items() if m.models_missing)
            raise ValueError(
                f"column '{empty[0]}': missing: allowed needs a mechanism that models a missing value as "
                f"a cell ({models}); {synth.name} decodes continuous values without one"
            )
        if self.engine.streaming and synth.streaming is None:
            streamable = sorted(name for name, m in MECHANISMS.items() if m.streaming is not None)
            raise ValueError(
                f"engine.name {self.engine.name!r} streams the data in two passes (histograms, then a "
                f"statistic summed over chunks), which only {streamable} can use; "
                f"{synth.name} needs every row in memory: use engine.name: memory"
            )

    def auto_candidates(self) -> tuple[str, ...]:
        """The mechanisms ``mechanism: auto`` may choose for this spec (``mechanisms.auto``):
        those of ``CANDIDATES`` whose requirements it meets."""
        target = self.mechanism.params.get("target")
        problems: dict[str, str] = {}
        for name in CANDIDATES:
            try:
                self._check_mechanism(name, candidate_params(name, target))
            except ValueError as e:
                problems[name] = str(e)
        if len(problems) == len(CANDIDATES):
            raise ValueError(
                "mechanism 'auto' chooses between "
                + " and ".join(f"{name} ({problem})" for name, problem in problems.items())
                + ", and neither can run this spec"
            )
        return tuple(name for name in CANDIDATES if name not in problems)

    def resolve(self, n_fitted: int, *, rows: int) -> ReleaseSpec:
        """This spec with ``mechanism: auto`` replaced by the mechanism the public rule of
        ``mechanisms.auto`` chooses for ``n_fitted`` fitted rows of the input's ``rows`` (the
        spec itself otherwise); the choice and its facts are in ``auto_choice`` and the
        release document."""
        if self.mechanism.name != AUTO:
            return self
        choice = choose(
            n_fitted,
            self.privacy.accountant,
            len(schema := self.public_schema()),
            sum(c.kind == "continuous" for c in schema.columns),
            self.mechanism.params.get("target"),
            self.auto_candidates(),
        )
        resolved = self._candidate(choice.mechanism)
        resolved._choice = replace(choice, rows=rows)
        return resolved

    def _candidate(self, name: str) -> ReleaseSpec:
        """This ``auto`` spec running candidate ``name`` with the parameters auto gives it."""
        params = candidate_params(name, self.mechanism.params.get("target"))
        return self.model_copy(update={"mechanism": MechanismSpec(name=name, params=params)})

    def ledger_plan(self) -> BudgetPlan:
        """The plan the ledger's pre-check judges (``Ledger.refusal``): ``budget_plan``; under
        ``mechanism: auto``, before n is known, the candidate plan with the largest charge.
        The candidates split the same (ε, δ) under the same accountant, so their charges
        differ only by how each stage's share was rounded down (a few ulps); composition is
        monotone in the charge, so if the largest fits the policy, the chosen one fits too,
        and a refusal never depends on n or on the choice."""
        if self.mechanism.name != AUTO:
            return self.budget_plan()
        plans = [self._candidate(name).budget_plan() for name in self.auto_candidates()]
        return max(plans, key=lambda p: (p.spent_rho or 0.0, p.spent_epsilon))

    def mechanism_defects(self) -> list[str]:
        """Why the mechanism is not differentially private with these parameters (none: it
        is); under ``mechanism: auto``, any candidate's (the spec admits no candidate that
        is not DP unless ``privacy.allow_non_dp``)."""
        auto = self.mechanism.name == AUTO
        specs = [self._candidate(n) for n in self.auto_candidates()] if auto else [self]
        return [d for s in specs for d in MECHANISMS[s.mechanism.name].defects(s.mechanism_params())]

    @property
    def auto_choice(self) -> AutoChoice | None:
        """What ``mechanism: auto`` chose and why (None: the spec named its mechanism)."""
        return self._choice

    def _concrete(self) -> str:
        if self.mechanism.name == AUTO:
            raise SpecError(
                "mechanism 'auto' is chosen from the public row count when the release runs "
                "(ReleaseSpec.resolve); this step needs the chosen mechanism"
            )
        return self.mechanism.name

    def _check_structure(self) -> None:
        """Indicator columns are named once in the file; a formula reads modelled
        continuous columns (not dates) only."""
        file_names = [n for n, c in self.columns.items() if not isinstance(c, OneHotSpec)]
        for name, (indicators, _) in self.one_hot().items():
            clash = sorted(set(indicators) & set(file_names))
            if clash:
                raise ValueError(f"column '{name}': one_hot columns {clash} are also declared as columns")
            file_names += indicators
        dup = sorted({n for n in file_names if file_names.count(n) > 1})
        if dup:
            raise ValueError(f"one_hot columns {dup} appear in more than one group")
        numeric = {n for n, c in self.columns.items() if isinstance(c, ContinuousSpec)}
        for name, d in self.derived().items():
            bad = [v for v in d.compiled().names if v not in numeric]
            if bad:
                raise ValueError(
                    f"column '{name}': formula {d.formula!r} reads {bad}, which must be modelled continuous "
                    f"columns of the schema ({sorted(numeric)})"
                )

    def refuse_draft(self) -> None:
        """A draft (``dprelease init``) is not released until its guesses are confirmed."""
        if self.draft is not None:
            raise SpecError(
                f"the spec is a draft written by {self.draft.written_by}: confirm the "
                f"{len(self.draft.confirm)} item(s) that `dprelease validate` lists, then delete its "
                "draft: section"
            )

    def _check_checks(self) -> None:
        c = self.checks
        if c.target is not None and c.target not in self.public_schema().names:
            raise ValueError(
                f"checks.target ({c.target!r}) must be a column of the schema, not an id or drop column"
            )
        declared = self.columns.get(c.target) if c.target is not None else None
        if isinstance(declared, ContinuousSpec | DateSpec) and declared.missing == "allowed":
            raise ValueError(
                f"checks.target ({c.target!r}) must not be a column with missing: allowed (the "
                "utility models need a value in every row)"
            )
        gates = set(c.gates)
        if not c.enabled and gates:
            raise ValueError("checks.gates need checks.enabled: true")
        if "wasserstein_max" in gates and not any(
            isinstance(col, ContinuousSpec) and col.missing == "reject" for col in self.columns.values()
        ):
            raise ValueError(
                "gate wasserstein_max needs a continuous column without missing: allowed in the schema"
            )

    @property
    def output_formats(self) -> list[str]:
        if self.output.formats is not None:
            return list(self.output.formats)
        return ["parquet"] if self.engine.streaming else ["csv"]

    @property
    def data_path(self) -> Path:
        return self.dataset.path if self.dataset.path.is_absolute() else self.base_dir / self.dataset.path

    def resolved_release_id(self, now: datetime | None = None) -> str:
        stamp = (now or datetime.now(UTC)).strftime(STAMP)
        return self.release_id or f"{self.dataset.name}-{stamp}"

    def _default_weights(self) -> dict[str, float]:
        return self._weights(self._concrete(), self.mechanism_params())

    def _weights(self, name: str, params: Any) -> dict[str, float]:
        """Mechanism ``name``'s default stage weights, and the ``gates`` stage
        (``GATES_WEIGHT`` of the mechanism's total) when the spec declares gates, and the
        ``grid`` stage (``GRID_WEIGHT`` of it) with ``mechanism.value_grid``."""
        weights = MECHANISMS[name].stage_weights(self.public_schema(), params)
        total = math.fsum(weights.values()) or 1.0
        if self.checks.gates:
            weights[GATES_STAGE] = GATES_WEIGHT * total
        if self.mechanism.value_grid:
            weights[GRID_STAGE] = GRID_WEIGHT * total
        return weights

    def stage_weights(self) -> dict[str, float]:
        return {**self._default_weights(), **self.allocation}

    def budget_plan(self, epsilon: float | None = None) -> BudgetPlan:
        """The release's plan: ``privacy.epsilon`` (or ``epsilon``, for a forecast) and
        ``privacy.delta`` under the spec's accountant, split over ``stage_weights``
        (``mechanisms.accounting.plan_budget``). The one plan the flow's reserve, the CLI's
        and the API's ledger pre-check, the forecast and ``synthesize`` use."""
        p = self.privacy
        return plan_budget(
            p.accountant, p.epsilon if epsilon is None else epsilon, p.delta, self.stage_weights()
        )

    def sensitivities(
        self, n_fitted: int, facts: dict[str, Any], compared_rows: int | None
    ) -> dict[str, Sensitivity]:
        """Every noisy statistic of a release of this spec, with its Δ, from public facts
        only: the mechanism's ``sensitivities`` (schema, parameters, the fitted rows n, the
        stages' public facts) and the gates' (on ``compared_rows`` rows)."""
        synth = MECHANISMS[self._concrete()]
        out = dict(synth.sensitivities(self.public_schema(), self.mechanism_params(), n_fitted, facts))
        if self.checks.gates:
            if compared_rows is None:
                raise ValueError("the gates' sensitivity needs the number of compared rows")
            out.update(gate_sensitivities(list(self.checks.gates), compared_rows))
        if self.mechanism.value_grid:
            out.update(grid_sensitivities(self.public_schema()))
        return out

    def mechanism_params(self) -> Any:
        return _params(self._concrete(), self.mechanism.params)

    def missing_tokens(self) -> dict[str, str]:
        return {
            name: c.missing
            for name, c in self.columns.items()
            if isinstance(c, OrdinalSpec | NominalSpec) and c.missing is not None
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
            if isinstance(c, OrdinalSpec | NominalSpec) and c.unknown == "other" and c.other is not None
        }

    def ignored_columns(self) -> list[str]:
        """Columns read past and never modelled: identifiers (``type: id``), dropped
        columns (``type: drop``) and derived ones (``type: derived``, recomputed after
        decoding). The readers check they are in the header, then leave them."""
        return [n for n, c in self.columns.items() if isinstance(c, IdSpec | DropSpec | DerivedSpec)]

    def one_hot(self) -> dict[str, tuple[tuple[str, ...], str | None]]:
        """One-hot groups: the modelled nominal's name → (its indicator columns in the
        file, the category of a row with none set, or None)."""
        return {n: (tuple(c.columns), c.none) for n, c in self.columns.items() if isinstance(c, OneHotSpec)}

    def derived(self) -> dict[str, DerivedSpec]:
        return {n: c for n, c in self.columns.items() if isinstance(c, DerivedSpec)}

    def identifiers(self) -> dict[str, str]:
        """Identifier columns and the format of their fresh synthetic values."""
        return {n: c.format for n, c in self.columns.items() if isinstance(c, IdSpec)}

    def dropped_columns(self) -> list[str]:
        return [n for n, c in self.columns.items() if isinstance(c, DropSpec)]

    def output_columns(self) -> list[str]:
        """The published table's columns, in the declared order: all but the dropped ones,
        a one-hot group as its indicator columns."""
        out: list[str] = []
        for n, c in self.columns.items():
            if isinstance(c, OneHotSpec):
                out += c.columns
            elif not isinstance(c, DropSpec):
                out.append(n)
        return out

    def public_schema(self) -> Schema:
        """The public schema of the modelled columns (not ``id`` or ``drop``); a declared
        ``missing`` token is one more category/level (for ordinal columns, the lowest)."""
        cols: list[Continuous | Ordinal | Nominal] = []
        for name, c in self.columns.items():
            if isinstance(c, ContinuousSpec):
                cols.append(c.public_column(name))
            elif isinstance(c, DateSpec):
                lo, hi = c.unit_bounds()
                cols.append(
                    Continuous(
                        name, lo, hi, True, intervals=c.bins, missing=c.missing == "allowed", calendar=c.unit
                    )
                )
            elif isinstance(c, OneHotSpec):
                cols.append(Nominal(name, tuple(c.categories)))
            elif isinstance(c, OrdinalSpec):
                extra = [c.missing] if c.missing is not None and c.missing not in c.levels else []
                cols.append(Ordinal(name, tuple(extra + c.levels)))
            elif isinstance(c, NominalSpec):
                extra = [c.missing] if c.missing is not None and c.missing not in c.categories else []
                cols.append(Nominal(name, tuple(c.categories + extra)))
        return Schema(tuple(cols))

    def public_dict(self) -> dict:
        """The spec as published: schema, privacy, mechanism; never the data path or the
        Dask scheduler's address."""
        d = self.model_dump(mode="json", by_alias=True, exclude={"base_dir", "dataset"})
        d["dataset"] = {"name": self.dataset.name}
        if not self.mechanism.value_grid:  # off: published as before the key existed
            del d["mechanism"]["value_grid"]
        for column in d["schema"].values():  # no declared edges: published as before the key existed
            if column.get("type") == "continuous" and column.get("edges") is None:
                column.pop("edges", None)
        if self.engine.scheduler is not None:  # infrastructure, like the data path
            d["engine"]["scheduler"] = "set (address not published)"
        return d


def _params(name: str, given: dict[str, Any]) -> Any:
    """Mechanism ``name``'s parameters from the spec's ``mechanism.params``."""
    try:
        return MECHANISMS[name].params_type(**given)
    except (TypeError, ValueError) as e:
        raise ValueError(f"mechanism.{e}") from None
