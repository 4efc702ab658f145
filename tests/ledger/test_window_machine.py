"""The budget ledger as a state machine: the real ``Ledger`` (SQLite; PostgreSQL when
``DPRELEASE_TEST_POSTGRES_URL`` is set, a smaller run) driven through reservations, stage
spends, failures before and after noise, re-runs of the same release_id, settles,
concurrent reservations (a second ``Ledger`` on the same database, in a thread, while the
first holds the lock), processes killed with their attempt open, and a clock (the seam
``ledger.database.now``) moved by seconds, across window boundaries and by months; under a
lifetime, a period and a disjoint-period policy, pure and zCDP.

The machine keeps its own model: every attempt (a reservation and what followed), its
window (the window of its own reservation's time), its charge (the whole plan while open,
else the stages it spent). After every step: no window's composed spend exceeds its
period budget and the lifetime is never exceeded, and every view agrees with the model
and so with each other: ``Ledger.period_spends``/``spend_so_far``, ``ledger show``
(``ledger.summary.show``), the figures ``release.json`` (``ledger_facts``) and a release
event (``budget_facts``) would publish, and ``audit verify``'s recomposition of the
release's period. Each reservation's outcome (admitted or refused) is the model's, and the
CLI's read-only pre-check (``Ledger.refusal``) says the same beforehand.

The long run: ``DPRELEASE_PROPERTY_SCALE=50 .venv/bin/python -m pytest -m property
tests/ledger/test_window_machine.py -p no:cacheprovider`` (the examples scale, each
example's steps are capped at four times make test's: ``_settings``).
"""

from __future__ import annotations

import math
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sqlalchemy import create_engine, text

import dprelease.ledger.database as database
import dprelease.ledger.store as store
from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.ledger import BudgetRefused, Ledger, budget_facts, ledger_facts, show
from dprelease.mechanisms.accounting import BudgetPlan, plan_budget, zcdp_epsilon
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.lifetime import Charge, LifetimeSpend, compose_lifetime, headroom
from dprelease.mechanisms.periods import Period, PeriodBudget
from dprelease.records.audit import period_checks
from tests.properties import property_settings

pytestmark = pytest.mark.property

DATASET = "d"
STAGES = {"a": 1.0, "b": 2.0}
START = datetime(2026, 11, 30, 23, 50, tzinfo=UTC)  # ten minutes before a month's end


def _plans(notion: str) -> list[BudgetPlan]:
    """Plans of several sizes against a budget of epsilon 1 per window: zCDP ones (and pure
    ones beside them, which compose into a zCDP account) or pure ones only."""
    pure = [plan_budget("pure", e, 0.0, STAGES) for e in (0.25, 0.5, 0.9)]
    if notion == "pure":
        return pure
    return [plan_budget("zcdp", e, 1e-6, STAGES) for e in (0.3, 0.6, 0.95)] + pure[:1]


def _plan_charge(plan: BudgetPlan) -> Charge:
    if plan.notion == "zcdp":
        return Charge("zcdp", plan.spent_rho, plan.spent_epsilon, plan.delta)
    return Charge("pure", None, plan.spent_epsilon, plan.delta)


def _spent_charge(plan: BudgetPlan, spent: set[str]) -> Charge:
    """What a closed attempt costs: its spent stages' allocations composed."""
    if plan.notion == "zcdp":
        rho = math.fsum(plan.stage(s).rho for s in spent)
        return Charge("zcdp", rho, zcdp_epsilon(rho, plan.delta), plan.delta if rho > 0 else 0.0)
    return Charge("pure", None, math.fsum(plan.stage(s).epsilon for s in spent), 0.0)


@dataclass
class _Attempt:
    """The model's attempt: a reservation and what followed it."""

    rid: str
    at: datetime
    plan: BudgetPlan
    owner: subprocess.Popen | None  # None: a reservation the model is deciding on
    state: str = "open"  # open, released, gated, failed
    spent: set[str] = field(default_factory=set)

    @property
    def alive(self) -> bool:
        return self.owner is None or self.owner.poll() is None

    @property
    def charge(self) -> Charge:
        return _plan_charge(self.plan) if self.state == "open" else _spent_charge(self.plan, self.spent)


