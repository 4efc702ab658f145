"""``private_pca`` end to end: the four pipeline steps (``PrivatePCA``; ``PrivatePCA().fit``
runs Alg 1 in one call), their states, the sensitivities from public facts and the
defects of the paper variant."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.design import design
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.private_pca.params import (
    PSMM_MAX_CELLS,
    STAGE_WEIGHTS,
    PrivatePCAParams,
    Subroutine,
    Variant,
)
from dprelease.mechanisms.private_pca.pmm import (
    NoisyTree,
    default_depth,
    level_plan,
    measure_tree,
    pmm_points,
)
from dprelease.mechanisms.private_pca.psmm import (
    NoisyGrid,
    SubroutineChoice,
    choose_subroutine,
    measure_grid,
    psmm_sample,
    psmm_scale,
)
from dprelease.mechanisms.private_pca.subspace import (
    Projection,
    covariance_sensitivity,
    lift,
    private_covariance,
    private_mean,
    private_projection,
    project,
)
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.synthesizer import Facts, MixedRows, Sensitivity, Stage, Synthesizer

__all__ = ["Encoded", "Lifted", "Measured", "PrivatePCA", "sensitivities"]


def _measure(
    x: np.ndarray,
    projection: Projection,
    epsilon: float,
    rng: np.random.Generator,
    variant: Variant,
    subroutine: Subroutine,
    depth: int | None,
    psmm_cells: int | None = None,
) -> tuple[SubroutineChoice, NoisyTree | NoisyGrid, int | None]:
    """Stage 3's measurement: the subroutine choice, the measured tree or grid, and r
    (None for PSMM).

    Sensitivity: Δ₁ = 2 per PMM level or for the PSMM grid counts (replace-one), for the
    released V̂ and X̄_priv (``measure_tree``, ``measure_grid``).
    Noise: discrete Laplace, σ_j from ``level_plan`` (PMM) or 2/ε₃ (``psmm_scale``).
    Privacy: ε₃-DP (stage ``measure``); the choice of subroutine uses public values and
    the noisy covariance only (post-processing).
    Reference: He, Strohmer, Vershynin, Zhu, Alg 1 step 3, Alg 4–5.
    Corrected: see ``measure_tree`` and ``measure_grid``.
    """
    n, d = x.shape
    choice = choose_subroutine(subroutine, d, projection.dims, epsilon, n, projection.radius, psmm_cells)
    a = project(x, projection)
    if choice.name == "psmm":
        if choice.delta is None:
            raise ValueError("the PSMM choice must carry its grid spacing (delta)")
        grid = measure_grid(
            a, projection.radius, epsilon, choice.delta, rng, variant, max_cells=PSMM_MAX_CELLS
        )
        return choice, grid, None
    r = depth if depth is not None else default_depth(epsilon, n)
    return choice, measure_tree(a, projection.radius, epsilon, r, rng, variant), r


def _measured_points(
    measured: NoisyTree | NoisyGrid, radius: float, rng: np.random.Generator, m: int
) -> tuple[np.ndarray, float | None]:
    """Post-processing of stage 3: points (and d_BL(ν, ν̂) for PSMM)."""
    if isinstance(measured, NoisyGrid):
        return psmm_sample(measured, rng, m)
    return pmm_points(measured, radius, rng, m), None


# ---------------------------------------------------------------- the states


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the confidential design matrix X (n, d) in [0, 1]^d and the
    noisy covariance's measurement (stage ``covariance``)."""

    x: np.ndarray = field(repr=False)
    covariance: Measurement = field(repr=False)


@dataclass(frozen=True)
class Measured:
    """The estimate step's state: the released ``Projection`` (V̂, X̄_priv, R) and the
    measured PMM tree or PSMM grid (noisy counts only: no exact row)."""

    projection: Projection
    counts: NoisyTree | NoisyGrid = field(repr=False)


@dataclass(frozen=True)
class Lifted:
    """The sample step's state: the m synthetic design rows Y = V̂a' + X̄_priv, clipped to
    [0, 1]^d."""

    y: np.ndarray = field(repr=False)


# ---------------------------------------------------------------- the four steps


def _estimate_facts(
    params: PrivatePCAParams,
    projection: Projection,
    choice: SubroutineChoice,
    r: int | None,
    psmm_used: bool,
    measurements: tuple[Measurement, ...],
) -> dict[str, object]:
    """The estimate step's public facts: d', R, the subroutine and its grid or depth, and
    the noise scales (all from public values and the noisy covariance and mean)."""
    return {
        "dims": projection.dims,
        "dims_note": (
            "chosen by the paper's section 6 rule from the noisy covariance (post-processing)"
            if projection.adaptive
            else "given in the spec"
        ),
        "radius": projection.radius,
        "subroutine": choice.name,
        "subroutine_note": choice.note,
        "grid_cells": choice.cells,
        "grid_cells_exact": choice.cells_exact,
        "grid_delta": choice.delta,
        "depth": r,
        "depth_note": (
            "not used (PSMM)"
            if psmm_used
            else "given in the spec"
            if params.depth is not None
            else "ceil(log2(eps_measure * n))"
        ),
        "level_scales": [] if psmm_used else [m.scale for m in measurements],
        "cell_scale": measurements[0].scale if psmm_used else None,
        "root_count_note": (
            "n, public under replace-one: PSMM divides the noisy counts by it"
            if psmm_used
            else "n, public under replace-one, released without noise"
            if params.variant == "corrected"
            else "noisy (paper variant)"
        ),
    }


def _int_fact(facts: Facts, key: str) -> int:
    """``facts[key]`` as an integer (KeyError when absent, TypeError when not an integer)."""
    value = facts[key]
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"fact {key!r} is not an integer: {value!r}")
    return int(value)


