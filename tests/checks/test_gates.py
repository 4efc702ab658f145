"""The gates' noise and decision (``mechanisms.gates``) and the message of a gated release
(``checks.gates.failed_gates_message``): metrics without a bounded sensitivity cannot
gate, the noise scale and its split over the gates, a decision that errs as often as the
noise says, and a message that names the noisy values only. The metrics' sensitivity
through the ``check_gates`` task is in tests/tasks/test_check_gates.py."""

import math

import numpy as np
import pytest

from dprelease.checks.gates import failed_gates_message
from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.gates import NOT_GATEABLE, decide, gate_sensitivity, measure_gates


def test_metrics_without_a_bound_cannot_gate():
    for name in NOT_GATEABLE:
        with pytest.raises(ValueError, match="no bounded sensitivity"):
            gate_sensitivity(name, 100)


def test_noise_scale_and_split():
    """ρ split evenly over g gates: σ = (1/k)/√(2ρ/g); pure: b = g/(kε)."""
    values = {"tvd_1way": 0.02, "tvd_2way": 0.05, "wasserstein_max": 0.01}
    zcdp = measure_gates(values, 1000, StageBudget("gates", 1.0, 0.003, None), rng=np.random.default_rng(0))
    for m in zcdp:
        assert m.stage == "gates" and m.mechanism == "gaussian"
        assert m.scale == pytest.approx((1 / 1000) / math.sqrt(2 * 0.001), rel=1e-12)
    pure = measure_gates(values, 1000, StageBudget("gates", 1.0, None, 0.3), rng=np.random.default_rng(0))
    for m in pure:
        assert m.mechanism == "laplace" and m.scale == pytest.approx(3 / (1000 * 0.3), rel=1e-12)
    assert sum(m.rho for m in zcdp) <= 0.003 and sum(m.epsilon for m in pure) <= 0.3


def test_noisy_decision_errs_as_often_as_the_noise_says():
    """A metric at d = σ below its max passes with probability Φ(1) ≈ 0.841 (Gaussian):
    2,000 draws land within 4 standard errors of it."""
    rng = np.random.default_rng(11)
    budget = StageBudget("gates", 1.0, 0.005, None)
    sigma = (1 / 500) / math.sqrt(2 * 0.005)
    bounds = {"tvd_1way": {"min": None, "max": 0.05}}
    passed = [
        decide(measure_gates({"tvd_1way": 0.05 - sigma}, 500, budget, rng=rng), bounds)[0].passed
        for _ in range(2000)
    ]
    p = 0.5 * (1 + math.erf(1 / math.sqrt(2)))
    assert abs(np.mean(passed) - p) < 4 * math.sqrt(p * (1 - p) / 2000)


def test_decide_and_message_name_the_noisy_values_only():
    budget = StageBudget("gates", 1.0, 1.0, None)
    measured = measure_gates(
        {"tvd_1way": 0.5, "wasserstein_max": 0.0}, 10_000, budget, rng=np.random.default_rng(1)
    )
    results = decide(
        measured, {"tvd_1way": {"min": None, "max": 0.03}, "wasserstein_max": {"min": None, "max": 0.1}}
    )
    assert [r.passed for r in results] == [False, True]
    text = failed_gates_message(results, "/out/r/internal")
    assert "gate 'tvd_1way' (max 0.03) failed: noisy value" in text and "wasserstein_max" not in text
    assert "differentially private" in text