class _OS:
    """``os`` as the ledger's store sees it, with the pid of the process that owns the next
    reservation: a child the machine can kill, so that its attempt is left open with a dead pid."""

    def __init__(self, real) -> None:
        self._real = real
        self.pid = real.getpid()

    def getpid(self) -> int:
        return self.pid

    def __getattr__(self, name: str):
        return getattr(self._real, name)


class LedgerMachine(RuleBasedStateMachine):
    """Subclassed per backend and policy (``_machine``)."""

    backend = "sqlite"
    policy_kind = "period"

    def __init__(self) -> None:
        super().__init__()
        self.t = START
        self._real_now, self._real_os = database.now, store.os
        database.now = lambda: self.t
        self.os = _OS(self._real_os)
        store.os = self.os
        self.url, self._drop = _new_database(self.backend)
        self.led, self.other = Ledger(self.url), Ledger(self.url)
        self.model: list[_Attempt] = []
        self.rids: list[str] = []
        self.owners: list[subprocess.Popen] = []
        self.recorded = False  # the policy is in the ledger (first admitted reservation)
        self.seen: tuple = ()  # the ledger's head and the window at the last check of the views

    @initialize(
        notion=st.sampled_from(["zcdp", "pure"]), length=st.sampled_from(["P1M", "P1D", "P1W", "P3M"])
    )
    def choose(self, notion: str, length: str) -> None:
        self.notion = notion
        self.delta = 1e-6 if notion == "zcdp" else 0.0
        self.plans = _plans(notion)
        if self.policy_kind == "lifetime":
            self.period: Period | None = None
            self.lifetime: tuple[float, float] | None = (2.0, self.delta)
            self.budget: PeriodBudget | None = None
            self.epsilon = 2.0
        else:
            self.period = Period.parse(length)
            self.lifetime = None
            self.budget = PeriodBudget(self.period, 1.0, self.delta, self.policy_kind == "disjoint")
            self.epsilon = 1.0

    def teardown(self) -> None:
        for p in self.owners:
            if p.poll() is None:
                p.kill()
            p.wait()
            assert p.stdin is not None
            p.stdin.close()
        self.led.close()
        self.other.close()
        database.now, store.os = self._real_now, self._real_os
        self._drop()

    # ---------------------------------------------------------------- the model

    def _window(self, at: datetime) -> object:
        return None if self.period is None else self.period.window(at)

    def _windows(self, attempts: list[_Attempt]) -> dict[object, list[_Attempt]]:
        groups: dict[object, list[_Attempt]] = {}
        for a in attempts:
            groups.setdefault(self._window(a.at), []).append(a)
        return groups

    def _spend(self, attempts: list[_Attempt]) -> LifetimeSpend:
        return compose_lifetime([a.charge for a in attempts], self.delta)

    def _admits(self, rid: str, plan: BudgetPlan) -> bool:
        """The model's decision on a reservation of ``rid`` now: the rerun rule (no earlier
        attempt published, gated, running or drew noise), then the account of the window of
        now with the new attempt in it (a dead open attempt of ``rid`` closed at what it spent)."""
        mine = [a for a in self.model if a.rid == rid]
        if mine and (
            mine[-1].state in ("released", "gated") or (mine[-1].state == "open" and mine[-1].alive)
        ):
            return False
        if any(a.spent for a in mine):
            return False
        pending = _Attempt(rid, self.t, plan, None)
        closed = [
            _Attempt(a.rid, a.at, a.plan, a.owner, "failed", a.spent)
            if a.rid == rid and a.state == "open"
            else a
            for a in self.model
        ]
        window = [a for a in [*closed, pending] if self._window(a.at) == self._window(self.t)]
        try:
            return self._spend(window).epsilon <= self.epsilon
        except BudgetError:
            return False

    def _owner(self) -> subprocess.Popen:
        """A process to own a reservation: ``cat`` on a pipe, which lives until killed, or
        until this process's end closes the pipe (an interrupted run leaves none behind)."""
        p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.owners.append(p)
        return p

    def _reserve(self, led: Ledger, rid: str, plan: BudgetPlan, **extra) -> bool:
        try:
            led.reserve(
                dataset=DATASET,
                release_id=rid,
                mechanism="m",
                plan=plan,
                lifetime=self.lifetime,
                period=self.budget,
                **extra,
            )
        except BudgetRefused:
            return False
        return True

    def _apply(self, rid: str, plan: BudgetPlan, owner: subprocess.Popen, admitted: bool) -> None:
        if not admitted:
            return
        for a in self.model:
            if a.rid == rid and a.state == "open":
                a.state = "failed"  # abandoned: its process is gone, it drew no noise
        self.model.append(_Attempt(rid, self.t, plan, owner))
        self.recorded = True
        if rid not in self.rids:
            self.rids.append(rid)

    def _attempt(self, rid: str, plan_index: int) -> None:
        plan = self.plans[plan_index % len(self.plans)]
        expected = self._admits(rid, plan)
        facts = {"dataset": DATASET, "plan": plan, "lifetime": self.lifetime, "period": self.budget}
        assert (self.led.refusal(release_id=rid, **facts) is None) == expected, (rid, expected)
        owner = self._owner()
        self.os.pid = owner.pid
        admitted = self._reserve(self.led, rid, plan)
        assert admitted == expected, (rid, plan.spent_epsilon, expected)
        self._apply(rid, plan, owner, admitted)

    def _open(self, *, alive: bool | None = True, spent: bool | None = None) -> list[_Attempt]:
        return [
            a
            for a in self.model
            if a.state == "open"
            and (alive is None or a.alive == alive)
            and (spent is None or bool(a.spent) == spent)
        ]

    # ---------------------------------------------------------------- rules

    @rule(plan=st.integers(0, 3))
    def reserve(self, plan: int) -> None:
        self._attempt(f"r{len(self.rids)}-{uuid.uuid4().hex[:4]}", plan)

    @precondition(lambda self: self.rids)
    @rule(which=st.integers(0, 99), plan=st.integers(0, 3))
    def rerun(self, which: int, plan: int) -> None:
        """The same release_id again: admitted as a new attempt (in the window of now) only
        when no earlier attempt published, is running or drew noise."""
        self._attempt(self.rids[which % len(self.rids)], plan)

    @precondition(lambda self: self._open(spent=False))
    @rule(which=st.integers(0, 99), killed=st.booleans(), seconds=st.integers(0, 900))
    def retry_after_the_boundary(self, which: int, killed: bool, seconds: int) -> None:
        """A scheduled run fails before any noise (refused at validation, or its process
        killed) just before its window ends and is retried, same release_id, just after."""
        a = self._open(spent=False)[which % len(self._open(spent=False))]
        if killed:
            a.owner.kill()
            a.owner.wait()
        else:
            self.led.finish(a.rid, "failed")
            a.state = "failed"
        self.to_the_boundary(False, seconds)
        self._attempt(a.rid, self.plans.index(a.plan))

    @rule()
    def reserve_not_dp(self) -> None:
        """A release that is not differentially private is refused under any policy."""
        rid = f"x{uuid.uuid4().hex[:6]}"
        assert not self._reserve(self.led, rid, self.plans[0], not_dp=["m"])

    @precondition(lambda self: self._open())
    @rule(which=st.integers(0, 99), stage=st.sampled_from(sorted(STAGES)))
    def spend(self, which: int, stage: str) -> None:
        a = self._open()[which % len(self._open())]
        if stage in a.spent:
            with pytest.raises(BudgetRefused, match="never drawn twice"):
                self.led.spend(a.rid, [stage], a.plan)
            return
        self.led.spend(a.rid, [stage], a.plan)
        a.spent.add(stage)

    @precondition(lambda self: self._open(spent=False))
    @rule(which=st.integers(0, 99))
    def fail_before_noise(self, which: int) -> None:
        a = self._open(spent=False)[which % len(self._open(spent=False))]
        self.led.finish(a.rid, "failed")
        a.state = "failed"

    @precondition(lambda self: self._open(spent=True))
    @rule(which=st.integers(0, 99))
    def fail_after_noise(self, which: int) -> None:
        a = self._open(spent=True)[which % len(self._open(spent=True))]
        self.led.finish(a.rid, "failed")
        a.state = "failed"

    @precondition(lambda self: self._open())
    @rule(which=st.integers(0, 99), status=st.sampled_from(["released", "gated"]))
    def publish(self, which: int, status: str) -> None:
        a = self._open()[which % len(self._open())]
        rest = [s for s in STAGES if s not in a.spent]
        self.led.spend(a.rid, rest, a.plan)
        a.spent |= set(rest)
        self.led.finish(a.rid, status)
        a.state = status

    @precondition(lambda self: any(a.state == "released" for a in self.model))
    @rule(which=st.integers(0, 99))
    def unseal(self, which: int) -> None:
        """A sealed bundle could not be moved into place: the attempt fails after all."""
        sealed = [a for a in self.model if a.state == "released"]
        a = sealed[which % len(sealed)]
        self.led.finish(a.rid, "failed", after_seal=True)
        a.state = "failed"

    @precondition(lambda self: self._open())
    @rule(which=st.integers(0, 99))
    def kill(self, which: int) -> None:
        """The process of an open attempt dies: the attempt stays ``reserved``, its pid dead."""
        a = self._open()[which % len(self._open())]
        a.owner.kill()
        a.owner.wait()

    @precondition(lambda self: self._open(alive=False))
    @rule(which=st.integers(0, 99))
    def settle(self, which: int) -> None:
        a = self._open(alive=False)[which % len(self._open(alive=False))]
        self.led.settle(a.rid, by="machine", reason="its process was killed", evidence=f"pid {a.owner.pid}")
        a.state = "failed"

    @rule(first=st.integers(0, 3), second=st.integers(0, 3))
    def concurrent_reserve(self, first: int, second: int) -> None:
        """Two reservations at once, on two ``Ledger`` objects: the second starts while the
        first holds the lock after its checks, so it must read the first's row. The outcome
        is the model's for the order the ledger's rows show."""
        plans = [self.plans[first % len(self.plans)], self.plans[second % len(self.plans)]]
        rids = [f"c{len(self.rids)}-{uuid.uuid4().hex[:4]}", f"c{len(self.rids)}-{uuid.uuid4().hex[:4]}b"]
        owner = self._owner()
        self.os.pid = owner.pid
        holding, results = threading.Event(), {}

        def hold() -> None:
            holding.set()
            threading.Event().wait(0.02)

        def go(i: int, led: Ledger) -> None:
            results[i] = self._reserve(led, rids[i], plans[i], **({"hold": hold} if i == 0 else {}))

        a = threading.Thread(target=go, args=(0, self.led))
        a.start()
        assert holding.wait(30)
        b = threading.Thread(target=go, args=(1, self.other))
        b.start()
        a.join(60)
        b.join(60)
        order = sorted((0, 1), key=lambda i: self.led.entries(release_id=rids[i])[0]["seq"])
        for i in order:
            assert results[i] == self._admits(rids[i], plans[i]), (i, results)
            self._apply(rids[i], plans[i], owner, results[i])
        self.rids += [r for r in rids if r not in self.rids]

    @rule(seconds=st.integers(1, 3600))
    def tick(self, seconds: int) -> None:
        self.t += timedelta(seconds=seconds)

    @rule(before=st.booleans(), seconds=st.integers(0, 90))
    def to_the_boundary(self, before: bool, seconds: int) -> None:
        """Just before, or at/just after, the end of the current window (a month's under a
        lifetime)."""
        end = (self.period or Period(1, "M")).window(self.t)[1]
        target = end - timedelta(seconds=seconds + 1) if before else end + timedelta(seconds=seconds)
        self.t = max(self.t, target)

    @rule(months=st.integers(1, 14))
    def months_later(self, months: int) -> None:
        index = self.t.year * 12 + self.t.month - 1 + months
        self.t = self.t.replace(year=index // 12, month=index % 12 + 1, day=min(self.t.day, 28))

    # ---------------------------------------------------------------- invariants

    @invariant()
    def within_every_budget(self) -> None:
        for window, group in self._windows(self.model).items():
            assert self._spend(group).epsilon <= self.epsilon, window
        if self.period is None:
            return
        for label, (spend, _) in self.led.period_spends(DATASET, self.budget).items():
            assert spend.epsilon <= self.epsilon, (label, spend.epsilon)

    @invariant()
    def every_view_agrees(self) -> None:
        """Checked whenever the ledger or the current window changed since the last check."""
        seen = (self.led.head(), self._window(self.t))
        if not self.recorded or seen == self.seen:
            return
        self.seen = seen
        assert self.led.verify_chain() == []
        total = self._spend(self.model)
        groups = self._windows(self.model)
        account = show(self.url, dataset=DATASET).accounts[DATASET]
        assert account.spent.epsilon == pytest.approx(total.epsilon, rel=1e-12, abs=1e-15)
        assert self.led.spend_so_far(DATASET, self.delta).epsilon == account.spent.epsilon
        now = [a for a in self.model if self._window(a.at) == self._window(self.t)]
        room = headroom([a.charge for a in now], (self.epsilon, self.delta), self.notion)
        assert account.headroom is not None
        assert account.headroom.used_up == room.used_up
        assert account.headroom.epsilon == pytest.approx(room.epsilon, rel=1e-12, abs=1e-15)
        latest = self.model[-1]
        facts = ledger_facts(self.led, DATASET, latest.rid)
        event = budget_facts(self.led, DATASET, latest.rid)
        if self.budget is None:
            assert facts["lifetime"]["spent_epsilon"] == account.spent.epsilon
            assert facts["lifetime"]["releases_counted"] == len({a.rid for a in self.model})
            assert event["lifetime"]["epsilon_spent"] == account.spent.epsilon
            return
        label = self.budget.length.label
        model = {
            label(a[0].at): (self._spend(a).epsilon, len({x.rid for x in a}))
            for _, a in sorted(groups.items(), key=lambda kv: kv[0][0])
        }
        ledger = {k: (s.epsilon, n) for k, (s, n) in self.led.period_spends(DATASET, self.budget).items()}
        shown = {p.period: (p.spent.epsilon, p.releases) for p in account.periods}
        assert list(ledger) == list(model) and ledger == shown
        for k, (eps, n) in model.items():
            assert ledger[k][1] == n and ledger[k][0] == pytest.approx(eps, rel=1e-12, abs=1e-15), k
        person = max(model.values())[0] if self.budget.disjoint else total.epsilon
        assert account.per_person.epsilon == pytest.approx(person, rel=1e-12, abs=1e-15)
        mine = label(latest.at)
        this = facts["period"]["this_period"]
        assert (this["period"], this["releases_counted"]) == (mine, model[mine][1])
        assert this["spent_epsilon"] == ledger[mine][0] == event["period"]["epsilon_spent"]
        assert event["period"]["period"] == mine
        assert facts["period"]["all_time"]["spent_epsilon"] == account.spent.epsilon
        assert facts["period"]["all_time"]["per_person_epsilon"] == account.per_person.epsilon
        assert facts["period"]["all_time"]["periods"] == len(model)
        doc = {"dataset": DATASET, "release_id": latest.rid, "privacy": {"ledger_record": facts}}
        checks = period_checks(self.led, ReleaseDocument.from_json(doc))
        assert [c.name for c in checks] == ["period budget", "release's period", "period account"]
        assert all(c.ok for c in checks), checks
        assert f"compose to epsilon {ledger[mine][0]:.6g}" in checks[-1].detail


def _new_database(backend: str) -> tuple[str, object]:
    """A fresh ledger database and how to drop it."""
    if backend == "sqlite":
        shm = Path("/dev/shm")  # many small transactions: spare the disk their fsyncs
        folder = tempfile.TemporaryDirectory(prefix="ledger-machine-", dir=shm if shm.is_dir() else None)
        return f"sqlite:///{Path(folder.name) / 'ledger.db'}", folder.cleanup
    import os

    server = os.environ["DPRELEASE_TEST_POSTGRES_URL"]
    name = f"m_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))

    def drop() -> None:
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()

    return server.rsplit("/", 1)[0] + "/" + name, drop


def _machine(backend: str, policy: str) -> type[LedgerMachine]:
    return type(
        f"LedgerMachine_{backend}_{policy}", (LedgerMachine,), {"backend": backend, "policy_kind": policy}
    )


POLICIES = ["lifetime", "period", "disjoint"]


def _settings(examples: int, steps: int) -> settings:
    """``property_settings``, with a long run's steps per example capped at four times make
    test's: every step reads the whole ledger for its views, so longer sequences cost
    quadratic time; a long run spends it on more examples instead."""
    chosen = property_settings(examples, steps=steps)
    return settings(chosen, stateful_step_count=min(chosen.stateful_step_count, 4 * steps))


@pytest.mark.parametrize("policy", POLICIES)
def test_the_ledger_holds_every_budget_and_every_view_agrees_sqlite(policy):
    machine = _machine("sqlite", policy)
    machine.TestCase.settings = _settings(6, 25)
    machine.TestCase().runTest()


@pytest.mark.parametrize("policy", POLICIES)
def test_the_ledger_holds_every_budget_and_every_view_agrees_postgresql(policy, postgres_url):
    machine = _machine("postgresql", policy)
    machine.TestCase.settings = _settings(2, 15)
    machine.TestCase().runTest()
