"""A release's account of its measurements (``mechanisms.accounting.account``, the
``privacy.ledger`` of release.json) and measurements that are not differentially
private: refused without ``allow_non_dp``, recorded and marking the release with it."""

import dataclasses

import numpy as np
import pytest

from dprelease.mechanisms.accounting import account as ledger
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.primitives import laplace_mechanism, unprotected

PLAN = plan_budget("pure", 1.0, 0.0, {"a": 0.5, "b": 0.5})


def _measurements(rng):
    ok = laplace_mechanism(
        np.zeros(3), l1_sensitivity=1.0, epsilon=PLAN.stage("a").epsilon, rng=rng, name="m", stage="a"
    )
    short = dataclasses.replace(
        laplace_mechanism(
            np.zeros(3), l1_sensitivity=0.1, epsilon=PLAN.stage("b").epsilon, rng=rng, name="cov", stage="b"
        ),
        defect="paper's sensitivity 0.1 is below the true 0.4",
    )
    raw = unprotected(np.ones(2), name="thresholds", stage="b", defect="used without noise")
    return [ok, short, raw]


def test_valid_measurements_make_a_dp_ledger(rng):
    book = ledger(PLAN, _measurements(rng)[:1])
    assert book["status"] == "differentially private" and book["defects"] == []
    assert book["measurements"][0]["differentially_private"] is True


def test_defects_are_refused_without_allow_non_dp(rng):
    with pytest.raises(BudgetError, match=r"not differentially private.*b/cov: paper's sensitivity"):
        ledger(PLAN, _measurements(rng))


def test_defects_are_recorded_and_mark_the_release(rng):
    book = ledger(PLAN, _measurements(rng), allow_non_dp=True)
    assert book["status"].startswith("NOT differentially private")
    assert book["defects"] == [
        "b/cov: paper's sensitivity 0.1 is below the true 0.4",
        "b/thresholds: used without noise",
    ]
    raw = book["measurements"][2]
    assert raw["mechanism"] == "none" and raw["epsilon"] is None and raw["differentially_private"] is False
    assert book["totals"]["epsilon"] == pytest.approx(1.0)  # the claim, not a guarantee


def test_a_mechanism_that_measures_nothing_is_marked_by_its_own_defects():
    """Spectral anonymization spends nothing: an empty plan, no rows, and still not DP."""
    empty = plan_budget("pure", 1.0, 0.0, {})
    with pytest.raises(BudgetError, match="mechanism: no privacy parameter"):
        ledger(empty, [], mechanism_defects=["no privacy parameter"])
    book = ledger(empty, [], allow_non_dp=True, mechanism_defects=["no privacy parameter"])
    assert book["defects"] == ["mechanism: no privacy parameter"]
    assert book["stages"] == [] and book["totals"]["epsilon"] == 0.0
    assert book["status"].startswith("NOT differentially private")
