"""Stage ``grid`` (``mechanisms.value_grid``): its sensitivity attained through its own
counting on worst-case neighbours, its noise at the planned scale, its post-processing
reading only the noisy counts, and the invariant a steward relies on: a value is never
moved out of its cell, so every binned figure of a release stays what it was."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.value_grid import (
    FALSE_POINTS,
    GRID_STAGE,
    ValueGrid,
    grid_columns,
    grid_counts,
    grid_sensitivities,
    grid_step,
    measure_grids,
    place,
)
from tests.properties import property_settings

AGE = Continuous("age", 0.15, 1.0, decimals=2)
INCOME = Continuous("income", 0.0, 5.0, transform="log", decimals=4)
GAIN = Continuous("gain", 0, 99_999, integer=True, atoms=(0.0,))
SCHEMA = Schema((AGE, INCOME, GAIN, Continuous("w", 0.0, 1.0), Nominal("k", ("a", "b"))))
GRID_AGES = np.array([0.19, 0.22, 0.27, 0.32, 0.37, 0.42, 0.47, 0.52, 0.57, 0.62, 0.67, 0.72])


def test_the_public_grid_is_the_declared_precision() -> None:
    assert grid_step(AGE) == pytest.approx(0.01)
    assert grid_step(INCOME) == pytest.approx(1e-4)
    assert grid_step(GAIN) == 1.0
    assert grid_step(Continuous("w", 0.0, 1.0)) is None  # no decimals: no grid
    assert grid_step(Continuous("n", 0, 90, integer=True)) is None  # a cell per integer already
    assert grid_step(Continuous("x", 0.0, 1e6, decimals=2)) is None  # 10^8 points: too many
    assert [c.name for c in grid_columns(SCHEMA)] == ["age", "income", "gain"]


@pytest.mark.parametrize("column", [AGE, INCOME, GAIN])
def test_sensitivity_is_attained_through_the_counting(column: Continuous) -> None:
    """Replace one record by a worst-case neighbour: the counts move by Δ₁ = 2, Δ₂ = √2,
    and never more, whatever the record (also to and from a missing value: ≤ 1)."""
    rng = np.random.default_rng(0)
    x = column.finish(rng.uniform(column.lower, column.upper, 200))
    base = grid_counts(x, column)
    sens = grid_sensitivities(SCHEMA)[f"grid[{column.name}]"]
    worst = 0.0
    for v in [column.lower, column.upper, *x[:20]]:
        y = x.copy()
        y[0] = v
        d = grid_counts(y, column) - base
        assert np.abs(d).sum() <= sens.l1 and np.linalg.norm(d) <= sens.l2 + 1e-12
        worst = max(worst, np.abs(d).sum())
    assert worst == sens.l1 and sens.tight
    y = x.copy()
    y[0] = np.nan
    assert np.abs(grid_counts(y, column) - base).sum() == 1


def test_noise_is_the_planned_scale() -> None:
    """The stage split evenly over the three grid columns: σ = √2/√(2ρ/3) each."""
    plan = plan_budget("zcdp", 1.0, 1e-6, {"marginals": 0.95, GRID_STAGE: 0.05})
    rho = plan.stage(GRID_STAGE).rho
    assert rho is not None
    columns = {"age": np.full(100, 0.5), "income": np.full(100, 1.0), "gain": np.zeros(100)}
    counts = [grid_counts(columns[c.name], c) for c in grid_columns(SCHEMA)]
    measured = measure_grids(counts, SCHEMA, plan.stage(GRID_STAGE), np.random.default_rng(1))
    assert [m.name for m in measured] == ["grid[age]", "grid[income]", "grid[gain]"]
    for m in measured:
        assert m.scale == pytest.approx(math.sqrt(2) / math.sqrt(2 * rho / 3))
        assert m.stage == GRID_STAGE and m.axes == ()  # not published as a table
    noise = measured[0].value - grid_counts(columns["age"], AGE)
    assert np.std(noise) == pytest.approx(measured[0].scale, rel=0.25)  # 86 draws


def test_a_coarse_grid_is_found_and_the_values_move_onto_it() -> None:
    """DoctorVisits' age: 12 values on a grid of 86; noise alone passes about
    ``FALSE_POINTS`` empty points; the synthetic values of a synthesizer that got every
    cell right, drawn uniformly inside their cells, end on the data's grid."""
    rng = np.random.default_rng(2)
    real = rng.choice(GRID_AGES, 4000)
    plan = plan_budget("zcdp", 1.0, 1e-6, {"marginals": 0.95, GRID_STAGE: 0.05})
    schema = Schema((AGE,))
    (m,) = measure_grids([grid_counts(real, AGE)], schema, plan.stage(GRID_STAGE), rng)
    grid = ValueGrid.of(m, AGE)
    assert set(np.round(grid.points, 2)) == set(GRID_AGES)
    synthetic = AGE.from_bins(AGE.to_bins(rng.choice(GRID_AGES, 4000)), rng.random(4000))
    placed = place(synthetic, grid, AGE, len(real), rng)
    on_grid = np.isin(np.round(placed, 2), GRID_AGES).mean()
    assert on_grid > 0.97
    assert np.isin(np.round(synthetic, 2), GRID_AGES).mean() < 0.7  # rounding alone: 58 %


