"""The SQL budget ledger (``ledger.Ledger`` over ``ledger.database``/``ledger.chain``) on
SQLite and PostgreSQL: charges, lifetime refusals, reruns (a release id that already
exists), the hash chain, URLs, and two processes racing for the last of a lifetime budget."""

import subprocess
import sys
import textwrap
import time

import pytest
from sqlalchemy import create_engine, text

from dprelease.ledger import BudgetRefused, Ledger, LedgerError
from dprelease.mechanisms.accounting import plan_budget, zcdp_epsilon
from dprelease.mechanisms.primitives import laplace_mechanism
from tests.helpers import PURE_PLAN as PURE
from tests.helpers import ROOT, record_release


def test_a_release_is_charged_what_it_spent(url, rng):
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="r1", mechanism="m", plan=PURE, lifetime=None)
        (before,) = led.releases()
        assert (before["status"], before["epsilon"]) == ("reserved", PURE.spent_epsilon)  # fail closed
        led.spend("r1", ["a"], PURE)
        m = laplace_mechanism([1.0, 2.0], l1_sensitivity=2.0, epsilon=0.5, rng=rng, name="x", stage="a")
        led.record_measurements("r1", [m])
        led.finish("r1", "failed")
        (r,) = led.releases()
    assert r["status"] == "failed" and r["epsilon"] == PURE.stage("a").epsilon and r["delta"] == 0.0
    (stage,) = r["stages"]
    assert stage["stage"] == "a" and stage["status"] == "spent"
    (row,) = stage["measurements"]
    assert (row["statistic"], row["sensitivity"], row["noise_scale"]) == ("x", 2.0, m.scale)


def test_zcdp_charge_converts_the_spent_rho(url):
    plan = plan_budget("zcdp", 1.0, 1e-6, {"a": 1.0, "b": 3.0})
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="z", mechanism="m", plan=plan, lifetime=None)
        led.spend("z", ["a"], plan)
        row = led.finish("z", "failed")
    assert row["rho"] == plan.stage("a").rho
    assert row["epsilon"] == zcdp_epsilon(plan.stage("a").rho, 1e-6) < 1.0


def test_lifetime_refusal_names_the_budget_left_and_spends_nothing(url):
    with Ledger(url) as led:
        record_release(led, "r1", lifetime=(1.5, 0.0))
        with pytest.raises(BudgetRefused, match=r"next release can take \(pure DP\) is 0\.5\b"):
            led.reserve(dataset="d", release_id="r2", mechanism="m", plan=PURE, lifetime=(1.5, 0.0))
        r2 = {r["release_id"]: r for r in led.releases()}["r2"]
        assert (r2["status"], r2["epsilon"], r2["stages"]) == ("refused", 0.0, [])
        half = plan_budget("pure", 0.5, 0.0, {"a": 1.0})
        record_release(led, "r3", plan=half, lifetime=(1.5, 0.0))  # what is left still fits
        assert led.spend_so_far("d", 0.0).epsilon <= 1.5
        with pytest.raises(BudgetRefused, match=r"lifetime budget epsilon=1\.5"):
            led.reserve(dataset="d", release_id="r4", mechanism="m", plan=half, lifetime=(2.0, 0.0))
        assert led.verify_chain() == []


def test_a_lifetime_in_the_ledger_binds_specs_that_omit_it(url):
    with Ledger(url) as led:
        record_release(led, "r1", lifetime=(1.2, 0.0))
        with pytest.raises(BudgetRefused, match="would be exceeded"):
            led.reserve(dataset="d", release_id="r2", mechanism="m", plan=PURE, lifetime=None)
        record_release(led, "other", dataset="e")  # another dataset has its own account


def test_zcdp_releases_compose_in_rho(url):
    plan = plan_budget("zcdp", 1.0, 1e-6, {"a": 1.0})
    with Ledger(url) as led:
        for i in range(3):  # basic composition would need epsilon 3; zCDP needs 1.81
            record_release(led, f"z{i}", plan=plan, lifetime=(2.0, 1e-6))
        spend = led.spend_so_far("d", 1e-6)
        assert spend.epsilon < 2.0 and spend.rule.startswith("zCDP") and spend.basic[0] > 2.9
        with pytest.raises(BudgetRefused, match=r"which would make 2\.11"):
            record_release(led, "z3", plan=plan, lifetime=(2.0, 1e-6))


def test_reruns_never_spend_twice(url):
    with Ledger(url) as led:
        record_release(led, "done")
        with pytest.raises(BudgetRefused, match="already exists in the ledger"):
            led.reserve(dataset="d", release_id="done", mechanism="m", plan=PURE, lifetime=None)
        led.reserve(dataset="d", release_id="crashed", mechanism="m", plan=PURE, lifetime=None)
        led.spend("crashed", ["a"], PURE)
        with pytest.raises(BudgetRefused, match="already spent stage"):
            led.spend("crashed", ["a"], PURE)
        led.finish("crashed", "failed")
        with pytest.raises(BudgetRefused, match=r"already drew noise for stage\(s\) \['a'\]"):
            led.reserve(dataset="d", release_id="crashed", mechanism="m", plan=PURE, lifetime=None)
        led.reserve(dataset="d", release_id="bad-input", mechanism="m", plan=PURE, lifetime=None)
        led.finish("bad-input", "failed")  # e.g. validation failed: nothing drawn
        record_release(led, "bad-input")  # the rerun may go ahead
        states = {r["release_id"]: (r["status"], r["epsilon"]) for r in led.releases()}
    assert states["crashed"] == ("failed", PURE.stage("a").epsilon)
    assert states["bad-input"] == ("released", PURE.spent_epsilon)


