"""What a release tells the operators: Prefect events and artifacts, delivered at most once
per run and never at the cost of the release's outcome; and the flow's failure hooks.

Events (``dprelease.release.completed``, ``.gated``, ``.refused``, ``.failed``) name the
release as their resource (``dprelease.release.<release_id>``, with the dataset as a
label), relate it to its flow run, flow, deployment and tags, and carry only public facts:
the status, what the release is charged (ε, δ) and the dataset's lifetime account (budget,
spent, left) from the ledger, where the bundle is (absolute path, host, and URL when the
flow has a ``public_url``), for a refusal the ledger's message (budgets only), and for a
failure the exception's type and the stage, never its message. ``deploy/automations.py``
reacts to them.

**Delivery** (``deliver``). A release's artifacts and event travel together as one
*notice*. Sending it is best effort and bounded (``DELIVERY_TIMEOUT`` in all, no client
retries): once the ledger has sealed a release and its bundle is in place, the release is
published whatever Prefect says, so a Prefect API that is down or unreachable must not turn
it into a failure. A notice that cannot be sent is written to
``<out>/.undelivered/<release_id>-<time>-<kind>.json`` (public facts only, beside the bundles,
outside every sealed manifest), with a warning that says so; ``send_undelivered`` sends what
is queued there, and every release into the same ``out`` (and ``dprelease notify``) calls it
first. A notice of a published release also records its flow run: when it is sent late, the
run's state is set to Completed if Prefect still shows it otherwise (Running or Crashed,
because its end could not be reported). If even the queue file cannot be written, the
warning says plainly that the notice is lost (the ledger and the bundle still hold the
release). Events are sent through their own connection and confirmed by the server before
they count as delivered.

The flow body records its own failures (it knows the stage and the staging folder). The
``on_failure`` / ``on_crashed`` hooks cover what the body could not: a failure before the
release started (an invalid spec, an existing folder) or a crash; they write the failure
record to ``<out>/failures/``, close the ledger reservation as ``failed`` (charged the
stages spent) and send ``.failed``. They need no server.
"""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import json
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from dprelease.bundle.write import write_failure_record
from dprelease.checks.gates import GateError
from dprelease.ledger import BudgetRefused, Ledger, NoLedger, budget_facts
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.spec import RELEASE_ID  # re-exported: the flow and the hooks check release ids with it

__all__ = [
    "DELIVERY_TIMEOUT",
    "RELEASE_ID",
    "UNDELIVERED",
    "Resent",
    "RunRecord",
    "deliver",
    "emit_event",
    "notice",
    "on_crashed",
    "on_failure",
    "record_failure",
    "release_event",
    "send_undelivered",
    "track",
    "untrack",
]

KINDS = ("completed", "gated", "refused", "failed")
DELIVERY_TIMEOUT = 10.0  # seconds for one notice: its health check, artifacts and events
UNDELIVERED = ".undelivered"  # under --out; a dot name is never a release_id
_log = logging.getLogger("dprelease.events")


def _warn(message: str, *args: Any) -> None:
    """A warning in the run's log when there is a run (the Prefect UI shows it once the API
    answers; the terminal or the worker's output at once), else in ``dprelease.events``."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        logger: Any = get_run_logger()
    except MissingContextError:
        logger = _log
    logger.warning(message, *args)


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


# ---------------------------------------------------------------- notices: what is sent


def _run_related(flow_run: Any = None) -> list[dict[str, str]]:
    """The event's related resources, from the run in memory (no API call, so that a notice
    queued while the API is down still names its run): flow run, flow, deployment, tags."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    run: Any = flow_run if flow_run is not None else getattr(ctx, "flow_run", None)
    if getattr(run, "id", None) is None:
        return []
    related = [{"prefect.resource.id": f"prefect.flow-run.{run.id}", "prefect.resource.role": "flow-run"}]
    if getattr(run, "name", None):
        related[0]["prefect.resource.name"] = str(run.name)
    if getattr(run, "flow_id", None) is not None:
        flow = {"prefect.resource.id": f"prefect.flow.{run.flow_id}", "prefect.resource.role": "flow"}
        if ctx is not None and ctx.flow is not None:
            flow["prefect.resource.name"] = ctx.flow.name
        related.append(flow)
    if getattr(run, "deployment_id", None) is not None:
        deployment = f"prefect.deployment.{run.deployment_id}"
        related.append({"prefect.resource.id": deployment, "prefect.resource.role": "deployment"})
    related += [
        {"prefect.resource.id": f"prefect.tag.{t}", "prefect.resource.role": "tag"}
        for t in sorted(getattr(run, "tags", None) or [])
    ]
    return related


