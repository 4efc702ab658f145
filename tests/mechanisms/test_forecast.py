"""The usability forecast (``mechanisms.forecast``): its thresholds on a noise model with
known answers, and its noise is the noise the stages really draw: the (kind, scale) the
forecast declares equals what each histogram's measurement hands ``primitives._perturb``
(``tests/wiring.py``'s probe), for factor_gauss's marginals and ron_gauss's class counts,
under both accountants."""

import math
import re

import numpy as np
import pytest

from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms import ron_gauss as rg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.forecast import (
    MAX_EPSILON,
    WARN_L1,
    Forecast,
    expected_l1,
    histogram_forecast,
    swamped_bins,
)
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.resolution import group_count
from dprelease.mechanisms.ron_gauss.params import RonGaussParams
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import HistogramNoise
from tests.mechanisms.small import SMALL, small_rows
from tests.wiring import Probe, flow_stages, probing

NOTIONS = {"zcdp": 1e-6, "pure": 0.0}
N = 200  # the fitted rows of small_rows(N, ...)


def _at_least(message: str) -> float:
    return float(re.search(r"at least ([0-9.e+-]+)", message).group(1))


@pytest.mark.parametrize("notion", list(NOTIONS))
def test_factor_gauss_forecast_noise_is_what_the_marginals_stage_draws(notion):
    plan = plan_budget(notion, 0.3, NOTIONS[notion], fg.STAGE_WEIGHTS)
    params = fg.FactorGaussParams()
    with probing(Probe()) as probe:
        measured = flow_stages("factor_gauss", SMALL, plan, params)(small_rows(N, np.random.default_rng(0)))
    drawn = {m.name: noise for m, noise in zip(measured, probe.noise, strict=True)}
    cells = {m.name: len(m.value) for m in measured}
    declared = fg.FactorGauss().histograms(SMALL, params, plan, N)
    assert [h.column for h in declared] == SMALL.names
    for h in declared:
        assert (h.mechanism, h.scale) == drawn[f"histogram[{h.column}]"]
        assert h.stage == "marginals" and h.bins == cells[f"histogram[{h.column}]"]


@pytest.mark.parametrize("notion", list(NOTIONS))
def test_ron_gauss_forecast_noise_is_what_the_class_counts_stage_draws(notion):
    params = RonGaussParams(task="classification", label="job")
    plan = plan_budget(notion, 0.3, NOTIONS[notion], rg.stage_weights("classification", "corrected"))
    with probing(Probe()) as probe:
        measured = flow_stages("ron_gauss", SMALL, plan, params)(small_rows(N, np.random.default_rng(0)))
    drawn = {m.name: noise for m, noise in zip(measured, probe.noise, strict=True)}
    (h,) = rg.RonGauss().histograms(SMALL, params, plan, N)
    assert (h.stage, h.column, h.bins) == ("class_counts", "job", 3)
    assert (h.mechanism, h.scale) == drawn["class_counts"]


def _noise_at(name: str, params: object):
    synth = MECHANISMS[name]
    weights = synth.stage_weights(SMALL, params)
    return lambda eps: synth.histograms(SMALL, params, plan_budget("zcdp", eps, 1e-6, weights), N)


@pytest.mark.parametrize(
    "name, params",
    [
        ("ron_gauss", RonGaussParams()),
        ("ron_gauss", RonGaussParams(task="regression", label="age")),
        ("dpfm", MECHANISMS["dpfm"].params_type()),
        ("private_pca", MECHANISMS["private_pca"].params_type()),
    ],
)
def test_mechanisms_without_public_histograms_forecast_nothing(name, params):
    """Moments, projections and factor scores are not histograms: no forecast, even at
    ε = 1e-9 (the module docstring says so)."""
    forecast = histogram_forecast(_noise_at(name, params), 1e-9, 100)
    assert forecast == Forecast(None, [], ())


def test_noise_per_count():
    g, lap = HistogramNoise("s", "x", 10, "gaussian", 2.0), HistogramNoise("s", "x", 10, "laplace", 2.0)
    assert g.sd == 2.0 and g.mean_abs == pytest.approx(2.0 * math.sqrt(2 / math.pi))
    assert lap.sd == pytest.approx(2.0 * math.sqrt(2)) and lap.mean_abs == 2.0
    assert expected_l1(g, 100) == pytest.approx(10 * g.mean_abs / 100)


