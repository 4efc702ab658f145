"""What a dead release leaves behind, and how it is cleared: stale staging folders and
attempts the ledger still holds as ``reserved``.

A run killed past its reservation leaves ``<out>/.staging-<release_id>-<uuid>/`` (its
lock released by the kernel, ``bundle/staging.py``) and, in the ledger, a ``reserved``
attempt charged its whole plan (fail closed). ``recover`` runs before every release into
the same ``--out`` (CLI and flow) and as ``dprelease recover``:

* a staging folder whose attempt the ledger shows sealed (``released``/``gated``, the run
  died between the seal and the rename) and whose manifests match the sealed sha256 is
  moved into place: the bundle the ledger vouches for is published;
* any other stale staging folder becomes a failure record under ``<out>/failures/``: its
  ``internal/`` reports (confidential) are kept only there, the rest is removed. A sealed
  attempt whose folder does not match is closed ``failed`` in the ledger.

A bundle moved into place this way never had its Prefect artifacts and completed event
sent (its process died first); ``Recovered.describe`` says so. ``published_by_run`` tells a
retry of a flow run that the run already published its release (the ledger's closing row
names the run and seals the bundle in place), so the retry reports it instead of refusing.

``settle`` closes a dead ``reserved`` attempt at what its spent stage rows show, refusing
while its process may be alive.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import shutil
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dprelease.bundle.files import sha256
from dprelease.bundle.staging import Staging, owner_of, stale_stagings
from dprelease.bundle.write import write_failure_record
from dprelease.ledger import Ledger, LedgerRow
from dprelease.mechanisms.errors import ProcessDied, SettleRefused

__all__ = [
    "ProcessDied",
    "Recovered",
    "SettleRefused",
    "log_recovered",
    "published_by_run",
    "recover",
    "sealed_matches",
    "settle",
]

_log = logging.getLogger("dprelease.recovery")


@dataclass(frozen=True)
class Recovered:
    """One stale staging folder and what became of it (public facts only)."""

    release_id: str
    outcome: str  # "published" (sealed in the ledger, moved into place) or "failure record"
    path: Path
    ledger_status: str | None
    spent: tuple[str, ...]

    def describe(self) -> str:
        if self.outcome == "published":
            return (
                f"release '{self.release_id}' had been sealed in the ledger when its process died: "
                f"its bundle was moved into place at '{self.path}'; its Prefect artifacts and "
                "completed event were never sent (the ledger and the bundle record the release)"
            )
        status = self.ledger_status or "unknown to this ledger"
        after = (
            f"; it is still reserved in the ledger (charged its whole plan; stages spent: "
            f"{list(self.spent) or 'none'}): `dprelease ledger settle {self.release_id}` closes it"
            if self.ledger_status == "reserved"
            else f" (ledger: {status})"
        )
        return (
            f"release '{self.release_id}' died before it finished: its staging folder became the "
            f"failure record '{self.path}'{after}"
        )


def sealed_matches(folder: Path, dest: Path, closing: LedgerRow) -> bool:
    """``folder`` (a staging folder, or the bundle itself) is exactly what the ledger's
    ``closing`` row sealed (its ``detail``) for the bundle at ``dest``: the same destination
    and the sha256 of both manifests (no ``public/`` for a gated release)."""
    if closing.detail_of("bundle") != str(dest.resolve()):
        return False
    public, internal = (
        closing.detail_of("public_manifest_sha256"),
        closing.detail_of("internal_manifest_sha256"),
    )
    try:
        ok = internal is not None and sha256(folder / "internal" / "manifest.json") == internal
        if public is None:
            return ok and not (folder / "public").exists()
        return ok and sha256(folder / "public" / "manifest.json") == public
    except OSError:
        return False


def published_by_run(ledger: Ledger, out: Path, release_id: str, flow_run_id: str) -> Path | None:
    """The bundle ``out/release_id`` if flow run ``flow_run_id`` already published it: the
    ledger's closing row is ``released``, names this flow run, and seals exactly the bundle
    in place (a folder of a run that died between the seal and the rename is moved into
    place first). A retry of that run then has nothing left to do. None otherwise."""
    recover(out, ledger, release_id)
    found = ledger.state(release_id)
    dest = out / release_id
    if found is None or found[0].status != "released" or dest.is_symlink():
        return None
    if found[0].detail_of("flow_run_id") != flow_run_id or not sealed_matches(dest, dest, found[0]):
        return None
    return dest


def _recover_one(stage: Staging, ledger: Ledger | None, out: Path) -> Recovered:
    found = ledger.state(stage.release_id) if ledger is not None else None
    status = found[0].status if found else None
    spent = tuple(found[1]) if found else ()
    if (
        found is not None
        and status in ("released", "gated")
        and not os.path.lexists(stage.dest)
        and sealed_matches(stage.path, stage.dest, found[0])
    ):
        os.replace(stage.path, stage.dest)
        return Recovered(stage.release_id, "published", stage.dest, status, spent)
    if ledger is not None and status in ("released", "gated"):  # sealed, but not this folder
        ledger.finish(
            stage.release_id,
            "failed",
            {"stage": "write_bundle", "error": "ProcessDied", "state": "recovered"},
            after_seal=True,
        )
        status = "failed"
    owner = owner_of(stage)
    died = ProcessDied(
        f"the process of release '{stage.release_id}' (host {owner.get('host', 'unknown')}, pid "
        f"{owner.get('pid', 'unknown')}, started {owner.get('started', 'unknown')}) ended before it finished"
    )
    facts = {
        "recovered": {
            "time": datetime.now(UTC).isoformat(),
            "by": f"{getpass.getuser()}@{socket.gethostname()} (pid {os.getpid()})",
            "staging_folder": stage.path.name,
            "ledger_status": status,
            "stages_spent": list(spent),
        }
    }
    shutil.rmtree(stage.path / "public", ignore_errors=True)  # unpublished, possibly partial
    where = f"after spending {list(spent)}" if spent else "before spending any stage"
    record = write_failure_record(out, stage.release_id, f"unknown: died {where}", died, stage.path, facts)
    return Recovered(stage.release_id, "failure record", record, status, spent)


def recover(out: Path, ledger: Ledger | None, release_id: str | None = None) -> list[Recovered]:
    """Clear every stale staging folder in ``out`` (of ``release_id`` only, if given);
    running releases' folders are left alone."""
    with stale_stagings(out, release_id) as (stale, _running):
        return [_recover_one(s, ledger, out) for s in stale]


