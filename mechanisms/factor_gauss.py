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

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.factor_gauss_params import (
    REFINE_WEIGHTS,
    STAGE_WEIGHTS,
    FactorGaussParams,
    check,
    refine_cells,
    sensitivities,
    stage_weights,
)
from dprelease.mechanisms.factor_marginals import (
    Code,
    code_from_one_way,
    marginal_noise,
    measure_one_way,
)
from dprelease.mechanisms.factor_model import (
    bound_rows,
    factor_correlation,
    sample_latent,
    second_moment_sensitivity,
)
from dprelease.mechanisms.latent import from_latent, hermite_coefficients, to_latent
from dprelease.mechanisms.marginals import histogram
from dprelease.mechanisms.primitives import Measurement, measure_stage
from dprelease.mechanisms.refine import (
    OVERSAMPLE,
    measure_pairs,
    pair_counts,
    refined_rows,
)
from dprelease.mechanisms.rowkeys import RowKeys, row_uniforms
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import (
    ChunkStatistic,
    Facts,
    HistogramNoise,
    MixedRows,
    Stage,
    Streaming,
    Synthesizer,
)

__all__ = [
    "REFINE_WEIGHTS",
    "STAGE_WEIGHTS",
    "Encoded",
    "FactorDraws",
    "FactorGauss",
    "FactorGaussParams",
    "Measured",
    "MomentSums",
    "Refinement",
    "Sampled",
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


@dataclass(frozen=True)
class Encoded:
    """Confidential latent rows ``z`` (‖z‖₂ ≤ ``bound``) and the private code behind them."""

    z: np.ndarray = field(repr=False)
    code: Code
    marginals: tuple[Measurement, ...]
    bound: float
    pair_counts: tuple[np.ndarray, ...] = field(default=(), repr=False)
    facts: Facts = field(default_factory=dict)


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


def model_facts(params: FactorGaussParams, factors: int) -> dict[str, object]:
    """The release document's public facts about the factor model (post-processing)."""
    note = "given in the spec" if params.factors is not None else "chosen from the noisy eigenvalues"
    return {"factors_used": factors, "factors_note": note}


@dataclass(frozen=True)
class Refinement:
    """The ``refine`` stage's noisy tables (none without a target) and the n they count."""

    tables: tuple[Measurement, ...]
    n: int


@dataclass(frozen=True)
class Measured:
    """The estimate step's state: the noisy latent second moment, the private code, and
    the ``refine`` tables."""

    moments: Measurement
    code: Code
    refinement: Refinement


def _measure_refine(
    counts: list[np.ndarray], code: Code, plan: BudgetPlan, rng: np.random.Generator
) -> tuple[Measurement, ...]:
    """Stage ``refine`` (``refine.measure_pairs``), when the code has tables."""
    if code.pairs is None:
        return ()
    return tuple(measure_pairs(counts, code.pairs, plan.stage("refine"), rng=rng))


def _draw_cells(
    corr: np.ndarray, code: Code, refinement: Refinement, m: int, rng: np.random.Generator
) -> np.ndarray:
    """m synthetic rows of declared cells: decoded from fresh latent rows, or, with
    tables, ``OVERSAMPLE``·m candidates raked to them and resampled to m
    (``refine.refined_rows``; post-processing)."""
    tables, n = refinement.tables, refinement.n
    candidates = m * OVERSAMPLE if tables else m
    cells = code.cells.fine(from_latent(sample_latent(corr, candidates, rng=rng), code.latent), rng)
    if not tables or code.pairs is None:
        return cells
    return refined_rows(cells, code.pairs, list(tables), n, m, rng, margins=code.cells)


@dataclass(frozen=True)
class FactorDraws:
    """The fitted factor model: its correlation, the private code to decode through, and
    the ``refine`` tables to rake to; draws fresh rows (post-processing)."""

    corr: np.ndarray = field(repr=False)
    code: Code
    refinement: Refinement

    def draw(self, m: int, rng: np.random.Generator) -> MixedRows:
        """m fresh rows of declared cells (``_draw_cells``)."""
        return MixedRows(_draw_cells(self.corr, self.code, self.refinement, m, rng))


@dataclass(frozen=True)
class Sampled:
    """The sample step's state: the model that draws and how many rows to decode."""

    draws: FactorDraws
    m: int


def _model(state: Measured, params: FactorGaussParams) -> Stage[FactorDraws]:
    """Post-processing: the factor model from the noisy second moment, and its public facts."""
    corr, r = latent_model(state.moments, state.code, params)
    return Stage(FactorDraws(corr, state.code, state.refinement), facts=model_facts(params, r))


# ---- the same steps from sums over chunks (the local and dask engines) -----------------


def encode_counts(
    counts: list[np.ndarray],
    n: int,
    schema: Schema,
    plan: BudgetPlan,
    params: FactorGaussParams,
    rng: np.random.Generator,
) -> Stage[MomentSums]:
    """Stage 1 from the fitted rows' summed one-way histograms over the declared cells
    (``measure_one_way``); noise drawn once, here. The code also carries the ``refine``
    tables' public cells, for pass 2 (``MomentSums``).

    Sensitivity, Noise, Privacy: ``measure_one_way``, as ``encode``.
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    one_way = measure_one_way(counts, n, schema, plan.stage("marginals"), params.cuts, rng=rng)
    code = replace(code_from_one_way(one_way, schema), pairs=refine_cells(schema, plan, params, n))
    return Stage(MomentSums(code), one_way.measurements, one_way.facts)


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
    total: np.ndarray,
    n: int,
    code: Code,
    plan: BudgetPlan,
    params: FactorGaussParams,
    rng: np.random.Generator,
) -> Stage[Measured]:
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
    return Stage(Measured(moments, code, Refinement(tables, n)), (moments, *tables))


@dataclass(frozen=True)
class MomentSums(ChunkStatistic[FactorGaussParams, Measured]):
    """The streaming encode step's state: the private code alone (pass 2 computes the latent
    rows chunk by chunk and sums ZᵀZ and the ``refine`` tables' counts under it)."""

    code: Code

    def chunk_sum(self, bins: np.ndarray, dither: np.ndarray, params: FactorGaussParams) -> np.ndarray:
        return chunk_moment_sum(bins, dither, self.code, params)

    def estimate(
        self, total: np.ndarray, n: int, plan: BudgetPlan, params: FactorGaussParams, rng: np.random.Generator
    ) -> Stage[Measured]:
        return estimate_moment_sum(total, n, self.code, plan, params, rng)


class FactorGaussStreaming(Streaming[FactorGaussParams, Measured]):
    """factor_gauss from sums over chunks: ZᵀZ and the ``refine`` tables are sums over rows."""

    def encode(
        self,
        counts: Sequence[np.ndarray],
        n: int,
        schema: Schema,
        plan: BudgetPlan,
        params: FactorGaussParams,
        rng: np.random.Generator,
    ) -> Stage[MomentSums]:
        return encode_counts(list(counts), n, schema, plan, params, rng)

    def sample(self, state: Measured, params: FactorGaussParams) -> Stage[FactorDraws]:
        return _model(state, params)


class FactorGauss(Synthesizer[FactorGaussParams, Encoded, Measured, Sampled]):
    """private marginals + private latent second moment (+ 2-way tables with a target) ->
    factor model -> fresh Gaussian rows decoded through the private marginals (and raked to
    the tables)

    factor_gauss's four steps (the module's docstring states the stages, their Δ and noise)."""

    name = "factor_gauss"
    notions = ("zcdp", "pure")
    spends = {"encode": ("marginals",), "estimate": ("moments", "refine")}
    models_missing = True
    leaves_out = True
    streaming = FactorGaussStreaming()

    stage_weights = staticmethod(stage_weights)
    check = staticmethod(check)

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: FactorGaussParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        encoded = encode(rows.bins, schema, plan.stage("marginals"), params, rng=rng)
        pairs = refine_cells(schema, plan, params, len(rows))
        if pairs is not None:
            encoded = replace(
                encoded,
                code=replace(encoded.code, pairs=pairs),
                pair_counts=tuple(pair_counts(rows.bins, pairs)),
            )
        return Stage(encoded, encoded.marginals, encoded.facts)

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: FactorGaussParams, rng: np.random.Generator
    ) -> Stage[Measured]:
        moments = measure_moments(state.z, state.bound, plan.stage("moments"), rng=rng)
        tables = _measure_refine(list(state.pair_counts), state.code, plan, rng)
        return Stage(Measured(moments, state.code, Refinement(tables, state.z.shape[0])), (moments, *tables))

    def sample(
        self, state: Measured, params: FactorGaussParams, m: int, rng: np.random.Generator
    ) -> Stage[Sampled]:
        model = _model(state, params)
        return Stage(Sampled(model.state, m), facts=model.facts)

    def decode(
        self, state: Sampled, schema: Schema, params: FactorGaussParams, rng: np.random.Generator
    ) -> MixedRows:
        return state.draws.draw(state.m, rng)

    sensitivities = staticmethod(sensitivities)

    def histograms(
        self, schema: Schema, params: FactorGaussParams, plan: BudgetPlan, n: int | None
    ) -> list[HistogramNoise]:
        return marginal_noise(schema, params, plan, n)

    def without(self, state: Measured, name: str) -> Measured:
        """The estimate step's state without the ``refine`` table ``name`` (and its pair in
        the code, which the raking aligns with the tables): ``Synthesizer.without``."""
        code, refinement = state.code, state.refinement
        keep = [k for k, t in enumerate(refinement.tables) if t.name != name]
        pairs = (
            None
            if code.pairs is None
            else replace(code.pairs, tables=tuple(code.pairs.tables[k] for k in keep))
        )
        return Measured(
            state.moments,
            replace(code, pairs=pairs),
            Refinement(tuple(refinement.tables[k] for k in keep), refinement.n),
        )