def test_empty_points_pass_at_the_stated_rate() -> None:
    """With no data, the kept points are noise alone: about ``FALSE_POINTS`` per column
    (Poisson-like; 200 draws over a grid of 50,001 points, mean within 3 s.e.)."""
    rng = np.random.default_rng(3)
    plan = plan_budget("zcdp", 1.0, 1e-6, {"marginals": 0.95, GRID_STAGE: 0.05})
    schema = Schema((INCOME,))
    kept = [
        len(
            ValueGrid.of(
                measure_grids([grid_counts(none, INCOME)], schema, plan.stage(GRID_STAGE), rng)[0], INCOME
            ).points
        )
        for none in [np.empty(0)] * 200
    ]
    assert np.mean(kept) == pytest.approx(FALSE_POINTS, abs=3 * math.sqrt(FALSE_POINTS / 200))


def test_post_processing_reads_only_the_noisy_counts() -> None:
    """Two grids of equal noisy counts place identically, whatever data they came from."""
    noisy = ValueGrid("age", np.array([0.22, 0.42]), np.array([50.0, 150.0]), 10.0, 3.0)
    synthetic = AGE.finish(np.random.default_rng(4).uniform(0.15, 1.0, 500))
    a = place(synthetic, noisy, AGE, 1000, np.random.default_rng(5))
    b = place(synthetic, noisy, AGE, 1000, np.random.default_rng(5))
    assert np.array_equal(a, b)


def test_the_order_inside_a_cell_is_kept_and_the_weights_met() -> None:
    """A cell wholly on its points: every value moves; a value placed higher by the
    synthesizer (with its row's other columns) is not placed lower; the points' shares
    are their weights' within 1/k."""
    column = Continuous("age", 0.0, 1.0, decimals=2, intervals=1)
    grid = ValueGrid("age", np.array([0.2, 0.5, 0.9]), np.array([100.0, 300.0, 600.0]), 10.0, 5.0)
    x = column.finish(np.random.default_rng(6).uniform(0, 1, 1000))
    placed = place(x, grid, column, 1000, np.random.default_rng(7))
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(placed[order]) >= 0)
    shares = [np.mean(placed == v) for v in (0.2, 0.5, 0.9)]
    assert shares == pytest.approx([0.1, 0.3, 0.6], abs=1e-3)


@property_settings(max_examples=60)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_points=st.integers(0, 30),
    missing=st.booleans(),
    rows=st.integers(0, 300),
)
def test_a_value_never_leaves_its_cell(seed: int, n_points: int, missing: bool, rows: int) -> None:
    """Whatever the kept points and weights, every placed value is in the cell it was in,
    or in the cell of a kept point within one grid step of it (where rounding carried it
    over an edge); missing stays missing, atoms stay exactly the atom; within bounds and on
    the column's precision."""
    rng = np.random.default_rng(seed)
    column = Continuous("gain", 0, 99_999, integer=True, atoms=(0, 7688), missing=missing, transform="log")
    near_atoms = [1.0, 7687.0, 7689.0]  # a kept point one step from an atom must not pull it
    points = np.unique(column.finish(np.r_[rng.uniform(0, 99_999, n_points), near_atoms[: n_points % 4]]))
    grid = ValueGrid("gain", points, rng.uniform(0.1, 500, len(points)), 1.0, 5.0)
    x = column.finish(rng.uniform(0, 99_999, rows))
    x[rng.random(rows) < 0.2] = 0.0
    x[rng.random(rows) < 0.1] = 7688.0
    if missing:
        x[rng.random(rows) < 0.1] = np.nan
    placed = place(x, grid, column, max(rows, 1), rng)
    assert np.array_equal(np.isnan(placed), np.isnan(x))
    ok = ~np.isnan(x)
    before, after = column.to_bins(x[ok]), column.to_bins(placed[ok])
    near = np.abs(points[:, None] - x[ok][None, :]).min(axis=0, initial=np.inf) <= 1
    assert np.all((after == before) | near)
    for atom in (0.0, 7688.0):
        assert np.array_equal(placed[x == atom], x[x == atom])
    assert np.array_equal(column.finish(placed[ok]), placed[ok])
