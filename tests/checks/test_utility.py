"""Every utility metric against values computed by hand on tiny data."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wasserstein_distance

from dprelease.checks import utility as ut
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

SCHEMA = Schema((Continuous("x", 0.0, 1.0), Ordinal("o", ("lo", "mid", "hi")), Nominal("c", ("a", "b"))))


def test_total_variation_by_hand():
    assert ut.total_variation(np.array([1, 1]), np.array([2, 0])) == pytest.approx(0.5)
    assert ut.total_variation(np.array([3, 1]), np.array([6, 2])) == 0.0
    assert ut.total_variation(np.array([1, 0]), np.array([0, 5])) == 1.0


def test_tvd_1way_and_2way_by_hand():
    schema = Schema((Nominal("a", ("0", "1")), Nominal("b", ("0", "1"))))
    real = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    syn = np.array([[0, 0], [0, 0], [1, 1], [1, 1]])
    one = ut.tvd_1way(real, syn, schema)
    assert one["per_column"] == {"a": 0.0, "b": 0.0} and one["mean"] == 0.0
    # joint real (¼,¼,¼,¼) vs synthetic (½,0,0,½): ½(¼+¼+¼+¼) = ½
    two = ut.tvd_2way(real, syn, schema, np.random.default_rng(0))
    assert two == {"mean": 0.5, "pairs": 1, "sampled_pairs": False}


def test_tvd_2way_samples_pairs_above_30_columns():
    schema = Schema(tuple(Nominal(f"c{i}", ("0", "1")) for i in range(31)))
    bins = np.zeros((4, 31), dtype=int)
    out = ut.tvd_2way(bins, bins, schema, np.random.default_rng(0))
    assert out["sampled_pairs"] and out["pairs"] == 435 and out["mean"] == 0.0


def test_association_matrix_by_hand():
    df = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.4], "o": ["lo", "lo", "hi", "hi"], "c": ["a", "a", "b", "b"]})
    bins = np.column_stack([SCHEMA["x"].to_bins(df["x"]), [0, 0, 2, 2], [0, 0, 1, 1]])
    a = ut.association_matrix(bins, df, SCHEMA)
    # Spearman(x, o): ranks (1,2,3,4) vs (1.5,1.5,3.5,3.5): ρ = 2/√5 ≈ 0.894
    assert a[0, 1] == pytest.approx(2 / np.sqrt(5))
    # Cramér's V of o × c: a 2×2 perfectly dependent table (after dropping the empty 'mid'): 1
    assert a[1, 2] == pytest.approx(1.0)
    np.testing.assert_array_equal(np.diag(a), 1.0)
    np.testing.assert_allclose(a, a.T)


def test_wasserstein_scaled_by_hand():
    schema = Schema((Continuous("x", 0.0, 2.0),))
    real = pd.DataFrame({"x": [0.0, 0.0, 1.0, 1.0]})
    syn = pd.DataFrame({"x": [1.0, 1.0, 1.0, 1.0]})
    assert ut.wasserstein_scaled(real, syn, schema) == {"x": pytest.approx(0.5 / 2.0)}


def _table(rng, n, shift=0.0):
    x = rng.uniform(0, 1, n)
    return pd.DataFrame(
        {
            "x": np.clip(x + shift, 0, 1),
            "o": np.where(x > 0.5, "hi", "lo"),
            "c": np.where(rng.uniform(size=n) < x, "b", "a"),
        }
    )


def test_pmse_extremes(rng):
    # indistinguishable: pMSE → 0 as n grows; a flexible classifier's overfit keeps it above
    # 0 at small n (3 folds, 400 rows a side: 0.029–0.031 over 3 seeds; 2,000: about 0.015)
    real = _table(rng, 2_000)
    same = _table(rng, 2_000)
    assert ut.pmse(real, same, SCHEMA, seed=0)["pmse"] < 0.03
    apart = real.assign(x=0.0, o="lo", c="a")
    far = real.assign(x=1.0, o="hi", c="b")
    out = ut.pmse(apart, far, SCHEMA, seed=0)
    assert out["worst"] == 0.25 and out["pmse"] == pytest.approx(0.25, abs=0.01)  # separable


def test_tstr_perfect_and_useless(rng):
    real = _table(rng, 600)
    real["c"] = np.where(real["x"] > 0.5, "b", "a")  # c is a function of x
    good = ut.tstr(real.iloc[:400], real.iloc[400:], real.iloc[:400], SCHEMA, "c", seed=0)
    assert (
        good["metric"] == "roc_auc"
        and good["tstr"] == pytest.approx(1.0)
        and good["ratio"] == pytest.approx(1.0)
    )
    noise = real.iloc[:400].assign(c=rng.choice(["a", "b"], 400))
    bad = ut.tstr(real.iloc[:400], real.iloc[400:], noise, SCHEMA, "c", seed=0)
    assert abs(bad["tstr"] - 0.5) < 0.15 and bad["trtr"] == pytest.approx(1.0)
    one_class = real.iloc[:400].assign(c="a")
    assert ut.tstr(real.iloc[:400], real.iloc[400:], one_class, SCHEMA, "c", seed=0)["tstr"] is None


def test_tstr_r2_for_a_continuous_target(rng):
    real = _table(rng, 600)
    out = ut.tstr(real.iloc[:400], real.iloc[400:], real.iloc[:400], SCHEMA, "x", seed=0)
    assert out["metric"] == "r2" and out["tstr"] == out["trtr"] and 0.5 < out["tstr"] <= 1.0


def test_constant_columns_have_undefined_association():
    """ρ and V of a column with one value are 0/0: NaN (undefined), never 0; only the
    column that varies keeps its diagonal 1."""
    df = pd.DataFrame({"x": [0.1, 0.1, 0.1], "o": ["lo", "mid", "hi"], "c": ["a", "a", "a"]})
    bins = np.column_stack([SCHEMA["x"].to_bins(df["x"]), [0, 1, 2], [0, 0, 0]])
    a = ut.association_matrix(bins, df, SCHEMA)
    expected = np.full((3, 3), np.nan)
    expected[1, 1] = 1.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("sizes", [(500, 500), (500, 321)])
def test_wasserstein_1d_equals_scipy_with_ties(rng, sizes):
    """The equal-size shortcut (sorted samples) is the same distance as scipy's general
    routine, on integer-valued samples full of ties and on a continuous one."""
    u = rng.integers(0, 7, sizes[0]).astype(float)
    v = rng.integers(2, 9, sizes[1]) + rng.random(sizes[1])
    assert ut.wasserstein_1d(u, v) == pytest.approx(wasserstein_distance(u, v), rel=1e-12)
    assert ut.wasserstein_1d(u, u[::-1]) == 0.0
