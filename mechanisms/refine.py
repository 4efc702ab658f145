"""Stage ``refine``: 2-way marginals of a declared target with every other column, and of
the other nominal and ordinal columns with each other, measured with noise, and a synthetic
sample raked to agree with them (post-processing).

A Gaussian copula keeps each column's marginal and a correlation matrix: it cannot carry
an interaction, e.g. a target that depends on two columns jointly, or on one column in a
non-monotone way, or the joint table of two categories (relationship and marital status).
Measured at 30 % of ρ on Adult the tables lift TSTR above the copula's ceiling and halve
the association error (``docs/mechanisms/factor_gauss.md``, and BENCHMARKS.md).

**Public choice of tables** (``table_pairs``). The target is a parameter of the spec
(public), so the tables — (j, target) for every other column j, then every pair of the
other nominal and ordinal columns while there are at most ``MAX_EXTRA_TABLES`` of them —
are chosen from the schema alone, without looking at the data. A continuous column's cells
in its table with the target are its declared cells merged by the public resolution rule
(``mechanisms.resolution``) for the noise on a table of k_t target cells: the noise budget
τ of a k_j·k_t table gives k_j = clamp(⌊2nτ / (e·k_t)⌋, 2, declared). Nominal and ordinal
columns keep their declared cells.

**Sensitivity.** Each table is a count histogram over public cells: replacing one record
moves one unit between two cells (or none), so Δ₁ = 2 and Δ₂ = √2 per table, attained.
The stage's ρ (or ε) is split over the tables (``table_parts``: two thirds evenly over
the target's tables, a third over the others in proportion to K_t^(1/3), K_t a table's
cells): σ = √2/√(2ρ_t) per count.

**Refinement (post-processing).** ``OVERSAMPLE``·m candidate rows are drawn from the
factor model (2·m: on Adult 4·m scored the same at twice the cost); their weights are
raked (iterative proportional fitting, ``SWEEPS`` sweeps, in chunks of at most ``FIT_ROWS``)
to the noisy tables, each shrunk towards the candidates' own table by its
James–Stein weight (``shrunk_distribution``: a table of noise alone, e.g. 600 rows at
ε = 0.3, leaves the candidates as they are) and projected onto the simplex, and to stage
1's private marginals; m rows are then chosen by systematic resampling. Raking only re-weights
candidates: a row that no candidate holds cannot be created. The prototype's weights
collapsed when matching all 105 of Adult's pairs at full resolution without shrinkage; the
shrunk tables of the target and of the categorical pairs do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.accuracy import entry_noise
from dprelease.mechanisms.axes import axes_of
from dprelease.mechanisms.marginals import histogram_sensitivity, project_to_simplex
from dprelease.mechanisms.primitives import Measurement, measure_stage
from dprelease.mechanisms.resolution import Cells, column_groups
from dprelease.mechanisms.schema import Schema

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
    "table_pairs",
    "table_parts",
]

OVERSAMPLE = 2
SWEEPS = 10
"""On Adult at ε = 1 (2 seeds), 10 sweeps scored as 20 did (TSTR 0.888/0.886 against
0.887/0.887, pMSE 0.054/0.055 against 0.055/0.057, 2-way TVD 0.059/0.058 against
0.059/0.059) in two thirds of the time; 5 sweeps kept the 1- and 2-way TVDs too."""
FIT_ROWS = 200_000
MAX_EXTRA_TABLES = 66
TARGET_SHARE = 2 / 3
MODEL_FLOOR = 0.1
"""Each raking target keeps this share of the candidates' own table: a cell the projection
sets to 0 keeps a tenth of its model mass, so no category the candidates hold is raked
out of the sample (without it, 4 of 30 seeds of 240 Adult rows at ε = 1 lost every woman)."""
"""At most this many tables among the nominal and ordinal columns (12 columns' pairs)."""


def pair_name(first: str, second: str) -> str:
    return f"pair[{first},{second}]"


def table_pairs(schema: Schema, target: int) -> list[tuple[int, int]]:
    """The public choice of tables (column indices): (j, target) for every other column
    j, then (i, j), i < j, for every pair of the other nominal and ordinal columns, when
    there are at most ``MAX_EXTRA_TABLES`` such pairs (else none: the stage's ρ would be
    spread too thin). A function of the schema and the declared target only."""
    others = [j for j in range(len(schema)) if j != target]
    categorical = [j for j in others if schema.columns[j].kind != "continuous"]
    extra = [(i, j) for a, i in enumerate(categorical) for j in categorical[a + 1 :]]
    return [(j, target) for j in others] + (extra if len(extra) <= MAX_EXTRA_TABLES else [])


@dataclass(frozen=True)
class Pairs:
    """The public layout of the tables: each column's ``cells`` (its groups), the
    ``tables`` as (first, second) column indices, the columns' ``names`` and the
    ``target``'s index."""

    cells: Cells
    tables: tuple[tuple[int, int], ...]
    names: tuple[str, ...]
    target: int

    @property
    def table_names(self) -> list[str]:
        return [pair_name(self.names[i], self.names[j]) for i, j in self.tables]

    @property
    def sizes(self) -> list[int]:
        k = self.cells.n_groups
        return [k[i] * k[j] for i, j in self.tables]

    def keys(self, bins: np.ndarray) -> list[np.ndarray]:
        """Each row's cell in each table, from its declared cells ``bins``."""
        g, k = self.cells.groups, self.cells.n_groups
        return [
            g[i][bins[:, i]].astype(np.int64) * k[j] + g[j][bins[:, j]].astype(np.int64)
            for i, j in self.tables
        ]


def table_parts(
    stage_part: StageBudget, tables: list[tuple[int, int]], target: int, sizes: list[int]
) -> list[StageBudget]:
    """Each table's part of the stage, in the order of ``tables`` (``sizes``: each
    table's number of cells, public). With tables among the other categorical columns,
    ``TARGET_SHARE`` of the stage goes to the target's tables, split evenly, and the rest
    to the others in proportion to K_t^(1/3) under zCDP, K_t^(1/4) under pure DP (K_t the
    table's cells); else the stage is split evenly. Σ ≤ the stage's.

    The exponent minimises the summed expected L2 norm of the others' noise,
    Σ_t E‖e_t‖₂ ≈ Σ_t √K_t·s_t, at a fixed total: Gaussian s_t = Δ₂/√(2ρ_t) under Σρ_t = ρ
    gives ρ_t ∝ K_t^(1/3) (Lagrange: √K_t·ρ_t^(−3/2) constant); Laplace s_t = √2·Δ₁/ε_t
    under Σε_t = ε gives ε_t ∝ K_t^(1/4). On Adult at ε = 1 (seeds 2–5) this lowered the
    raw pMSE from 0.057 to 0.054 against an even split, other figures unchanged
    (``benchmarks/refine_knobs.py``)."""
    is_target = [target in pair for pair in tables]
    extra = [k for k, t in zip(sizes, is_target, strict=True) if not t]
    if not extra:
        return stage_part.split(len(tables))
    first, second = stage_part.split_by([TARGET_SHARE, 1 - TARGET_SHARE])
    power = 1 / 3 if stage_part.rho is not None else 1 / 4
    targets = iter(first.split(sum(is_target)))
    others = iter(second.split_by([float(k) ** power for k in extra]))
    return [next(targets) if t else next(others) for t in is_target]


def pair_cells(schema: Schema, target: int, n: int, mean_abs_noise: float) -> Pairs:
    """Each column's cells in its tables (public: n, the noise per count E|e| and the
    schema): a continuous column is merged for its table with the target's k_t cells;
    nominal and ordinal columns keep their declared cells."""
    k_t = schema.columns[target].n_bins
    cells = Cells(
        tuple(
            np.arange(c.n_bins) if j == target else column_groups(c, n, mean_abs_noise * k_t)
            for j, c in enumerate(schema.columns)
        )
    )
    return Pairs(cells, tuple(table_pairs(schema, target)), tuple(schema.names), target)


def pair_counts(bins: np.ndarray, pairs: Pairs) -> list[np.ndarray]:
    """The exact (k_i·k_j) count tables of the rows ``bins`` (declared cells), in the
    order of ``pairs.tables``; sums over chunks are the whole table's."""
    return [
        np.bincount(key, minlength=size).astype(float)
        for key, size in zip(pairs.keys(bins), pairs.sizes, strict=True)
    ]


def measure_pairs(
    counts: list[np.ndarray], pairs: Pairs, stage_part: StageBudget, *, rng: np.random.Generator
) -> list[Measurement]:
    """Stage ``refine``: each table plus noise.

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per table (``marginals.histogram_sensitivity``).
    Noise: each table's part (``table_parts``: the stage split evenly over the T tables,
    or ``TARGET_SHARE`` evenly over the target's and the rest over the others in proportion
    to their cells^(1/3) (zCDP) or ^(1/4) (pure)): Gaussian σ = √2/√(2ρ_t) (zCDP) or
    Laplace b = 2/ε_t (pure).
    Privacy: Σ ρ_t ≤ ρ_refine (zCDP) or Σ ε_t ≤ ε_refine (basic composition).
    Reference: ours; the tables of a target as in PrivSyn/AIM-style workloads.
    """
    names = pairs.table_names
    parts = table_parts(stage_part, list(pairs.tables), pairs.target, pairs.sizes)
    return [
        measure_stage(
            table,
            part,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=name,
            axes=axes_of(pairs.cells, pairs.names, pair),
        )
        for table, name, part, pair in zip(counts, names, parts, pairs.tables, strict=True)
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
    shrunk = project_to_simplex((n * model + lam * d) / n, 1.0)
    return (1 - MODEL_FLOOR) * shrunk + MODEL_FLOOR * model


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
) -> np.ndarray:
    """The candidate rows' raked weights (sum 1): iterative proportional fitting, ``SWEEPS``
    sweeps, to each noisy table (shrunk and projected onto the simplex at the public total
    n, ``shrunk_distribution``) and to each of stage 1's one-way private distributions in
    ``margins`` (already published: free, and it keeps refining the pairs from pulling the
    marginals away)."""
    keys = _keys(bins, pairs, margins)
    targets = _tables(pairs, tables, n, margins, keys)
    w = np.full(len(bins), 1.0 / len(bins))
    for _ in range(SWEEPS):
        for key, table in zip(keys, targets, strict=True):
            current = np.bincount(key, weights=w, minlength=len(table))
            total = current.sum()
            if total <= 0:
                return np.full(len(bins), 1.0 / len(bins))
            ratio = np.divide(table * total, current, out=np.zeros_like(table), where=current > 0)
            w = w * ratio[key]
    return w / w.sum()


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
    random order. The candidates are raked in random chunks of at most ``FIT_ROWS``, each
    to the same tables (so their union agrees with them too); the cost is linear in m.

    Raking factors fitted on one chunk must not be applied to another: with noisy tables
    that no weighting satisfies at once, the factors of overlapping tables drift apart
    sweep after sweep (their products stay right on the rows they were fitted on), and on a
    row combination the fit did not see one product can hold all the weight (a release of
    150,000 Adult rows collapsed onto one distinct row that way)."""
    order = rng.permutation(len(bins))
    w = np.empty(len(bins))
    for chunk in np.array_split(order, -(-len(bins) // FIT_ROWS)):
        w[chunk] = rake(bins[chunk], pairs, tables, n, margins) * (len(chunk) / len(bins))
    positions = (rng.random() + np.arange(m)) / m
    chosen = np.minimum(np.searchsorted(np.cumsum(w), positions, side="right"), len(bins) - 1)
    return bins[rng.permutation(chosen)]
