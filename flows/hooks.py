"""The release flow's ``on_failure`` and ``on_crashed`` hooks: what a run leaves recorded
when its body could not record it itself. They need no server.

**The body ran in this process** (its ``RunRecord``, ``flows/events.py``): it failed before
it had recorded anything (an invalid spec, an existing folder, a refused ``release_id``) or
was interrupted. The hook closes the ledger's reservation as ``failed`` (charged the stages
spent), writes the failure record to ``<out>/failures/`` and sends ``.failed`` (``.refused``
for a budget refusal the body raised before its own record: a deployment's run whose spec
has no budget policy).

**The body did not run here**: the run's process died (``kill -9``, the out-of-memory
killer) and Prefect's worker runs the hook (Prefect 3.9: in a subprocess, in the
deployment's working directory, with the flow run's environment; 3.8: in the worker, after
the deployment's pull step). The hook learns the run from the run itself: its parameters
(the spec, ``out_dir``, ``ledger_url``, ``ledger_password_secret``); its release id as the
body made it (``release_id``, else the spec's, else ``<dataset>-<scheduled time>`` for a
deployment's run, else the run's name, which the flow sets to its release id); and, from
the ledger, what that attempt reserved and spent. The dead run's staging folder (its lock
died with the process) becomes the failure record, or, for a release the ledger had
sealed, is moved into place (``records/recovery.py``). The reservation stays open, charged
its whole plan (fail closed), until ``dprelease ledger settle`` closes it at what it spent:
the event and the alert say so. A relative ``out_dir`` is the run's, taken from the same
working directory. When nothing names the release (its spec no longer loads, or its
``release_id`` was refused), the record and the event say so (``run_label``), never a
made-up id.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, cast

from dprelease.bundle.write import write_failure_record
from dprelease.flows.delivery import deliver
from dprelease.flows.events import RELEASE_ID, RunRecord, forget, notice, release_event, run_label
from dprelease.ledger import BudgetRefused, Ledger, NoLedger, default_url
from dprelease.records.artifacts import bundle_location
from dprelease.records.recovery import ProcessDied, recover
from dprelease.spec import ReleaseSpec, load_spec

__all__ = ["on_crashed", "on_failure", "release_id_of"]

_log = logging.getLogger("dprelease.events")


def on_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_failure`` hook: record a failure the flow body did not (e.g. an invalid spec)."""
    _hook(flow_run, state, "failed")


