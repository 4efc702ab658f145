import math
import re

import numpy as np
import pytest

from dprelease.mechanisms.errors import SchemaError
from dprelease.mechanisms.schema import DEFAULT_BINS, Continuous, Nominal, Ordinal, Schema


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
    np.testing.assert_array_equal(col.to_bins(back), bins)  # integers too (mechanisms/integers.py)


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


# ---------------------------------------------------------------- issue 33: a signed heavy-tailed transform

NET = Continuous("net_assets", -2e6, 2e6, transform="asinh", scale=1000.0)


def test_asinh_bins_are_symmetric_and_fine_near_zero():
    e = NET.edges
    np.testing.assert_allclose(e, -e[::-1], atol=1e-12)  # symmetric working scale
    widths = np.diff(NET._inverse(e))  # raw widths of the 64 bins
    np.testing.assert_allclose(widths, widths[::-1], rtol=1e-9)
    # 0 is an edge; the bins beside it are scale·sinh(Δt) ≈ scale·Δt wide (sinh is linear
    # there), Δt = 2·asinh(upper/scale)/64; the tails are wide
    dt = 2 * np.arcsinh(2e6 / 1000) / DEFAULT_BINS
    assert e[DEFAULT_BINS // 2] == pytest.approx(0.0, abs=1e-12)
    assert widths[DEFAULT_BINS // 2] == pytest.approx(1000 * np.sinh(dt), rel=1e-9)
    assert widths[DEFAULT_BINS // 2] < 300 and widths[0] > 100 * widths[DEFAULT_BINS // 2]
    # linear bins over the same bounds would be 62,500 wide everywhere
    assert Continuous("x", -2e6, 2e6).edges[1] - Continuous("x", -2e6, 2e6).edges[0] == 62_500


def test_asinh_round_trips_the_unit_scale_and_the_bins(rng):
    x = np.r_[rng.standard_t(1.5, 3000) * 5000, -2e6, 0.0, 2e6]
    x = np.clip(x, NET.lower, NET.upper)
    u = NET.to_unit(x)
    assert u.min() == 0.0 and u.max() == 1.0
    np.testing.assert_allclose(NET.from_unit(u), x, rtol=1e-9, atol=1e-6)
    assert NET.to_unit(np.array([0.0]))[0] == pytest.approx(0.5)
    cells = NET.to_bins(x)
    back = NET.from_bins(cells, rng.random(len(x)))
    assert back.min() >= NET.lower and back.max() <= NET.upper
    np.testing.assert_array_equal(NET.to_bins(back), cells)  # decoded inside its own cell
    assert np.all(np.sign(back[np.abs(x) > 1000]) == np.sign(x[np.abs(x) > 1000]))


def test_asinh_keeps_atoms_and_labels_its_cells():
    col = Continuous("net", -1e5, 1e5, transform="asinh", scale=100.0, atoms=(0.0,), intervals=8)
    labels = col.cell_labels()
    assert labels[4] == "=0" and len(labels) == 9
    assert [float(v) for v in labels[:4]] == [-float(v) for v in labels[5:][::-1]]
    np.testing.assert_array_equal(col.to_bins(np.array([-1.0, 0.0, 1.0])), [3, 4, 5])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Continuous("a", -1, 5, transform="asinh"),
            "column 'a': transform 'asinh' needs scale (None)",
        ),
        (
            lambda: Continuous("a", -1, 5, transform="asinh", scale=0.0),
            "needs scale (0.0) a finite number > 0",
        ),
        (lambda: Continuous("a", -1, 5, transform="asinh", scale=math.inf), "needs scale (inf) a finite"),
        (
            lambda: Continuous("a", 0, 5, scale=2.0),
            "column 'a': scale (2.0) is used only with transform: asinh",
        ),
        (lambda: Continuous("a", -1, 5, transform="log"), "use transform: asinh with a public scale"),
    ],
)
def test_asinh_scale_rules(make, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        make()
