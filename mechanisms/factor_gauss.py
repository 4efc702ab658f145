"""``factor_gauss``: private marginals, a private latent second moment, a factor model,
fresh Gaussian samples decoded through the private marginals.

Stages and their budgets (default weights 0.5 / 0.5):

1. ``marginals`` — one private histogram per column over its groups: the declared
   bins, with a continuous column's intervals merged into the number of groups that
   public n and the noise scale call for (``mechanisms.resolution``; atoms, declared
   ``bins`` and ``values`` are kept), post-processed to private CDFs. With ``params.cuts``
   ``quantiles`` (the default) a merged column's groups are placed at private quantiles,
   read off a noisy histogram over its declared cells measured first from the column's
   share (``factor_marginals.measure_one_way``); with ``equal`` they are equal widths.
2. encoding (post-processing) — latent scores z = Φ⁻¹(U) (``mechanisms.latent``),
   clipped to [−c, c] and each row to L2 norm ≤ B (public c and B; B = √p by default).
3. ``moments`` — S = ZᵀZ/n released with noise on its upper triangle (mirrored).
4. projection and sampling (post-processing) — eigendecomposition of the noisy S, r
   factors, Σ = ΛΛᵀ + Ψ rescaled to unit diagonal, m fresh rows z ~ N(0, Σ).
5. decoding (post-processing) — z → U = Φ(z) → group through the private CDF → a
   declared cell inside the group by the private piecewise-linear density
   (``resolution.Cells.fine``).

With ``params.target`` (a nominal or ordinal column), stage 3 also measures ``refine``:
the 2-way tables of the target with every other column and of the other nominal and ordinal
columns with each other (``refine.table_pairs``), and the
sampling draws ``refine.OVERSAMPLE``·m candidates that decoding rakes to those tables and
resamples to m rows (post-processing). Default weights then 0.45 / 0.25 / 0.3.

Privacy: stages 1 and 3 compose (adaptively): ρ = ρ₁ + ρ₂ (+ ρ_refine) (zCDP) or
ε = ε₁ + ε₂ (+ ε_refine) (pure).
Synthetic rows are fresh draws: no output row corresponds to an input row. Not from a
paper: no paper variant, no defects.

Modules: this one holds the stages and the synthesizer; stage 1 and the private code are in
``factor_marginals``, the factor model's math (the rows' bound, the second moment's
sensitivity, the factor correlation, fresh latent rows) in ``factor_model``.

The privacy argument and the derivations: ``docs/proofs/factor_gauss.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.factor_marginals import (
    Code,
    Cuts,
    check_cuts,
    code_from_one_way,
    marginal_noise,
    mean_abs_noise,
    measure_one_way,
    one_way_sensitivities,
)
from dprelease.mechanisms.factor_model import (
    bound_rows,
    factor_correlation,
    sample_latent,
    second_moment_sensitivity,
)
from dprelease.mechanisms.latent import from_latent, hermite_coefficients, to_latent
from dprelease.mechanisms.marginals import histogram, histogram_sensitivity
from dprelease.mechanisms.primitives import Measurement, measure_stage, stage_noise
from dprelease.mechanisms.refine import (
    OVERSAMPLE,
    Pairs,
    measure_pairs,
    pair_cells,
    pair_counts,
    pair_name,
    refined_rows,
    table_pairs,
    table_parts,
)
from dprelease.mechanisms.rowkeys import RowKeys, row_uniforms
from dprelease.mechanisms.schema import Schema, check_target
from dprelease.mechanisms.synthesizer import (
    MixedRows,
    Sensitivity,
    Stage,
    Streaming,
    Synthesizer,
)

__all__ = [
    "REFINE_WEIGHTS",
    "STAGE_WEIGHTS",
    "SYNTHESIZER",
    "Encoded",
    "FactorGaussParams",
    "chunk_moment_sum",
    "encode",
    "encode_counts",
    "estimate_moment_sum",
    "latent_model",
    "latent_rows",
    "measure_moment_sum",
    "measure_moments",
    "model_facts",
    "moment_sum",
    "sensitivities",
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
    schema: Schema, params: FactorGaussParams, n: int, facts: Mapping[str, Any] | None = None
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


@dataclass(frozen=True)
class Encoded:
    """Confidential latent rows ``z`` (‖z‖₂ ≤ ``bound``) and the private code behind them."""

    z: np.ndarray = field(repr=False)
    code: Code
    marginals: tuple[Measurement, ...]
    bound: float
    pair_counts: tuple[np.ndarray, ...] = field(default=(), repr=False)
    facts: Mapping[str, Any] = field(default_factory=dict)


def latent_rows(bins: np.ndarray, code: Code, params: FactorGaussParams, dither: np.ndarray) -> np.ndarray:
    """Stage 2: bounded latent scores of the rows' groups, placed inside their groups by
    ``dither`` (n, p) in [0, 1): ``rowkeys.row_uniforms`` of the rows' positions, so that
    the same rows give the same scores in any chunking. ‖z‖₂ ≤ B holds for any dither."""
    z = to_latent(code.cells.coarse(bins), code.latent, dither)
    return bound_rows(z, params.clip, params.bound(bins.shape[1]))


def moment_sum(bins: np.ndarray, code: Code, params: FactorGaussParams, dither: np.ndarray) -> np.ndarray:
    """ZᵀZ over some rows (a streaming pass sums it over chunks; exact)."""
    z = latent_rows(bins, code, params, dither)
    return z.T @ z


def encode(
    bins: np.ndarray,
    schema: Schema,
    stage_part: StageBudget,
    params: FactorGaussParams,
    *,
    rng: np.random.Generator,
) -> Encoded:
    """Stage 1 (private histograms over the groups ``measure_one_way`` places → CDFs,
    nominal order) and stage 2 (bounded scores).

    Sensitivity, Noise, Privacy: ``measure_one_way`` (a histogram of groups is a
    histogram: Δ₁ = 2, Δ₂ = √2); stage 2 is post-processing.
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    n, p = bins.shape
    counts = [histogram(bins[:, j], c.n_bins) for j, c in enumerate(schema.columns)]
    one_way = measure_one_way(counts, n, schema, stage_part, params.cuts, rng=rng)
    code = code_from_one_way(one_way, schema)
    z = latent_rows(bins, code, params, row_uniforms(RowKeys.draw(rng).dither, 0, n, p))
    return Encoded(z, code, one_way.measurements, params.bound(len(schema)), facts=one_way.facts)


