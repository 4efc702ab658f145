"""The release flow, in the order of the design card. Under ``mechanism: auto``, first the
ledger's refusal (recorded), then the rule's choice on the rows counted without parsing a
value (``_choose``). Then the rehearsal
(``flows/rehearsal.py``): the whole path that needs no confidential value, run on a table
drawn from the public schema alone, so that a spec that would fail after the noise is
drawn is refused (exit 2) before anything is reserved. Then budget allocation (the plan
divides ε, δ across the stages and is reserved in the ledger before any data is read),
input validation, type encoding, private moment estimation, projection and sampling,
decoding (and the synthetic table's validation), the differentially private gates, the
advisory utility and linkage checks, and the release bundle: the steps of
``flows/pipeline.py``, each a Prefect task, which the rehearsal runs as plain functions.

A failure at any step publishes nothing: the staging folder is removed and a failure
record (stage, error, internal reports) is left in ``<out>/failures/``. A run that dies
(``kill -9``) leaves its staging folder unlocked; the next run into the same ``<out>``
(or ``dprelease recover``) turns it into a failure record (``records/recovery.py``).

Once the ledger has sealed the bundle and it is in place, the release is published and
nothing after changes that: Prefect's artifacts and event are sent best effort, within a
bounded time, and queued in ``<out>/.undelivered/`` when its API is unreachable
(``flows/events.py``); a retry of the same flow run reports the existing bundle.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.runtime import deployment, flow_run

from dprelease.bundle.staging import prepare_staging
from dprelease.checks.gates import GateError, failed_gates_message
from dprelease.engines.inputs import InputRefused, resolve_mechanism
from dprelease.flows.concurrency import DatasetSlot
from dprelease.flows.delivery import deliver, send_undelivered
from dprelease.flows.events import (
    RELEASE_ID,
    RunRecord,
    notice,
    record_failure,
    release_event,
    track,
    untrack,
)
from dprelease.flows.hooks import on_crashed, on_failure
from dprelease.flows.pipeline import Run, release_steps
from dprelease.flows.progress import STAGES, set_progress, step_reached
from dprelease.flows.rehearsal import rehearse
from dprelease.flows.run import refuse_first
from dprelease.ledger import PASSWORD_ENV, BudgetRefused, Ledger, NoLedger, default_url, parse_url
from dprelease.ledger.identity import checked_reason
from dprelease.mechanisms.auto import AUTO
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.primitives import Streams, release_streams
from dprelease.records.artifacts import bundle_location, check_public_url, release_artifacts
from dprelease.records.recovery import log_recovered, published_by_run, recover
from dprelease.spec import ReleaseSpec, load_spec
from dprelease.spec.resources import check_resources
from dprelease.spec.sections import NEEDS_POLICY
from dprelease.tasks.scrub import scrub

__all__ = ["STAGES", "forget_outcome", "release", "run_outcome", "set_progress"]

_log = logging.getLogger("dprelease.release")


def _slot_time(now: datetime) -> datetime:
    """A deployment's run is named after its scheduled time, so a retried or late run of
    the same slot gets the same release_id (and the ledger refuses to spend it twice);
    a direct call is named after now."""
    if deployment.id is None or flow_run.scheduled_start_time is None:
        return now
    return datetime.fromtimestamp(flow_run.scheduled_start_time.timestamp(), UTC)


_NAMED_AT: dict[str, datetime] = {}  # flow run id -> the time its name (its release id) was made from


def _run_name() -> str:
    """The flow run's name: its release id (public), as the body resolves it (the
    ``release_id`` parameter, else the spec's, else ``<dataset>-<slot time>``), made from
    the time the body then takes as its start. Never raises (Prefect would crash the run
    before its hooks): a release_id or spec the body will refuse keeps Prefect's name."""
    params = flow_run.parameters
    now = _NAMED_AT[str(flow_run.id)] = datetime.now(UTC)
    given = params.get("release_id")
    if given is not None:
        return given if isinstance(given, str) and RELEASE_ID.fullmatch(given) else flow_run.name
    try:
        return load_spec(params["spec_path"]).resolved_release_id(_slot_time(now))
    except Exception:  # the body says what is wrong with the spec
        return flow_run.name


_OUTCOME: dict[str, Any] = {}  # the last run of the flow body in this process: see run_outcome


