"""What a release tells the operators: the Prefect events and notices of its outcome, the
runs the failure hooks look after, and the hooks themselves.

Events (``dprelease.release.completed``, ``.gated``, ``.refused``, ``.refused-again``,
``.failed``) name the release as their resource (``dprelease.release.<release_id>``, with
the dataset as a label), relate it to its flow run, flow, deployment and tags, and carry only public facts:
the status, what the release is charged (ε, δ) and the dataset's lifetime account (budget,
spent, left) from the ledger, where the bundle is (absolute path, host, and URL when the
flow has a ``public_url``), for a refusal the ledger's message (budgets only), and for a
failure the exception's type and the stage, never its message, and where its failure record
is (absolute path and host). The charge is there exact (``epsilon_spent``, ``delta_spent``)
and rounded for people (``spent``: 0.9999999999999999 is "ε = 1"). ``deploy/automations.py``
reacts to them; a refusal the ledger already gave for the same reason is ``.refused-again``,
which it logs and does not page.

Notices are sent, or queued when Prefect cannot be reached, by ``flows.delivery``.

The flow body records its own failures (it knows the stage and the staging folder): the
run's ``RunRecord`` says what the ``on_failure`` / ``on_crashed`` hooks (``flows/hooks.py``)
must still record. A failure event also carries the ledger's state of the attempt
(``ledger_status``: reserved, failed, ...; the stages spent and planned), and ``crashed``
when the run's process died or was interrupted.
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from dprelease.bundle.write import write_failure_record
from dprelease.checks.gates import GateError
from dprelease.flows.delivery import deliver
from dprelease.ledger import BudgetRefused, Ledger, budget_facts
from dprelease.ledger.charges import repeated_refusal
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.spec import RELEASE_ID  # re-exported: the flow and the hooks check release ids with it

__all__ = [
    "RELEASE_ID",
    "RunRecord",
    "forget",
    "notice",
    "record_failure",
    "release_event",
    "run_label",
    "track",
    "untrack",
]

KINDS = ("completed", "gated", "refused", "refused-again", "failed")
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


def forget(flow_run_id: Any) -> RunRecord | None:
    """The record of flow run ``flow_run_id`` kept by its body in this process, forgotten
    (None: the body never ran here, e.g. the run's process died and a worker runs its hook)."""
    return _RUNS.pop(UUID(str(flow_run_id)), None)


def run_label(flow_run: Any) -> str:
    """What names a run whose release id is not known (its spec or ``release_id`` was
    refused before the body named it): ``flow-run-<its name>`` (Prefect's, e.g.
    ``witty-fox``), or ``flow-run-<its id>``; safe as a folder name, never a release id."""
    name = getattr(flow_run, "name", None)
    if isinstance(name, str) and RELEASE_ID.fullmatch(name):
        return f"flow-run-{name}"
    return f"flow-run-{getattr(flow_run, 'id', None) or 'outside-prefect'}"


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
    release_id: str | None,
    dataset: str | None,
    ledger: Ledger | None,
    error: BaseException | None = None,
    stage: str | None = None,
    where: dict[str, str] | None = None,
    failure_record: Path | None = None,
    flow_run: Any = None,
    crashed: bool = False,
    no_ledger: bool = False,
) -> dict[str, Any]:
    """The event ``dprelease.release.<kind>`` as JSON (``emit_event``'s arguments); never
    raises for want of the ledger (its facts are then left out, with a warning).
    ``release_id`` None: the run failed before it had one (its resource is then
    ``dprelease.release.<run_label>``, and the payload's ``release_id`` null). ``no_ledger``:
    there is no ledger where the run had its own, so it reserved nothing.

    A refusal carries the ledger's message (budgets and release ids: public). A failure
    carries only the error's type and the stage: even our rule-naming messages say that
    some record broke a rule, which belongs to the steward's failure record, not to every
    automation's notification target. ``where``: the bundle's location
    (``flows.artifacts.bundle_location``): ``bundle`` (absolute path), ``bundle_host`` and
    ``bundle_url``. ``failure_record``: the folder ``write_failure_record`` made (the
    operator's ``out_dir``, not confidential; its contents are the steward's)."""
    if kind not in KINDS:
        raise ValueError(f"event kind {kind!r} must be one of {KINDS}")
    payload: dict[str, Any] = {"release_id": release_id, "dataset": dataset, "status": kind}
    if ledger is not None and dataset is not None and release_id is not None:
        try:
            payload.update(budget_facts(ledger, dataset, release_id))
            if kind == "failed":
                payload.update(attempt_facts(ledger, release_id))
        except Exception as e:  # the ledger holds the truth; the event goes without it
            _log.warning("the ledger's facts are left out of the %s event (%s)", kind, type(e).__name__)
    if no_ledger and kind == "failed":
        payload.update(ledger_status=None, stages_spent=[], stages_planned=[])
    if crashed:
        payload["crashed"] = True
    if isinstance(payload.get("epsilon_spent"), float | int):
        payload["spent"] = _for_people(payload["epsilon_spent"], payload.get("delta_spent"))
    if error is not None:
        payload.update(error=type(getattr(error, "original", error)).__name__, stage=stage)
        if isinstance(error, BudgetRefused):
            payload["message"] = str(error)
    if failure_record is not None:
        payload.update(failure_record=str(failure_record.resolve()), failure_host=socket.gethostname())
    if where is not None:
        payload["bundle"] = where["path"]
        payload["bundle_host"] = where["host"]
        if "url" in where:
            payload["bundle_url"] = where["url"]
    named = release_id or run_label(flow_run if flow_run is not None else _this_run())
    resource = {"prefect.resource.id": f"dprelease.release.{named}", "prefect.resource.name": named}
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