def on_crashed(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_crashed`` hook: record a crash (the process was interrupted, or killed)."""
    _hook(flow_run, state, "crashed")


def _hook(flow_run: Any, state: Any, what: str) -> None:
    record = forget(flow_run.id)
    if record is not None and record.handled:
        return
    try:
        if record is None:
            _report_dead_run(flow_run, state, what)
        else:
            _record_in_process(record, flow_run, state, what)
    except Exception as e:  # a hook must not hide the run's own failure
        _log.warning("the %s hook could not record the failure (%s)", what, type(e).__name__)


def _error(state: Any, what: str) -> BaseException:
    result = state.result(raise_on_failure=False)
    return result if isinstance(result, BaseException) else RuntimeError(state.message or what)


def _record_in_process(record: RunRecord, flow_run: Any, state: Any, what: str) -> None:
    """The body's record says the stage, the ledger and whether it reserved."""
    error = _error(state, what)
    rid = record.release_id
    ledger = None
    try:
        if record.ledger_url is not None and rid is not None:
            try:  # never created here: a run that failed before its reserve has nothing to record
                ledger = Ledger(record.ledger_url, create=False, password=record.ledger_password)
            except NoLedger:
                ledger = None
            if ledger is not None and record.reserved:
                ledger.finish(
                    rid, "failed", {"stage": record.stage, "error": type(error).__name__, "state": what}
                )
        named = rid or run_label(flow_run)
        facts = None if rid is not None else {"release_id": None, "flow_run": named}
        path = write_failure_record(record.out, named, f"{record.stage} ({what})", error, None, facts)
        kind = "refused" if isinstance(error, BudgetRefused) else "failed"  # e.g. a deployment with no policy
        event = release_event(
            kind,
            release_id=rid,
            dataset=record.dataset,
            ledger=ledger,
            error=error,
            stage=record.stage,
            failure_record=path,
            flow_run=flow_run,
            crashed=what == "crashed",
        )
        deliver(record.out, notice(named, kind, events=[event], flow_run=flow_run))
    finally:
        if ledger is not None:
            ledger.close()


# ---------------------------------------------------------------- a run whose process is gone


def _as_prefect_holds_it(flow_run: Any) -> Any:
    """The flow run as Prefect's API holds it now: the worker's copy was read before the run
    started, so its name is still Prefect's, not the release id. The copy given if the API
    does not answer, or none is set (a hook never starts a temporary server)."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        return flow_run
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return client.read_flow_run(flow_run.id)
    except Exception:
        return flow_run


def _spec(path: Any) -> ReleaseSpec | None:
    try:
        return load_spec(str(path)) if path else None
    except Exception:  # edited or removed since: the ledger and the run's name still tell
        return None


def release_id_of(params: dict[str, Any], flow_run: Any, spec: ReleaseSpec | None) -> str | None:
    """The release id the body gave run ``flow_run`` (``flows/release.py``: ``_run_name`` and
    ``_run``): the ``release_id`` parameter; else the spec's; else, for a deployment's run,
    ``<dataset>-<its scheduled time>``; else the run's name. None when the body could not
    have named it (a refused ``release_id``, a spec that does not load)."""
    given = params.get("release_id")
    if given is not None:
        return given if isinstance(given, str) and RELEASE_ID.fullmatch(given) else None
    if spec is None:
        return None
    if spec.release_id is not None:
        return spec.release_id
    slot = getattr(flow_run, "expected_start_time", None)
    if getattr(flow_run, "deployment_id", None) is not None and slot is not None:
        return spec.resolved_release_id(slot)
    name = getattr(flow_run, "name", None)
    return name if isinstance(name, str) and RELEASE_ID.fullmatch(name) else None


def _ledger(params: dict[str, Any], out: Path) -> tuple[Ledger | None, bool]:
    """The run's ledger, opened as the body opened it (never created here), and whether
    there is none (so the run reserved nothing). (None, False): it cannot be read (the event
    then goes without its facts)."""
    password = None
    try:
        secret = params.get("ledger_password_secret")
        if secret:
            from prefect.blocks.system import Secret

            password = cast(Secret, Secret.load(str(secret))).get()
        url = str(params.get("ledger_url") or default_url(out))
        return Ledger(url, create=False, password=password), False
    except NoLedger:
        return None, True
    except Exception as e:  # unreachable, refused (a LedgerError), or the Secret block
        _log.warning("the crash hook could not read the ledger (%s)", type(e).__name__)
        return None, False


def _report_dead_run(flow_run: Any, state: Any, what: str) -> None:
    """Record a run whose body did not run in this process (see the module's docstring)."""
    run = _as_prefect_holds_it(flow_run)
    params = dict(getattr(run, "parameters", None) or {})
    out = Path(str(params.get("out_dir") or "releases")).absolute()
    spec = _spec(params.get("spec_path"))
    rid = release_id_of(params, run, spec)
    ledger, no_ledger = _ledger(params, out)
    try:
        recovered = recover(out, ledger, rid) if rid is not None else []
        found = ledger.state(rid) if ledger is not None and rid is not None else None
        attempt = None if found is None else found[0]
        dataset = spec.dataset.name if spec is not None else None if attempt is None else attempt.dataset
        status = None if attempt is None else attempt.status
        sealed_by_it = attempt is not None and attempt.detail_of("flow_run_id") == str(run.id)
        if rid is not None and status in ("released", "gated") and sealed_by_it and os.path.isdir(out / rid):
            _report_sealed(out, rid, dataset, ledger, status == "released", params, run)
            return
        named = rid or run_label(run)
        if what == "crashed":
            error: BaseException = ProcessDied(f"the process of {named} died (Prefect: {state.message})")
            stage = "unknown: its process died"
        else:
            error, stage = _error(state, what), "before the flow's body ran (failed)"
        path = next((r.path for r in recovered if r.outcome == "failure record"), None)
        if path is None:
            facts = {"flow_run": str(run.id), **({} if rid is not None else {"release_id": None})}
            path = write_failure_record(out, named, stage, error, None, facts)
        kind = "refused" if isinstance(error, BudgetRefused) else "failed"
        event = release_event(
            kind,
            release_id=rid,
            dataset=dataset,
            ledger=ledger,
            error=error,
            failure_record=path,
            flow_run=run,
            crashed=what == "crashed",
            no_ledger=no_ledger,
        )
        deliver(out, notice(named, kind, events=[event], flow_run=run))
    finally:
        if ledger is not None:
            ledger.close()


def _report_sealed(
    out: Path,
    rid: str,
    dataset: str | None,
    ledger: Ledger | None,
    published: bool,
    params: dict[str, Any],
    run: Any,
) -> None:
    """The ledger had sealed the release for this run and its bundle is in place (moved there
    now, or before the process died): the release stands, and its event says so."""
    public_url = params.get("public_url") if isinstance(params.get("public_url"), str) else None
    where = bundle_location(out / rid, public_url, published=published)
    kind = "completed" if published else "gated"
    event = release_event(kind, release_id=rid, dataset=dataset, ledger=ledger, where=where, flow_run=run)
    deliver(out, notice(rid, kind, events=[event], flow_run=run, completed=published))
