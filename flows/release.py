"""The release flow, in the order of the design card: budget allocation first (the plan
divides ε, δ across the stages and is reserved in the ledger before any data is read),
then input validation, type encoding, private moment estimation, projection and
sampling, decoding (and the synthetic table's validation), the differentially private
gates, the advisory utility and linkage checks, and the release bundle.

Each step is a Prefect task. A step that may draw noise runs inside the ledger's spend
bracket (``Ledger.spending``): its plan stages are recorded as spent before it runs and
its measurements after. Randomness comes from named streams (``primitives.Streams``).
Engines (``spec.engine``): ``memory`` reads the table and runs any mechanism;
``local`` and ``dask`` stream a synthesizer that declares ``Streaming`` in two passes
over chunks and write the synthetic rows chunk by chunk.

A failure at any step publishes nothing: the staging folder is removed and a failure
record (stage, error, internal reports) is left in ``<out>/failures/``. A run that dies
(``kill -9``) leaves its staging folder unlocked; the next run into the same ``<out>``
(or ``dprelease recover``) turns it into a failure record (``flows/recovery.py``).

Once the ledger has sealed the bundle and it is in place, the release is published and
nothing after changes that: Prefect's artifacts and event are sent best effort, within a
bounded time, and queued in ``<out>/.undelivered/`` when its API is unreachable
(``flows/events.py``); a retry of the same flow run reports the existing bundle.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from prefect import flow, get_run_logger
from prefect.runtime import deployment, flow_run

from bundle.document import release_document
from bundle.published import Layout, publishable
from bundle.staging import prepare_staging
from checks.gates import GateError, failed_gates_message
from engines.inputs import check_rows, holdout_split
from engines.runners import open_engine
from engines.tables import table_to_bins, table_to_rows
from flows.artifacts import bundle_location, check_public_url, release_artifacts
from flows.concurrency import DatasetSlot
from flows.events import (
    RELEASE_ID,
    RunRecord,
    deliver,
    notice,
    on_crashed,
    on_failure,
    record_failure,
    release_event,
    send_undelivered,
    track,
    untrack,
)
from flows.progress import STAGES, rows_done, set_progress, step_detail, step_reached
from flows.recovery import log_recovered, published_by_run, recover
from ledger import PASSWORD_ENV, Ledger, default_url, ledger_facts, split_password
from mechanisms.accounting import BudgetPlan
from mechanisms.errors import DPReleaseError
from mechanisms.gates import GATES_STAGE, GateResult
from mechanisms.primitives import Measurement, Streams, release_streams, sampler_note
from mechanisms.registry import MECHANISMS
from mechanisms.rowkeys import RowKeys
from mechanisms.synthesizer import Stage
from spec import ReleaseSpec, load_spec
from tasks.budget import allocate_budget
from tasks.post_release import check_gates, check_linkage, check_utility, write_report
from tasks.publish import write_bundle
from tasks.scrub import scrub
from tasks.streaming import (
    chunk_job,
    scan_input,
    stream_decode,
    stream_encode,
    stream_estimate,
    stream_sample,
    streaming_steps,
)
from tasks.synthesis import decode, encode, estimate_private_moments, project_and_sample
from tasks.validate import validate_input, validate_output

__all__ = ["STAGES", "forget_outcome", "release", "run_outcome", "set_progress"]

_log = logging.getLogger("dprelease.release")


@dataclass
class _Fitted:
    """What the synthesis left for the rest of the flow: n, the fitted count, m, the
    stages (their measurements and facts), the rows the checks see (all of them, or the
    streaming engines' samples), the synthetic table (``None`` when it was already
    written, chunk by chunk) and public facts about the engine."""

    n: int
    n_fitted: int
    m: int
    stages: list[Stage]
    real: tuple[pd.DataFrame, np.ndarray]
    holdout: pd.DataFrame | None
    synthetic_for_checks: pd.DataFrame
    synthetic: pd.DataFrame | None
    engine: dict


@dataclass
class _Release:
    """One run: the spec, the ledger, this release's id and plan, and the hooks' record."""

    spec: ReleaseSpec
    ledger: Ledger
    rid: str
    plan: BudgetPlan
    record: RunRecord

    def at(self, step: str) -> None:
        step_reached(self.record, step)

    def spending(self, step: str) -> AbstractContextManager[Callable[[tuple[Measurement, ...]], None]]:
        """The ledger's spend bracket around the mechanism's ``step`` (``encode``,
        ``estimate`` or ``sample``): the plan stages it declares (``Synthesizer.spends``)."""
        synth = MECHANISMS[self.spec.mechanism.name]
        planned = {s.stage for s in self.plan.stages}
        declared = [s for s in synth.spends.get(step, ()) if s in planned]
        not_dp = bool(synth.defects(self.spec.mechanism_params()))
        return self.ledger.spending(self.rid, declared, self.plan, not_dp=not_dp)


def _warn(messages: list[str]) -> None:
    """The forecast's warnings (public facts: ε, n, the bins) in the run's log."""
    for message in messages:
        get_run_logger().warning(message)


def _synthesise(r: _Release, staging: Path, streams: Streams) -> _Fitted:
    """The memory engine: input validation, the holdout split, type encoding, private
    moment estimation, projection and sampling, decoding, the output's validation."""
    spec, internal = r.spec, staging / "internal"
    schema, params, name = spec.public_schema(), spec.mechanism_params(), spec.mechanism.name
    r.at("validate_input")
    table = validate_input(spec, internal)
    _warn(check_rows(spec, len(table)))  # n is public: too few rows, δ ≥ 1/n, noise ≥ n: before any noise
    train, holdout = holdout_split(table, spec.checks.holdout_fraction, streams.holdout)
    train_bins = table_to_bins(train, schema)  # once: for encode and for the checks
    m = spec.synthetic_rows or len(train)
    r.at("encode")
    with r.spending("encode") as record:
        encoded = encode(
            name, table_to_rows(train, train_bins, schema), schema, r.plan, params, streams.encode
        )
        record(encoded.measurements)
    r.at("estimate_private_moments")
    with r.spending("estimate") as record:
        moments = estimate_private_moments(name, encoded.state, r.plan, params, streams.estimate)
        record(moments.measurements)
    r.at("project_and_sample")
    with r.spending("sample") as record:
        sampled = project_and_sample(name, moments.state, params, m, streams.sample)
        record(sampled.measurements)
    r.at("decode")
    synthetic = decode(name, sampled.state, schema, params, streams.decode)
    r.at("validate_output")
    validate_output(synthetic, schema, internal)
    stages = [encoded, moments, sampled]
    return _Fitted(
        len(table),
        len(train),
        m,
        stages,
        (train, train_bins),
        holdout,
        synthetic,
        synthetic,
        {"name": "memory"},
    )


