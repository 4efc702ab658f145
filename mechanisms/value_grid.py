"""Stage ``grid``: the values a continuous column really takes inside its cells, found
under DP, so that synthetic values sit where the data's do (``mechanism.value_grid``).

**Why.** A synthesizer draws a value inside its interval cell uniformly on the working
scale. Many published floats lie on a coarse grid no codebook states (an age stored as
years/100 in five-year groups, an income in survey brackets): the synthetic rows then
hold values the data never has, and a classifier tells them apart inside every cell
(raw pMSE near its 0.25 ceiling while the binned pMSE is low).

**The statistic.** The column's public grid is every multiple of its step between the
bounds: 10^−d for a declared ``decimals: d``, 1 for an ``integer`` column whose cells are
intervals (``grid_step``; at most ``MAX_GRID`` points, else the column is skipped). The
exact count of each grid point (a value counts at its nearest point; a missing value at
none) is a histogram over public cells: replacing one record moves one count by −1 and
another by +1, Δ₁ = 2, Δ₂ = √2 (attained by any record moving between two points).
**Noise:** the stage's share split evenly over the grid columns (``StageBudget.split``),
``primitives.measure_stage``: Gaussian σ = √2/√(2ρ/k) under zCDP, Laplace b = 2k/ε under
pure DP. Privacy: ρ-zCDP (ε-DP) by composition of the k histograms.

**Post-processing** (``ValueGrid``, ``place``): a point is *kept* when its noisy count
exceeds τ = σ·Φ⁻¹(1 − ``FALSE_POINTS``/K) (Laplace: b·ln(K/(2·``FALSE_POINTS``))), so that
of K empty points ``FALSE_POINTS`` are expected to pass; a kept point weighs its noisy
count. A synthetic value in cell c moves to a kept point of c with probability
min(1, (W_c + s·√k_c)·m/(n·m_c)): W_c the kept weight in c (k_c points, each count's noise
s.d. s), m_c the synthetic rows in c, m and n the synthetic and fitted rows. That is the
share of the cell's rows the kept points explain, given one noise s.d. of benefit (a cell
wholly on its points would otherwise keep about s/W_c of its rows off them by noise alone).
The values moved in a cell take the points in proportion to their weights and in the
values' order, so the synthesizer's within-cell placement, which carries the row's other
columns, is kept as a rank. Only noisy counts and the synthetic rows are read, and a value
never leaves its cell (but for one grid step of rounding), so every binned figure of the
release is unchanged. The method is ours: a thresholded noisy histogram, as Cormode et
al. 2012 publish a sparse histogram over a large domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.primitives import Measurement, measure_stage
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import Sensitivity

__all__ = [
    "FALSE_POINTS",
    "GRID_STAGE",
    "GRID_WEIGHT",
    "MAX_GRID",
    "ValueGrid",
    "grid_columns",
    "grid_counts",
    "grid_sensitivities",
    "grid_step",
    "measure_grids",
    "place",
]

GRID_STAGE = "grid"
GRID_WEIGHT = 0.05
"""The stage's weight, as a share of the mechanism's stages (as the gates' is)."""
MAX_GRID = 1_000_000
"""The most grid points a column may have (8 MB of counts)."""
FALSE_POINTS = 0.1
"""Empty grid points expected to pass the threshold, per column."""


def grid_step(column: Continuous) -> float | None:
    """The column's public grid step: 10^−decimals, or 1 for an integer column with interval
    cells; None for a column without one (no ``decimals``, ``values`` declared, a cell per
    integer already, a calendar column) or whose grid exceeds ``MAX_GRID`` points."""
    if column.values is not None or column.one_bin_per_integer or column.calendar is not None:
        return None
    if column.integer:
        step = 1.0
    elif column.decimals is not None:
        step = 10.0**-column.decimals
    else:
        return None
    return step if _points(column, step) <= MAX_GRID else None


def _points(column: Continuous, step: float) -> int:
    return math.floor(round((column.upper - column.lower) / step, 6)) + 1


def grid_columns(schema: Schema) -> list[Continuous]:
    """The schema's columns with a public grid (``grid_step``), in schema order."""
    return [c for c in schema.columns if isinstance(c, Continuous) and grid_step(c) is not None]


def _grid(column: Continuous) -> np.ndarray:
    step = grid_step(column)
    if step is None:
        raise ValueError(f"column '{column.name}' has no public grid")
    return column.lower + step * np.arange(_points(column, step))


def grid_counts(values: np.ndarray, column: Continuous) -> np.ndarray:
    """Exact count of each grid point (confidential): a value counts at its nearest point,
    a missing value (NaN) at none."""
    step = grid_step(column)
    if step is None:
        raise ValueError(f"column '{column.name}' has no public grid")
    k = _points(column, step)
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    index = np.clip(np.rint((x - column.lower) / step), 0, k - 1).astype(np.int64)
    return np.bincount(index, minlength=k).astype(float)


def grid_sensitivities(schema: Schema) -> dict[str, Sensitivity]:
    """Each grid histogram's Δ₁ = 2, Δ₂ = √2 (replace-one; attained)."""
    return {
        f"grid[{c.name}]": Sensitivity(
            GRID_STAGE, histogram_sensitivity("l1"), histogram_sensitivity("l2"), tight=True
        )
        for c in grid_columns(schema)
    }


def measure_grids(
    counts: list[np.ndarray], schema: Schema, stage_part: StageBudget, rng: np.random.Generator
) -> list[Measurement]:
    """One noisy histogram per grid column (``grid_columns``) from its exact ``counts``
    (``grid_counts``; summed over chunks on the streaming engines): the stage split evenly
    over them; Δ₁ = 2, Δ₂ = √2 (the module's docstring)."""
    grids = grid_columns(schema)
    if not grids:
        return []
    return [
        measure_stage(
            np.asarray(exact, dtype=float),
            part,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=f"grid[{c.name}]",
        )
        for c, exact, part in zip(grids, counts, stage_part.split(len(grids)), strict=True)
    ]


@dataclass(frozen=True)
class ValueGrid:
    """A column's kept grid points and their noisy counts (post-processing of its
    ``grid[...]`` measurement), and the threshold they passed."""

    column: str
    points: np.ndarray
    weights: np.ndarray
    threshold: float
    noise_sd: float

    @classmethod
    def of(cls, measurement: Measurement, column: Continuous) -> ValueGrid:
        """Keep the points whose noisy count exceeds τ (the module's docstring)."""
        noisy = np.asarray(measurement.value, dtype=float)
        k = len(noisy)
        if measurement.mechanism == "gaussian":
            sd = measurement.scale
            tau = sd * float(stats.norm.isf(FALSE_POINTS / k))
        else:
            sd = math.sqrt(2) * measurement.scale
            tau = measurement.scale * math.log(k / (2 * FALSE_POINTS))
        kept = np.flatnonzero(noisy > tau)
        points = column.finish(_grid(column)[kept])
        return cls(column.name, points, noisy[kept], tau, sd)

    def as_dict(self) -> dict[str, object]:
        """The published facts: the kept points (at most 50 listed) and the threshold."""
        order = np.argsort(-self.weights)[:50]
        return {
            "threshold": round(self.threshold, 3),
            "kept_points": len(self.points),
            "points": sorted(float(v) for v in self.points[order]),
        }


def place(
    values: np.ndarray, grid: ValueGrid, column: Continuous, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Synthetic ``values`` with each moved, with probability min(1, (W_c + s·√k_c)·m/(n·m_c)),
    to a kept point of its cell c, by weight and in order (``_in_order``; the module's
    docstring); ``n`` is the fitted rows. A value's cell is where it lies, or, in a cell
    without a kept point, the cell of a kept point within one grid step (where the
    decoding's rounding to the grid carried it over an edge). Post-processing: reads only
    ``grid`` (noisy) and the synthetic values."""
    x = np.asarray(values, dtype=float).copy()
    if not len(grid.points) or not len(x):
        return x
    present = np.flatnonzero(~np.isnan(x))
    cells = np.full(len(x), -1, dtype=np.int64)
    cells[present] = column.to_bins(x[present])
    order = np.argsort(grid.points)
    points, weights = grid.points[order], grid.weights[order]
    point_cells = column.to_bins(points)
    _carried_back(x, cells, points, point_cells, column)
    atom = column.atom_cells
    m = len(x)  # all synthetic rows, as n counts all fitted rows (missing ones too)
    for c in np.unique(point_cells):
        rows = np.flatnonzero(cells == c)
        if atom[c] or not len(rows):
            continue  # an atom's cell decodes to the atom exactly
        mine = point_cells == c
        w = weights[mine]
        explained = float(w.sum()) + grid.noise_sd * math.sqrt(len(w))
        share = min(1.0, explained * m / (n * len(rows)))
        moved = rows[rng.random(len(rows)) < share]
        x[moved] = _in_order(x[moved], points[mine], w)
    return x


def _in_order(values: np.ndarray, points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The k ``values`` of one cell replaced by the points (ascending) at the weighted
    quantiles (i + ½)/k of their ranks: the points in proportion to their weights, and in
    the values' order, so that what the synthesizer placed higher in the cell (with the
    other columns of its row) stays higher."""
    k = len(values)
    cdf = np.cumsum(weights) / weights.sum()
    at = np.minimum(np.searchsorted(cdf, (np.arange(k) + 0.5) / k), len(points) - 1)
    out = np.empty(k)
    out[np.argsort(values, kind="stable")] = points[at]
    return out


def _carried_back(
    x: np.ndarray, cells: np.ndarray, points: np.ndarray, point_cells: np.ndarray, column: Continuous
) -> None:
    """In place: a value in a cell without a kept point takes the cell of the nearest kept
    point (``points`` ascending) when that lies within one grid step of it; neither cell
    may be an atom's (nor the missing cell)."""
    step = grid_step(column)
    interval = np.flatnonzero(~column.atom_cells)  # an atom's value (or a missing one) stays
    alone = np.flatnonzero(np.isin(cells, interval) & ~np.isin(cells, point_cells))
    if step is None or not len(alone):
        return
    v = x[alone]
    right = np.minimum(np.searchsorted(points, v), len(points) - 1)
    left = np.maximum(right - 1, 0)
    nearest = np.where(np.abs(points[left] - v) <= np.abs(points[right] - v), left, right)
    near = np.abs(points[nearest] - v) <= step * (1 + 1e-9)
    near &= ~column.atom_cells[point_cells[nearest]]
    cells[alone[near]] = point_cells[nearest[near]]
