"""The ``check_gates`` task (``tasks.post_release``, its body through ``.fn``) as a DP
mechanism: each gated metric computed through the task's own code path stays within the
sensitivity the task records (Δ = 1/k for k compared rows) on random neighbouring tables,
and reaches it on constructed worst cases (the wiring harness, ``tests/wiring.py``); and the
task's decision follows the noisy metric, never the exact one. The noise and the decision
themselves are in tests/checks/test_gates.py."""

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger

from dprelease.engines.tables import table_to_bins
from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.gates import GATEABLE
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.tasks.post_release import check_gates
from tests.wiring import Probe, compare, probing, worst

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


def _forced(real: pd.DataFrame, synthetic: pd.DataFrame, bounds, offset: float):
    """``check_gates`` with the noise forced: each metric's release is its exact value +
    ``offset`` (the harness's probe stands in for the noise). The probe (its ``exact``
    values in the order of ``bounds``) and the task's results."""
    probe = Probe(jitter=lambda shape: np.full(shape, offset))
    budget = StageBudget("gates", 1.0, 0.01, None)
    with probing(probe), disable_run_logger():
        _, results = check_gates.fn(
            _binned(real), _binned(synthetic), SCHEMA, bounds, budget, np.random.default_rng(0)
        )
    return probe, results


@pytest.mark.parametrize("exact_passes", [True, False], ids=["exact-passes", "exact-fails"])
@pytest.mark.parametrize("side", ["max", "min"])
def test_the_decision_follows_the_noisy_metric_not_the_exact_one(side, exact_passes):
    """Each gate's bound a margin t from its exact metric e, and the noise forced to 2t the
    other way: the noisy value e ± 2t and the exact e fall on opposite sides of the bound,
    so a decision on e (post-processing of the confidential rows, not of the release) gives
    the opposite result. The task must decide, and report, the noisy value."""
    rng = np.random.default_rng(3)
    real, synthetic = _table(rng, 80), _table(rng, 120)
    probe, _ = _forced(real, synthetic, BOUNDS, 0.0)
    exact = {name: float(e[0]) for name, e in zip(GATEABLE, probe.exact, strict=True)}
    assert all(e > 0 for e in exact.values())  # the tables differ: every metric is informative
    t = 0.01
    s = 1.0 if (side == "max") == exact_passes else -1.0  # bound at e + s·t, noise 2·s·t
    bounds = {name: {"min": None, "max": None, side: e + s * t} for name, e in exact.items()}
    _, results = _forced(real, synthetic, bounds, 2 * s * t)
    assert [r.gate for r in results] == list(GATEABLE)
    for r in results:
        assert r.passed is (not exact_passes), r
        assert r.noisy_value == pytest.approx(exact[r.gate] + 2 * s * t, abs=1e-12)