def forget_outcome() -> None:
    """Forget the last run's outcome, before a caller runs the flow and may ask
    ``run_outcome`` (a process may run the flow more than once: tests, notebooks)."""
    _OUTCOME.clear()


def run_outcome() -> tuple[str | None, BaseException | None] | None:
    """What the last run of the flow's body in this process did: (bundle, None) when it
    published its release (or found it published by this same run), (None, error) when it
    raised ``error``, None when no body ran. A caller that gets an error from Prefect itself
    (its API went away, so the run's final state could not be reported) asks this: what the
    body did stands (``cli/main.py``)."""
    if not _OUTCOME:
        return None
    return _OUTCOME.get("path"), _OUTCOME.get("error")


def _in_place(sealed: bool, dest: Path, staging: Path) -> bool:
    """The ledger sealed the bundle and it was renamed into place: published (or gated)."""
    return sealed and os.path.isdir(dest) and not dest.is_symlink() and not staging.exists()


def _refused_first(spec: ReleaseSpec, record: RunRecord, rid: str, new_dataset: str | None) -> None:
    """The ledger's refusal, decided in the flow's body before anything else runs and
    recorded as the reserve records it (``flows.run.refuse_first``: the rerun rule and the
    budget policy, neither of which depends on the data or on ``auto``'s choice). An expected
    refusal so never happens inside a task, whose engine would log it with its traceback; the
    reserve still decides again under the ledger's lock."""
    url = record.ledger_url or default_url(record.out)
    try:
        book = Ledger(url, create=False, password=record.ledger_password)
    except NoLedger:  # a first release: nothing to refuse yet (the reserve still decides)
        return
    with book:
        log_recovered(recover(record.out, book))  # what dead runs left holds budget until recovered
        try:
            refuse_first(book, spec, rid, rid, new_dataset)
        except BudgetRefused as e:
            record.stage = "allocate_budget"
            record_failure(record, book, e, record.out / f".not-staged-{rid}", False)
            raise


def _choose(spec: ReleaseSpec, rid: str, streams: Streams) -> ReleaseSpec:
    """``mechanism: auto`` resolved in a sound order, after the ledger's refusal
    (``_refused_first``), whatever the data file holds: the rule on the public n, counted
    without parsing a value (``engines.inputs.public_rows``), and the rows the release fits:
    on a streaming engine those its holdout coin keeps with the release's own row keys. Then
    the rehearsal and the reserve run the chosen mechanism's plan."""
    chosen = resolve_mechanism(spec, streams.row_keys if spec.engine.streaming else None)
    # the reason quotes the count, which the readers confirm only after the reserve (check_rows):
    # release.json states it then; Prefect hears the name, which the reserved plan shows anyway
    get_run_logger().info("mechanism auto chose %s (release.json states why)", chosen.mechanism.name)
    return chosen


def _retried(record: RunRecord, out: Path, rid: str) -> Path | None:
    """This flow run already published ``rid`` (a retry of a run whose end Prefect could not
    record, or a run retried by hand): its bundle, after checking it against the ledger's
    seal (``records.recovery.published_by_run``). None: a fresh attempt (which the checks that
    follow may refuse, e.g. because the release_id exists)."""
    if flow_run.id is None:
        return None
    dest = out / rid
    if not os.path.lexists(dest) and not any(out.glob(f".staging-{rid}-*")):
        return None
    try:
        url = record.ledger_url or default_url(out)
        with Ledger(url, create=False, password=record.ledger_password) as book:
            return published_by_run(book, out, rid, str(flow_run.id))
    except DPReleaseError:
        return None