def _synthesise_streaming(r: _Release, staging: Path, streams: Streams) -> _Fitted:
    """The local and dask engines: pass 1 validates every chunk and sums the fitted rows'
    histograms (input validation); the encode step on the sums; pass 2 sums the
    mechanism's statistic and the estimate step measures it once; projection; synthetic
    rows drawn, decoded, validated and written chunk by chunk. The checks see samples."""
    spec = r.spec
    schema, params, steps = spec.public_schema(), spec.mechanism_params(), streaming_steps(spec)
    job = chunk_job(spec, RowKeys.draw(streams.holdout))
    engine = open_engine(spec.engine, spec.data_path)
    try:
        r.at("validate_input")
        scan = scan_input(engine, job, staging / "internal", rows_done("validate_input"))
        _warn(check_rows(spec, scan.rows, fitted=scan.fitted))
        r.at("encode")
        with r.spending("encode") as record:
            encoded = stream_encode(steps, scan, schema, r.plan, params, streams.encode)
            record(encoded.measurements)
        r.at("estimate_private_moments")
        with r.spending("estimate") as record:
            moments = stream_estimate(
                steps,
                engine,
                job,
                encoded.state,
                scan.fitted,
                r.plan,
                params,
                streams.estimate,
                rows_done("estimate_private_moments"),
            )
            record(moments.measurements)
        facts = engine.describe()
    finally:
        engine.close()
    r.at("project_and_sample")
    with r.spending("sample") as record:
        sampled = stream_sample(steps, moments.state, params)
        record(sampled.measurements)
    r.at("decode")
    m, k = spec.synthetic_rows or scan.fitted, spec.checks.sample_rows
    written = stream_decode(
        steps,
        sampled.state,
        schema,
        m,
        spec.engine.chunk_rows,
        spec.output_formats,
        k,
        staging,
        streams.decode,
        rows_done("decode"),
        Layout.of(spec),
    )
    fitted_sample, held_sample = scan.samples()
    counting = "; before them, a pass counting each chunk's rows" if facts.get("counting_pass") else ""
    return _Fitted(
        scan.rows,
        scan.fitted,
        m,
        [encoded, moments, sampled],
        (fitted_sample, table_to_bins(fitted_sample, schema)),
        held_sample if spec.checks.holdout_fraction else None,
        written.sample,
        None,
        {
            **facts,
            "passes": "pass 1: validation and histograms; pass 2: the mechanism's statistic summed "
            "over chunks" + counting,
            "holdout": "each row held out with probability holdout_fraction, by its position only",
            "checks_sample": {
                "rows": k,
                "note": "the checks ran on uniform samples of at most this many fitted, held-out and "
                "synthetic rows",
            },
            "synthetic_chunks": written.chunks,
        },
    )


