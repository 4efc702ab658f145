"""How finely a synthesizer models each continuous column, chosen from public facts only,
and how a coarse cell is decoded back to the declared cells.

**The rule (data-independent).** A noisy histogram of k cells over n rows is off, in
total variation, by about k·e/(2n) from noise alone, with e = E|noise| per count
(σ√(2/π) Gaussian, b Laplace). A column keeps its declared cells while that is at most
``NOISE_TVD`` (τ = 0.25: an expected L1 error of 0.5, the forecast's warning threshold,
``mechanisms.forecast.WARN_L1``), and is merged to the most cells that keep it there:

    k = clamp(⌊2nτ / e⌋, ``MIN_GROUPS``, the column's declared interval bins).

Merging trades noise for discretisation error, which is small for smooth densities and
large for spiky ones (Adult's hours-per-week at 40: declare such a value as an atom), and
the projection onto the simplex already removes much of the noise of a sparse histogram,
so the rule merges only where noise would swamp the histogram. τ was measured, not
derived: at τ = 0.05, three real tables (BENCHMARKS.md §15) lost up to 0.07 of 1-way
TVD against no merging; at τ = 0.25 they gained up to 0.09 (``benchmarks/quality.py``,
2 seeds, ε = 1). At ε = 1 the rule leaves Adult (n = 26,048) as declared and gives a
442-row, 11-column table 9 groups per column.
So the intervals of a continuous column are merged into k contiguous groups of near-equal
size; declared atoms keep their own cells; a column with declared ``bins`` or ``values``
is left as declared (a steward's choice is final; the forecast warns when the noise swamps
declared ``bins`` and says how many this rule would keep, ``forecast.swamped_bins``);
ordinal and nominal columns are never merged. n, the noise scale and the schema are
public (replace-one: n is the same on neighbours), so the grouping is too, and a
histogram of groups is still a histogram: Δ₁ = 2, Δ₂ = √2
(``marginals.histogram_sensitivity``).

**Decoding (post-processing).** A row drawn in group g is placed in one of g's declared
cells with the probability that a piecewise-linear density through the groups' private
densities (p_g / width_g at each group's centre, flat beyond the ends) gives that cell,
renormalised inside g, so the group keeps its private mass; the cell's value is then drawn
as the schema decodes it (uniform inside an interval, exactly an atom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.schema import Column, Continuous, Schema

__all__ = [
    "MIN_GROUPS",
    "NOISE_TVD",
    "Cells",
    "column_groups",
    "cut_points",
    "group_count",
    "mass_groups",
    "mergeable",
    "resolve",
]

NOISE_TVD = 0.25
MIN_GROUPS = 2


def group_count(n: int, mean_abs_noise: float, declared: int) -> int:
    """k = clamp(⌊2nτ / e⌋, ``MIN_GROUPS``, ``declared``): the module's rule."""
    if mean_abs_noise <= 0:
        return declared
    k = math.floor(2 * n * NOISE_TVD / mean_abs_noise)
    return max(min(k, declared), min(MIN_GROUPS, declared))


def mergeable(column: Column) -> bool:
    """A continuous column whose intervals the rule may merge: no declared ``bins``, edges or
    ``values`` (a steward's choice is final)."""
    return isinstance(column, Continuous) and not column.declared


def column_groups(column: Column, n: int, mean_abs_noise: float) -> np.ndarray:
    """The group of each of ``column``'s cells (contiguous, numbered in cell order): merged
    intervals by ``group_count``, each declared atom alone (also on a column with a cell
    per integer); the identity for a column that is not
    continuous or that declares ``bins`` or ``values``."""
    identity = np.arange(column.n_bins)
    if not isinstance(column, Continuous) or not mergeable(column):
        return identity
    k_declared = column.n_intervals
    k = group_count(n, mean_abs_noise, k_declared)
    if k == k_declared:
        return identity
    part = np.repeat(np.arange(k), [len(a) for a in np.array_split(np.arange(k_declared), k)])
    return _label(column, part)


def mass_groups(column: Continuous, distribution: np.ndarray, k: int) -> np.ndarray:
    """At most k groups of contiguous intervals holding near-equal *private* mass (atoms
    alone, as ``column_groups``): an interval goes to group ⌊k·F(mid)⌋ (at most k − 1), F the
    cumulative share of the intervals' mass at its middle, from ``distribution``, a private
    distribution over the declared cells. Post-processing of a noisy histogram: the cuts are
    private quantiles of the column read off its noisy CDF (a spike of mass gets a group of
    its own, a sparse tail is merged), not equal widths. Groups left empty by a jump of F are
    skipped, so a column may get fewer than k."""
    _, _, item = column._layout
    alone = column.atom_cells
    mass = np.zeros(column.n_intervals)
    np.add.at(mass, item[~alone], np.asarray(distribution, dtype=float)[~alone])
    total = mass.sum()
    if total <= 0:
        share = (np.arange(column.n_intervals) + 0.5) / column.n_intervals
    else:
        share = (np.cumsum(mass) - mass / 2) / total
    return _label(column, np.minimum((share * k).astype(np.int64), k - 1))