def test_the_precheck_refuses_a_rerun_that_drew_noise_as_the_reserve_does(url):
    """``refusal`` (the CLI's and the API's pre-check, before Prefect starts) read only the
    release_id's ``release`` rows, not its stage rows, so it admitted a re-run of an attempt
    that drew noise, which the flow's reserve then refused after Prefect had started."""
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="crashed", mechanism="m", plan=PURE, lifetime=None)
        led.spend("crashed", ["a"], PURE)
        led.finish("crashed", "failed")
        why = led.refusal(dataset="d", release_id="crashed", plan=PURE, lifetime=None)
        assert why is not None and "already drew noise for stage(s) ['a']" in why


def test_an_open_reservation_is_taken_over_only_when_its_process_is_gone(url):
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="live", mechanism="m", plan=PURE, lifetime=None)
        with pytest.raises(BudgetRefused, match="is in progress since"):
            led.reserve(dataset="d", release_id="live", mechanism="m", plan=PURE, lifetime=None)
    dead = subprocess.run(
        [sys.executable, "-c", _RESERVE, url, "dead", "0", "9"], cwd=ROOT, capture_output=True, text=True
    )
    assert dead.stdout.strip() == "reserved", dead.stderr
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="dead", mechanism="m", plan=PURE, lifetime=None)
        events = [e["status"] for e in {r["release_id"]: r for r in led.releases()}["dead"]["events"]]
    assert events == ["reserved", "failed", "reserved"]  # the dead attempt is closed, drew nothing


def test_tampering_breaks_the_chain(url):
    with Ledger(url) as led:
        for i in range(3):
            record_release(led, f"r{i}")
        assert led.verify_chain() == []
        seqs = [r["seq"] for r in led.entries()]
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("UPDATE ledger_entries SET epsilon = 0.01 WHERE seq = :s"), {"s": seqs[2]})
    with Ledger(url) as led:
        assert led.verify_chain() == [f"ledger row {seqs[2]}: its hash does not match its contents (edited)"]
    with engine.begin() as c:
        c.execute(text("DELETE FROM ledger_entries WHERE seq >= :s"), {"s": seqs[2]})
    with Ledger(url) as led:
        assert led.verify_chain() == [
            "ledger head does not match the last row (rows removed or added at the end)"
        ]
    engine.dispose()


def test_a_bad_url_is_a_clear_error(tmp_path):
    with pytest.raises(LedgerError, match="must be a database URL"):
        Ledger("not a url")
    with pytest.raises(LedgerError, match="must start with sqlite:/// or postgresql"):
        Ledger("mysql://u@localhost/x")


_RESERVE = textwrap.dedent(
    """
    import pathlib, sys, time
    from dprelease.mechanisms.accounting import plan_budget
    from dprelease.ledger import BudgetRefused, Ledger
    url, rid, hold, eps = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    marker = pathlib.Path(sys.argv[5]) if len(sys.argv) > 5 else None
    plan = plan_budget("pure", 1.0, 0.0, {"a": 1.0})

    def wait():
        if marker is not None:
            marker.touch()  # the checks are done and the transaction is still open
        time.sleep(hold)

    with Ledger(url) as led:
        try:
            led.reserve(dataset="d", release_id=rid, mechanism="m", plan=plan, lifetime=(eps, 0.0), hold=wait)
            print("reserved")
        except BudgetRefused as e:
            print("refused:", e)
    """
)


def test_two_processes_cannot_both_pass_the_lifetime_check(url, tmp_path):
    """Lifetime 1.5 holds one ε = 1 release. A passes its check and holds its transaction
    open for 2 s; B starts once A is holding. Without the lock B would read the ledger
    before A's row is committed and pass too."""
    Ledger(url).close()  # create the tables first, so neither process races on DDL
    marker = tmp_path / "a-holds"
    cmd = [sys.executable, "-c", _RESERVE, url]
    a = subprocess.Popen([*cmd, "a", "2.0", "1.5", str(marker)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "process A never reached its hold"
    b = subprocess.Popen([*cmd, "b", "0", "1.5"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    out_a, out_b = (p.communicate(timeout=120)[0].strip() for p in (a, b))
    assert out_a == "reserved" and out_b.startswith("refused: lifetime budget"), (out_a, out_b)
    with Ledger(url) as led:
        assert led.verify_chain() == []
        assert sorted(r["status"] for r in led.releases()) == ["refused", "reserved"]


def test_reading_never_creates_a_ledger(tmp_path, url):
    if url.startswith("sqlite"):
        with pytest.raises(LedgerError, match="there is no ledger at"):
            Ledger(f"sqlite:///{tmp_path / 'typo.db'}", create=False)
        assert not (tmp_path / "typo.db").exists()
    with pytest.raises(LedgerError, match="there is no ledger at"):
        Ledger(url, create=False)  # the database exists, but holds no ledger yet
    Ledger(url).close()
    Ledger(url, create=False).close()
