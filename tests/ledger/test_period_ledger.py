"""A period budget in the ledger: a release is charged with the releases of its dataset first
reserved in the same UTC calendar period (the ledger's clock, ``ledger.database.now``, is set
by the test); a refusal names the rule, the period, what was spent, what the next release can
take and when the period resets; the policy is recorded once and then binds; ``ledger show``
gives each period's and the all-time totals; the reserve stays atomic."""

import threading
from datetime import datetime

import pytest
from typer.testing import CliRunner

import dprelease.ledger.database as database
from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.cli.main import app
from dprelease.ledger import BudgetRefused, Ledger, show
from dprelease.ledger.facts import ledger_facts
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.lifetime import compose_lifetime
from dprelease.mechanisms.periods import Period, PeriodBudget
from dprelease.records.audit import period_checks
from tests.helpers import without_software

MONTHLY = PeriodBudget(Period(1, "M"), 1.0, 1e-6)
PLAN = plan_budget("zcdp", 0.6, 1e-6, {"a": 1.0})  # two fit in epsilon 1 (zCDP composition), three do not


@pytest.fixture
def clock(monkeypatch):
    """The ledger's clock, set with ``clock.now = "2026-11-30T23:59:00+00:00"``."""

    class Clock:
        now = "2026-11-10T12:00:00+00:00"

    monkeypatch.setattr(database, "now", lambda: datetime.fromisoformat(Clock.now))
    return Clock


def release(led, rid, period=MONTHLY, plan=PLAN, lifetime=None, dataset="d"):
    led.reserve(dataset=dataset, release_id=rid, mechanism="m", plan=plan, lifetime=lifetime, period=period)
    led.spend(rid, [s.stage for s in plan.stages], plan)
    return led.finish(rid, "released")


def test_a_period_charges_its_own_releases_and_resets(url, clock):
    with Ledger(url) as led:
        release(led, "n1")
        clock.now = "2026-11-30T23:59:00+00:00"
        release(led, "n2")
        with pytest.raises(BudgetRefused) as refused:
            led.reserve(dataset="d", release_id="n3", mechanism="m", plan=PLAN, lifetime=None, period=MONTHLY)
        why = " ".join(str(refused.value).split())
        two = compose_lifetime([led.charge("n1"), led.charge("n2")], 1e-6).epsilon
        assert "period budget of dataset 'd' (epsilon=1, delta=1e-06 per P1M) (UTC calendar periods)" in why
        assert "would be exceeded in period 2026-11: 2 earlier release(s) in period 2026-11" in why
        assert f"spent epsilon={two:.4g}" in why and "until the period resets at 2026-12-01T00:00Z" in why
        assert "The largest epsilon the next release can take at delta=1e-06 until the period resets" in why
        assert {r["release_id"]: r["status"] for r in led.releases()}["n3"] == "refused"
        clock.now = "2026-12-01T00:00:00+00:00"  # the next minute: a new period, a fresh account
        release(led, "d1")
        spends = led.period_spends("d", MONTHLY)
        assert list(spends) == ["2026-11", "2026-12"]
        assert spends["2026-11"][1] == 2 and spends["2026-11"][0].epsilon == pytest.approx(two)
        assert spends["2026-12"][1] == 1 and spends["2026-12"][0].epsilon == pytest.approx(
            led.charge("d1").epsilon
        )
        room = led.headroom("d")
        assert 0 < room.epsilon < 1.0 and not room.used_up
        assert led.verify_chain() == []


def test_the_read_only_precheck_uses_the_same_clock(url, clock):
    with Ledger(url) as led:
        release(led, "n1")
        release(led, "n2")
        facts = {"dataset": "d", "plan": PLAN, "lifetime": None, "period": MONTHLY}
        assert "in period 2026-11" in led.refusal(release_id="n3", **facts)
        clock.now = "2026-12-01T00:00:00+00:00"
        assert led.refusal(release_id="n3", **facts) is None