def cut_points(column: Continuous, groups: np.ndarray) -> list[float]:
    """Where one group of intervals ends and the next begins, on the raw scale (the
    interval edges between groups; atoms, alone, are not cuts): what a release publishes
    of ``mass_groups``. Six significant digits."""
    _, _, item = column._layout
    interval = ~column.atom_cells
    first: dict[int, int] = {}
    for cell in np.flatnonzero(interval):
        first.setdefault(int(groups[cell]), int(item[cell]))
    starts = sorted(first.values())[1:]
    edges = column._inverse(column.edges[starts]) if starts else np.empty(0)
    return [float(f"{v:.6g}") for v in edges]


def _label(column: Continuous, part: np.ndarray) -> np.ndarray:
    """Per cell in value order, its group: runs of intervals in the same ``part`` (per
    interval index) share one, each atom cell (``atom_cells``) is alone."""
    _, _, item = column._layout  # per cell: interval index, or −1 − atom index (or missing)
    alone = column.atom_cells
    groups = np.empty(column.n_bins, dtype=np.int64)
    g, previous = -1, None
    for cell, i in enumerate(item):
        key = ("atom", cell) if alone[cell] else ("interval", part[i])
        if key != previous:
            g, previous = g + 1, key
        groups[cell] = g
    return groups


@dataclass(frozen=True)
class Cells:
    """Per column: the group of each declared cell (public), and after the private
    marginals, the cumulative probability of each cell inside its group and each group's
    private probability."""

    groups: tuple[np.ndarray, ...]
    within: tuple[np.ndarray, ...] = ()
    probs: tuple[np.ndarray, ...] = ()

    @property
    def n_groups(self) -> list[int]:
        return [int(g[-1]) + 1 for g in self.groups]

    def coarse(self, bins: np.ndarray) -> np.ndarray:
        """(n, p) declared cells → (n, p) groups."""
        out = np.empty(bins.shape, dtype=np.int32)
        for j, g in enumerate(self.groups):
            out[:, j] = g[bins[:, j]]
        return out

    def coarse_counts(self, counts: list[np.ndarray]) -> list[np.ndarray]:
        """Histograms over declared cells → histograms over groups (exact sums)."""
        return [
            np.bincount(g, weights=c, minlength=int(g[-1]) + 1)
            for g, c in zip(self.groups, counts, strict=True)
        ]

    def with_private(self, schema: Schema, distributions: list[np.ndarray]) -> Cells:
        """Post-processing of the private group distributions: ``within`` for decoding,
        and the distributions themselves (``probs``)."""
        return Cells(
            self.groups,
            tuple(
                _within(c, g, p) for c, g, p in zip(schema.columns, self.groups, distributions, strict=True)
            ),
            tuple(distributions),
        )

    def fine(self, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(m, p) groups → (m, p) declared cells, each drawn inside its group by ``within``."""
        out = np.empty(groups.shape, dtype=np.int32)
        for j, (g, cum) in enumerate(zip(self.groups, self.within, strict=True)):
            if len(g) == int(g[-1]) + 1:  # identity: nothing merged
                out[:, j] = groups[:, j]
                continue
            key = groups[:, j] + rng.random(len(groups)) * (1 - 1e-12)
            out[:, j] = np.minimum(np.searchsorted(g + cum, key, side="right"), len(g) - 1)
        return out


def _within(column: Column, groups: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Cumulative P(cell | group) along each group's cells (ends at 1 in each group), from
    the piecewise-linear density through the interval groups' private densities (atoms,
    alone in their groups, are not knots)."""
    k = len(groups)
    if not isinstance(column, Continuous) or int(groups[-1]) + 1 == k:
        return np.ones(k)
    _, _, item = column._layout
    e = column.edges
    weight = np.ones(k)
    interval = ~column.atom_cells  # a declared atom (or the missing cell) is no knot
    if interval.any():
        lo, hi = e[item[interval]], e[item[interval] + 1]
        g = groups[interval]
        g_lo = np.full(int(groups[-1]) + 1, np.inf)
        g_hi = np.full(int(groups[-1]) + 1, -np.inf)
        np.minimum.at(g_lo, g, lo)
        np.maximum.at(g_hi, g, hi)
        ig = np.unique(g)
        centre = (g_lo[ig] + g_hi[ig]) / 2
        density = probs[ig] / (g_hi[ig] - g_lo[ig])
        weight[interval] = np.interp((lo + hi) / 2, centre, density) * (hi - lo)
    out = np.empty(k)
    for grp in range(int(groups[-1]) + 1):
        cells = groups == grp
        w = weight[cells]
        w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1 / len(w))
        out[cells] = np.cumsum(w)
        out[np.flatnonzero(cells)[-1]] = 1.0
    return out


def resolve(schema: Schema, n: int, mean_abs_noise: list[float]) -> Cells:
    """Every column's groups (``column_groups``) for n rows and its histogram's E|noise|."""
    return Cells(tuple(column_groups(c, n, e) for c, e in zip(schema.columns, mean_abs_noise, strict=True)))
