"""``mst``: the maximum-spanning-tree synthesizer on Private-PGM (McKenna, Miklau, Sheldon
2021, "Winning the NIST Contest: A scalable and general approach to differentially private
synthetic data", §3), over the project's public cells.

Stages and their budgets (default weights ⅓ each, as the paper's):

1. ``marginals`` — one noisy histogram per column over its public groups
   (``mechanisms.workload``).
2. ``select`` — p − 1 selections by the exponential mechanism, Kruskal's algorithm with a
   private choice at each step: among the candidate pairs that join two trees of the forest
   so far, the one whose counts the one-way model (n·p̂ᵢ⊗p̂ⱼ) gets most wrong, by the score
   qᵢⱼ = ‖Cᵢⱼ − n·p̂ᵢ⊗p̂ⱼ‖₁ (Cᵢⱼ the exact table). The stage is split evenly over the p − 1
   steps.
3. ``measure`` — the chosen pairs' tables with Gaussian (zCDP) or Laplace (pure) noise, the
   stage split evenly over the p − 1 planned tables.
4. estimation (post-processing) — mbi's mirror descent on all the measurements
   (``mechanisms.graphical``); sampling of m fresh rows along the model's junction tree.
5. decoding (post-processing) — groups → declared cells by the private one-way density.

Sensitivity (replace-one): Δ₁ = 2, Δ₂ = √2 for every count table (one record leaves one cell
and enters another); the score q moves by at most ‖ΔCᵢⱼ‖₁ ≤ 2 (p̂ is fixed, noisy), so
Δ∞ = 2 for the selection.
Privacy: zCDP composes the stages adaptively (each selection ρ_t-zCDP as a bounded-range
mechanism, ``primitives.exponential_mechanism``): ρ = ρ₁ + ρ₂ + ρ₃. Under pure DP the
selection is charged ε_t = 2Δ∞/s at its scale, the tables Laplace.
Corrected: the paper's selection uses add/remove neighbours (Δ = 1); under replace-one the
score's sensitivity is 2.
The privacy argument: ``docs/proofs/marginal_synthesizers.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.axes import axes_of
from dprelease.mechanisms.factor_marginals import Cuts, check_cuts, one_way_sensitivities
from dprelease.mechanisms.graphical import Marginal, estimate
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.primitives import Measurement, exponential_mechanism, measure_stage
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import (
    Facts,
    MixedRows,
    Sensitivity,
    Stage,
    Streaming,
    Synthesizer,
    fact_names,
)
from dprelease.mechanisms.workload import (
    ModelDraws,
    Sampled,
    Workload,
    WorkloadSums,
    encode_counts,
    encode_rows,
    histograms,
    independent_table,
    l1_error,
    one_way,
    pair_name,
)

__all__ = ["MST", "SCORE_SENSITIVITY", "STAGE_WEIGHTS", "MSTParams", "Measured", "select_tree"]

STAGE_WEIGHTS = {"marginals": 1 / 3, "select": 1 / 3, "measure": 1 / 3}
SCORE_SENSITIVITY = 2.0
"""Δ∞ of the selection score ‖C − n·p̂ᵢ⊗p̂ⱼ‖₁ under replace-one (C moves by ≤ 2 in L1)."""


@dataclass(frozen=True)
class MSTParams:
    """Public hyperparameters: ``iters`` of mirror descent for the estimate; ``cuts``:
    where a merged column's groups lie (``factor_marginals.Cuts``): ``quantiles`` by default,
    as for ``factor_gauss`` and ``aim`` (BENCHMARKS.md §15, 3 seeds: ahead of equal widths on at
    least 4 of 6 figures in 6 of the 8 merged conditions; behind on PSID1976 at ε = 0.3 and 1)."""

    iters: int = 1000
    cuts: Cuts = "quantiles"

    def __post_init__(self) -> None:
        if not (isinstance(self.iters, int) and self.iters >= 1):
            raise ValueError(f"params.iters ({self.iters}) must be an integer >= 1")
        check_cuts(self.cuts)


def _parts(stage_part: StageBudget, p: int) -> list[StageBudget]:
    return stage_part.split(max(p - 1, 1))


def _selection(scores: np.ndarray, part: StageBudget, *, rng: np.random.Generator, name: str) -> Measurement:
    """One private choice among ``scores`` (Δ∞ = ``SCORE_SENSITIVITY``), charged ``part``."""
    if part.rho is not None:
        return exponential_mechanism(
            scores, linf_sensitivity=SCORE_SENSITIVITY, rho=part.rho, rng=rng, name=name, stage=part.stage
        )
    # pure DP: the exponential mechanism at ε = 2Δ∞/s is ε-DP; s from ε
    rho = part.pure_epsilon**2 / 8
    m = exponential_mechanism(
        scores, linf_sensitivity=SCORE_SENSITIVITY, rho=rho, rng=rng, name=name, stage=part.stage
    )
    return Measurement(
        m.name, m.stage, m.value, "noisy_max", m.sensitivity, "linf", m.scale, None, part.epsilon
    )


def select_tree(
    workload: Workload, counts: tuple[np.ndarray, ...], stage_part: StageBudget, *, rng: np.random.Generator
) -> tuple[list[tuple[int, int]], list[Measurement]]:
    """Stage 2: Kruskal's algorithm with the exponential mechanism at each step.

    Sensitivity: Δ∞ = 2 per score (``SCORE_SENSITIVITY``).
    Noise: Gumbel of scale Δ∞/√(2ρ_t) per step, ρ_t = ρ_select/(p − 1) (``exponential_mechanism``).
    Privacy: Σ ρ_t ≤ ρ_select (zCDP); ε_t each under pure DP.
    Reference: McKenna, Miklau, Sheldon 2021, §3 (``select``).
    """
    p = len(workload.sizes)
    component = list(range(p))
    chosen: list[tuple[int, int]] = []
    made: list[Measurement] = []
    for t, part in enumerate(_parts(stage_part, p)):
        open_ = [k for k, (i, j) in enumerate(workload.pairs) if component[i] != component[j]]
        if not open_:
            break
        scores = np.array(
            [l1_error(counts[k], independent_table(workload, *workload.pairs[k])) for k in open_]
        )
        m = _selection(scores, part, rng=rng, name=f"select[{t}]")
        i, j = workload.pairs[open_[int(m.value[0])]]
        chosen.append((i, j))
        made.append(m)
        old, new = component[j], component[i]
        component = [new if c == old else c for c in component]
    return chosen, made


def measure_tree(
    workload: Workload,
    counts: tuple[np.ndarray, ...],
    chosen: list[tuple[int, int]],
    stage_part: StageBudget,
    names: list[str],
    *,
    rng: np.random.Generator,
) -> list[Measurement]:
    """Stage 3: each chosen pair's table plus noise.

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per table (``marginals.histogram_sensitivity``).
    Noise: Gaussian σ = √2/√(2ρ_t) or Laplace b = 2/ε_t, the stage split over p − 1 tables.
    Privacy: Σ ρ_t ≤ ρ_measure (zCDP) or Σ ε_t ≤ ε_measure (pure).
    Reference: McKenna, Miklau, Sheldon 2021, §3 (``measure``).
    """
    index = {pair: k for k, pair in enumerate(workload.pairs)}
    return [
        measure_stage(
            np.asarray(counts[index[(i, j)]], dtype=float),
            part,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=pair_name(names, i, j),
            axes=axes_of(workload.cells, names, (i, j)),
        )
        for (i, j), part in zip(chosen, _parts(stage_part, len(workload.sizes)), strict=False)
    ]


def _facts(chosen: list[tuple[int, int]], names: list[str]) -> dict[str, object]:
    return {"tree": [[names[i], names[j]] for i, j in chosen]}


@dataclass(frozen=True)
class Measured:
    """The estimate step's state: the workload and the chosen pairs' noisy tables."""

    workload: Workload
    tables: list[Marginal]


def _estimate(
    workload: Workload,
    counts: tuple[np.ndarray, ...],
    plan: BudgetPlan,
    params: MSTParams,
    rng: np.random.Generator,
) -> Stage[Measured]:
    names = list(workload.names)
    if len(names) < 2:
        return Stage(Measured(workload, []), (), _facts([], names))
    chosen, selections = select_tree(workload, counts, plan.stage("select"), rng=rng)
    tables = measure_tree(workload, counts, chosen, plan.stage("measure"), names, rng=rng)
    measured = [Marginal(pair, m) for pair, m in zip(chosen, tables, strict=True)]
    return Stage(Measured(workload, measured), (*selections, *tables), _facts(chosen, names))


def _model(state: Measured, params: MSTParams) -> Stage[ModelDraws]:
    """Post-processing: mbi's estimate from every measurement (the counts are dropped)."""
    workload = state.workload
    model = estimate(
        workload.names,
        workload.sizes,
        [*one_way(workload), *state.tables],
        workload.n,
        iters=params.iters,
        last=True,
    )
    return Stage(ModelDraws(replace(workload, counts=()), model))