def test_the_policy_is_recorded_once_and_then_binds(url, clock):
    with Ledger(url) as led:
        release(led, "n1")
        (budget,) = led.entries(dataset="d")[:1]
        assert (
            budget["kind"],
            budget["epsilon"],
            budget["delta"],
            without_software(budget["detail"]),
        ) == (
            "budget",
            1.0,
            1e-6,
            {"period": "P1M"},
        )
        assert led.period_budget("d") == MONTHLY and led.lifetime("d") is None
        with pytest.raises(
            BudgetRefused,
            match=r"has period budget epsilon=1, delta=1e-06 per P1M .* in the ledger, "
            r"but the spec says lifetime budget epsilon=3",
        ):
            release(led, "x", period=None, lifetime=(3.0, 1e-6))
        with pytest.raises(
            BudgetRefused, match=r"but the spec says period budget epsilon=1, delta=1e-06 per P1W"
        ):
            release(led, "y", period=PeriodBudget(Period(1, "W"), 1.0, 1e-6))
        release(led, "n2", period=None)  # a spec without a policy is held to the ledger's
        with pytest.raises(BudgetRefused, match="period budget of dataset 'd'"):
            release(led, "n3", period=None)
        assert led.verify_chain() == []


def test_ledger_show_gives_each_period_and_all_time(url, clock, tmp_path):
    with Ledger(url) as led:
        release(led, "n1")
        release(led, "n2")
        clock.now = "2026-12-03T08:00:00+00:00"
        release(led, "d1")
        everything = led.spend_so_far("d", 1e-6)
    account = show(url).accounts["d"]
    assert account.period == MONTHLY and account.current == "2026-12"
    assert [(p.period, p.releases) for p in account.periods] == [("2026-11", 2), ("2026-12", 1)]
    assert account.spent.epsilon == pytest.approx(everything.epsilon) and everything.epsilon > 1.0
    text = CliRunner().invoke(app, ["ledger", "show", "--ledger", url], terminal_width=200)
    assert text.exit_code == 0, text.output
    words = " ".join(text.output.split())
    assert "d: period budget epsilon 1 (delta 1e-06) per P1M (UTC calendar periods)" in words
    assert "period 2026-11: 2 release(s), spent epsilon" in words and "period 2026-12: 1 release(s)" in words
    assert "current period 2026-12; the next release can take epsilon up to" in words
    assert f"all time: spent epsilon {everything.epsilon:.6g} at delta 1e-06" in words
    assert "covered by the composition of k period budgets" in words


def test_two_reservations_cannot_both_take_the_last_of_a_period(url, clock):
    """The period's account is read and charged in one locked transaction: B, started while A
    holds its transaction after its check, reads A's reservation and is refused."""
    with Ledger(url) as led:
        release(led, "n1")  # 0.6 of 1: one more fits, two do not
    holding, results = threading.Event(), {}

    def reserve(rid, hold=None):
        with Ledger(url) as mine:
            try:
                mine.reserve(
                    dataset="d",
                    release_id=rid,
                    mechanism="m",
                    plan=PLAN,
                    lifetime=None,
                    period=MONTHLY,
                    hold=hold,
                )
                results[rid] = "reserved"
            except BudgetRefused as e:
                results[rid] = str(e)

    a = threading.Thread(target=reserve, args=("a", lambda: (holding.set(), threading.Event().wait(1.0))))
    a.start()
    assert holding.wait(30)
    b = threading.Thread(target=reserve, args=("b",))
    b.start()
    a.join(60)
    b.join(60)
    assert results["a"] == "reserved" and "period budget of dataset 'd'" in results["b"], results


DISJOINT = PeriodBudget(Period(1, "M"), 1.0, 1e-6, disjoint=True)


