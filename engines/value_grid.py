"""Stage ``grid`` on tables (``mechanisms.value_grid``): the fitted rows' noisy grid counts,
then the synthetic table's values moved onto the kept points, for the release flow's task
and for the benchmarks alike."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import Stage
from dprelease.mechanisms.value_grid import ValueGrid, grid_columns, measure_grids, place

__all__ = ["value_grid"]


def value_grid(
    fitted: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    stage_part: StageBudget,
    rng: np.random.Generator,
) -> tuple[Stage, pd.DataFrame]:
    """The noisy counts of each grid column's public points among the ``fitted`` rows
    (confidential), then, as post-processing, the ``synthetic`` values moved onto the kept
    points inside their cells. Returns the stage (its measurements and, as the fact
    ``value_grid``, the kept points: public) and the new synthetic table."""
    columns = grid_columns(schema)
    measured = measure_grids(
        {c.name: fitted[c.name].to_numpy(dtype=float) for c in columns}, schema, stage_part, rng
    )
    out = synthetic.copy()
    facts = {}
    for c, m in zip(columns, measured, strict=True):
        grid = ValueGrid.of(m, c)
        placed = place(out[c.name].to_numpy(dtype=float), grid, c, len(fitted), rng)
        out[c.name] = pd.Series(placed, index=out.index).astype(out[c.name].dtype)
        facts[c.name] = grid.as_dict()
    return Stage(None, tuple(measured), {"value_grid": facts}), out