def release_event(
    kind: str,
    *,
    release_id: str,
    dataset: str | None,
    ledger: Ledger | None,
    error: BaseException | None = None,
    stage: str | None = None,
    where: dict[str, str] | None = None,
    flow_run: Any = None,
) -> dict[str, Any]:
    """The event ``dprelease.release.<kind>`` as JSON (``emit_event``'s arguments); never
    raises for want of the ledger (its facts are then left out, with a warning).

    A refusal carries the ledger's message (budgets and release ids: public). A failure
    carries only the error's type and the stage: even our rule-naming messages say that
    some record broke a rule, which belongs to the steward's failure record, not to every
    automation's notification target. ``where``: the bundle's location
    (``flows.artifacts.bundle_location``): ``bundle`` (absolute path), ``bundle_host`` and
    ``bundle_url``."""
    if kind not in KINDS:
        raise ValueError(f"event kind {kind!r} must be one of {KINDS}")
    payload: dict[str, Any] = {"release_id": release_id, "dataset": dataset, "status": kind}
    if ledger is not None and dataset is not None:
        try:
            payload.update(budget_facts(ledger, dataset, release_id))
        except Exception as e:  # the ledger holds the truth; the event goes without it
            _log.warning("the ledger's facts are left out of the %s event (%s)", kind, type(e).__name__)
    if error is not None:
        payload.update(error=type(getattr(error, "original", error)).__name__, stage=stage)
        if isinstance(error, BudgetRefused):
            payload["message"] = str(error)
    if where is not None:
        payload["bundle"] = where["path"]
        payload["bundle_host"] = where["host"]
        if "url" in where:
            payload["bundle_url"] = where["url"]
    resource = {"prefect.resource.id": f"dprelease.release.{release_id}", "prefect.resource.name": release_id}
    if dataset is not None:
        resource["dprelease.dataset"] = dataset
    return {
        "event": f"dprelease.release.{kind}",
        "resource": resource,
        "related": _run_related(flow_run),
        "payload": payload,
        "occurred": datetime.now(UTC).isoformat(),
        "id": str(uuid4()),
    }


def notice(
    release_id: str,
    kind: str,
    *,
    events: list[dict[str, Any]],
    artifacts: list[dict[str, Any]] | None = None,
    flow_run: Any = None,
    completed: bool = False,
) -> dict[str, Any]:
    """What one outcome sends: its artifacts and events, and the flow run they belong to.
    ``completed``: the run published its release, so a late delivery may set the run's state
    to Completed (``send_undelivered``)."""
    from prefect.context import FlowRunContext

    run: Any = flow_run if flow_run is not None else getattr(FlowRunContext.get(), "flow_run", None)
    return {
        "release_id": release_id,
        "kind": kind,
        "created": datetime.now(UTC).isoformat(),
        "flow_run_id": None if getattr(run, "id", None) is None else str(run.id),
        "completed": completed,
        "artifacts": list(artifacts or []),
        "events": list(events),
    }


# ---------------------------------------------------------------- sending, bounded


