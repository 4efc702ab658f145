"""What a release tells the operators: Prefect events, and the flow's failure hooks.

Events (``dprelease.release.completed``, ``.gated``, ``.refused``, ``.failed``) name the
release as their resource (``dprelease.release.<release_id>``, with the dataset as a
label) and carry only public facts: the status, what the release is charged (ε, δ) and the
dataset's lifetime account (budget, spent, left) from the ledger, the bundle's path, for a
refusal the ledger's message (budgets only), and for a failure the exception's type and the
stage, never its message. ``deploy/automations.py`` reacts to them.

The flow body records its own failures (it knows the stage and the staging folder). The
``on_failure`` / ``on_crashed`` hooks cover what the body could not: a failure before the
release started (an invalid spec, an existing folder) or a crash; they write the failure
record to ``<out>/failures/``, close the ledger reservation as ``failed`` (charged the
stages spent) and emit ``.failed``. They need no server.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect.events import emit_event

from bundle.write import write_failure_record
from checks.gates import GateError
from ledger import BudgetRefused, Ledger, budget_facts
from mechanisms.errors import DPReleaseError
from spec import RELEASE_ID

__all__ = [
    "RELEASE_ID",
    "RunRecord",
    "on_crashed",
    "on_failure",
    "record_failure",
    "release_event",
    "track",
    "untrack",
]

KINDS = ("completed", "gated", "refused", "failed")
_log = logging.getLogger("dprelease.events")


class RunRecord:
    """What the hooks need to know about a run of the flow, kept by the body as it goes."""

    def __init__(self, out: Path, release_id: str | None = None, dataset: str | None = None) -> None:
        self.out, self.release_id, self.dataset = out, release_id, dataset
        self.stage = "load_spec"
        self.ledger_url: str | None = None
        self.ledger_password: str | None = None  # from a Secret block; never a flow parameter
        self.reserved = False
        self.handled = False


_RUNS: dict[UUID, RunRecord] = {}


def track(flow_run_id: Any, record: RunRecord) -> RunRecord:
    """Register ``record`` for the hooks of flow run ``flow_run_id`` (None: not in a run)."""
    if flow_run_id is not None:
        _RUNS[UUID(str(flow_run_id))] = record
    return record


def untrack(flow_run_id: Any) -> None:
    """Forget a run that ended without needing the hooks."""
    if flow_run_id is not None:
        _RUNS.pop(UUID(str(flow_run_id)), None)


def release_event(
    kind: str,
    *,
    release_id: str,
    dataset: str | None,
    ledger: Ledger | None,
    error: BaseException | None = None,
    stage: str | None = None,
    bundle: Path | None = None,
) -> None:
    """Emit ``dprelease.release.<kind>``; never raises (an event must not fail a release).

    A refusal carries the ledger's message (budgets and release ids: public). A failure
    carries only the error's type and the stage: even our rule-naming messages say that
    some record broke a rule, which belongs to the steward's failure record, not to every
    automation's notification target."""
    if kind not in KINDS:
        raise ValueError(f"event kind {kind!r} must be one of {KINDS}")
    payload: dict[str, Any] = {"release_id": release_id, "dataset": dataset, "status": kind}
    try:
        if ledger is not None and dataset is not None:
            payload.update(budget_facts(ledger, dataset, release_id))
        if error is not None:
            payload.update(error=type(getattr(error, "original", error)).__name__, stage=stage)
            if isinstance(error, BudgetRefused):
                payload["message"] = str(error)
        if bundle is not None:
            payload["bundle"] = str(bundle)
        resource = {
            "prefect.resource.id": f"dprelease.release.{release_id}",
            "prefect.resource.name": release_id,
        }
        if dataset is not None:
            resource["dprelease.dataset"] = dataset
        emit_event(event=f"dprelease.release.{kind}", resource=resource, payload=payload)
    except Exception as e:  # the release's outcome stands; the operator still has the ledger
        _log.warning("could not emit dprelease.release.%s (%s)", kind, type(e).__name__)


def _record_unhandled(flow_run: Any, state: Any, what: str) -> None:
    record = _RUNS.pop(UUID(str(flow_run.id)), None)
    if record is not None and record.handled:
        return
    params = dict(getattr(flow_run, "parameters", None) or {})
    if record is None:
        rid = params.get("release_id")
        safe = isinstance(rid, str) and RELEASE_ID.fullmatch(rid) is not None  # it names a folder
        record = RunRecord(Path(params.get("out_dir") or "releases"), rid if safe else None)
    result = state.result(raise_on_failure=False)
    error = result if isinstance(result, BaseException) else RuntimeError(state.message or what)
    rid = record.release_id or "unknown-release"
    ledger = None
    try:
        if record.ledger_url is not None:
            ledger = Ledger(record.ledger_url, password=record.ledger_password)
            if record.reserved:
                ledger.finish(
                    rid, "failed", {"stage": record.stage, "error": type(error).__name__, "state": what}
                )
        write_failure_record(record.out, rid, f"{record.stage} ({what})", error, None)
        release_event(
            "failed", release_id=rid, dataset=record.dataset, ledger=ledger, error=error, stage=record.stage
        )
    except Exception as e:  # a hook must not hide the run's own failure
        _log.warning("the %s hook could not record the failure (%s)", what, type(e).__name__)
    finally:
        if ledger is not None:
            ledger.close()


def on_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_failure`` hook: record a failure the flow body did not (e.g. an invalid spec)."""
    _record_unhandled(flow_run, state, "failed")


def on_crashed(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_crashed`` hook: record a crash (the process was interrupted or terminated)."""
    _record_unhandled(flow_run, state, "crashed")


def record_failure(
    record: RunRecord, ledger: Ledger | None, error: BaseException, staging: Path, sealed: bool
) -> None:
    """The body's own failure record: close the reservation (charged the stages spent),
    write ``<out>/failures/``, emit ``.gated``, ``.refused`` or ``.failed``."""
    rid = record.release_id or "unknown-release"  # the flow names the release before it can fail here
    if record.reserved and ledger is not None:
        _close_failed(ledger, rid, record.stage, error, sealed)
    write_failure_record(record.out, rid, record.stage, error, staging if staging.exists() else None)
    kind = (
        "gated"
        if isinstance(error, GateError)
        else "refused"
        if isinstance(error, BudgetRefused)
        else "failed"
    )
    release_event(
        kind, release_id=rid, dataset=record.dataset, ledger=ledger, error=error, stage=record.stage
    )
    record.handled = True


def _close_failed(ledger: Ledger, rid: str, stage: str, error: BaseException, sealed: bool) -> None:
    """Mark the attempt failed (charged the stages it spent), also when it was sealed but the
    bundle could not be moved into place; if the ledger itself is what failed, the
    reservation stays open and keeps the whole plan charged (fail closed)."""
    try:
        ledger.finish(rid, "failed", {"stage": stage, "error": type(error).__name__}, after_seal=sealed)
    except DPReleaseError as e:
        _log.warning("release '%s' stays reserved (charged its whole plan) in the ledger: %s", rid, e)
