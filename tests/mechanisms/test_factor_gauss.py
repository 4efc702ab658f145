import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.factor_model import sample_latent
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

SCHEMA = Schema(
    (
        Continuous("x", -4.0, 4.0),
        Continuous("y", -4.0, 4.0),
        Ordinal("o", ("lo", "mid", "hi")),
        Nominal("b", ("no", "yes")),
    )
)
R = np.array([[1.0, 0.7, 0.5, 0.4], [0.7, 1.0, 0.3, 0.2], [0.5, 0.3, 1.0, 0.3], [0.4, 0.2, 0.3, 1.0]])


def _data(n: int, rng: np.random.Generator) -> np.ndarray:
    """Bins of a Gaussian copula with correlation R (known latent truth)."""
    z = multivariate_normal(np.zeros(4), R).rvs(n, random_state=rng)
    x, y = SCHEMA.columns[0], SCHEMA.columns[1]
    return np.column_stack(
        [
            x.to_bins(np.clip(z[:, 0], -4, 4)),
            y.to_bins(np.clip(z[:, 1], -4, 4)),
            np.digitize(z[:, 2], [-0.5, 0.8]),
            (z[:, 3] > 0.3),
        ]
    ).astype(np.int32)


def _synthetic_latent_corr(bins, params, m, rng):
    plan = plan_budget("zcdp", 50.0, 1e-6, fg.STAGE_WEIGHTS)
    enc = fg.encode(bins, SCHEMA, plan.stage("marginals"), params, rng=rng)
    moments = fg.measure_moments(enc.z, enc.bound, plan.stage("moments"), rng=rng)
    corr, _ = fg.latent_model(moments, enc.code, params)
    return np.corrcoef(sample_latent(corr, m, rng=rng).T)


def test_recovers_the_latent_correlation_with_a_loose_row_bound(rng):
    """ε = 50 and B = 4√p (rows are almost never scaled): the synthetic latent
    correlation matches R. A correlation's s.d. is ≤ (1 − r²)/√n ≈ 0.005, inflated ≤ 2.5×
    by the coarse columns' inversion, for each of two samples: 5 s.d. ≈ 0.04."""
    bins = _data(40_000, rng)
    got = _synthetic_latent_corr(bins, fg.FactorGaussParams(row_norm=8.0), 40_000, rng)
    np.testing.assert_allclose(got, R, atol=0.04)


def test_the_default_row_bound_shrinks_correlations_towards_zero(rng):
    """Known bias of B = √p (the issue's default): rows along correlated directions are
    longer and get scaled down more, so off-diagonal correlations come out smaller
    (≈ 10 % here), never larger beyond sampling error."""
    bins = _data(40_000, rng)
    got = _synthetic_latent_corr(bins, fg.FactorGaussParams(), 40_000, rng)
    off = ~np.eye(4, dtype=bool)
    assert np.all(got[off] <= R[off] + 0.04)
    assert np.mean(got[off] / R[off]) < 0.97


def test_marginals_match_at_high_budget(rng):
    n = m = 40_000
    bins = _data(n, rng)
    plan = plan_budget("zcdp", 50.0, 1e-6, fg.STAGE_WEIGHTS)
    rel = fg.FactorGauss().fit(MixedRows(bins), SCHEMA, plan, fg.FactorGaussParams(), m=m, rng=rng)
    assert rel.rows.bins.shape == (m, 4)
    for j, k in enumerate(SCHEMA.n_bins):
        real = np.bincount(bins[:, j], minlength=k) / n
        syn = np.bincount(rel.rows.bins[:, j], minlength=k) / m
        # per bin E|p̂ − p| ≤ √(p(1−p)/m) for the synthetic sample; 4× that, summed, halved
        tol = 0.5 * 4 * np.sum(np.sqrt(real * (1 - real) / m))
        assert 0.5 * np.abs(real - syn).sum() <= tol


def test_synthetic_rows_are_fresh_draws(rng):
    bins = _data(2000, rng)
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    for m in (500, 2000, 5000):
        rel = fg.FactorGauss().fit(MixedRows(bins), SCHEMA, plan, fg.FactorGaussParams(), m=m, rng=rng)
        assert rel.rows.bins.shape == (m, 4)
        assert all(rel.rows.bins[:, j].max() < k for j, k in enumerate(SCHEMA.n_bins))


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_measurements_respect_the_plan(notion, rng):
    bins = _data(3000, rng)
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, {"marginals": 1.0, "moments": 3.0})
    rel = fg.FactorGauss().fit(MixedRows(bins), SCHEMA, plan, fg.FactorGaussParams(), m=100, rng=rng)
    key = "rho" if notion == "zcdp" else "epsilon"
    for stage in plan.stages:
        spent = math.fsum(getattr(x, key) for x in rel.measurements if x.stage == stage.stage)
        assert spent <= getattr(stage, key)
    moments = rel.measurements[-1]
    bound = math.sqrt(4)
    if notion == "zcdp":
        assert moments.sensitivity == math.sqrt(2) * bound**2 / 3000
        assert moments.scale >= moments.sensitivity / math.sqrt(2 * plan.stage("moments").rho)
    else:
        assert moments.sensitivity == math.sqrt(4 * 5) * bound**2 / 3000
        assert moments.mechanism == "laplace"


def test_moments_refuse_unbounded_rows(rng):
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    with pytest.raises(ValueError, match="bound_rows"):
        fg.measure_moments(np.full((10, 4), 3.0), 2.0, plan.stage("moments"), rng=rng)


def test_factor_count_can_be_fixed(rng):
    bins = _data(5000, rng)
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    fit = fg.FactorGauss().fit(MixedRows(bins), SCHEMA, plan, fg.FactorGaussParams(factors=1), m=10, rng=rng)
    assert fit.facts["factors_used"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clip": 0}, "params.clip (0) must be"),
        ({"row_norm": -1.0}, "params.row_norm (-1.0)"),
        ({"factors": 0}, "params.factors (0) must be an integer >= 1"),
    ],
)
def test_params_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fg.FactorGaussParams(**kwargs)