@flow(
    name="dp-release",
    flow_run_name=_run_name,
    on_failure=[on_failure],
    on_crashed=[on_crashed],
    # A failed run's exception is persisted by Prefect whatever persist_result says (its
    # flow engine writes failure states unconditionally); as JSON it is only the type and
    # the (scrubbed) message, never a pickled object that carries the original error.
    persist_result=False,
    result_serializer="json",
)
def release(
    spec_path: str,
    out_dir: str = "releases",
    release_id: str | None = None,
    insecure_seed: int | None = None,
    ledger_url: str | None = None,
    ledger_password_secret: str | None = None,
    public_url: str | None = None,
    new_dataset: str | None = None,
) -> str:
    """Run one release of the spec at ``spec_path`` into ``out_dir``; returns the bundle.

    ``insecure_seed`` makes the noise reproducible; the bundle then says it is not fit
    for publication. Without it every draw comes from OS entropy. ``ledger_url``: the
    budget ledger (default ``sqlite:///<out_dir>/ledger.db``), without a password: Prefect
    stores flow parameters, so the database password comes from the environment
    (``DPRELEASE_LEDGER_PASSWORD``) or from the Prefect Secret block named by
    ``ledger_password_secret``. ``release_id``: default the spec's, else
    ``<dataset>-<time>`` with the scheduled time of a deployment's run. ``public_url``:
    the URL prefix under which each bundle's ``public/`` folder is served (e.g.
    ``https://data.example.org/releases``); the artifacts and the event then name
    ``<public_url>/<release_id>/public/`` beside the bundle's absolute path and host.
    Serve only the ``<release_id>/public/`` folders, never ``out_dir`` as a whole: its
    ``internal/`` folders, ``failures/`` and ``ledger.db`` are confidential. ``new_dataset``:
    the steward's reason why this dataset is new though another dataset name in the ledger
    has the same public schema (recorded in the ledger; without it such a release is
    refused before any read, ``ledger.identity``).

    Once the ledger has sealed the bundle and it is in place, the release is published:
    the artifacts and the event are sent best effort (``flows.delivery.deliver``: queued in
    ``<out_dir>/.undelivered/`` if Prefect's API is unreachable), and a retry of this same
    flow run reports the existing bundle instead of running again.
    """
    _OUTCOME.clear()
    try:
        path = _run(
            spec_path,
            out_dir,
            release_id,
            insecure_seed,
            ledger_url,
            ledger_password_secret,
            public_url,
            new_dataset,
        )
    except BaseException as e:
        # Prefect logs and persists what the flow raises: never an unscrubbed message
        safe = scrub(e, "the release flow") if isinstance(e, Exception) else e
        _OUTCOME["error"] = safe
        if isinstance(safe, BudgetRefused) and deployment.id is not None:
            return _refused(safe)
        if safe is e:
            raise
        raise safe from None
    _OUTCOME["path"] = path
    return path


def _refused(error: BudgetRefused) -> Any:
    """A deployment's run refused by the ledger (the budget policy, the rerun rule) or for
    want of a budget policy, before any reservation, so that nothing was read or spent, ends
    in a state of type Completed named ``Refused``, with the reason as its message, and one
    log line: an expected outcome of a schedule. A Failed state would make Prefect's engine
    log the exception with its traceback in the worker's log (141 lines and 7 ERROR lines per
    refusal in issue 42's operator trial), and retry the run if the deployment retries. The
    failure hook, which Prefect then does not run, is called here: it reports a refusal the
    body had not recorded (``flows.hooks``). A run outside a deployment (the CLI, the Python
    API) raises the refusal as before."""
    from prefect.context import FlowRunContext
    from prefect.states import Completed, Failed

    ctx = FlowRunContext.get()
    if ctx is not None and ctx.flow_run is not None:
        on_failure(ctx.flow, ctx.flow_run, Failed(message=str(error), data=error))
    get_run_logger().warning("refused; nothing was read or spent: %s", error)
    return Completed(name="Refused", message=str(error))