@pytest.mark.parametrize("budget", [MONTHLY, DISJOINT], ids=["overlapping", "disjoint"])
def test_periods_declared_disjoint_bound_a_person_by_the_largest_period_not_the_sum(url, clock, budget):
    """Two releases in November, one in December: the all-time total is all three composed
    either way; per person it is that total, or, with the periods declared disjoint (parallel
    composition), November's spend, the larger period's."""
    with Ledger(url) as led:
        release(led, "n1", period=budget)
        release(led, "n2", period=budget)
        clock.now = "2026-12-03T08:00:00+00:00"
        release(led, "d1", period=budget)
        assert without_software(led.entries(dataset="d")[0]["detail"]) == (
            {"period": "P1M", "disjoint": True} if budget.disjoint else {"period": "P1M"}
        )
        assert led.period_budget("d") == budget
        spends = led.period_spends("d", budget)
        everything = led.spend_so_far("d", 1e-6)
        largest = spends["2026-11"][0].epsilon
        assert largest > spends["2026-12"][0].epsilon and everything.epsilon > 1.0 >= largest
        person = everything.epsilon if not budget.disjoint else largest
        assert led.all_time_guarantee("d", budget).epsilon == pytest.approx(person)
        record = ledger_facts(led, "d", "d1")
    all_time = record["period"]["all_time"]
    assert all_time["spent_epsilon"] == pytest.approx(everything.epsilon)
    assert all_time["per_person_epsilon"] == pytest.approx(person)
    assert record["period"]["disjoint"] is budget.disjoint
    covers = " ".join(record["policy"]["covers"].split())
    account = show(url).accounts["d"]
    assert account.per_person.epsilon == pytest.approx(person)
    text = CliRunner().invoke(app, ["ledger", "show", "--ledger", url], terminal_width=300)
    words = " ".join(text.output.split())
    assert f"all time: spent epsilon {everything.epsilon:.6g} at delta 1e-06" in words
    if budget.disjoint:
        assert "no person's row is in two periods' tables" in covers and "if it is false" in covers
        assert "per_person_epsilon states the largest period's composed spend" in covers
        assert (
            "in total; periods declared disjoint (the steward's declaration that no person is in two "
            f"periods' tables), so per person all time: epsilon {largest:.6g} at delta 1e-06" in words
        )
        assert "covered by the composition of k period budgets" not in words
    else:
        assert "covered by the composition of k period budgets" in covers and "disjoint" not in covers
        assert "covered by the composition of k period budgets" in words and "per person" not in words


def test_a_declaration_of_disjoint_periods_is_fixed_with_the_policy(url, clock):
    with Ledger(url) as led:
        release(led, "n1")
        with pytest.raises(
            BudgetRefused,
            match=r"has period budget epsilon=1, delta=1e-06 per P1M \(UTC calendar periods\) in the ledger, "
            r"but the spec says period budget epsilon=1, delta=1e-06 per P1M \(UTC calendar periods; "
            r"declared disjoint\)",
        ):
            release(led, "x", period=DISJOINT)
        release(led, "e1", period=DISJOINT, dataset="e")
        with pytest.raises(BudgetRefused, match=r"declared disjoint\) in the ledger, but the spec says"):
            release(led, "y", dataset="e")
        release(led, "e2", period=None, dataset="e")  # a spec without a policy is held to the ledger's
        assert led.period_budget("e") == DISJOINT and led.period_budget("d") == MONTHLY
        assert led.verify_chain() == []


def test_a_rerun_across_a_boundary_is_charged_to_the_window_that_admits_it(url, clock):
    """A scheduled run reserved at 23:50 on 30 November fails at validation (before any
    noise); November then takes n2; the run's retry at 00:10 on 1 December (the same
    release_id) is a December attempt, checked against and charged to December. Before,
    the ledger charged it to November (its first reservation), which then composed to
    epsilon 1.079 against a budget of 1, while December granted it a fresh account."""
    with Ledger(url) as led:
        release(led, "n1")
        clock.now = "2026-11-30T23:50:00+00:00"
        led.reserve(dataset="d", release_id="r", mechanism="m", plan=PLAN, lifetime=None, period=MONTHLY)
        led.finish("r", "failed")  # refused at validation: no stage spent
        release(led, "n2")
        clock.now = "2026-12-01T00:10:00+00:00"
        release(led, "r")
        spends = {k: (s.epsilon, n) for k, (s, n) in led.period_spends("d", MONTHLY).items()}
        november = compose_lifetime([led.charge("n1"), led.charge("n2")], 1e-6).epsilon
        assert spends == {"2026-11": (november, 3), "2026-12": (led.charge("r").epsilon, 1)}
        assert november <= 1.0 and led.reserved_at("r") == datetime.fromisoformat(clock.now)
        facts = ledger_facts(led, "d", "r")
        assert facts["period"]["this_period"]["period"] == "2026-12"
        assert facts["period"]["this_period"]["spent_epsilon"] == spends["2026-12"][0]
        doc = {"dataset": "d", "release_id": "r", "privacy": {"ledger_record": facts}}
        assert all(c.ok for c in period_checks(led, ReleaseDocument.from_json(doc)))
    account = show(url).accounts["d"]
    assert [(p.period, p.spent.epsilon) for p in account.periods] == [
        ("2026-11", november),
        ("2026-12", spends["2026-12"][0]),
    ]
