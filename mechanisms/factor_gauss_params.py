"""``factor_gauss``'s public side: its parameters, their checks against the schema, the budget
split, and the sensitivity of every statistic it measures (from public facts only); the
mechanism's steps are in ``factor_gauss``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.factor_marginals import (
    Cuts,
    check_cuts,
    mean_abs_noise,
    one_way_sensitivities,
)
from dprelease.mechanisms.factor_model import (
    second_moment_sensitivity,
)
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.primitives import stage_noise
from dprelease.mechanisms.refine import (
    Pairs,
    pair_cells,
    pair_name,
    table_pairs,
    table_parts,
)
from dprelease.mechanisms.schema import Schema, check_target
from dprelease.mechanisms.synthesizer import (
    Facts,
    Sensitivity,
)

__all__ = [
    "REFINE_WEIGHTS",
    "STAGE_WEIGHTS",
    "FactorGaussParams",
    "check",
    "refine_cells",
    "sensitivities",
    "stage_weights",
]


STAGE_WEIGHTS = {"marginals": 0.5, "moments": 0.5}
REFINE_WEIGHTS = {"marginals": 0.45, "moments": 0.25, "refine": 0.3}


@dataclass(frozen=True)
class FactorGaussParams:
    """Public hyperparameters. ``row_norm`` None means B = √p; ``factors`` None means r is
    chosen from the *noisy* eigenvalues; ``attenuation_correction`` undoes the shrinkage
    of latent correlations by coarse bins (both post-processing); ``target`` (a nominal or
    ordinal column) adds the ``refine`` stage: its 2-way tables with every other column and
    the tables of the other nominal and ordinal columns' pairs (``refine.table_pairs``);
    ``cuts``: where a merged column's groups lie (``factor_marginals.Cuts``)."""

    clip: float = 4.0
    row_norm: float | None = None
    factors: int | None = None
    attenuation_correction: bool = True
    target: str | None = None
    cuts: Cuts = "quantiles"

    def __post_init__(self) -> None:
        if not (self.clip > 0 and math.isfinite(self.clip)):
            raise ValueError(f"params.clip ({self.clip}) must be a finite number > 0")
        if self.row_norm is not None and not (self.row_norm > 0 and math.isfinite(self.row_norm)):
            raise ValueError(f"params.row_norm ({self.row_norm}) must be a finite number > 0")
        if self.factors is not None and self.factors < 1:
            raise ValueError(f"params.factors ({self.factors}) must be an integer >= 1")
        check_cuts(self.cuts)

    def bound(self, p: int) -> float:
        return self.row_norm if self.row_norm is not None else math.sqrt(p)


def check(schema: Schema, params: FactorGaussParams) -> None:
    """``target``, when set, names a nominal or ordinal column and leaves another column."""
    check_target(schema, params.target)
    if params.target is None:
        return
    if len(schema) < 2:
        raise ValueError(f"params.target ({params.target!r}) must leave at least one other column")


def stage_weights(schema: Schema, params: FactorGaussParams) -> dict[str, float]:
    return dict(STAGE_WEIGHTS if params.target is None else REFINE_WEIGHTS)


def sensitivities(
    schema: Schema, params: FactorGaussParams, n: int, facts: Facts | None = None
) -> dict[str, Sensitivity]:
    """Every statistic factor_gauss measures, from public facts: one histogram per column,
    and one over the declared cells per column cut by private mass (``facts["cuts"]``)
    (Δ₁ = 2, Δ₂ = √2, ``marginals.histogram_sensitivity``; attained by any record moving
    bins) and the latent second moment (``second_moment_sensitivity`` with B =
    ``params.bound(p)``; its Δ₂ is attained by z = B·e₁ vs z' = B·e₂ when B ≤ c, its Δ₁
    by no pair in general); with a ``target``, each 2-way table of ``refine.table_pairs``
    (a count histogram over public cells: Δ₁ = 2, Δ₂ = √2, attained; ``mechanisms.refine``)."""
    p = len(schema)
    out = one_way_sensitivities(schema, facts)
    b = params.bound(p)
    out["latent_second_moment"] = Sensitivity(
        "moments", second_moment_sensitivity(n, b, p, "l1"), second_moment_sensitivity(n, b, p, "l2")
    )
    t = _target(schema, params)
    if t is not None:
        for i, j in table_pairs(schema, t):
            out[pair_name(schema.names[i], schema.names[j])] = Sensitivity(
                "refine", histogram_sensitivity("l1"), histogram_sensitivity("l2"), tight=True
            )
    return out


def _target(schema: Schema, params: FactorGaussParams) -> int | None:
    return None if params.target is None else schema.names.index(params.target)


def refine_cells(schema: Schema, plan: BudgetPlan, params: FactorGaussParams, n: int) -> Pairs | None:
    """The ``refine`` tables' public cells (``refine.pair_cells``) for n rows, or None
    without a target."""
    t = _target(schema, params)
    if t is None:
        return None
    tables = table_pairs(schema, t)
    declared = [schema.columns[i].n_bins * schema.columns[j].n_bins for i, j in tables]
    # the first table is a target table: its share does not depend on the sizes
    (part, *_) = table_parts(plan.stage("refine"), tables, t, declared)
    noise = stage_noise(
        part, l2_sensitivity=histogram_sensitivity("l2"), l1_sensitivity=histogram_sensitivity("l1")
    )
    return pair_cells(schema, t, n, mean_abs_noise(*noise))
