"""Row-keyed randomness (``mechanisms.rowkeys``, what lets the streaming engines draw per
row): the same rows get the same draws whatever the chunking."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dprelease.mechanisms.rowkeys import RowKeys, held_out, holdout_mask, row_uniforms
from tests.properties import property_settings


def test_draws_depend_on_the_row_not_the_chunk():
    whole = row_uniforms(12345, 0, 1_000, 4)
    pieces = np.vstack([row_uniforms(12345, s, e - s, 4) for s, e in [(0, 37), (37, 500), (500, 1_000)]])
    np.testing.assert_array_equal(whole, pieces)


def test_keys_give_different_streams():
    a, b = row_uniforms(1, 0, 1_000, 2), row_uniforms(2, 0, 1_000, 2)
    assert not np.any(a == b)


def test_uniform_on_the_unit_interval():
    """Kolmogorov-Smirnov at the 0.1 % level on 200,000 draws of one fixed key, and no
    correlation between neighbouring rows or columns beyond 4 standard errors."""
    u = row_uniforms(2026, 10**12, 100_000, 2)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    se = 1 / math.sqrt(len(u))
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 4 * se
    assert abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 4 * se


def test_holdout_is_a_fair_coin_per_row():
    n, f = 200_000, 0.2
    held = holdout_mask(7, 0, n, f)
    assert abs(held.mean() - f) < 4 * math.sqrt(f * (1 - f) / n)
    np.testing.assert_array_equal(held[1000:2000], holdout_mask(7, 1000, 1000, f))
    assert not holdout_mask(7, 0, 100, 0.0).any()


def test_keys_from_a_generator_are_reproducible_and_distinct():
    a = RowKeys.draw(np.random.default_rng(5))
    assert a == RowKeys.draw(np.random.default_rng(5))
    assert len({a.dither, a.holdout, a.sample}) == 3


@pytest.mark.property
@given(
    key=st.integers(0, 2**63 - 1),
    n=st.integers(0, 5_000),
    fraction=st.sampled_from([0.0, 0.01, 0.2, 0.5]),
    block=st.integers(1, 3_000),
)
@property_settings(50)
def test_held_out_counts_the_coins_of_every_row(key, n, fraction, block):
    """``held_out`` (the streaming fitted count that ``mechanism: auto`` chooses on, before
    any row is read) is the number of rows ``holdout_mask`` holds out, in any block size."""
    assert held_out(key, n, fraction, block) == int(holdout_mask(key, 0, n, fraction).sum())
