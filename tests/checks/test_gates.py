"""The gates as a DP mechanism (``mechanisms.gates``, ``tasks.post_release.check_gates``):
the metrics' sensitivity through the task's own code path, the decision on noisy values,
and the messages."""

import math

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger

from checks.gates import failed_gates_message
from engines.tables import table_to_bins
from mechanisms.accounting import StageBudget
from mechanisms.gates import GATEABLE, NOT_GATEABLE, decide, gate_sensitivity, measure_gates
from mechanisms.schema import Continuous, Nominal, Schema
from tasks.post_release import check_gates
from tests.wiring import compare, worst

SCHEMA = Schema(
    (Continuous("x", 0.0, 10.0), Continuous("k", 0, 4, integer=True), Nominal("c", ("a", "b", "c")))
)
BOUNDS = {name: {"min": None, "max": 1.0} for name in GATEABLE}


def _binned(df: pd.DataFrame, schema: Schema = SCHEMA):
    return df, table_to_bins(df, schema)


def _gates(synthetic: pd.DataFrame, schema: Schema, bounds=BOUNDS, notion: str = "zcdp"):
    budget = StageBudget("gates", 1.0, 0.01 if notion == "zcdp" else None, None if notion == "zcdp" else 0.1)

    def run(real: pd.DataFrame):
        with disable_run_logger():
            measurements, _ = check_gates.fn(
                _binned(real, schema),
                _binned(synthetic, schema),
                schema,
                bounds,
                budget,
                np.random.default_rng(0),
            )
        return measurements

    return run


def _table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 10, n),
            "k": rng.integers(0, 5, n),
            "c": rng.choice(["a", "b", "c"], n),
        }
    )


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_gate_metrics_stay_within_their_recorded_sensitivity(notion):
    """Random real tables and one-row replacements, a fixed synthetic table: each gated
    metric changes by at most the recorded Δ = 1/k (k compared rows), in the norm used."""
    rng = np.random.default_rng(5)
    synthetic = _table(rng, 300)
    changes = []
    for _ in range(150):
        d = _table(rng, int(rng.integers(3, 60)))
        d2 = d.copy()
        d2.iloc[int(rng.integers(len(d)))] = _table(rng, 1).iloc[0]
        d2 = d2.astype(d.dtypes.to_dict())
        pair = compare(_gates(synthetic, SCHEMA, notion=notion), d, d2)
        assert all(c.recorded == 1.0 / len(d) for c in pair)
        changes.append(pair)
    for c in (c for pair in changes for c in pair):
        assert c.within, c
    assert set(worst(changes)) == {f"gate[{name}]" for name in GATEABLE}


def test_the_issues_example_reaches_the_bound():
    """One binary column, n = 10: tvd_1way is 0.0 on D (same histogram as S) and 0.1 on a
    neighbour; the noise the gate gets is calibrated to exactly that change, 1/n."""
    schema = Schema((Nominal("b", ("0", "1")),))
    synthetic = pd.DataFrame({"b": ["0"] * 5 + ["1"] * 5})
    d = synthetic.copy()
    d2 = d.copy()
    d2.loc[0, "b"] = "1"
    bounds = {"tvd_1way": {"min": None, "max": 0.05}, "tvd_2way": {"min": None, "max": 0.05}}
    (tv1, tv2) = compare(_gates(synthetic, schema, bounds), d, d2)
    assert tv1.observed == pytest.approx(0.1) and tv1.recorded == pytest.approx(0.1)
    assert tv2.observed == 0.0  # one column has no pairs: the mean over no pairs is 0


def test_tvd_2way_and_wasserstein_reach_the_bound():
    """Two columns, every other record equal to the synthetic rows: moving one record's
    value from the lower to the upper public bound (and to another category) changes the
    pair's TVD by 1/n and the scaled Wasserstein distance by exactly (u − l)/n/(u − l)."""
    schema = Schema((Continuous("x", 0.0, 10.0), Nominal("c", ("a", "b"))))
    n = 20
    synthetic = pd.DataFrame({"x": [0.0] * n, "c": ["a"] * n})
    d = synthetic.copy()
    d2 = d.copy()
    d2.loc[7] = {"x": 10.0, "c": "b"}
    bounds = {"tvd_2way": {"min": None, "max": 1.0}, "wasserstein_max": {"min": None, "max": 1.0}}
    for c in compare(_gates(synthetic, schema, bounds), d, d2):
        assert c.observed == pytest.approx(c.recorded, rel=1e-12) and c.recorded == pytest.approx(1 / n)


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