def _gates(r: _Release, fit: _Fitted, rng: np.random.Generator) -> list[GateResult]:
    """The DP gates: noisy metrics on the compared rows, charged to the ``gates`` stage."""
    if not r.spec.checks.gates:
        return []
    schema = r.spec.public_schema()
    r.at("check_gates")
    bounds = {k: g.model_dump() for k, g in r.spec.checks.gates.items()}
    syn = (fit.synthetic_for_checks, table_to_bins(fit.synthetic_for_checks, schema))
    with r.ledger.spending(r.rid, [GATES_STAGE], r.plan) as record:
        measurements, results = check_gates(fit.real, syn, schema, bounds, r.plan.stage(GATES_STAGE), rng)
        record(measurements)
    fit.stages.append(Stage(None, tuple(measurements)))
    return results


def _advisory_checks(
    r: _Release,
    fit: _Fitted,
    gates: list[GateResult],
    document: dict,
    staging: Path,
    rng: np.random.Generator,
) -> None:
    """Utility and linkage checks and the internal report: advisory, internal only; they
    never change what is published, the exit code or an event."""
    spec, internal = r.spec, staging / "internal"
    schema = spec.public_schema()
    syn = (fit.synthetic_for_checks, table_to_bins(fit.synthetic_for_checks, schema))
    held = None if fit.holdout is None else (fit.holdout, table_to_bins(fit.holdout, schema))
    keeps_order = MECHANISMS[spec.mechanism.name].keeps_row_order
    r.at("check_utility")  # the utility and linkage checks run at once (issue 18), each on its own generator
    utility_rng, linkage_rng = rng.spawn(2)
    checks = (
        check_utility.submit(
            fit.real,
            syn,
            schema,
            spec.checks.target,
            held,
            internal,
            utility_rng,
            step_detail("check_utility"),
        ),
        check_linkage.submit(
            fit.real, syn, schema, keeps_order, held, internal, linkage_rng, step_detail("check_linkage")
        ),
    )
    for check in checks:  # both end before either's error is raised: neither writes into a moved folder
        check.wait()
    utility = checks[0].result()
    r.at("check_linkage")
    linkage = checks[1].result()
    r.at("write_report")
    write_report(fit.real, syn, schema, utility, linkage, [g.as_dict() for g in gates], document, internal)


