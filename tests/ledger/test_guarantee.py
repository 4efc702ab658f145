"""What the ledger guarantees beyond arithmetic, on SQLite and PostgreSQL: a non-DP
release voids its dataset's account; a broken hash chain refuses new releases, checked
from a checkpoint; a password never has to travel in a URL; a lifetime budget used up,
or spent in large amounts, refuses the next release cleanly."""

import json

import pytest
from sqlalchemy import create_engine, text

from dprelease.ledger import (
    PASSWORD_ENV,
    BudgetRefused,
    Ledger,
    ledger_facts,
    row_hash,
    split_password,
)
from dprelease.mechanisms.accounting import plan_budget, zcdp_rho
from dprelease.mechanisms.discovery import discovery_plan
from dprelease.mechanisms.lifetime import Charge, compose_lifetime
from tests.helpers import PURE_PLAN as PURE
from tests.helpers import record_release

ZCDP = plan_budget("zcdp", 1.0, 1e-6, {"a": 1.0})
NOT_DP = ["spectral anonymization has no privacy parameter"]


def _non_dp(led, rid, *, synthesis_started=True, status="released", dataset="d"):
    led.reserve(
        dataset=dataset, release_id=rid, mechanism="spectral", plan=PURE, lifetime=None, not_dp=NOT_DP
    )
    if synthesis_started:
        led.mark_unprotected(rid)
    return led.finish(rid, status)


def test_a_non_dp_release_is_an_unbounded_charge(url):
    with Ledger(url) as led:
        record_release(led, "dp-1")
        assert led.void_since("d") is None
        led.reserve(
            dataset="d", release_id="x", mechanism="spectral", plan=PURE, lifetime=None, not_dp=NOT_DP
        )
        assert led.charge("x").is_void  # fail closed while it runs
        led.mark_unprotected("x")
        led.finish("x", "released")
        assert led.charge("x").is_void
        void = led.void_since("d")
        assert void["release_id"] == "x"
        assert led.spend_so_far("d", 1e-6).void
        rows = {r["release_id"]: r for r in led.releases()}
        assert rows["x"]["epsilon"] is None and not rows["x"]["differentially_private"]
        assert rows["dp-1"]["differentially_private"]
        assert led.void_since("other") is None  # another dataset is untouched


def test_a_non_dp_attempt_that_never_reached_synthesis_costs_nothing(url):
    with Ledger(url) as led:
        _non_dp(led, "x", synthesis_started=False, status="failed")
        assert not led.charge("x").is_void and led.charge("x").epsilon == 0.0
        assert led.void_since("d") is None


def test_a_lifetime_budget_on_a_voided_dataset_is_refused(url):
    with Ledger(url) as led:
        _non_dp(led, "x")
        record_release(led, "plain")  # a DP release without a lifetime still runs
        with pytest.raises(
            BudgetRefused, match="has had a release that was not differentially private \\('x'"
        ):
            led.reserve(dataset="d", release_id="r", mechanism="m", plan=ZCDP, lifetime=(5.0, 1e-6))


def test_a_non_dp_release_is_refused_on_a_dataset_with_a_lifetime_budget(url):
    with Ledger(url) as led:
        record_release(led, "r1", plan=ZCDP, lifetime=(5.0, 1e-6))
        with pytest.raises(BudgetRefused, match="not differentially private and dataset 'd' has a lifetime"):
            led.reserve(dataset="d", release_id="x", mechanism="s", plan=PURE, lifetime=None, not_dp=NOT_DP)
        assert led.void_since("d") is None


def _tamper(db: str, seq: int, **values) -> None:
    engine = create_engine(db)
    with engine.begin() as c:
        sets = ", ".join(f"{k} = :{k}" for k in values)
        c.execute(text(f"UPDATE ledger_entries SET {sets} WHERE seq = :seq"), {**values, "seq": seq})
    engine.dispose()


def _closing_seq(led, rid: str) -> int:
    return [r for r in led.entries(release_id=rid) if r["kind"] == "release"][-1]["seq"]


def test_a_tampered_charge_refuses_the_next_release(url):
    """Lifetime 1.5 holds one ε = 1 release. Lowering the first release's charge in the
    database would admit a second; the reservation sees the broken chain and refuses."""
    with Ledger(url) as led:
        record_release(led, "r1", lifetime=(1.5, 0.0))
        seq = _closing_seq(led, "r1")
        record_release(led, "other", dataset="e")  # the checkpoint moves past the edited row
    _tamper(url, seq, epsilon=0.0)
    with Ledger(url) as led, pytest.raises(BudgetRefused, match="hash chain is broken"):
        led.reserve(dataset="d", release_id="r2", mechanism="m", plan=PURE, lifetime=(1.5, 0.0))
    with Ledger(url) as led:
        assert not any(r["release_id"] == "r2" for r in led.entries())  # nothing written