def sensitivities(
    schema: Schema, params: PrivatePCAParams, n: int, facts: Facts | None
) -> dict[str, Sensitivity]:
    """Every statistic private_pca measures (corrected; pure ε, L1 only), from public
    facts: d = the design width, n, and the subroutine and depth the estimate stage
    reported (chosen from public values and the noisy covariance). The covariance
    (``covariance_sensitivity``, the paper's 3d²/n, valid but loose), the mean (d/n,
    attained by 0 vs 1 in every coordinate, so only when no nominal has 3+ categories (a
    record moves 2 of its one-hot coordinates) and every integer column's bounds are
    integers) and either one count vector per PMM level or PSMM's grid counts (a
    histogram under replace-one: Δ₁ = 2, attained)."""
    facts = facts or {}
    d = design(schema).width
    mean_attained = all(
        c.n_bins == 2
        if isinstance(c, Nominal)
        else not (isinstance(c, Continuous) and c.integer)
        or (float(c.lower).is_integer() and float(c.upper).is_integer())
        for c in schema.columns
    )
    out = {
        "covariance": Sensitivity("covariance", covariance_sensitivity(n, d), None),
        "mean": Sensitivity("mean", d / n, None, tight=mean_attained),
    }
    if facts["subroutine"] == "psmm":
        out["psmm_counts"] = Sensitivity("measure", psmm_scale(1.0)[1], None, tight=True)
    else:
        depth = _int_fact(facts, "depth")
        sens = level_plan(1.0, depth, _int_fact(facts, "dims"), "corrected").sensitivity
        for j in range(1, depth + 1):
            out[f"pmm_level_{j}"] = Sensitivity("measure", sens, None, tight=True)
    return out


def _check(schema: Schema, params: PrivatePCAParams) -> None:
    width = design(schema).width
    if params.dims is not None and params.dims > width:
        raise ValueError(f"params.dims ({params.dims}) must be at most the design width ({width})")


def _defects(params: PrivatePCAParams) -> list[str]:
    if params.variant == "corrected":
        return []
    pmm_defects = [
        "PMM (Alg 4) noise scales sigma_j = eps^-1 * 2^((1-1/d')(r-j)/2) are not normalised: "
        "the tree costs eps * S with S = sum_k 2^(-k(1-1/d')/2) > 1 (about 5.95 for d' = 2, r = 16)",
        "PMM counts use histogram sensitivity 1 (add/remove); under replace-one it is 2 per level, "
        "doubling the true cost again",
    ]
    psmm_defect = (
        "PSMM (Alg 5) adds Lap_Z(1/eps) to the grid counts, i.e. histogram sensitivity 1 (add/remove); "
        "under replace-one the counts change by 2 in L1, so they truly cost 2 * eps"
    )
    if params.subroutine == "pmm":
        return pmm_defects
    if params.subroutine == "psmm":
        return [psmm_defect]
    return [*pmm_defects, psmm_defect + " (when 'auto' selects PSMM)"]


class PrivatePCA(Synthesizer[PrivatePCAParams, Encoded, Measured, Lifted]):
    """private centred covariance -> private top-d' subspace and mean -> private
    hierarchical counts (PMM) or grid counts with a bounded-Lipschitz LP (PSMM) of the
    projected rows -> points in the cells, lifted back and clipped

    private_pca's four steps (the package's docstring states the stages, their Δ and noise)."""

    name = "private_pca"
    notions = ("pure",)
    spends = {"encode": ("covariance",), "estimate": ("mean", "measure")}

    def stage_weights(self, schema: Schema, params: PrivatePCAParams) -> dict[str, float]:
        return dict(STAGE_WEIGHTS)

    def defects(self, params: PrivatePCAParams) -> list[str]:
        return _defects(params)

    def check(self, schema: Schema, params: PrivatePCAParams) -> None:
        _check(schema, params)

    def min_rows(self, schema: Schema, params: PrivatePCAParams) -> int:
        return 2  # _check_rows: the centred covariance needs n >= 2

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: PrivatePCAParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        x = design(schema).encode(rows)
        cov = private_covariance(x, plan.stage("covariance").pure_epsilon, rng, stage="covariance")
        return Stage(Encoded(x, cov), (cov,), {"design_width": x.shape[1]})

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: PrivatePCAParams, rng: np.random.Generator
    ) -> Stage[Measured]:
        x, cov = state.x, state.covariance
        n = x.shape[0]
        mean = private_mean(x, plan.stage("mean").pure_epsilon, rng, stage="mean")
        e3 = plan.stage("measure").pure_epsilon
        projection = private_projection(cov, mean, params.dims, e3, n)
        choice, measured, r = _measure(
            x, projection, e3, rng, params.variant, params.subroutine, params.depth, params.psmm_cells
        )
        psmm_used = isinstance(measured, NoisyGrid)
        measurements = (measured.measurement,) if isinstance(measured, NoisyGrid) else measured.measurements
        facts = _estimate_facts(params, projection, choice, r, psmm_used, measurements)
        return Stage(Measured(projection, measured), (mean, *measurements), facts)

    def sample(
        self, state: Measured, params: PrivatePCAParams, m: int, rng: np.random.Generator
    ) -> Stage[Lifted]:
        projection = state.projection
        points, bl = _measured_points(state.counts, projection.radius, rng, m)
        facts: dict[str, object] = {"rows": m} if bl is None else {"rows": m, "bl_distance": bl}
        return Stage(Lifted(lift(points, projection)), facts=facts)

    def decode(
        self, state: Lifted, schema: Schema, params: PrivatePCAParams, rng: np.random.Generator
    ) -> MixedRows:
        return design(schema).decode(state.y)

    sensitivities = staticmethod(sensitivities)
