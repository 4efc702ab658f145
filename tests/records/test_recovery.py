"""What a dead release leaves behind (issue 17): stale staging folders become failure
records (or, when the ledger sealed them, the bundle), and a dead ``reserved`` attempt is
settled at what it spent, never while it may be alive. Plain functions: no Prefect."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from dprelease.bundle.staging import prepare_staging
from dprelease.bundle.write import write_bundle_files
from dprelease.ledger import Ledger
from dprelease.ledger.database import ENTRIES
from dprelease.records.recovery import SettleRefused, recover, settle
from tests.helpers import PURE_PLAN


class _Killed(BaseException):
    """Stands for SIGKILL at a chosen instruction: nothing after it runs."""


def _die(held) -> None:
    os.close(held.fd)  # the kernel's part of a kill -9: the lock goes, the files stay
    held.fd = None


def _started(tmp_path: Path, rid: str, *, spend: bool = True):
    """A release that reserved, spent its stages and wrote confidential reports, then died."""
    out = tmp_path / "out"
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    held = prepare_staging(out, rid)
    led.reserve(dataset="d", release_id=rid, mechanism="m", plan=PURE_PLAN, lifetime=None)
    if spend:
        led.spend(rid, ["a"], PURE_PLAN)
    (held.path / "internal" / "gates.json").write_text('{"measured": 0.123}')
    (held.path / "public" / "synthetic.csv").write_text("x\n1\n")
    return out, led, held


def test_a_dead_runs_staging_becomes_a_failure_record(tmp_path):
    out, led, held = _started(tmp_path, "r1")
    _die(held)
    [found] = recover(out, led)
    assert found.outcome == "failure record" and found.ledger_status == "reserved" and found.spent == ("a",)
    assert not held.path.exists() and not held.lock.exists()
    assert (found.path / "internal" / "gates.json").read_text() == '{"measured": 0.123}'
    assert not (found.path / "public").exists()  # the partial synthetic table is not kept
    record = json.loads((found.path / "failure.json").read_text())
    assert record["error"] == "ProcessDied" and record["published"] is False
    assert record["recovered"]["stages_spent"] == ["a"] and record["recovered"]["ledger_status"] == "reserved"
    assert "settle r1" in found.describe()
    # nothing confidential outside failures/
    assert sorted(p.name for p in out.iterdir()) == ["failures"]
    assert recover(out, led) == []  # done once


def test_a_running_release_is_left_alone(tmp_path):
    out, led, held = _started(tmp_path, "r2")
    assert recover(out, led) == []
    assert held.path.is_dir()
    with pytest.raises(SettleRefused, match=r"release 'r2' is running .* locked by pid"):
        settle(led, "r2", out, reason="test")
    assert led.attempt("r2")["status"] == "reserved"
    held.unlock()


def _sealed(tmp_path: Path, rid: str):
    """A release killed between the ledger's seal and the rename into place."""
    out, led, held = _started(tmp_path, rid)

    def seal(public: str | None, internal: str) -> None:
        led.finish(
            rid,
            "released",
            {
                "manifest_sha256": public,
                "public_manifest_sha256": public,
                "internal_manifest_sha256": internal,
                "bundle": str(held.dest.resolve()),
            },
        )
        raise _Killed

    with pytest.raises(_Killed):
        write_bundle_files(held.path, held.dest, None, {"outputs": {}, "release_id": rid}, seal=seal)
    _die(held)
    return out, led, held


def test_a_sealed_bundle_is_moved_into_place(tmp_path, monkeypatch):
    monkeypatch.setattr("dprelease.bundle.write.readme", lambda document: "readme\n")
    out, led, held = _sealed(tmp_path, "r3")
    [found] = recover(out, led)
    assert found.outcome == "published" and found.path == held.dest
    assert (held.dest / "public" / "manifest.json").is_file() and not held.path.exists()
    assert led.attempt("r3")["status"] == "released"


def test_a_sealed_attempt_whose_folder_changed_is_failed(tmp_path, monkeypatch):
    monkeypatch.setattr("dprelease.bundle.write.readme", lambda document: "readme\n")
    out, led, held = _sealed(tmp_path, "r4")
    (held.path / "public" / "release.json").write_text("{}")  # not what was sealed
    (held.path / "public" / "manifest.json").write_text("{}")
    [found] = recover(out, led)
    assert found.outcome == "failure record" and found.ledger_status == "failed"
    assert not held.dest.exists() and led.attempt("r4")["status"] == "failed"