def test_a_rewritten_chain_is_caught_by_the_checkpoint(url):
    """A forger who edits a row *and* recomputes every hash after it (and the head) keeps
    the chain consistent, but the checkpoint row's hash changes."""
    with Ledger(url) as led:
        record_release(led, "r1", lifetime=(1.5, 0.0))
        seq = _closing_seq(led, "r1")
        record_release(led, "other", dataset="e")
        rows = [r for r in led.entries() if r["seq"] >= seq]
    engine = create_engine(url)
    with engine.begin() as c:
        prev = None
        for r in rows:
            raw = dict(
                c.execute(text("SELECT * FROM ledger_entries WHERE seq = :s"), {"s": r["seq"]})
                .mappings()
                .one()
            )
            if r["seq"] == seq:
                raw["epsilon"] = 0.0
            if prev is not None:
                raw["prev_hash"] = prev
            raw["hash"] = row_hash(raw)
            c.execute(
                text("UPDATE ledger_entries SET epsilon = :e, prev_hash = :p, hash = :h WHERE seq = :s"),
                {"e": raw["epsilon"], "p": raw["prev_hash"], "h": raw["hash"], "s": raw["seq"]},
            )
            prev = raw["hash"]
        c.execute(text("UPDATE ledger_head SET hash = :h"), {"h": prev})
    engine.dispose()
    with Ledger(url) as led:
        assert led.verify_chain() == []  # the full check alone cannot see this forgery
        with pytest.raises(BudgetRefused, match="no longer has the hash verified earlier"):
            led.reserve(dataset="d", release_id="r2", mechanism="m", plan=PURE, lifetime=(1.5, 0.0))


def test_an_edited_row_after_the_checkpoint_is_caught(url):
    with Ledger(url) as led:
        record_release(led, "r1")
        led.reserve(dataset="d", release_id="r2", mechanism="m", plan=PURE, lifetime=None)
        led.spend("r2", ["a"], PURE)  # written after the checkpoint
        seq = next(r["seq"] for r in led.entries(release_id="r2") if r["kind"] == "stage")
        led.finish("r2", "failed")
    _tamper(url, seq, detail=json.dumps({"edited": True}))
    with Ledger(url) as led, pytest.raises(BudgetRefused, match=f"ledger row {seq} does not match"):
        led.reserve(dataset="e", release_id="r3", mechanism="m", plan=PURE, lifetime=None)


def test_the_checkpoint_moves_with_each_reservation(url):
    """The reservation verifies only the rows after the last checkpoint (its cost does not
    grow with the ledger): after a reservation the checkpoint is the new head."""
    with Ledger(url) as led:
        for i in range(3):
            record_release(led, f"r{i}")
        led.reserve(dataset="d", release_id="r9", mechanism="m", plan=PURE, lifetime=None)
        head = led.head()
        with led.engine.connect() as c:
            cp = c.execute(text("SELECT seq, hash FROM ledger_checkpoint")).one()
    assert tuple(cp) == head


def test_split_password_keeps_the_secret_out_of_the_url():
    url, pw = split_password("postgresql+psycopg://alice:s3cr%40t@db.example:5432/ledger")
    assert pw == "s3cr@t" and "s3cr" not in url and url == "postgresql+psycopg://alice@db.example:5432/ledger"
    assert split_password("sqlite:////tmp/ledger.db") == ("sqlite:////tmp/ledger.db", None)


def test_the_password_comes_from_the_environment(postgres_url, monkeypatch):
    """A URL without a password, the password in DPRELEASE_LEDGER_PASSWORD: the engine
    connects with it (loopback trust auth accepts any; what matters is that it is used)."""
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    with Ledger(postgres_url) as led:
        assert led.engine.url.password == "from-env"
        assert "from-env" not in led.url


def test_checkpoint_verifies_the_whole_chain_first(url):
    """``Ledger.checkpoint`` (after a restore, or in the benchmark's set-up) moves the
    checkpoint only over an intact chain."""
    with Ledger(url) as led:
        record_release(led, "r1")
        seq = _closing_seq(led, "r1")
        assert led.checkpoint() == []
        before = led.head()
    _tamper(url, seq, epsilon=0.0)
    with Ledger(url) as led:
        assert led.checkpoint() and led.verify_chain()
        with led.engine.connect() as c:
            assert tuple(c.execute(text("SELECT seq, hash FROM ledger_checkpoint")).one()) == before


