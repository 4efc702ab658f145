"""Issue 38, defect 3: aim's rehearsal of a 10,000-category column peaked at 7.8 GB, in the
junction-tree sampler (``graphical.sample``), which compared a block of 100,000 rows with
each row's conditional CDF over all the column's cells at once. The sampler's memory is
now bounded by ``SAMPLE_CELLS`` whatever the column's size, and it draws the same rows as
the plain row-by-row inverse CDF."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dprelease.mechanisms.graphical import SAMPLE_CELLS, Model, sample
from tests.properties import property_settings


def _model(parent: int, k: int, seed: int) -> Model:
    """A two-column model (a parent of ``parent`` cells, a child of ``k``) with a random
    joint table, its first row empty (when it has more than one)."""
    table = np.random.default_rng(seed).gamma(0.3, size=(parent, k))
    if parent > 1:
        table[0] = 0.0
    return Model(None, (parent, k), ((0, 1),), (table,), (0, 1))


def _reference(model: Model, m: int, rng: np.random.Generator) -> np.ndarray:
    """Row by row: the parent from its margin, then the child by the inverse CDF given it."""
    table = model.tables[0]
    out = np.zeros((m, 2), dtype=np.int64)
    for col, cond in ((0, table.sum(axis=1)[None, :]), (1, table)):
        totals = cond.sum(axis=1, keepdims=True)
        probs = np.divide(cond, totals, out=np.full_like(cond, 1.0 / cond.shape[1]), where=totals > 0)
        cdf = np.cumsum(probs, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random(m)
        for r in range(m):
            key = out[r, 0] if col == 1 else 0
            out[r, col] = min(np.searchsorted(cdf[key], u[r], side="left"), cond.shape[1] - 1)
    return out


@pytest.mark.property
@property_settings(15)
@given(st.integers(1, 4), st.integers(2, 20_000), st.integers(1, 3_000), st.integers(0, 2**31))
@example(2, 10_000, 5_000, 0)  # issue 38: 100,000 × 10,000 float64 CDFs at once, 8 GB
def test_the_sampler_draws_the_plain_inverse_cdf_rows_in_bounded_memory(parent, k, m, seed):
    model = _model(parent, k, seed)
    tracemalloc.start()
    try:
        rows = sample(model, m, np.random.default_rng(seed))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    bound = 12 * SAMPLE_CELLS + 8 * m * 2 + 8 * parent * k * 4  # the CDF block, the rows, the tables
    assert peak <= bound, f"{peak / 2**20:.0f} MB > {bound / 2**20:.0f} MB"
    if m <= 300:  # the reference is a Python loop
        assert np.array_equal(rows, _reference(model, m, np.random.default_rng(seed)))
    assert rows[:, 0].max() < parent and rows[:, 1].max() < k
    assert parent == 1 or (rows[:, 0] != 0).all()