def log_recovered(recovered: list[Recovered]) -> None:
    """One warning per recovered folder (release ids and paths only)."""
    for r in recovered:
        _log.warning(r.describe())


def settle(
    ledger: Ledger,
    release_id: str,
    out: Path,
    *,
    reason: str,
    by: str | None = None,
    stale_after: float = 24.0,
) -> dict:
    """Close ``release_id``'s dead ``reserved`` attempt at what its spent stage rows show.

    Evidence that its process is gone, strongest first: its staging folder in ``out`` was
    found unlocked (recovered now, or a failure record of an earlier recovery); its pid is
    gone on this host; its last ledger row is older than ``stale_after`` hours (another
    host, which this machine cannot ask). Refused (``SettleRefused``) when the attempt is
    not ``reserved``, while its staging folder is locked, while its pid lives on this host,
    or when no evidence holds."""
    found = ledger.state(release_id)
    if found is None:
        raise SettleRefused(f"release '{release_id}' is not in this ledger; check --ledger / --out")
    attempt = found[0]
    if attempt.status != "reserved":
        raise SettleRefused(
            f"release '{release_id}' is already closed ({attempt.status} at {attempt.time}); "
            "there is nothing to settle"
        )
    recovered = recover(out, ledger, release_id)
    with stale_stagings(out, release_id) as (_stale, running):
        if running:
            owner = owner_of(running[0])
            raise SettleRefused(
                f"release '{release_id}' is running (its staging folder '{running[0].path}' is locked by "
                f"pid {owner.get('pid', 'unknown')} on {owner.get('host', 'unknown')}); wait for it to end"
            )
    host, pid = attempt.detail_of("host"), attempt.detail_of("pid")
    records = (
        sorted((out / "failures").glob(f"{release_id}-*/failure.json")) if (out / "failures").is_dir() else []
    )
    recovered_before = any(json.loads(p.read_text()).get("recovered") for p in records)
    if recovered or recovered_before:
        evidence = f"its staging folder in '{out}' was found unlocked (the process had ended)"
    elif host == socket.gethostname():
        try:
            os.kill(int(str(pid)), 0)
        except ProcessLookupError:
            evidence = f"its process (pid {pid} on {host}) no longer exists"
        except (PermissionError, ValueError):
            evidence = ""
        else:
            evidence = ""
        if not evidence:
            raise SettleRefused(
                f"release '{release_id}' may still be running: pid {pid} is alive on this host; "
                "wait for it, or stop it, then settle"
            )
    else:
        last = datetime.fromisoformat(ledger.rows(release_id=release_id)[-1].time)
        age = datetime.now(UTC) - (last if last.tzinfo else last.replace(tzinfo=UTC))
        if age < timedelta(hours=stale_after):
            raise SettleRefused(
                f"release '{release_id}' ran on host {host} (pid {pid}), which this machine cannot ask, "
                f"and its last ledger row is {age.total_seconds() / 3600:.1f} h old; settle it on {host}, "
                f"or after {stale_after:g} h without a sign of life (--stale-after)"
            )
        evidence = f"no ledger row for {age.total_seconds() / 3600:.1f} h (ran on host {host}, pid {pid})"
    return ledger.settle(
        release_id, by=by or f"{getpass.getuser()}@{socket.gethostname()}", reason=reason, evidence=evidence
    )
