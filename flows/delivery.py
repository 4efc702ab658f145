"""Sending a release's notices (its artifacts and events, ``flows.events``) to Prefect:
at most once per run and never at the cost of the release's outcome.

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

__all__ = ["DELIVERY_TIMEOUT", "UNDELIVERED", "Resent", "deliver", "emit_event", "send_undelivered"]

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
