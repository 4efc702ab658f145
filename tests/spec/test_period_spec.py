"""The period budget in the spec (``privacy.period``): one policy (a lifetime or a period),
a length of one ISO-8601 unit, a release's own (ε, δ) within the period's; a deployment's
spec must declare a policy (``has_policy``, ``NEEDS_POLICY``)."""

import copy

import pytest
import yaml

from dprelease.mechanisms.periods import Period, PeriodBudget
from dprelease.spec import SpecError, load_spec
from dprelease.spec.sections import NEEDS_POLICY
from tests.helpers import DEMO_DIR, DEMO_SPEC


def _load(tmp_path, **privacy):
    doc = copy.deepcopy(DEMO_SPEC)
    doc["privacy"] = {"epsilon": 1.0, "delta": 1e-6, **privacy}
    doc["dataset"]["path"] = str(DEMO_DIR / "adult.csv.gz")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_spec(path)


def test_a_period_budget_loads_with_the_release_delta_by_default(tmp_path):
    p = _load(tmp_path, period={"length": "P1M", "epsilon": 2.0}).privacy
    assert p.period_budget == PeriodBudget(Period(1, "M"), 2.0, 1e-6) and p.lifetime is None and p.has_policy
    stated = _load(tmp_path, period={"length": "P1W", "epsilon": 1.0, "delta": 1e-5}).privacy
    assert stated.period_budget == PeriodBudget(Period(1, "W"), 1.0, 1e-5)


@pytest.mark.parametrize(
    ("privacy", "says"),
    [
        (
            {"period": {"length": "P1M", "epsilon": 2.0}, "lifetime_epsilon": 3.0},
            "period and lifetime_epsilon/lifetime_delta are two budget policies: state one",
        ),
        (
            {"period": {"length": "P1M", "epsilon": 2.0}, "lifetime_delta": 1e-5},
            "period and lifetime_epsilon/lifetime_delta are two budget policies",
        ),
        (
            {"period": {"length": "P1M", "epsilon": 0.5}},
            r"epsilon \(1.0\) must not exceed period.epsilon \(0.5\)",
        ),
        (
            {"period": {"length": "P1M", "epsilon": 2.0, "delta": 1e-7}},
            r"delta \(1e-06\) must not exceed period.delta \(1e-07\)",
        ),
        (
            {"period": {"length": "P1H", "epsilon": 2.0}},
            r"privacy.period.length.*\('P1H'\) must be an ISO-8601",
        ),
        ({"period": {"length": "P1Y6M", "epsilon": 2.0}}, r"privacy.period.length.*one unit: PnD"),
        ({"period": {"length": "P1M", "epsilon": 0}}, r"privacy.period.epsilon"),
        ({"period": {"length": "P1M", "epsilon": 2.0, "every": 1}}, r"privacy.period.every"),
        ({"period": {"epsilon": 2.0}}, r"privacy.period.length"),
        (
            {"period": {"length": "P1M", "epsilon": 2.0}, "allow_non_dp": True},
            "allow_non_dp cannot be charged to a period budget",
        ),
    ],
)
def test_a_wrong_period_is_refused_naming_the_field_and_rule(tmp_path, privacy, says):
    with pytest.raises(SpecError, match=says):
        _load(tmp_path, **privacy)


def test_periods_declared_disjoint_load_and_are_not_disjoint_by_default(tmp_path):
    p = _load(tmp_path, period={"length": "P1M", "epsilon": 2.0, "disjoint": True}).privacy
    assert p.period_budget == PeriodBudget(Period(1, "M"), 2.0, 1e-6, disjoint=True)
    assert not _load(tmp_path, period={"length": "P1M", "epsilon": 2.0}).privacy.period_budget.disjoint


@pytest.mark.parametrize(
    ("privacy", "says"),
    [
        (
            {"lifetime_epsilon": 3.0, "disjoint": True},
            r"disjoint must be set under privacy.period \(privacy.period.disjoint\).*a lifetime budget has "
            "no periods",
        ),
        (
            {"period": {"length": "P1M", "epsilon": 2.0}, "disjoint": True},
            r"disjoint must be set under privacy.period",
        ),
        ({"period": {"length": "P1M", "epsilon": 2.0, "disjoint": "yes"}}, r"privacy.period.disjoint.*bool"),
    ],
)
def test_disjoint_is_refused_outside_a_period_or_when_not_a_boolean(tmp_path, privacy, says):
    with pytest.raises(SpecError, match=says):
        _load(tmp_path, **privacy)


def test_neither_policy_loads_but_has_none(tmp_path):
    p = _load(tmp_path).privacy
    assert not p.has_policy and p.period_budget is None  # CLI/API releases run without a policy
    assert _load(tmp_path, lifetime_epsilon=3.0).privacy.has_policy
    assert "privacy.period (e.g. {length: P1M, epsilon: 1.0, delta: 1e-6}) or privacy.lifetime_epsilon" in (
        NEEDS_POLICY
    )


def test_the_scheduled_demo_spec_is_the_demo_with_a_monthly_budget():
    """deploy/prefect.yaml's spec: flows/demo/adult.yaml but for its budget policy, which admits
    exactly one release of epsilon 1 per UTC calendar month."""
    monthly = load_spec(DEMO_DIR / "adult-monthly.yaml")
    demo = load_spec(DEMO_DIR / "adult.yaml")
    assert monthly.privacy.period_budget == PeriodBudget(Period(1, "M"), 1.0, 1e-6)
    assert monthly.privacy.epsilon == monthly.privacy.period_budget.epsilon
    assert monthly.model_dump(exclude={"privacy"}) == demo.model_dump(exclude={"privacy"})
    assert monthly.privacy.model_dump(exclude={"period"}) == demo.privacy.model_dump(exclude={"period"})