def _run(
    spec_path: str,
    out_dir: str,
    release_id: str | None,
    insecure_seed: int | None,
    ledger_url: str | None,
    ledger_password_secret: str | None,
    public_url: str | None,
    new_dataset: str | None,
) -> str:
    """The flow's body (``release``)."""
    started = _NAMED_AT.pop(str(flow_run.id), None) or datetime.now(UTC)  # the time in the run's name
    out = Path(out_dir)
    record = track(flow_run.id, RunRecord(out))
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(f"release_id ({release_id!r}) must match [a-z0-9][a-z0-9-]*")
    public_url = check_public_url(public_url)
    new_dataset = checked_reason(new_dataset)
    record.release_id = release_id  # only once it is safe as a folder name
    spec = load_spec(spec_path)
    spec.refuse_draft()
    rid = release_id or spec.resolved_release_id(_slot_time(started))
    record.release_id, record.dataset, record.stage = rid, spec.dataset.name, "prepare"
    if deployment.id is not None and not spec.privacy.has_policy:  # a scheduled release: before any read
        raise BudgetRefused(
            f"the spec {spec_path} of this deployment declares no budget policy: {NEEDS_POLICY}"
        )
    given = None if ledger_url is None else parse_url(ledger_url)  # refuses any other secret
    if given is not None and given.password is not None:
        raise DPReleaseError(
            "ledger_url must not contain a password (Prefect stores flow parameters); set "
            f"{PASSWORD_ENV} in the flow's environment or name a Prefect Secret block with "
            "ledger_password_secret"
        )
    record.ledger_url = default_url(out) if given is None else given.url
    if ledger_password_secret is not None:
        from prefect.blocks.system import Secret

        record.ledger_password = cast(Secret, Secret.load(ledger_password_secret)).get()
    done = _retried(record, out, rid)
    if done is not None:
        get_run_logger().warning(
            "release '%s' was already published by this flow run (sealed in the ledger, bundle in place at "
            "'%s'): nothing was run and nothing spent",
            rid,
            done.resolve(),
        )
        send_undelivered(out)
        untrack(flow_run.id)
        return str(done)
    _refused_first(spec, record, rid, new_dataset)
    streams = release_streams(insecure_seed)
    if spec.mechanism.name == AUTO:
        spec = _choose(spec, rid, streams)
    check_resources(spec)  # before the rehearsal: the memory and time it and the release would need
    step_reached(record, "rehearse")
    for warning in rehearse(spec, rid, insecure_seed=insecure_seed).warnings:  # before the reserve
        get_run_logger().warning(warning)
    held = prepare_staging(out, rid)  # locked while this run lives (bundle/staging.py)
    dest, staging = held.dest, held.path
    ledger: Ledger | None = None
    run: Run | None = None
    slot = DatasetSlot(spec.dataset.name)  # one release of a dataset at a time (flows/concurrency.py)
    try:
        try:
            slot.acquire()  # waits while another release of this dataset runs; before the ledger is opened
            ledger = Ledger(record.ledger_url, password=record.ledger_password)
            log_recovered(recover(out, ledger))  # what dead runs left in this --out
            send_undelivered(out)  # what earlier runs could not tell Prefect
            run = Run(spec, ledger, rid, record, new_dataset=new_dataset)
            release_steps(run, staging, dest, streams, started=started, insecure_seed=insecure_seed)
        except BaseException as e:
            sealed = run is not None and run.sealed
            if not _in_place(sealed, dest, staging):
                failure = record_failure(record, ledger, e, staging, sealed)
                if isinstance(e, InputRefused):  # the detail is in the record, never in Prefect
                    raise e.recorded(str(failure)) from None
                safe = scrub(e, f"stage '{record.stage}'") if isinstance(e, Exception) else e
                if safe is e:
                    raise
                raise safe from None  # Prefect logs the flow's exception message: never an unscrubbed one
            record.reserved = False
            if not isinstance(e, Exception):
                record.handled = True  # interrupted after the bundle was sealed and in place: it stands
                raise
            _log.warning(  # e.g. Prefect could not record the task's end: the bundle stands
                "release '%s': write_bundle reported %s after the ledger sealed the bundle and it was moved "
                "into place; the release stands",
                rid,
                type(e).__name__,
            )
        finally:
            held.unlock()
        # The ledger sealed the bundle and it is in place: from here on nothing changes the
        # outcome. Prefect hears of it best effort (flows/events.py), never at its cost.
        assert run is not None and run.outcome is not None  # sealed: the steps made their outcome
        document, gates, passed = run.outcome.document, run.outcome.gates, run.outcome.passed
        record.reserved = False
        where = bundle_location(dest, public_url, published=passed)
        try:
            artifacts = release_artifacts(
                rid, document, where, gates, published=passed, ledger=ledger, dataset=spec.dataset.name
            )
        except Exception as e:  # never at the release's cost
            _log.warning("release '%s': its Prefect artifacts could not be made (%s)", rid, type(e).__name__)
            artifacts = []
        if not passed:
            stopped = GateError(failed_gates_message(gates, str(dest / "internal")))
            stopped.internal_dir = str(dest / "internal")
            record_failure(record, ledger, stopped, staging, True, artifacts=artifacts, where=where)
            raise stopped
        event = release_event(
            "completed", release_id=rid, dataset=spec.dataset.name, ledger=ledger, where=where
        )
        deliver(out, notice(rid, "completed", events=[event], artifacts=artifacts, completed=True))
    finally:
        if ledger is not None:
            ledger.close()
        slot.release()
    untrack(flow_run.id)
    return str(dest)
