"""What the marginal synthesizers (``mst``, ``aim``) share: the public cells, the one-way
stage, the candidate two-way marginals and their exact counts, and the decoding of drawn
groups back to the schema's declared cells.

**Cells.** Every column is modelled over its public groups: the declared cells, with a
continuous column's intervals merged as the one-way noise and the public n call for
(``resolution.resolve``, the rule ``factor_gauss`` uses; atoms, declared ``bins`` and
``values``, ordinal and nominal columns are kept). A drawn group is placed in a declared
cell by the private one-way density (``resolution.Cells.fine``), then decoded as the schema
decodes a cell (exactly an atom, uniformly inside an interval).

**Stage ``marginals``.** One noisy histogram per column over its groups
(``factor_marginals.measure_one_way``: Δ₁ = 2, Δ₂ = √2 under replace-one, the stage split
evenly over the p columns; with ``cuts="quantiles"`` a merged column's groups are placed at
private quantiles of a noisy histogram over its declared cells, measured first).

**Candidates.** The two-way marginals (i, j), i < j, whose table has at most
``MAX_PAIR_CELLS`` cells (a public rule on the schema and n), the target's pairs first. Their
exact counts are sums over rows (``graphical.pair_counts``): the streaming engines count
them chunk by chunk in pass 2 and add them, and the selection runs on the sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.factor_marginals import Cuts, HasCuts, marginal_noise, measure_one_way
from dprelease.mechanisms.graphical import Marginal, Model, sample, table_counts
from dprelease.mechanisms.marginals import histogram
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.resolution import Cells
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import ChunkStatistic, HistogramNoise, MixedRows, Stage

__all__ = [
    "MAX_PAIR_CELLS",
    "ModelDraws",
    "Sampled",
    "Workload",
    "WorkloadSums",
    "candidate_pairs",
    "chunk_counts",
    "decode_groups",
    "encode_counts",
    "encode_rows",
    "histograms",
    "independent_table",
    "l1_error",
    "one_way",
    "pair_name",
    "split_counts",
    "target_triples",
]

MAX_PAIR_CELLS = 10_000
"""The largest two-way table a candidate may have (AIM's default workload bound, McKenna et
al. 2022, §5: all 2-way marginals of at most 10k cells)."""


def pair_name(names: Sequence[str], *columns: int) -> str:
    """The ledger name of the marginal of ``columns`` (ascending), e.g. ``marginal[a,b]``."""
    return f"marginal[{','.join(names[c] for c in columns)}]"


def candidate_pairs(schema: Schema, sizes: list[int], target: str | None = None) -> list[tuple[int, int]]:
    """The two-way marginals (i, j), i < j, of at most ``MAX_PAIR_CELLS`` cells over the
    groups ``sizes``, the target's pairs first (public: the schema, the groups, the target)."""
    p = len(sizes)
    pairs = [(i, j) for i in range(p) for j in range(i + 1, p) if sizes[i] * sizes[j] <= MAX_PAIR_CELLS]
    if target is None:
        return pairs
    t = schema.names.index(target)
    return sorted(pairs, key=lambda ij: t not in ij)


def target_triples(schema: Schema, sizes: list[int], target: str) -> list[tuple[int, int, int]]:
    """The three-way marginals (t, i, j), ascending, of the target t with two other columns,
    of at most ``MAX_PAIR_CELLS`` cells (public: the schema, the groups, the target). What a
    classifier of the target needs beyond the pairs (AIM's own workload is every triple;
    McKenna et al. 2022, §5)."""
    t = schema.names.index(target)
    others = [c for c in range(len(sizes)) if c != t]
    return [
        tuple(sorted((t, i, j)))  # type: ignore[misc]
        for a, i in enumerate(others)
        for j in others[a + 1 :]
        if sizes[t] * sizes[i] * sizes[j] <= MAX_PAIR_CELLS
    ]