WHOLE = (1.0, 1e-6)  # a lifetime that one release of ZCDP (epsilon 1, delta 1e-6) uses up


def test_a_lifetime_used_up_by_one_release_refuses_the_next_one(url):
    """Issue 30: the release's ledger facts, the headroom and the refusal of the next
    release searched for a root at vanishing rho and crashed; now the lifetime is used up."""
    with Ledger(url) as led:
        record_release(led, "whole", plan=ZCDP, lifetime=WHOLE)
        room = led.headroom("d")
        assert room is not None and room.used_up and (room.epsilon, room.rho) == (0.0, 0.0)
        life = ledger_facts(led, "d", "whole")["lifetime"]
        assert life["next_epsilon_max"] == 0.0 and life["spent_epsilon"] <= 1.0
        for plan in (ZCDP, plan_budget("zcdp", 0.01, 1e-6, {"a": 1.0})):
            reason = led.refusal(dataset="d", release_id="next", plan=plan, lifetime=WHOLE)
            assert reason is not None and "The lifetime budget is used up" in reason
        with pytest.raises(BudgetRefused, match="used up: no further release of this dataset fits"):
            led.reserve(dataset="d", release_id="next", mechanism="m", plan=ZCDP, lifetime=WHOLE)
        (refused,) = [r for r in led.releases() if r["release_id"] == "next"]
        assert (refused["status"], refused["epsilon"], refused["stages"]) == ("refused", 0.0, [])


def test_an_open_reservation_of_the_whole_lifetime_refuses_the_others_until_it_closes(url):
    """Releases started together: the first reservation holds the whole plan while it
    runs, so the others are refused (BudgetRefused, not a crash) and told why; a first
    release that fails before drawing noise gives its plan back."""
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="first", mechanism="m", plan=ZCDP, lifetime=WHOLE)
        for rid in ("second", "third"):
            with pytest.raises(BudgetRefused, match=r"\(1 of them still open.*used up.*Wait for the open"):
                led.reserve(dataset="d", release_id=rid, mechanism="m", plan=ZCDP, lifetime=WHOLE)
        led.finish("first", "failed")
        record_release(led, "after", plan=ZCDP, lifetime=WHOLE)
        assert led.headroom("d").used_up


def test_a_lifetime_of_epsilon_1000_takes_releases_until_rho_runs_out(url):
    """A spent rho above ~355 overflowed exp in the conversion (the 7th release of epsilon
    100 crashed): releases are admitted while zCDP composition fits, then refused."""
    big = plan_budget("zcdp", 100.0, 1e-6, {"a": 1.0})
    fit = int(zcdp_rho(1000.0, 1e-6) // big.spent_rho)  # 16 (basic composition: delta 1e-6 allows 1)
    with Ledger(url) as led:
        for i in range(fit):
            record_release(led, f"r{i}", plan=big, lifetime=(1000.0, 1e-6))
        with pytest.raises(BudgetRefused, match="The largest epsilon the next release can take"):
            record_release(led, "over", plan=big, lifetime=(1000.0, 1e-6))
        assert led.spend_so_far("d", 1e-6).epsilon <= 1000.0
        room = led.headroom("d")
        charges = [led.charge(f"r{i}") for i in range(fit)]
        nxt = Charge("zcdp", zcdp_rho(room.epsilon, 1e-6), room.epsilon, 1e-6)
        assert 0 < room.epsilon < 100 and compose_lifetime([*charges, nxt], 1e-6).epsilon <= 1000.0


def test_a_release_whose_delta_no_longer_fits_is_told_what_still_does(url):
    """Schema discovery set aside delta 1e-7 of a lifetime (5, 1e-6) and spent rho 0.5, more
    than zCDP composition has at delta 9e-7: no zCDP release at delta 1e-6 fits, but the
    lifetime is not used up (basic composition leaves epsilon 4 at a smaller delta)."""
    with Ledger(url) as led:
        record_release(led, "s", plan=discovery_plan(1.0, 1e-7), lifetime=(5.0, 1e-6))
        room = led.headroom("d")
        assert room is not None and room.epsilon == 0.0 and not room.used_up
        with pytest.raises(
            BudgetRefused, match=r"No zCDP release at delta=1e-06 fits.*pure-DP release .* up to 4,"
        ):
            led.reserve(dataset="d", release_id="z", mechanism="m", plan=ZCDP, lifetime=(5.0, 1e-6))
        record_release(led, "p", plan=plan_budget("pure", 4.0, 0.0, {"a": 1.0}), lifetime=(5.0, 1e-6))
        assert led.headroom("d").used_up
