"""Stage ``grid`` on tables (``mechanisms.value_grid``): the fitted rows' grid counts, their
noisy measurement, and the synthetic values moved onto the kept points, for the release
flow's tasks (memory and streaming) and for the benchmarks alike."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import Stage
from dprelease.mechanisms.value_grid import ValueGrid, grid_columns, grid_counts, measure_grids, place

__all__ = ["fitted_grid_counts", "measure_value_grid", "on_value_grid", "value_grid"]


def fitted_grid_counts(fitted: pd.DataFrame, schema: Schema) -> list[np.ndarray]:
    """The exact counts of each grid column's public points among ``fitted`` (confidential)."""
    return [grid_counts(fitted[c.name].to_numpy(dtype=float), c) for c in grid_columns(schema)]


def measure_value_grid(
    counts: list[np.ndarray], schema: Schema, stage_part: StageBudget, rng: np.random.Generator
) -> Stage:
    """The noisy grid counts; the stage's state is the kept points (``ValueGrid`` per grid
    column), its fact ``value_grid`` what is published of them."""
    measured = measure_grids(counts, schema, stage_part, rng)
    grids = [ValueGrid.of(m, c) for c, m in zip(grid_columns(schema), measured, strict=True)]
    return Stage(tuple(grids), tuple(measured), {"value_grid": {g.column: g.as_dict() for g in grids}})


def on_value_grid(
    synthetic: pd.DataFrame, grids: tuple[ValueGrid, ...], schema: Schema, n: int, rng: np.random.Generator
) -> pd.DataFrame:
    """``synthetic`` (all of it, or one chunk) with its grid columns' values moved onto the
    kept points (post-processing); ``n`` the fitted rows."""
    out = synthetic.copy()
    for column, grid in zip(grid_columns(schema), grids, strict=True):
        placed = place(out[column.name].to_numpy(dtype=float), grid, column, n, rng)
        out[column.name] = pd.Series(placed, index=out.index).astype(out[column.name].dtype)
    return out


def value_grid(
    fitted: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    stage_part: StageBudget,
    rng: np.random.Generator,
) -> tuple[Stage, pd.DataFrame]:
    """The memory engine's stage: ``measure_value_grid`` on the ``fitted`` rows, then
    ``on_value_grid`` on the ``synthetic`` table."""
    stage = measure_value_grid(fitted_grid_counts(fitted, schema), schema, stage_part, rng)
    return stage, on_value_grid(synthetic, stage.state, schema, len(fitted), rng)