def _toy(bins: int):
    """σ = 1/ε on one histogram: the refusal threshold is ε > 1/n, the warning's
    ε ≥ bins·√(2/π)/(0.5·n)."""
    return lambda eps: [HistogramNoise("marginals", "x", bins, "gaussian", 1.0 / eps)]


def test_refusal_names_the_epsilon_that_lifts_it():
    n = 1_000
    f = histogram_forecast(_toy(2), 1e-4, n)  # σ = 10⁴ ≥ n
    assert f.refuse is not None and "privacy.epsilon" in f.refuse
    x = _at_least(f.refuse)
    assert 1 / n < x <= 1.1 / n  # the threshold ε = 1/n, rounded up to 2 digits
    assert histogram_forecast(_toy(2), x, n).refuse is None
    assert histogram_forecast(_toy(2), 0.9 * x, n).refuse is not None


def test_warning_names_the_column_and_the_epsilon_that_lifts_it():
    n, bins = 442, 64
    f = histogram_forecast(_toy(bins), 0.01, n)  # σ = 100: E‖e‖₁/n ≈ 11.5
    assert f.refuse is None and len(f.warnings) == 1 and "'x'" in f.warnings[0]
    x = _at_least(f.warnings[0])
    exact = bins * math.sqrt(2 / math.pi) / (WARN_L1 * n)  # solves K·σ√(2/π)/n = 0.5 for σ = 1/ε
    assert exact <= x <= 1.1 * exact
    assert histogram_forecast(_toy(bins), x, n).warnings == []


def test_no_epsilon_is_large_enough_for_one_row_and_many_bins():
    f = histogram_forecast(lambda eps: [HistogramNoise("s", "x", 10_000, "gaussian", 1.0)], 1.0, 1)
    assert f.refuse is not None and f"no privacy.epsilon up to {MAX_EPSILON:g}" in f.refuse


def test_without_n_there_is_nothing_to_forecast():
    f = histogram_forecast(_toy(2), 1e-9, None)
    assert f.refuse is None and f.warnings == [] and f.histograms[0].scale == pytest.approx(1e9)
    with pytest.raises(ValueError, match="fitted rows"):
        histogram_forecast(_toy(2), 1.0, 0)


# ---------------------------------------------------------------- issue 33: declared bins the noise swamps


def _merging(bins: int):
    """σ = 1/ε on the histogram of a merging step (``declared`` set), over ``bins`` cells."""
    return lambda eps: [HistogramNoise("marginals", "x", bins, "gaussian", 1.0 / eps, declared=bins)]


def test_declared_bins_the_noise_swamps_are_warned_about_with_the_merge_rules_count():
    n, eps = 1_000, 0.05  # σ = 20, E|e| ≈ 16: the rule keeps ⌊2·1000·0.25/16⌋ = 31 of 256
    schema = Schema((Continuous("x", 0.0, 1.0, intervals=256),))
    f = histogram_forecast(_merging(256), eps, n, schema)
    k = group_count(n, 20 * math.sqrt(2 / math.pi), 256)
    assert k == 31
    (warning,) = [w for w in f.warnings if w.startswith("column 'x'")]
    assert warning.startswith(
        "column 'x': bins: 256 keeps 256 cells; at privacy.epsilon 0.05 and n = 1000 fitted rows the noise "
        "swamps them"
    )
    assert warning.endswith("the merge rule would keep 31; remove bins to let it merge")


def test_declared_bins_the_noise_leaves_alone_and_undeclared_bins_are_not_warned_about():
    n = 1_000
    few = Schema((Continuous("x", 0.0, 1.0, intervals=16),))  # the rule would keep 31 ≥ 16
    assert histogram_forecast(_merging(16), 0.05, n, few).warnings == []
    merged = Schema((Continuous("x", 0.0, 1.0),))  # no bins declared: the step merges itself
    assert swamped_bins(_merging(64)(0.05), merged, 0.05, n) == []
    declared = Schema((Continuous("x", 0.0, 1.0, intervals=256),))
    not_merging = [HistogramNoise("marginals", "x", 256, "gaussian", 20.0)]  # declared None: no merge rule
    assert swamped_bins(not_merging, declared, 0.05, n) == []