def _undeclared_stages(spec: ReleaseSpec, plan: BudgetPlan) -> list[str]:
    spends = MECHANISMS[spec.mechanism.name].spends
    declared = {s for stages in spends.values() for s in stages} | {GATES_STAGE}
    return sorted({s.stage for s in plan.stages} - declared)


def _slot_time(now: datetime) -> datetime:
    """A deployment's run is named after its scheduled time, so a retried or late run of
    the same slot gets the same release_id (and the ledger refuses to spend it twice);
    a direct call is named after now."""
    if deployment.id is None or flow_run.scheduled_start_time is None:
        return now
    return datetime.fromtimestamp(flow_run.scheduled_start_time.timestamp(), UTC)


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
    body did stands (``flows/cli.py``)."""
    if not _OUTCOME:
        return None
    return _OUTCOME.get("path"), _OUTCOME.get("error")


def _in_place(sealed: bool, dest: Path, staging: Path) -> bool:
    """The ledger sealed the bundle and it was renamed into place: published (or gated)."""
    return sealed and os.path.isdir(dest) and not dest.is_symlink() and not staging.exists()


def _retried(record: RunRecord, out: Path, rid: str) -> Path | None:
    """This flow run already published ``rid`` (a retry of a run whose end Prefect could not
    record, or a run retried by hand): its bundle, after checking it against the ledger's
    seal (``flows.recovery.published_by_run``). None: a fresh attempt (which the checks that
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
) -> str:
    """Run one release of the spec at ``spec_path`` into ``out_dir``; returns the bundle.

    ``insecure_seed`` makes the noise reproducible; the bundle then says it is not fit
    for publication. Without it every draw comes from OS entropy. ``ledger_url``: the
    budget ledger (default ``sqlite:///<out_dir>/ledger.db``), without a password: Prefect
    stores flow parameters, so the database password comes from the environment
    (``DPRELEASE_LEDGER_PASSWORD``) or from the Prefect Secret block named by
    ``ledger_password_secret``. ``release_id``: default the spec's, else
    ``<dataset>-<time>`` with the scheduled time of a deployment's run. ``public_url``:
    where ``out_dir`` is reachable by the bundle's readers (e.g.
    ``https://data.example.org/releases``); the artifacts and the event then name
    ``<public_url>/<release_id>/public/`` beside the bundle's absolute path and host.

    Once the ledger has sealed the bundle and it is in place, the release is published:
    the artifacts and the event are sent best effort (``flows.events.deliver``: queued in
    ``<out_dir>/.undelivered/`` if Prefect's API is unreachable), and a retry of this same
    flow run reports the existing bundle instead of running again.
    """
    _OUTCOME.clear()
    try:
        path = _run(
            spec_path, out_dir, release_id, insecure_seed, ledger_url, ledger_password_secret, public_url
        )
    except BaseException as e:
        # Prefect logs and persists what the flow raises: never an unscrubbed message
        safe = scrub(e, "the release flow") if isinstance(e, Exception) else e
        _OUTCOME["error"] = safe
        if safe is e:
            raise
        raise safe from None
    _OUTCOME["path"] = path
    return path