def measure_moments(
    z: np.ndarray, bound: float, part: StageBudget, *, rng: np.random.Generator
) -> Measurement:
    """Stage 3 on rows in memory: ``measure_moment_sum`` of ZᵀZ (rows must satisfy
    ‖z‖₂ ≤ B, enforced by ``bound_rows``; ValueError otherwise).

    Sensitivity: ``second_moment_sensitivity`` (needs the bound checked here).
    Noise: as ``measure_moment_sum``.
    Privacy: ρ₂-zCDP or ε₂-DP (stage ``moments``), for the fixed stage-1 output.
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    n = z.shape[0]
    if np.any(np.linalg.norm(z, axis=1) > bound * (1 + 1e-12)):
        raise ValueError("latent rows must be bounded with bound_rows before measuring")
    return measure_moment_sum(z.T @ z, n, bound, part, rng=rng)


def measure_moment_sum(
    total: np.ndarray, n: int, bound: float, part: StageBudget, *, rng: np.random.Generator
) -> Measurement:
    """Stage 3: the upper triangle of S = ZᵀZ/n plus noise (value = the vector), from the
    exact sum ZᵀZ of rows with ‖z‖₂ ≤ B (one chunk, or summed over chunks: the noise is
    drawn once, here, never per chunk).

    Sensitivity: ``second_moment_sensitivity``: Δ₂ = √2·B²/n (attained when B ≤ c),
    Δ₁ = √(p(p+1))·B²/n.
    Noise: σ = Δ₂/√(2ρ) (Gaussian) or b = Δ₁/ε (Laplace) per entry.
    Privacy: ρ₂-zCDP or ε₂-DP (stage ``moments``); adaptive composition with stage 1
    (Z depends on the data through the private CDFs and each row's own bins).
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    p = total.shape[0]
    upper = (total / n)[np.triu_indices(p)]
    return measure_stage(
        upper,
        part,
        l2_sensitivity=second_moment_sensitivity(n, bound, p, "l2"),
        l1_sensitivity=second_moment_sensitivity(n, bound, p, "l1"),
        rng=rng,
        name="latent_second_moment",
    )


def latent_model(moments: Measurement, code: Code, params: FactorGaussParams) -> tuple[np.ndarray, int]:
    """Stage 4's model: the factor correlation, with the attenuation correction if set."""
    coefficients = hermite_coefficients(code.latent) if params.attenuation_correction else None
    return factor_correlation(moments, len(code.latent.cdfs), params.factors, coefficients)


def model_facts(params: FactorGaussParams, factors: int) -> dict:
    """The release document's public facts about the factor model (post-processing)."""
    note = "given in the spec" if params.factors is not None else "chosen from the noisy eigenvalues"
    return {"factors_used": factors, "factors_note": note}


Refinement = tuple[tuple[Measurement, ...], int]  # the noisy tables, and n they count


def _encode_stage(rows: MixedRows, schema: Schema, plan: BudgetPlan, params: FactorGaussParams, rng) -> Stage:
    encoded = encode(rows.bins, schema, plan.stage("marginals"), params, rng=rng)
    pairs = refine_cells(schema, plan, params, len(rows))
    if pairs is not None:
        encoded = replace(
            encoded,
            code=replace(encoded.code, pairs=pairs),
            pair_counts=tuple(pair_counts(rows.bins, pairs)),
        )
    return Stage(encoded, encoded.marginals, encoded.facts)


def _measure_refine(counts: list[np.ndarray], code: Code, plan: BudgetPlan, rng) -> tuple[Measurement, ...]:
    """Stage ``refine`` (``refine.measure_pairs``), when the code has tables."""
    if code.pairs is None:
        return ()
    return tuple(measure_pairs(counts, code.pairs, plan.stage("refine"), rng=rng))


def _estimate_stage(encoded: Encoded, plan: BudgetPlan, params: FactorGaussParams, rng) -> Stage:
    moments = measure_moments(encoded.z, encoded.bound, plan.stage("moments"), rng=rng)
    tables = _measure_refine(list(encoded.pair_counts), encoded.code, plan, rng)
    return Stage((moments, encoded.code, (tables, encoded.z.shape[0])), (moments, *tables))


def _draw_cells(corr: np.ndarray, code: Code, refinement: Refinement, m: int, rng) -> np.ndarray:
    """m synthetic rows of declared cells: decoded from fresh latent rows, or, with
    tables, ``OVERSAMPLE``·m candidates raked to them and resampled to m
    (``refine.refined_rows``; post-processing)."""
    tables, n = refinement
    candidates = m * OVERSAMPLE if tables else m
    cells = code.cells.fine(from_latent(sample_latent(corr, candidates, rng=rng), code.latent), rng)
    if not tables or code.pairs is None:
        return cells
    return refined_rows(cells, code.pairs, list(tables), n, m, rng, margins=code.cells)


def _sample_stage(
    state: tuple[Measurement, Code, Refinement], params: FactorGaussParams, m: int, rng
) -> Stage:
    moments, code, refinement = state
    corr, r = latent_model(moments, code, params)
    return Stage((corr, code, refinement, m), facts=model_facts(params, r))


def _decode_stage(
    state: tuple[np.ndarray, Code, Refinement, int], schema: Schema, params: FactorGaussParams, rng
) -> MixedRows:
    corr, code, refinement, m = state
    return MixedRows(_draw_cells(corr, code, refinement, m, rng))


# ---- the same steps from sums over chunks (the local and dask engines) -----------------


def encode_counts(
    counts: list[np.ndarray], n: int, schema: Schema, plan: BudgetPlan, params: FactorGaussParams, rng
) -> Stage:
    """Stage 1 from the fitted rows' summed one-way histograms over the declared cells
    (``measure_one_way``); noise drawn once, here. The code also carries the ``refine``
    tables' public cells, for pass 2.

    Sensitivity, Noise, Privacy: ``measure_one_way``, as ``encode``.
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    one_way = measure_one_way(counts, n, schema, plan.stage("marginals"), params.cuts, rng=rng)
    code = replace(code_from_one_way(one_way, schema), pairs=refine_cells(schema, plan, params, n))
    return Stage(code, one_way.measurements, one_way.facts)


def chunk_moment_sum(
    bins: np.ndarray, dither: np.ndarray, code: Code, params: FactorGaussParams
) -> np.ndarray:
    """Pass 2 on one chunk's fitted rows: ``moment_sum`` (exact; summed over chunks); with
    tables, ZᵀZ flattened and their counts after it (``refine.pair_counts``)."""
    total = moment_sum(bins, code, params, dither)
    if code.pairs is None:
        return total
    return np.concatenate([total.ravel(), *pair_counts(bins, code.pairs)])


def estimate_moment_sum(
    total: np.ndarray, n: int, code: Code, plan: BudgetPlan, params: FactorGaussParams, rng
) -> Stage:
    """Stage 3 from ZᵀZ summed over the chunks: ``measure_moment_sum``, once; with tables,
    stage ``refine`` on their summed counts (``refine.measure_pairs``), once.

    Sensitivity: ``second_moment_sensitivity`` with B = ``params.bound(p)``; Δ₁ = 2,
    Δ₂ = √2 per table.
    Noise: as ``measure_moment_sum`` and ``refine.measure_pairs`` (drawn once, on the sums).
    Privacy: ρ₂-zCDP or ε₂-DP (stage ``moments``), ρ_refine or ε_refine (stage ``refine``).
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    p = len(code.latent.cdfs)
    counts: list[np.ndarray] = []
    if code.pairs is not None:  # ZᵀZ, then the tables (``chunk_moment_sum``)
        counts = np.split(total[p * p :], np.cumsum(code.pairs.sizes)[:-1])
        total = total[: p * p].reshape(p, p)
    moments = measure_moment_sum(total, n, params.bound(p), plan.stage("moments"), rng=rng)
    tables = _measure_refine(counts, code, plan, rng)
    return Stage((moments, code, (tables, n)), (moments, *tables))


def _model_stage(state: tuple[Measurement, Code, Refinement], params: FactorGaussParams) -> Stage:
    moments, code, refinement = state
    corr, r = latent_model(moments, code, params)
    return Stage((corr, code, refinement), facts=model_facts(params, r))


def _draw(state: tuple[np.ndarray, Code, Refinement], m: int, rng: np.random.Generator) -> MixedRows:
    corr, code, refinement = state
    return MixedRows(_draw_cells(corr, code, refinement, m, rng))


def _without(state: tuple[Measurement, Code, Refinement], name: str) -> tuple[Measurement, Code, Refinement]:
    """The estimate step's state without the ``refine`` table ``name`` (and its pair in the
    code, which the raking aligns with the tables): ``Synthesizer.without``."""
    moments, code, (tables, n) = state
    keep = [k for k, t in enumerate(tables) if t.name != name]
    pairs = (
        None if code.pairs is None else replace(code.pairs, tables=tuple(code.pairs.tables[k] for k in keep))
    )
    return moments, replace(code, pairs=pairs), (tuple(tables[k] for k in keep), n)


SYNTHESIZER = Synthesizer(
    name="factor_gauss",
    summary=(
        "private marginals + private latent second moment (+ 2-way tables with a target) -> "
        "factor model -> fresh Gaussian rows decoded through the private marginals (and raked "
        "to the tables)"
    ),
    notions=("zcdp", "pure"),
    params_type=FactorGaussParams,
    stage_weights=stage_weights,
    defects=lambda params: [],
    keeps_row_order=False,
    spends={"encode": ("marginals",), "estimate": ("moments", "refine")},
    encode=_encode_stage,
    estimate=_estimate_stage,
    sample=_sample_stage,
    decode=_decode_stage,
    sensitivities=sensitivities,
    check=check,
    streaming=Streaming(encode_counts, chunk_moment_sum, estimate_moment_sum, _model_stage, _draw),
    histograms=marginal_noise,
    models_missing=True,
    without=_without,
)
