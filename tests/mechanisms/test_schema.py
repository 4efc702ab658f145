import re

import numpy as np
import pytest

from mechanisms.errors import SchemaError
from mechanisms.schema import DEFAULT_BINS, Continuous, Nominal, Ordinal, Schema


@pytest.mark.parametrize(
    ("column", "n_bins"),
    [
        (Continuous("age", 17, 90, integer=True), 74),  # one bin per integer (74 <= 128)
        (Continuous("hours", 1, 128, integer=True), 128),  # exactly 128 integers
        (Continuous("big", 0, 128, integer=True), DEFAULT_BINS),  # 129 integers
        (Continuous("x", 0.0, 1.0), DEFAULT_BINS),  # real-valued
        (Continuous("gain", 0, 99999, integer=True, transform="log"), DEFAULT_BINS),
    ],
)
def test_bins_follow_the_public_rule(column, n_bins):
    assert column.n_bins == n_bins
    assert len(column.edges) == n_bins + 1


def test_integer_bins_round_trip_exactly(rng):
    col = Continuous("age", 17, 90, integer=True)
    x = rng.integers(17, 91, size=1000)
    np.testing.assert_array_equal(col.from_bins(col.to_bins(x), rng.random(1000)), x)


@pytest.mark.parametrize(
    "col", [Continuous("x", -3.0, 5.0), Continuous("gain", 0, 99999, integer=True, transform="log")]
)
def test_values_decode_inside_their_bin_and_bounds(col, rng):
    x = rng.uniform(col.lower, col.upper, size=5000)
    if col.integer:
        x = np.round(x)
    bins = col.to_bins(x)
    back = col.from_bins(bins, rng.random(len(x)))
    assert back.min() >= col.lower and back.max() <= col.upper
    if not col.integer:  # rounding to integers may cross an edge; reals never do
        np.testing.assert_array_equal(col.to_bins(back), bins)


def test_log_bins_are_equal_width_on_log1p_scale():
    col = Continuous("gain", 0, 99999, integer=True, transform="log")
    np.testing.assert_allclose(np.diff(col.edges), np.log1p(99999) / DEFAULT_BINS)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Continuous("a", 5, 5), "column 'a': lower bound (5) must be below the upper bound (5)"),
        (lambda: Continuous("a", -1, 5, transform="log"), "needs lower bound (-1) >= 0"),
        (lambda: Continuous("a", 0.2, 0.7, integer=True), "column 'a': the bounds hold no integer"),
        (lambda: Ordinal("e", ("lo",)), "column 'e': levels must list at least 2 values"),
        (lambda: Nominal("s", ("F", "M", "F")), "column 's': categories must be distinct; repeated: ['F']"),
        (lambda: Schema(()), "schema must declare at least one column"),
    ],
)
def test_schema_errors_name_the_column_and_rule(make, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        make()


@pytest.mark.parametrize(
    "col",
    [
        Continuous("x", -3.0, 5.0),
        Continuous("age", 17, 90, integer=True),
        Continuous("gain", 0, 99999, integer=True, transform="log"),
    ],
)
def test_unit_scale_round_trips_and_stays_in_bounds(col, rng):
    x = rng.uniform(col.lower, col.upper, size=2000)
    if col.integer:
        x = np.round(x)
    u = col.to_unit(x)
    assert u.min() >= 0.0 and u.max() <= 1.0
    np.testing.assert_allclose(col.from_unit(u), x, rtol=1e-9, atol=1e-9)
    # out-of-range positions are clipped to the public bounds
    assert col.from_unit(np.array([-0.5, 1.5])).tolist() == [col.lower, col.upper]


def test_unit_scale_is_linear_on_log1p_for_log_columns():
    col = Continuous("gain", 0.0, 1e4, transform="log")
    mid = col.from_unit(np.array([0.5]))[0]
    assert mid == pytest.approx(np.expm1(np.log1p(1e4) / 2))
