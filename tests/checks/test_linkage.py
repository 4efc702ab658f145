"""Linkage metrics against hand-computed values."""

import numpy as np
import pandas as pd
import pytest

from dprelease.checks import linkage as lk
from dprelease.engines.tables import table_to_bins
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

SCHEMA = Schema((Continuous("x", 0.0, 2.0), Nominal("c", ("a", "b")), Ordinal("o", ("lo", "mid", "hi"))))


def _features(df):
    return lk.gower_features(df, table_to_bins(df, SCHEMA), SCHEMA)


def test_gower_distance_by_hand():
    q, nominal = _features(pd.DataFrame({"x": [0.5], "c": ["a"], "o": ["lo"]}))
    r, _ = _features(pd.DataFrame({"x": [1.5, 0.5], "c": ["b", "a"], "o": ["mid", "hi"]}))
    dist, idx = lk.nearest(q, r, nominal)
    # to row 0: (1.0/2 + 1 + 1/2)/3 = 2/3; to row 1: (0 + 0 + 2/2)/3 = 1/3
    assert idx[0] == 1 and dist[0] == pytest.approx(1 / 3)
    assert list(nominal) == [False, True, False]


def test_nearest_other_record_skips_itself():
    f, nominal = _features(
        pd.DataFrame({"x": [0.0, 0.0, 2.0], "c": ["a", "a", "b"], "o": ["lo", "lo", "hi"]})
    )
    dist, idx = lk.nearest(f, f, nominal, self_index=np.arange(3))
    assert list(idx) == [1, 0, 0] and dist[0] == 0.0 and dist[2] == pytest.approx(1.0)


def test_nearest_equals_the_pairwise_gower_distance_across_chunks(rng):
    """Many nominal columns with uneven code ranges, more query rows than one chunk: the
    one-hot product gives each pair's Gower distance, and the first nearest row."""
    nominal = np.array([True, False, True, True, False])

    def rows(n):
        f = rng.random((n, 5)).astype(np.float32)
        f[:, 0], f[:, 2], f[:, 3] = rng.integers(0, 4, n), rng.integers(0, 2, n), rng.integers(0, 9, n)
        return f

    q, r = rows(lk._CHUNK + 37), rows(300)
    pair = np.where(nominal, q[:, None, :] != r[None, :, :], np.abs(q[:, None, :] - r[None, :, :])).mean(
        axis=2
    )
    dist, idx = lk.nearest(q, r, nominal)
    np.testing.assert_allclose(dist, pair.min(axis=1), rtol=1e-5)
    np.testing.assert_allclose(pair[np.arange(len(q)), idx], pair.min(axis=1), rtol=1e-5)


def test_exact_match_rates_by_hand():
    real = pd.DataFrame({"x": [0.0, 1.0, 1.0], "c": ["a", "b", "b"], "o": ["lo", "hi", "hi"]})
    syn = pd.DataFrame({"x": [0.0, 1.0, 2.0, 0.0], "c": ["a", "b", "b", "a"], "o": ["lo", "hi", "hi", "lo"]})
    out = lk.exact_match_rates(real, syn)
    # rows 0, 1, 3 match a real row; rows 0 and 3 match the real row that is unique
    assert out == {"exact_match_rate": 0.75, "unique_exact_match_rate": 0.5}


def test_dcr_summary_by_hand():
    out = lk.dcr_summary(np.array([0.0, 0.1, 0.2, 0.3]))
    assert out["mean"] == pytest.approx(0.15) and out["quantiles"]["q00"] == 0.0
    assert out["quantiles"]["q50"] == pytest.approx(0.15) and sum(out["histogram"]["counts"]) == 4


def _random(rng, n):
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 2, n),
            "c": rng.choice(["a", "b"], n),
            "o": rng.choice(["lo", "mid", "hi"], n),
        }
    )


def test_correct_link_rate_extremes(rng):
    real = _random(rng, 300)
    f_real, nominal = _features(real)
    rows, ref = np.arange(0, 300, 3), np.arange(300)
    assert lk.correct_link_rate(f_real, f_real, nominal, rows, ref) == 1.0  # a copy links every row
    shuffled = f_real[rng.permutation(300)]
    assert lk.correct_link_rate(f_real, shuffled, nominal, rows, ref) < 0.1  # ≈ 1/300 by chance


def test_membership_share_extremes(rng):
    train, holdout = _features(_random(rng, 400))[0], _features(_random(rng, 400))[0]
    _, nominal = _features(_random(rng, 1))
    assert lk.membership_share(train, holdout, train[:200], nominal) == 1.0  # copies of training rows
    fresh = _features(_random(rng, 1000))[0]
    # independent draws: Binomial(1000, ½)/1000, s.d. ≈ 0.016; 4 s.d.
    assert lk.membership_share(train, holdout, fresh, nominal) == pytest.approx(0.5, abs=0.065)