def _bounded(make: Callable[[], Coroutine[Any, Any, Any]], timeout: float) -> Any:
    """Run ``make()`` on an event loop of its own thread (the caller may be anywhere: a sync
    flow, a hook, a thread with a loop), in a copy of this context (the Prefect settings of
    the run: its API URL) with Prefect's client retries off, for at most ``timeout`` s."""
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    with temporary_settings(updates={PREFECT_CLIENT_MAX_RETRIES: 0}):
        ctx = contextvars.copy_context()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = ctx.run(lambda: asyncio.run(asyncio.wait_for(make(), timeout)))
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=run, name="dprelease-notify", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    if thread.is_alive():  # wait_for did not end it: leave the daemon thread behind
        raise TimeoutError(f"the Prefect API did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def emit_event(timeout: float = DELIVERY_TIMEOUT, **event: Any) -> None:
    """Send one event (``release_event``'s JSON) to the Prefect API and wait until the server
    acknowledges it (a websocket ping after it); raises if it cannot within ``timeout``."""

    async def send() -> None:
        from prefect.events.clients import get_events_client
        from prefect.events.schemas.events import Event

        async with get_events_client(reconnection_attempts=0, checkpoint_every=1) as client:
            await client.emit(Event.model_validate(event))

    _bounded(send, timeout)


def _send(item: dict[str, Any], timeout: float, on_progress: Callable[[], None]) -> None:
    """Send what ``item`` (a notice) still holds, removing each artifact and event once it
    is delivered (``on_progress`` then saves it): a notice half sent is resumed, not
    repeated. Raises on the first failure."""

    from prefect.context import FlowRunContext

    this_run = getattr(getattr(FlowRunContext.get(), "flow_run", None), "id", None)
    fix_state = (  # not for the run that is sending it (a retry): Prefect records its end itself
        bool(item.get("late") and item.get("completed") and item.get("flow_run_id"))
        and str(this_run) != item["flow_run_id"]
    )

    async def artifacts() -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import ArtifactCreate
        from prefect.client.schemas.objects import StateType
        from prefect.exceptions import ObjectNotFound
        from prefect.states import Completed

        async with get_client(httpx_settings={"timeout": min(timeout, 5.0)}) as client:
            problem = await client.api_healthcheck()
            if problem is not None:
                raise problem
            run_id = UUID(item["flow_run_id"]) if item.get("flow_run_id") else None
            run = None
            if run_id is not None:
                try:
                    run = await client.read_flow_run(run_id)
                except ObjectNotFound:  # another server, or a reset one: the artifacts go unattached
                    run_id = None
            while item["artifacts"]:
                await client.create_artifact(ArtifactCreate(**item["artifacts"][0], flow_run_id=run_id))
                item["artifacts"].pop(0)
                on_progress()
            if fix_state and run is not None and run.state_type != StateType.COMPLETED:
                message = (
                    f"release {item['release_id']} was published and sealed in the ledger at "
                    f"{item['created'][:19]} UTC; Prefect's API was unreachable when the run ended, so "
                    "dprelease recorded its end later"
                )
                await client.set_flow_run_state(run.id, Completed(message=message), force=True)

    if item["artifacts"] or fix_state:
        _bounded(artifacts, timeout)
    while item["events"]:
        emit_event(timeout=timeout, **item["events"][0])
        item["events"].pop(0)
        on_progress()


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def _describe(item: dict[str, Any]) -> str:
    what = [f"{len(item['artifacts'])} artifact(s)"] if item["artifacts"] else []
    what += [e["event"] for e in item["events"]]
    return ", ".join(what) or "nothing"


def deliver(out: Path, item: dict[str, Any], *, timeout: float = DELIVERY_TIMEOUT) -> bool:
    """Send a notice now; if that fails, queue what is left of it in ``<out>/.undelivered/``
    with a warning (or, if even that fails, say plainly that it is lost). Never raises: a
    release's outcome does not depend on Prefect's API. True when all was delivered."""
    try:
        _send(item, timeout, lambda: None)
        return True
    except Exception as e:
        reason = type(e).__name__
    left = _describe(item)
    folder = out / UNDELIVERED
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = folder / f"{item['release_id']}-{stamp}-{item['kind']}.json"
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, {**item, "late": True, "reason": reason})
        except FileNotFoundError:  # a sender removed the emptied folder meanwhile
            folder.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, {**item, "late": True, "reason": reason})
    except OSError as oe:
        _warn(
            "release '%s': the Prefect API could not be reached (%s) and the notice could not be queued "
            "(%s): %s LOST; the ledger (`dprelease ledger show`) and the bundle still hold the release",
            item["release_id"],
            reason,
            oe.strerror or type(oe).__name__,
            left,
        )
        return False
    _warn(
        "release '%s': the Prefect API could not be reached (%s); %s queued in '%s'. Run `dprelease notify "
        "--out %s` when the server is back (every release into this folder also sends them)",
        item["release_id"],
        reason,
        left,
        path,
        out,
    )
    return False


