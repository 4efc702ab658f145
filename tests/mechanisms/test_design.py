"""The public-box design matrix shared by the projection synthesizers."""

import numpy as np
import pytest

from dprelease.mechanisms.design import design
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

SCHEMA = Schema(
    (
        Continuous("x", 0.0, 10.0),
        Ordinal("grade", ("lo", "mid", "hi")),
        Nominal("colour", ("r", "g", "b", "y")),
        Continuous("age", 17, 90, integer=True),
    )
)


def _rows(rng, n=500):
    bins = np.column_stack(
        [
            rng.integers(0, 64, n),
            rng.integers(0, 3, n),
            rng.integers(0, 4, n),
            rng.integers(0, 74, n),
        ]
    ).astype(np.int32)
    unit = np.full((n, 4), np.nan)
    unit[:, 0] = rng.random(n)
    unit[:, 3] = bins[:, 3] / 73
    bins[:, 0] = SCHEMA.columns[0].to_bins(SCHEMA.columns[0].from_unit(unit[:, 0]))
    return MixedRows(bins, unit)


def test_layout_and_norm_bound(rng):
    d = design(SCHEMA)
    assert d.width == 1 + 1 + 4 + 1
    x = d.encode(_rows(rng))
    assert x.min() >= 0 and x.max() <= 1
    assert np.linalg.norm(x, axis=1).max() <= d.max_norm == pytest.approx(2.0)
    np.testing.assert_array_equal(x[:, 2:6].sum(axis=1), 1.0)  # one-hot block


def test_decode_inverts_encode(rng):
    d = design(SCHEMA)
    rows = _rows(rng)
    back = d.decode(d.encode(rows))
    np.testing.assert_array_equal(back.bins, rows.bins)
    np.testing.assert_allclose(back.unit[:, [0, 3]], rows.unit[:, [0, 3]])
    assert np.isnan(back.unit[:, [1, 2]]).all()


def test_decode_maps_any_real_matrix_to_valid_rows(rng):
    d = design(SCHEMA)
    back = d.decode(rng.normal(0.5, 2.0, size=(300, d.width)))
    for j, c in enumerate(SCHEMA.columns):
        assert back.bins[:, j].min() >= 0 and back.bins[:, j].max() < c.n_bins
    assert np.nanmin(back.unit) >= 0 and np.nanmax(back.unit) <= 1


def test_continuous_values_are_required():
    with pytest.raises(ValueError, match="needs continuous values"):
        design(SCHEMA).encode(MixedRows(np.zeros((2, 4), dtype=np.int32)))