@dataclass(frozen=True)
class Workload:
    """The columns' names, the public cells (with the private one-way placement for
    decoding), the candidate pairs (and the target's triples, for ``aim``), the one-way
    measurements, and the public n. ``counts`` are the exact tables of ``tables``."""

    names: tuple[str, ...]
    cells: Cells
    pairs: tuple[tuple[int, int], ...]
    one_way: tuple[Measurement, ...]
    n: int
    counts: tuple[np.ndarray, ...] = field(default=(), repr=False)  # exact table counts: confidential
    one_counts: tuple[np.ndarray, ...] = field(default=(), repr=False)  # exact histograms: confidential
    triples: tuple[tuple[int, int, int], ...] = ()
    cuts: tuple[Measurement, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def stage(self) -> Stage:
        """The one-way stage for the flow: this workload, its measurements in the order
        drawn (the cuts' histograms, then the groups'), and its public facts (cut points)."""
        return Stage(self, (*self.cuts, *self.one_way), self.facts)

    @property
    def sizes(self) -> list[int]:
        return self.cells.n_groups

    @property
    def tables(self) -> tuple[tuple[int, ...], ...]:
        """The candidate tables, pairs then triples (``counts`` in this order)."""
        return (*self.pairs, *self.triples)


def encode_rows(
    bins: np.ndarray,
    schema: Schema,
    plan: BudgetPlan,
    target: str | None,
    rng: np.random.Generator,
    triples_of: str | None = None,
    cuts: Cuts = "quantiles",
) -> Workload:
    """The one-way stage on rows in memory (``encode_counts`` on their histograms over the
    declared cells), and the candidates' exact counts (confidential, kept in the workload
    for the selection; never published).

    Sensitivity, Noise, Privacy: as ``encode_counts``.
    Reference: as ``encode_counts``.
    """
    declared = [histogram(bins[:, j], c.n_bins) for j, c in enumerate(schema.columns)]
    workload = encode_counts(declared, len(bins), schema, plan, target, rng, triples_of, cuts)
    groups = workload.cells.coarse(bins)
    return replace(workload, counts=tuple(table_counts(groups, workload.tables, workload.sizes)))


def encode_counts(
    counts: list[np.ndarray],
    n: int,
    schema: Schema,
    plan: BudgetPlan,
    target: str | None,
    rng: np.random.Generator,
    triples_of: str | None = None,
    cuts: Cuts = "quantiles",
) -> Workload:
    """The one-way stage from the fitted rows' histograms over the declared cells (in
    memory, or summed over chunks by the streaming engines' pass 1), summed into the groups;
    noise drawn once, here. The candidates: the pairs, the target's first, and with
    ``triples_of`` that column's triples.

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per histogram (``factor_marginals.measure_one_way``).
    Noise: the ``marginals`` stage split evenly over the p columns (a cut column's part
    shared with its cuts' histogram, ``CUT_SHARE``).
    Privacy: Σⱼ ρⱼ ≤ ρ_marginals (zCDP) or Σⱼ εⱼ ≤ ε_marginals (pure).
    Reference: McKenna et al. 2021 (MST) and 2022 (AIM) measure every one-way marginal first.
    """
    stage = measure_one_way(counts, n, schema, plan.stage("marginals"), cuts, rng=rng)
    sizes = stage.cells.n_groups
    pairs = candidate_pairs(schema, sizes, target)
    triples = target_triples(schema, sizes, triples_of) if triples_of is not None else []
    return Workload(
        tuple(schema.names),
        stage.cells,
        tuple(pairs),
        stage.marginals,
        n,
        one_counts=stage.coarse,
        triples=tuple(triples),
        cuts=stage.cuts,
        facts=stage.facts,
    )


def chunk_counts(bins: np.ndarray, workload: Workload) -> np.ndarray:
    """Pass 2 on one chunk: the candidates' exact counts, concatenated (summed over chunks)."""
    tables = table_counts(workload.cells.coarse(bins), workload.tables, workload.sizes)
    return np.concatenate(tables) if tables else np.zeros(0)


def split_counts(total: np.ndarray, workload: Workload) -> tuple[np.ndarray, ...]:
    """The concatenated counts of ``chunk_counts`` (summed), one table per candidate."""
    sizes = [math.prod(workload.sizes[c] for c in columns) for columns in workload.tables]
    return tuple(np.split(np.asarray(total, dtype=float), np.cumsum(sizes)[:-1])) if sizes else ()


P = TypeVar("P")
M = TypeVar("M")


@dataclass(frozen=True)
class WorkloadSums(ChunkStatistic[P, M]):
    """The streaming encode step's state of a marginal synthesizer: pass 2 counts the
    candidates' tables chunk by chunk (``chunk_counts``); ``measure``, the synthesizer's
    estimate step, runs once on their sums (``split_counts``)."""

    workload: Workload
    measure: Callable[[Workload, tuple[np.ndarray, ...], BudgetPlan, P, np.random.Generator], Stage[M]]

    @property
    def stage(self) -> Stage[WorkloadSums[P, M]]:
        """The one-way stage (``Workload.stage``) with this for its state."""
        one_way = self.workload.stage
        return Stage(self, one_way.measurements, one_way.facts)

    def chunk_sum(self, bins: np.ndarray, dither: np.ndarray, params: P) -> np.ndarray:
        return chunk_counts(bins, self.workload)

    def estimate(
        self, total: np.ndarray, n: int, plan: BudgetPlan, params: P, rng: np.random.Generator
    ) -> Stage[M]:
        return self.measure(self.workload, split_counts(total, self.workload), plan, params, rng)


def one_way(workload: Workload) -> list[Marginal]:
    """The one-way measurements as marginals for the estimator."""
    return [Marginal((j,), m) for j, m in enumerate(workload.one_way)]


def independent_table(workload: Workload, i: int, j: int) -> np.ndarray:
    """n·(p̂ᵢ ⊗ p̂ⱼ): the (i, j) table of the independence model of the private one-way
    distributions (the estimate the one-way marginals alone give; post-processing)."""
    probs = workload.cells.probs
    return workload.n * np.outer(probs[i], probs[j]).ravel()


def decode_groups(groups: np.ndarray, workload: Workload, rng: np.random.Generator) -> MixedRows:
    """Drawn groups (m, p) → declared cells, placed by the private one-way density."""
    return MixedRows(workload.cells.fine(groups, rng))


@dataclass(frozen=True)
class ModelDraws:
    """A graphical model over a workload's groups (its exact counts dropped): draws fresh
    rows along the junction tree, decoded to declared cells (post-processing; mst, aim)."""

    workload: Workload
    model: Model = field(repr=False)

    def draw(self, m: int, rng: np.random.Generator) -> MixedRows:
        """m fresh rows."""
        return decode_groups(sample(self.model, m, rng), self.workload, rng)


@dataclass(frozen=True)
class Sampled:
    """The sample step's state: the model that draws and how many rows to decode."""

    draws: ModelDraws
    m: int


def histograms(schema: Schema, params: HasCuts, plan: BudgetPlan, n: int | None) -> list[HistogramNoise]:
    """The one-way stage's noise per histogram, for the forecast (as ``factor_gauss``'s)."""
    return marginal_noise(schema, params, plan, n)


def l1_error(exact: np.ndarray, estimate: np.ndarray) -> float:
    """‖exact − estimate‖₁: how far a model's table is from a candidate's counts."""
    return float(math.fsum(np.abs(np.asarray(exact, dtype=float) - estimate)))