@dataclass(frozen=True)
class Resent:
    """One queued notice and what became of it."""

    path: Path
    release_id: str
    kind: str
    sent: bool
    left: str  # what is still queued ("nothing" once sent)
    reason: str | None = None


def send_undelivered(out: Path, *, timeout: float = DELIVERY_TIMEOUT) -> list[Resent]:
    """Send every notice queued in ``<out>/.undelivered/`` (oldest first), removing each
    once sent and the folder once empty. One process at a time (a lock on the folder:
    another that finds it held leaves the queue to it). Stops at the first notice that
    cannot be sent (the API is still unreachable). Never raises."""
    folder = out / UNDELIVERED
    done: list[Resent] = []
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return done  # nothing queued
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for path in sorted(folder.glob("*.json")):
            try:
                item = json.loads(path.read_text())

                def save(item: dict[str, Any] = item, path: Path = path) -> None:
                    _write_atomic(path, item)

                try:
                    _send(item, timeout, save)
                except Exception as e:
                    rid, kind, reason = item["release_id"], item["kind"], type(e).__name__
                    done.append(Resent(path, rid, kind, False, _describe(item), reason))
                    break
                path.unlink()
                done.append(Resent(path, item["release_id"], item["kind"], True, "nothing"))
            except (OSError, ValueError, KeyError) as e:
                done.append(Resent(path, "?", "?", False, "unreadable notice", type(e).__name__))
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass
    except BlockingIOError:
        pass  # another process is sending them
    finally:
        os.close(fd)
    for r in done:
        if r.sent:
            _warn("release '%s': its queued %s notice was sent to Prefect", r.release_id, r.kind)
    return done


# ---------------------------------------------------------------- failures


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
            try:  # never created here: a run that failed before its reserve has nothing to record
                ledger = Ledger(record.ledger_url, create=False, password=record.ledger_password)
            except NoLedger:
                ledger = None
            if ledger is not None and record.reserved:
                ledger.finish(
                    rid, "failed", {"stage": record.stage, "error": type(error).__name__, "state": what}
                )
        write_failure_record(record.out, rid, f"{record.stage} ({what})", error, None)
        event = release_event(
            "failed",
            release_id=rid,
            dataset=record.dataset,
            ledger=ledger,
            error=error,
            stage=record.stage,
            flow_run=flow_run,
        )
        deliver(record.out, notice(rid, "failed", events=[event], flow_run=flow_run))
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
    record: RunRecord,
    ledger: Ledger | None,
    error: BaseException,
    staging: Path,
    sealed: bool,
    *,
    artifacts: list[dict[str, Any]] | None = None,
    where: dict[str, str] | None = None,
) -> Path:
    """The body's own failure record: close the reservation (charged the stages spent),
    write ``<out>/failures/`` (returned), deliver ``.gated``, ``.refused`` or ``.failed``
    (with the ``artifacts`` a gated release still has)."""
    rid = record.release_id or "unknown-release"  # the flow names the release before it can fail here
    if record.reserved and ledger is not None:
        _close_failed(ledger, rid, record.stage, error, sealed)
    path = write_failure_record(record.out, rid, record.stage, error, staging if staging.exists() else None)
    kind = (
        "gated"
        if isinstance(error, GateError)
        else "refused"
        if isinstance(error, BudgetRefused)
        else "failed"
    )
    event = release_event(
        kind,
        release_id=rid,
        dataset=record.dataset,
        ledger=ledger,
        error=error,
        stage=record.stage,
        where=where,
    )
    record.handled = True
    deliver(record.out, notice(rid, kind, events=[event], artifacts=artifacts))
    return path


def _close_failed(ledger: Ledger, rid: str, stage: str, error: BaseException, sealed: bool) -> None:
    """Mark the attempt failed (charged the stages it spent), also when it was sealed but the
    bundle could not be moved into place; if the ledger itself is what failed, the
    reservation stays open and keeps the whole plan charged (fail closed)."""
    try:
        ledger.finish(rid, "failed", {"stage": stage, "error": type(error).__name__}, after_seal=sealed)
    except DPReleaseError as e:
        _log.warning("release '%s' stays reserved (charged its whole plan) in the ledger: %s", rid, e)