def _this_run() -> Any:
    from prefect.context import FlowRunContext

    return getattr(FlowRunContext.get(), "flow_run", None)


def attempt_facts(ledger: Ledger, release_id: str) -> dict[str, Any]:
    """The ledger's state of the attempt (public): its status (``reserved`` while open, and
    then charged its whole plan; ``failed`` once closed, charged the stages spent; None when
    it never reserved), the stages it spent, and those it planned."""
    found = ledger.state(release_id)
    if found is None:
        return {"ledger_status": None, "stages_spent": [], "stages_planned": []}
    (state, spent), rows = found, ledger.rows(release_id=release_id)
    reserved = [r for r in rows if r.kind == "release" and r.status == "reserved"]
    plan = [stage for stage, *_ in reserved[-1].detail_of("plan") or []] if reserved else []
    return {"ledger_status": state.status, "stages_spent": spent, "stages_planned": plan}


def _for_people(epsilon: float, delta: float | None) -> str:
    """A charge rounded to 6 significant digits: float sums such as 0.9999999999999999 read 1."""
    return f"ε = {epsilon:.6g}" + (f", δ = {delta:.6g}" if isinstance(delta, float | int) else "")


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


# ---------------------------------------------------------------- failures


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
    rid = record.release_id
    assert rid is not None  # the body names the release before it can fail here
    if record.reserved and ledger is not None:
        _close_failed(ledger, rid, record.stage, error, sealed)
    path = write_failure_record(record.out, rid, record.stage, error, staging if staging.exists() else None)
    kind = (
        "gated"
        if isinstance(error, GateError)
        else _refusal_kind(ledger, record.dataset, rid)
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
        failure_record=path,
    )
    record.handled = True
    deliver(record.out, notice(rid, kind, events=[event], artifacts=artifacts))
    return path


def _refusal_kind(ledger: Ledger | None, dataset: str | None, rid: str) -> str:
    """``refused``, or ``refused-again`` when the ledger already refused the dataset for the
    very same reason (``ledger.charges.repeated_refusal``): no automation pages on it, so a
    schedule whose period budget is spent pages once per period, not at every slot."""
    if ledger is None or dataset is None:
        return "refused"
    try:
        return (
            "refused-again"
            if repeated_refusal(ledger.entries(dataset=dataset, kinds=("release",)), rid)
            else "refused"
        )
    except DPReleaseError:  # the ledger cannot be read: tell the operator
        return "refused"


def _close_failed(ledger: Ledger, rid: str, stage: str, error: BaseException, sealed: bool) -> None:
    """Mark the attempt failed (charged the stages it spent), also when it was sealed but the
    bundle could not be moved into place; if the ledger itself is what failed, the
    reservation stays open and keeps the whole plan charged (fail closed)."""
    try:
        ledger.finish(rid, "failed", {"stage": stage, "error": type(error).__name__}, after_seal=sealed)
    except DPReleaseError as e:
        _log.warning("release '%s' stays reserved (charged its whole plan) in the ledger: %s", rid, e)
