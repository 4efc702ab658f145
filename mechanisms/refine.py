"""Stage ``refine``: 2-way marginals of a declared target with every other column, measured
with noise, and a synthetic sample raked to agree with them (post-processing).

A Gaussian copula keeps each column's marginal and a correlation matrix: it cannot carry
an interaction, e.g. a target that depends on two columns jointly, or on one column in a
non-monotone way. The tables below carry the joint distribution of each column with the
target; measured at 30 % of ρ on Adult they lift TSTR above the copula's ceiling
(``../shared/notes/refinement-prototype.md``, and BENCHMARKS.md).

**Public choice of tables.** The target is a parameter of the spec (public), so the set of
tables — (j, target) for every other column j — is chosen without looking at the data.
Column j's cells in its table are its declared cells merged by the public resolution rule
(``mechanisms.resolution``) for the noise on a table of k_t target cells: the noise budget
τ of a k_j·k_t table gives k_j = clamp(⌊2nτ / (e·k_t)⌋, 2, declared).

**Sensitivity.** Each table is a count histogram over public cells: replacing one record
moves one unit between two cells (or none), so Δ₁ = 2 and Δ₂ = √2 per table, attained.
The stage's ρ (or ε) is split evenly over the p − 1 tables: σ = √2/√(2ρ/(p−1)) per count.

**Refinement (post-processing).** ``OVERSAMPLE``·m candidate rows are drawn from the
factor model (2·m: on Adult 4·m scored the same at twice the cost); their weights are
raked (iterative proportional fitting, ``SWEEPS`` sweeps, fitted on at most ``FIT_ROWS`` of
them) to the noisy tables, each shrunk towards the candidates' own table by its
James–Stein weight (``shrunk_distribution``: a table of noise alone, e.g. 600 rows at
ε = 0.3, leaves the candidates as they are) and projected onto the simplex, and to stage
1's private marginals; m rows are then chosen by systematic resampling. Raking only re-weights
candidates: a row that no candidate holds cannot be created. With the target shared by
every table the tables stay consistent enough for the weights not to collapse (the
prototype's collapse came from matching all 105 pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.accounting import StageBudget
from mechanisms.accuracy import entry_noise
from mechanisms.marginals import histogram_sensitivity, project_to_simplex
from mechanisms.primitives import Measurement, measure_stage
from mechanisms.resolution import Cells, column_groups
from mechanisms.schema import Schema

__all__ = [
    "FIT_ROWS",
    "OVERSAMPLE",
    "SWEEPS",
    "Pairs",
    "measure_pairs",
    "pair_cells",
    "pair_counts",
    "pair_name",
    "rake",
    "refined_rows",
    "shrunk_distribution",
    "weights",
]

OVERSAMPLE = 2
SWEEPS = 20
FIT_ROWS = 200_000


def pair_name(column: str, target: str) -> str:
    return f"pair[{column},{target}]"


@dataclass(frozen=True)
class Pairs:
    """The public layout of the tables: each column's ``cells`` in its table with the
    column ``target`` (an index), and the columns' ``names``."""

    cells: Cells
    target: int
    names: tuple[str, ...]

    @property
    def others(self) -> list[int]:
        return [j for j in range(len(self.names)) if j != self.target]

    @property
    def sizes(self) -> list[int]:
        k_t = self.cells.n_groups[self.target]
        return [self.cells.n_groups[j] * k_t for j in self.others]

    def keys(self, bins: np.ndarray) -> list[np.ndarray]:
        """Each row's cell in each table, from its declared cells ``bins``."""
        k_t = self.cells.n_groups[self.target]
        y = bins[:, self.target].astype(np.int64)
        return [self.cells.groups[j][bins[:, j]].astype(np.int64) * k_t + y for j in self.others]


def pair_cells(schema: Schema, target: int, n: int, mean_abs_noise: float) -> Pairs:
    """Each column's cells in its table with the target (public: n, the noise per count
    E|e| and the schema); the target keeps its declared cells."""
    k_t = schema.columns[target].n_bins
    cells = Cells(
        tuple(
            np.arange(c.n_bins) if j == target else column_groups(c, n, mean_abs_noise * k_t)
            for j, c in enumerate(schema.columns)
        )
    )
    return Pairs(cells, target, tuple(schema.names))


def pair_counts(bins: np.ndarray, pairs: Pairs) -> list[np.ndarray]:
    """The exact (k_j·k_t) count tables of the rows ``bins`` (declared cells), in column
    order without the target; sums over chunks are the whole table's."""
    return [
        np.bincount(key, minlength=size).astype(float)
        for key, size in zip(pairs.keys(bins), pairs.sizes, strict=True)
    ]


def measure_pairs(
    counts: list[np.ndarray], pairs: Pairs, budget: StageBudget, *, rng: np.random.Generator
) -> list[Measurement]:
    """Stage ``refine``: each table plus noise.

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per table (``marginals.histogram_sensitivity``).
    Noise: the stage split evenly over the p − 1 tables (``StageBudget.split``): Gaussian
    σ = √2/√(2ρ/(p−1)) (zCDP) or Laplace b = 2(p−1)/ε (pure).
    Privacy: Σ ρ_t ≤ ρ_refine (zCDP) or Σ ε_t ≤ ε_refine (basic composition).
    Reference: ours; the tables of a target as in PrivSyn/AIM-style workloads.
    """
    names = [pairs.names[j] for j in pairs.others]
    target_name = pairs.names[pairs.target]
    return [
        measure_stage(
            table,
            share,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=pair_name(name, target_name),
        )
        for table, name, share in zip(counts, names, budget.split(len(names)), strict=True)
    ]