def test_settle_closes_a_dead_attempt_at_what_it_spent(tmp_path):
    out, led, held = _started(tmp_path, "r5")
    _die(held)
    row = settle(led, "r5", out, reason="killed in a test", by="auditor")
    assert row["status"] == "failed"
    assert row["epsilon"] == pytest.approx(0.5) and row["delta"] == 0.0  # stage a of a, b (ε = 1 in halves)
    assert row["detail"]["settled"]["by"] == "auditor"
    assert "found unlocked" in row["detail"]["settled"]["evidence"]
    assert next(r for r in led.releases() if r["release_id"] == "r5")["epsilon"] == pytest.approx(0.5)
    assert list((out / "failures").glob("r5-*/failure.json"))
    assert led.verify_chain() == []
    with pytest.raises(SettleRefused, match="already closed"):
        settle(led, "r5", out, reason="again")


def test_settle_after_an_earlier_recovery(tmp_path):
    out, led, held = _started(tmp_path, "r6")
    _die(held)
    recover(out, led)  # e.g. the next release into out
    row = settle(led, "r6", out, reason="test")
    assert "found unlocked" in row["detail"]["settled"]["evidence"]


def test_settle_asks_the_pid_when_there_is_no_staging_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    led.reserve(dataset="d", release_id="r7", mechanism="m", plan=PURE_PLAN, lifetime=None)
    with pytest.raises(SettleRefused, match=f"pid {os.getpid()} is alive on this host"):
        settle(led, "r7", out, reason="test")
    _set_owner(led, "r7", socket.gethostname(), 2**22 + 12345)  # beyond pid_max: no such process
    row = settle(led, "r7", out, reason="test")
    assert "no longer exists" in row["detail"]["settled"]["evidence"] and row["epsilon"] == 0.0


def test_settle_waits_for_an_attempt_on_another_host(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    led.reserve(dataset="d", release_id="r8", mechanism="m", plan=PURE_PLAN, lifetime=None)
    _set_owner(led, "r8", "elsewhere", 1)
    with pytest.raises(SettleRefused, match=r"ran on host elsewhere .* settle it on elsewhere"):
        settle(led, "r8", out, reason="test")
    row = settle(led, "r8", out, reason="test", stale_after=0.0)
    assert "no ledger row for" in row["detail"]["settled"]["evidence"]


def _set_owner(led: Ledger, rid: str, host: str, pid: int) -> None:
    """Rewrite the reservation's host/pid (the hash chain is not the point of these tests)."""
    row = next(r for r in led.entries(release_id=rid) if r["status"] == "reserved")
    detail = {**row["detail"], "host": host, "pid": pid}
    with led.engine.begin() as conn:
        conn.execute(update(ENTRIES).where(ENTRIES.c.seq == row["seq"]).values(detail=json.dumps(detail)))


def test_a_refusal_counts_only_charged_releases_and_says_running(tmp_path, monkeypatch):
    """The lifetime refusal's "earlier release(s)" leaves refused attempts out, and a rerun of
    an attempt whose process lives is "in progress", not "did not finish"."""
    from dprelease.ledger import BudgetRefused

    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    life = (1.5, 0.0)
    led.reserve(dataset="d", release_id="a1", mechanism="m", plan=PURE_PLAN, lifetime=life)
    led.spend("a1", ["a", "b"], PURE_PLAN)
    led.finish("a1", "released")
    for rid in ("a2", "a3"):
        with pytest.raises(BudgetRefused, match=r"1 earlier release\(s\) spent"):
            led.reserve(dataset="d", release_id=rid, mechanism="m", plan=PURE_PLAN, lifetime=life)
    led.reserve(dataset="e", release_id="b1", mechanism="m", plan=PURE_PLAN, lifetime=None)
    led.spend("b1", ["a"], PURE_PLAN)
    with pytest.raises(BudgetRefused, match=r"'b1' is in progress .* spent stage\(s\) \['a'\] so far"):
        led.reserve(dataset="e", release_id="b1", mechanism="m", plan=PURE_PLAN, lifetime=None)
    monkeypatch.setattr("dprelease.ledger.charges.pid_alive", lambda detail: False)  # its process has gone
    with pytest.raises(BudgetRefused, match=r"did not finish.*ledger settle"):
        led.reserve(dataset="e", release_id="b1", mechanism="m", plan=PURE_PLAN, lifetime=None)


def test_settle_time_arithmetic_uses_the_rows_time(tmp_path):
    """An attempt elsewhere becomes settleable once its last row is older than stale_after."""
    out = tmp_path / "out"
    out.mkdir()
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    led.reserve(dataset="d", release_id="r9", mechanism="m", plan=PURE_PLAN, lifetime=None)
    _set_owner(led, "r9", "elsewhere", 1)
    last = led.entries(release_id="r9")[-1]
    old = (datetime.now(UTC) - timedelta(hours=25)).isoformat()
    with led.engine.begin() as conn:
        conn.execute(update(ENTRIES).where(ENTRIES.c.seq == last["seq"]).values(time=old))
    row = settle(led, "r9", out, reason="test")
    assert "no ledger row for 25.0 h" in row["detail"]["settled"]["evidence"]
