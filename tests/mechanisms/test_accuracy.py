"""Issue 16: the accuracy statement (``mechanisms.accuracy``). Its per-entry formulas equal
the distributions' (scipy, or direct summation), and the noise the stages really draw
(``primitives.measure_stage``, which every stage calls) has that mean absolute value, to
within a tolerance from the central limit theorem."""

import math

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.accuracy import describe, entry_noise, expected_error
from dprelease.mechanisms.primitives import discrete_laplace_noise, measure_stage


@pytest.mark.parametrize("scale", [0.5, 3.0, 35.1])
def test_per_entry_formulas_are_the_distributions(scale):
    assert entry_noise("gaussian", scale) == pytest.approx((scale, stats.halfnorm(scale=scale).mean()))
    lap = stats.laplace(scale=scale)
    assert entry_noise("laplace", scale) == pytest.approx((lap.std(), stats.expon(scale=scale).mean()))
    k = np.arange(-4000, 4001)
    p = np.exp(-np.abs(k) / scale)
    p /= p.sum()
    sd, mean_abs = entry_noise("discrete_laplace", scale)
    assert sd == pytest.approx(math.sqrt(np.sum(p * k**2)), rel=1e-9)
    assert mean_abs == pytest.approx(np.sum(p * np.abs(k)), rel=1e-9)
    assert entry_noise("none", scale) == (0.0, 0.0)


@pytest.mark.parametrize("budget", [StageBudget("s", 1.0, 0.001, None), StageBudget("s", 1.0, None, 0.05)])
def test_the_noise_a_stage_draws_has_the_stated_mean_absolute_value(budget):
    """200,000 draws of ``measure_stage`` on zeros (Δ₂ = √2, Δ₁ = 2, a histogram's): the mean
    |noise| is E|e| within 5 standard errors (sd of |e| ≤ sd of e)."""
    n = 200_000
    m = measure_stage(
        np.zeros(n),
        budget,
        l2_sensitivity=math.sqrt(2),
        l1_sensitivity=2.0,
        rng=np.random.default_rng(4),
        name="h",
    )
    sd, mean_abs = entry_noise(m.mechanism, m.scale)
    assert abs(np.mean(np.abs(m.value)) - mean_abs) < 5 * sd / math.sqrt(n)


def test_discrete_laplace_draws_have_the_stated_mean_absolute_value():
    n, scale = 200_000, 4.0
    e = discrete_laplace_noise(scale, n, np.random.default_rng(5))
    sd, mean_abs = entry_noise("discrete_laplace", scale)
    assert abs(np.mean(np.abs(e)) - mean_abs) < 5 * sd / math.sqrt(n)


def test_a_count_table_states_its_total_variation_and_a_moment_does_not():
    table = expected_error("pair[age,income]", "gaussian", 10.0, 64, 1_000)
    assert table["expected_tvd"] == pytest.approx(64 * 10.0 * math.sqrt(2 / math.pi) / 2_000)
    assert describe(table) == "±7.98, TVD 0.26"
    moment = expected_error("latent_second_moment", "gaussian", 0.01, 120, 1_000)
    assert "expected_tvd" not in moment and describe(moment) == "±0.00798"
    assert describe(None) == "—"