def shrunk_distribution(measurement: Measurement, model: np.ndarray, n: int) -> np.ndarray:
    """A noisy count table shrunk towards the model's own table, then projected onto the
    simplex at the public total n (post-processing of published values only).

    With d = ŷ − n·p̂ (ŷ the noisy counts, p̂ the candidates' distribution over the same K
    cells), E‖d‖² = ‖n(p − p̂)‖² + K·σ² for noise of variance σ² per cell
    (``accuracy.entry_noise``), so λ = max(0, 1 − K·σ²/‖d‖²) is the positive-part
    James–Stein weight of the measurement: near 1 when the table says more than its noise,
    0 when it is noise alone (a small table at small ε), and the target is n·p̂ + λ·d."""
    sd, _ = entry_noise(measurement.mechanism, measurement.scale)
    d = measurement.value - n * model
    ss = float(d @ d)
    lam = max(0.0, 1.0 - len(d) * sd * sd / ss) if ss > 0 else 0.0
    return project_to_simplex((n * model + lam * d) / n, 1.0)


def _tables(
    pairs: Pairs, tables: list[Measurement], n: int, margins: Cells | None, keys: list[np.ndarray]
) -> list[np.ndarray]:
    """The distributions to rake to: each noisy table shrunk towards the candidates' own
    table (``shrunk_distribution``), then stage 1's one-way distributions."""
    out = [
        shrunk_distribution(m, np.bincount(key, minlength=len(m.value)) / len(key), n)
        for m, key in zip(tables, keys, strict=False)
    ]
    return out + list(margins.probs) if margins is not None else out


def _keys(bins: np.ndarray, pairs: Pairs, margins: Cells | None) -> list[np.ndarray]:
    keys = pairs.keys(bins)
    if margins is not None and margins.probs:
        coarse = margins.coarse(bins)
        keys += [coarse[:, j].astype(np.int64) for j in range(bins.shape[1])]
    return keys


def rake(
    bins: np.ndarray, pairs: Pairs, tables: list[Measurement], n: int, margins: Cells | None = None
) -> list[np.ndarray]:
    """Raking factors: one per cell of each noisy table (shrunk and projected onto the
    simplex at the public total n, ``shrunk_distribution``) and of each of stage 1's one-way private
    distributions in ``margins`` (already published: free, and it keeps refining the pairs
    from pulling the marginals away). Iterative proportional fitting on the candidate rows
    ``bins``: a row's weight is the product of its cells' factors (``weights``)."""
    keys = _keys(bins, pairs, margins)
    targets = _tables(pairs, tables, n, margins, keys)
    factors = [np.ones(len(t)) for t in targets]
    w = np.full(len(bins), 1.0 / len(bins))
    for _ in range(SWEEPS):
        for key, table, factor in zip(keys, targets, factors, strict=True):
            current = np.bincount(key, weights=w, minlength=len(table))
            total = current.sum()
            if total <= 0:
                return [np.ones(len(t)) for t in targets]
            ratio = np.divide(table * total, current, out=np.zeros_like(table), where=current > 0)
            factor *= ratio
            w = w * ratio[key]
    return factors


def weights(
    bins: np.ndarray, pairs: Pairs, factors: list[np.ndarray], margins: Cells | None = None
) -> np.ndarray:
    """Each row's weight (sum 1): the product of its cells' raking factors (the order of
    ``_keys``: the tables, then the margins), one column at a time."""
    k_t = pairs.cells.n_groups[pairs.target]
    y = bins[:, pairs.target]
    w = np.ones(len(bins))
    for j, factor in zip(pairs.others, factors, strict=False):
        w *= factor.reshape(-1, k_t)[pairs.cells.groups[j][bins[:, j]], y]
    if margins is not None and margins.probs:
        for j, factor in enumerate(factors[len(pairs.others) :]):
            w *= factor[margins.groups[j][bins[:, j]]]
    s = w.sum()
    return w / s if s > 0 else np.full(len(bins), 1.0 / len(bins))


def refined_rows(
    bins: np.ndarray,
    pairs: Pairs,
    tables: list[Measurement],
    n: int,
    m: int,
    rng: np.random.Generator,
    margins: Cells | None = None,
) -> np.ndarray:
    """m of the candidate rows, chosen by systematic resampling of their raked weights, in
    random order. The factors are fitted on at most ``FIT_ROWS`` candidates (a random
    subset: the fit's cost is bounded whatever m) and applied to all."""
    fit = bins if len(bins) <= FIT_ROWS else bins[rng.choice(len(bins), FIT_ROWS, replace=False)]
    w = weights(bins, pairs, rake(fit, pairs, tables, n, margins), margins)
    positions = (rng.random() + np.arange(m)) / m
    chosen = np.minimum(np.searchsorted(np.cumsum(w), positions, side="right"), len(bins) - 1)
    return bins[rng.permutation(chosen)]