def _run(
    spec_path: str,
    out_dir: str,
    release_id: str | None,
    insecure_seed: int | None,
    ledger_url: str | None,
    ledger_password_secret: str | None,
    public_url: str | None,
) -> str:
    """The flow's body (``release``)."""
    started = datetime.now(UTC)
    out = Path(out_dir)
    record = track(flow_run.id, RunRecord(out))
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(f"release_id ({release_id!r}) must match [a-z0-9][a-z0-9-]*")
    public_url = check_public_url(public_url)
    record.release_id = release_id  # only once it is safe as a folder name
    spec = load_spec(spec_path)
    spec.refuse_draft()
    rid = release_id or spec.resolved_release_id(_slot_time(started))
    record.release_id, record.dataset, record.stage = rid, spec.dataset.name, "prepare"
    if ledger_url is not None and split_password(ledger_url)[1] is not None:
        raise DPReleaseError(
            "ledger_url must not contain a password (Prefect stores flow parameters); set "
            f"{PASSWORD_ENV} in the flow's environment or name a Prefect Secret block with "
            "ledger_password_secret"
        )
    record.ledger_url = ledger_url or default_url(out)
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
    held = prepare_staging(out, rid)  # locked while this run lives (bundle/staging.py)
    dest, staging = held.dest, held.path
    streams = release_streams(insecure_seed)
    ledger: Ledger | None = None
    sealed = False
    slot = DatasetSlot(spec.dataset.name)  # one release of a dataset at a time (flows/concurrency.py)
    try:
        try:
            slot.acquire()  # waits while another release of this dataset runs; before the ledger is opened
            ledger = Ledger(record.ledger_url, password=record.ledger_password)
            log_recovered(recover(out, ledger))  # what dead runs left in this --out
            send_undelivered(out)  # what earlier runs could not tell Prefect
            step_reached(record, "allocate_budget")
            plan = allocate_budget(spec, staging / "public", ledger, rid)  # before the data is read
            record.reserved = True
            if undeclared := _undeclared_stages(spec, plan):
                raise DPReleaseError(
                    f"internal error: {spec.mechanism.name} does not say which step spends "
                    f"stage(s) {undeclared}"
                )
            r = _Release(spec, ledger, rid, plan, record)
            fit = (_synthesise_streaming if spec.engine.streaming else _synthesise)(r, staging, streams)
            gates = _gates(r, fit, streams.gates)
            passed = all(g.passed for g in gates)
            document = release_document(
                spec,
                rid,
                plan,
                [mm for st in fit.stages for mm in st.measurements],
                n=fit.n,
                m=fit.m,
                facts={k: v for st in fit.stages for k, v in st.facts.items()},
                insecure_seed=insecure_seed,
                started=started,
                status="released" if passed else "gated",
                n_fitted=fit.n_fitted,
                ledger_record=ledger_facts(ledger, spec.dataset.name, rid),
                numerics=sampler_note(streams.estimate),
                engine=fit.engine,
                gates=[g.as_dict() for g in gates],
                compared_rows=len(fit.real[0]),
            )
            if spec.checks.enabled:
                _advisory_checks(r, fit, gates, document, staging, streams.checks)
            r.at("write_bundle")
            book = ledger

            def seal(public_sha256: str | None, internal_sha256: str) -> None:
                nonlocal sealed
                book.finish(
                    rid,
                    "released" if passed else "gated",
                    {
                        "manifest_sha256": public_sha256 or internal_sha256,
                        "public_manifest_sha256": public_sha256,
                        "internal_manifest_sha256": internal_sha256,
                        "bundle": str(dest.resolve()),
                        "flow_run_id": None if flow_run.id is None else str(flow_run.id),
                    },
                )
                sealed = True

            published = None if fit.synthetic is None else publishable(fit.synthetic, Layout.of(spec))
            write_bundle(staging, dest, published, document, publish=passed, seal=seal)
        except BaseException as e:
            if not _in_place(sealed, dest, staging):
                record_failure(record, ledger, e, staging, sealed)
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
        record.reserved = False
        where = bundle_location(dest, public_url, published=passed)
        try:
            artifacts = release_artifacts(rid, document, where, gates, published=passed)
        except Exception as e:  # never at the release's cost
            _log.warning("release '%s': its Prefect artifacts could not be made (%s)", rid, type(e).__name__)
            artifacts = []
        if not passed:
            stopped = GateError(failed_gates_message(gates, str(dest / "internal")))
            stopped.internal_dir = str(dest / "internal")
            record_failure(record, ledger, stopped, staging, sealed, artifacts=artifacts, where=where)
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
