"""An integer column on interval cells decodes every cell to integers of that cell
(``mechanisms/integers.py``): rounding a draw never crosses an edge nor lands on an atom, so
the published table re-encodes to the cells the model drew. The property holds for every
public layout: equal widths or declared edges or bins, identity or log scale, with atoms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dprelease.mechanisms.integers import integer_ranges
from dprelease.mechanisms.schema import MAX_INTEGER_BINS, Continuous
from tests.properties import property_settings


@st.composite
def integer_columns(draw: st.DrawFn) -> Continuous:
    """An integer column whose range is too long for a cell per integer, on interval cells."""
    lower = draw(st.integers(-1_000, 1_000))
    upper = lower + draw(st.integers(MAX_INTEGER_BINS + 1, 100_000))
    transform = draw(st.sampled_from(["identity", "log"])) if lower >= 0 else "identity"
    layout = draw(st.sampled_from(["default", "bins", "edges"]))
    inner = draw(st.lists(st.integers(lower + 1, upper - 1), max_size=30, unique=True))
    atoms = tuple(float(a) for a in draw(st.lists(st.integers(lower, upper), max_size=4, unique=True)))
    return Continuous(
        "x",
        float(lower),
        float(upper),
        integer=True,
        transform=transform,
        atoms=atoms,
        intervals=draw(st.integers(1, 200)) if layout == "bins" else None,
        cuts=(float(lower), *map(float, sorted(inner)), float(upper)) if layout == "edges" else None,
    )


@pytest.mark.property
@property_settings(200)
@given(integer_columns(), st.lists(st.integers(-1_000, 101_000), min_size=1, max_size=60), st.floats(0, 1))
def test_an_integer_decodes_to_integers_of_its_own_cell(column, xs, u):
    x = np.clip(np.array(xs, dtype=float), math.ceil(column.lower), math.floor(column.upper))
    cells = column.to_bins(x)
    back = column.from_bins(cells, np.full(len(x), u))
    assert np.array_equal(back, np.round(back))
    assert np.array_equal(column.to_bins(back), cells)


@pytest.mark.property
@property_settings(100)
@given(integer_columns())
def test_each_interval_holds_exactly_the_integers_the_encoder_puts_in_it(column):
    """``integer_ranges`` against a brute-force scan of every integer of a short range."""
    assume(column.upper - column.lower <= 5_000)
    first, last = integer_ranges(
        column._interval_of, column.lower, column.upper, column.n_intervals, column.cell_atoms
    )
    xs = np.arange(math.ceil(column.lower), math.floor(column.upper) + 1, dtype=float)
    xs = xs[~np.isin(xs, column.cell_atoms)]
    of = column._interval_of(xs)
    for i in range(column.n_intervals):
        held = xs[of == i]
        if held.size:
            assert (first[i], last[i]) == (held.min(), held.max())
        else:
            assert first[i] > last[i]


def test_a_draw_at_the_top_of_a_cell_stays_in_it():
    """[0, 10) and [10, 20] on an integer column: a draw at 9.7 was published as 10 (the next
    cell) before; now 9. An atom at 0 is never produced by the interval cell [0, 10)."""
    column = Continuous("x", 0.0, 20.0, integer=True, cuts=(0.0, 10.0, 20.0), atoms=(0.0,))
    cells = column.to_bins(np.array([5.0, 15.0]))
    np.testing.assert_array_equal(column.from_bins(cells, np.array([0.97, 0.0])), [9.0, 10.0])
    np.testing.assert_array_equal(column.from_bins(cells[:1], np.array([0.0])), [1.0])