class MSTStreaming(Streaming[MSTParams, Measured]):
    """mst from sums over chunks: the one-way and pair counts are sums over rows."""

    def encode(
        self,
        counts: Sequence[np.ndarray],
        n: int,
        schema: Schema,
        plan: BudgetPlan,
        params: MSTParams,
        rng: np.random.Generator,
    ) -> Stage[WorkloadSums[MSTParams, Measured]]:
        workload = encode_counts(list(counts), n, schema, plan, None, rng, cuts=params.cuts)
        return WorkloadSums(workload, _estimate).stage

    def sample(self, state: Measured, params: MSTParams) -> Stage[ModelDraws]:
        return _model(state, params)


class MST(Synthesizer[MSTParams, Workload, Measured, Sampled]):
    """MST (McKenna et al. 2021) on Private-PGM: noisy one-way marginals, a spanning tree of
    two-way marginals chosen by the exponential mechanism and measured with noise, a
    graphical model estimated by mbi, fresh rows decoded through the private one-way
    densities

    mst's four steps (the module's docstring states the stages, their Δ and noise)."""

    name = "mst"
    notions = ("zcdp", "pure")
    spends = {"encode": ("marginals",), "estimate": ("select", "measure")}
    models_missing = True
    rehearsal_params = {"iters": 5}
    streaming = MSTStreaming()

    def stage_weights(self, schema: Schema, params: MSTParams) -> dict[str, float]:
        return dict(STAGE_WEIGHTS) if len(schema) > 1 else {"marginals": 1.0}

    def encode(
        self, rows: MixedRows, schema: Schema, plan: BudgetPlan, params: MSTParams, rng: np.random.Generator
    ) -> Stage[Workload]:
        return encode_rows(rows.bins, schema, plan, None, rng, cuts=params.cuts).stage

    def estimate(
        self, state: Workload, plan: BudgetPlan, params: MSTParams, rng: np.random.Generator
    ) -> Stage[Measured]:
        return _estimate(state, state.counts, plan, params, rng)

    def sample(self, state: Measured, params: MSTParams, m: int, rng: np.random.Generator) -> Stage[Sampled]:
        return Stage(Sampled(_model(state, params).state, m))

    def decode(
        self, state: Sampled, schema: Schema, params: MSTParams, rng: np.random.Generator
    ) -> MixedRows:
        return state.draws.draw(state.m, rng)

    def sensitivities(
        self, schema: Schema, params: MSTParams, n: int, facts: Facts | None = None
    ) -> dict[str, Sensitivity]:
        """Every statistic mst measures, from public facts: one histogram per column (and one
        over the declared cells per column cut by private mass, ``facts["cuts"]``), the
        selections and the chosen pairs (``facts["tree"]``, the noisy selections' outcome)."""
        h1, h2 = histogram_sensitivity("l1"), histogram_sensitivity("l2")
        out = one_way_sensitivities(schema, facts)
        for t, (a, b) in enumerate(fact_names(facts, "tree")):
            out[f"select[{t}]"] = Sensitivity("select", None, None, linf=SCORE_SENSITIVITY)
            i, j = schema.names.index(a), schema.names.index(b)
            out[pair_name(schema.names, i, j)] = Sensitivity("measure", h1, h2, tight=True)
        return out

    histograms = staticmethod(histograms)
