"""The release flow: validated input → budget plan → private synthesis → audited bundle.

Stages (each a Prefect task, run in this order):
allocate_budget → validate_input → encode → estimate_private_moments →
project_and_sample → decode → validate_output → write_bundle.

Engines (``spec.engine``): ``memory`` reads the table and runs any mechanism through
``tasks.synthesis``; ``local`` and ``dask`` stream ``factor_gauss``'s two passes over
chunks (``tasks.streaming``, ``tasks.engines``), draw each noise once here, on the
driver, and write the synthetic rows chunk by chunk (validated per chunk in ``decode``).

A failure at any stage publishes nothing: the staging folder is removed and a failure
record (stage, error, internal reports) is left in ``<out>/failures/``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import numpy as np
import pandas as pd
from prefect import flow
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.runtime import deployment, flow_run

from flows.events import (
    RELEASE_ID,
    RunRecord,
    on_crashed,
    on_failure,
    release_event,
    track,
    untrack,
)
from flows.spec import load_spec
from mechanisms.errors import DPReleaseError
from mechanisms.gates import GATES_STAGE, GateResult
from mechanisms.primitives import noise_rngs, sampler_note
from mechanisms.registry import MECHANISMS
from mechanisms.rowkeys import RowKeys
from mechanisms.synthesizer import Stage
from tasks.budget import allocate_budget
from tasks.bundle import release_document, write_bundle, write_failure_record
from tasks.checks.gates import GateError, failed_gates_message
from tasks.engines import open_engine
from tasks.ledger_db import PASSWORD_ENV, BudgetRefused, Ledger, default_url, ledger_facts, split_password
from tasks.post_release import check_gates, check_linkage, check_utility, write_report
from tasks.scrub import scrub
from tasks.streaming import chunk_job, measure_marginals, project, scan_input, stream_moments, write_synthetic
from tasks.synthesis import decode, encode, estimate_private_moments, project_and_sample
from tasks.tables import table_to_bins, table_to_rows
from tasks.validate import check_rows, validate_input, validate_output

__all__ = ["STAGES", "release", "set_progress"]

STAGES = {
    "allocate_budget": "allocating and reserving the privacy budget (ledger)",
    "validate_input": "validating the input against the public schema (GX)",
    "encode": "encoding (and any private marginals or thresholds)",
    "estimate_private_moments": "measuring the private moments",
    "project_and_sample": "projecting and sampling",
    "decode": "decoding to the schema's types",
    "validate_output": "validating the synthetic data (GX)",
    "check_gates": "testing the gates (noisy metrics, differentially private)",
    "check_utility": "checking utility (internal report)",
    "check_linkage": "checking record linkage (internal report)",
    "write_report": "writing the internal report",
    "write_bundle": "writing the release bundle",
}

_progress: Callable[[str, str | None], None] | None = None


def set_progress(callback: Callable[[str, str | None], None] | None) -> None:
    """Register a callback told the name of each stage as it starts, and then (streaming
    engines) how far it has got, e.g. "1,250,000 rows" (the CLI's display)."""
    global _progress
    _progress = callback


def _rows_done(stage: str) -> Callable[[int], None]:
    def tell(rows: int) -> None:
        if _progress is not None:
            _progress(stage, f"{rows:,} rows")

    return tell


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


def _prepare(out: Path, release_id: str) -> tuple[Path, Path]:
    dest = out / release_id
    if dest.exists():
        raise DPReleaseError(
            f"release '{release_id}' already exists at '{dest}'; choose another release_id "
            "(or omit it for a timestamped one)"
        )
    try:
        staging = out / f".staging-{release_id}-{uuid4().hex[:8]}"
        (staging / "public").mkdir(parents=True)
        (staging / "internal").mkdir()
    except OSError as e:
        raise DPReleaseError(
            f"output folder '{out}' is not writable ({e.strerror}); pass --out with a folder you can write to"
        ) from None
    return dest, staging


def _artifacts(release_id: str, document: dict, path: Path, *, published: bool) -> None:
    """Prefect artifacts: a budget table, a summary and a link to the bundle (its public
    folder, or its internal one when a gate stopped it); all hold only public facts."""
    create_link_artifact(
        key=f"{release_id}-bundle",
        link=(path / ("public" if published else "internal")).resolve().as_uri(),
        link_text=f"release {release_id} ({'published' if published else 'gated: internal reports only'})",
        description=f"Bundle of release {release_id}",
    )
    led = document["privacy"]["ledger"]
    create_table_artifact(
        key=f"{release_id}-budget",
        table=[
            {
                k: r[k]
                for k in ("stage", "statistic", "mechanism", "sensitivity", "noise_scale", "rho", "epsilon")
            }
            for r in led["measurements"]
        ],
        description=f"Budget ledger of release {release_id}",
    )
    t = led["totals"]
    rows = "\n".join(
        f"| {s['stage']} | {s['weight']:g} | {s.get('rho_spent', s.get('epsilon_spent')):.6g} |"
        for s in led["stages"]
    )
    create_markdown_artifact(
        key=f"{release_id}-summary",
        markdown=(
            f"# Release `{release_id}`\n\n"
            f"- mechanism: `{document['mechanism']['name']}`\n"
            f"- privacy: ({t['epsilon']:.6g}, {t['delta']:.3g})-DP, "
            f"{document['privacy']['accountant']} accounting, replace-one neighbours\n"
            f"- synthetic rows: {document['privacy']['synthetic_rows']}\n"
            f"- bundle: `{path}`\n\n| stage | weight | spent |\n|---|---|---|\n{rows}\n"
        ),
        description=f"Summary of release {release_id}",
    )


def _holdout_split(
    table: pd.DataFrame, fraction: float, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Keep ⌊fraction·n⌋ random rows out of the release, for the membership check and as
    unseen test rows. The split ignores the data, so the release stays DP for the whole
    table (a replaced record is either held out, changing nothing, or a neighbour)."""
    if fraction == 0:
        return table, None
    k = int(fraction * len(table))
    perm = rng.permutation(len(table))
    return table.iloc[np.sort(perm[k:])].reset_index(drop=True), table.iloc[np.sort(perm[:k])].reset_index(
        drop=True
    )


def _run_gates(spec, schema, fit: _Fitted, ledger: Ledger, rid: str, plan, rng, step) -> list[GateResult]:
    """The DP gates: the ``gates`` stage is recorded as spent, the noisy metrics measured
    (``check_gates``) and recorded, one ledger row per gate."""
    if not spec.checks.gates:
        return []
    step("check_gates")
    ledger.spend(rid, [GATES_STAGE], plan)
    bounds = {k: g.model_dump() for k, g in spec.checks.gates.items()}
    syn = (fit.synthetic_for_checks, table_to_bins(fit.synthetic_for_checks, schema))
    measurements, results = check_gates(fit.real, syn, schema, bounds, plan.stage(GATES_STAGE), rng)
    ledger.record_measurements(rid, measurements)
    fit.stages.append(Stage(None, tuple(measurements)))
    return results


def _run_advisory(spec, schema, fit: _Fitted, gates: list[GateResult], document, staging, rng, step) -> None:
    """check_utility, check_linkage and the internal report: advisory, internal only; they
    never change what is published, the exit code or an event."""
    internal = staging / "internal"
    real, holdout = fit.real, fit.holdout
    syn = (fit.synthetic_for_checks, table_to_bins(fit.synthetic_for_checks, schema))
    held = None if holdout is None else (holdout, table_to_bins(holdout, schema))
    step("check_utility")
    utility = check_utility(real, syn, schema, spec.checks.target, held, internal, rng)
    step("check_linkage")
    keeps_order = MECHANISMS[spec.mechanism.name].keeps_row_order
    linkage = check_linkage(real, syn, schema, keeps_order, held, internal, rng)
    step("write_report")
    write_report(real, syn, schema, utility, linkage, [g.as_dict() for g in gates], document, internal)


def _gate_artifact(release_id: str, gates: list[GateResult]) -> None:
    """Per gate: its public bounds, the noisy (DP) value and the decision."""
    create_table_artifact(
        key=f"{release_id}-gates",
        table=[g.as_dict() for g in gates],
        description=f"Gates of release {release_id}: differentially private decisions on noisy metrics",
    )


def _spender(spec, ledger: Ledger, rid: str, plan) -> Callable[..., Stage]:
    """run(step, task, *args): before the step, the stages whose noise it may draw are
    recorded as spent in the ledger; after it, one ledger row per noisy statistic."""
    name = spec.mechanism.name
    spends = MECHANISMS[name].spends
    planned = {s.stage for s in plan.stages}
    not_dp = bool(MECHANISMS[name].defects(spec.mechanism_params()))

    def run(key: str, task, *args) -> Stage:
        declared = [s for s in spends.get(key, ()) if s in planned]
        if not_dp:  # from here the attempt is charged as unbounded: its output is not DP
            ledger.mark_unprotected(rid)
        ledger.spend(rid, declared, plan)
        out = task(*args)
        noisy = {mm.stage for mm in out.measurements if mm.draws_noise}
        stray = sorted(noisy - set(declared))
        if stray:
            raise DPReleaseError(f"internal error: {name}.{key} measured stage(s) {stray} it did not declare")
        ledger.record_measurements(rid, list(out.measurements))
        return out

    return run


def _in_memory(spec, ledger: Ledger, rid: str, plan, staging: Path, rngs, step) -> _Fitted:
    """The memory engine: validate the whole table, split off the holdout,
    encode → estimate_private_moments → project_and_sample → decode, validate the output."""
    step("validate_input")
    table = validate_input(spec, staging / "internal")
    check_rows(spec, len(table))  # n is public: too few rows, or δ ≥ 1/n, before any noise
    train, holdout = _holdout_split(table, spec.checks.holdout_fraction, rngs[4])
    m = spec.synthetic_rows or len(train)
    schema, params, name = spec.public_schema(), spec.mechanism_params(), spec.mechanism.name
    run = _spender(spec, ledger, rid, plan)
    step("encode")
    train_bins = table_to_bins(train, schema)  # once: for encode and for the checks
    rows = table_to_rows(train, train_bins, schema)
    encoded = run("encode", encode, name, rows, schema, plan, params, rngs[0])
    step("estimate_private_moments")
    moments = run("estimate", estimate_private_moments, name, encoded.state, plan, params, rngs[1])
    step("project_and_sample")
    sampled = run("sample", project_and_sample, name, moments.state, params, m, rngs[2])
    step("decode")
    synthetic = decode(name, sampled.state, schema, params, rngs[3])
    step("validate_output")
    validate_output(synthetic, schema, staging / "internal")
    return _Fitted(
        len(table),
        len(train),
        m,
        [encoded, moments, sampled],
        (train, train_bins),
        holdout,
        synthetic,
        synthetic,
        {"name": "memory"},
    )


def _streaming(spec, ledger: Ledger, rid: str, plan, staging: Path, rngs, step) -> _Fitted:
    """The local and dask engines (factor_gauss): pass 1 validates every chunk and sums the
    fitted rows' histograms; noise on them (encode); pass 2 sums ZᵀZ; noise once
    (estimate_private_moments); the factor model (project_and_sample); synthetic rows made,
    validated and written chunk by chunk (decode). The checks see uniform samples."""
    schema, params = spec.public_schema(), spec.mechanism_params()
    job = chunk_job(spec, RowKeys.draw(rngs[4]))
    run = _spender(spec, ledger, rid, plan)
    engine = open_engine(spec.engine, spec.data_path)
    try:
        step("validate_input")
        scan = scan_input(engine, job, staging / "internal", _rows_done("validate_input"))
        check_rows(spec, scan.rows, fitted=scan.fitted)
        step("encode")
        encoded = run("encode", measure_marginals, scan, schema, plan, params, rngs[0])
        step("estimate_private_moments")
        progress = _rows_done("estimate_private_moments")
        moments = run(
            "estimate",
            stream_moments,
            engine,
            job,
            encoded.state,
            scan.fitted,
            plan,
            params,
            rngs[1],
            progress,
        )
        facts = engine.describe()
    finally:
        engine.close()
    step("project_and_sample")
    projected = run("sample", project, moments.state, params)
    step("decode")
    m = spec.synthetic_rows or scan.fitted
    chunk = spec.engine.chunk_rows
    formats, k = spec.output_formats, spec.checks.sample_rows
    written = write_synthetic(
        projected.state, schema, m, chunk, formats, k, staging, rngs[3], _rows_done("decode")
    )
    fitted_sample, held_sample = scan.samples()
    return _Fitted(
        scan.rows,
        scan.fitted,
        m,
        [encoded, moments, projected],
        (fitted_sample, table_to_bins(fitted_sample, schema)),
        held_sample if spec.checks.holdout_fraction else None,
        written.sample,
        None,
        {
            **facts,
            "passes": "pass 1: validation and histograms; pass 2: latent second-moment sum"
            + ("; before them, a pass counting each chunk's rows" if facts.get("counting_pass") else ""),
            "holdout": "each row held out with probability holdout_fraction, by its position only",
            "checks_sample": {
                "rows": k,
                "note": "the checks ran on uniform samples of at most this many fitted, held-out and "
                "synthetic rows",
            },
            "synthetic_chunks": written.chunks,
        },
    )


def _undeclared_stages(spec, plan) -> list[str]:
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


@flow(name="dp-release", on_failure=[on_failure], on_crashed=[on_crashed])
def release(
    spec_path: str,
    out_dir: str = "releases",
    release_id: str | None = None,
    insecure_seed: int | None = None,
    ledger_url: str | None = None,
    ledger_password_secret: str | None = None,
) -> str:
    """Run one release of the spec at ``spec_path`` into ``out_dir``; returns the bundle.

    ``insecure_seed`` makes the noise reproducible; the bundle then says it is not fit
    for publication. Without it every draw comes from OS entropy. ``ledger_url``: the
    budget ledger (default ``sqlite:///<out_dir>/ledger.db``), without a password: Prefect
    stores flow parameters, so the database password comes from the environment
    (``DPRELEASE_LEDGER_PASSWORD``) or from the Prefect Secret block named by
    ``ledger_password_secret``. ``release_id``: default the spec's, else
    ``<dataset>-<time>`` with the scheduled time of a deployment's run.
    """
    started = datetime.now(UTC)
    out = Path(out_dir)
    record = track(flow_run.id, RunRecord(out))
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(f"release_id ({release_id!r}) must match [a-z0-9][a-z0-9-]*")
    record.release_id = release_id  # only once it is safe as a folder name
    spec = load_spec(spec_path)
    rid = release_id or spec.resolved_release_id(_slot_time(started))
    record.release_id, record.dataset, record.stage = rid, spec.dataset.name, "prepare"
    dest, staging = _prepare(out, rid)
    if ledger_url is not None and split_password(ledger_url)[1] is not None:
        raise DPReleaseError(
            "ledger_url must not contain a password (Prefect stores flow parameters); set "
            f"{PASSWORD_ENV} in the flow's environment or name a Prefect Secret block with "
            "ledger_password_secret"
        )
    record.ledger_url = ledger_url or default_url(out)
    if ledger_password_secret is not None:
        from prefect.blocks.system import Secret

        record.ledger_password = Secret.load(ledger_password_secret).get()
    ledger: Ledger | None = None
    sealed = False

    def step(name: str) -> None:
        record.stage = name
        if _progress is not None:
            _progress(name, None)

    try:
        ledger = Ledger(record.ledger_url, password=record.ledger_password)
        step("allocate_budget")  # before the data is read: the lifetime check needs no data
        plan = allocate_budget(spec, staging / "public", ledger, rid)
        record.reserved = True
        if undeclared := _undeclared_stages(spec, plan):
            raise DPReleaseError(
                f"internal error: {spec.mechanism.name} does not say which step spends stage(s) {undeclared}"
            )
        rngs = noise_rngs(insecure_seed, 7)
        synthesise = _streaming if spec.engine.streaming else _in_memory
        fit = synthesise(spec, ledger, rid, plan, staging, rngs, step)
        schema = spec.public_schema()
        gates = _run_gates(spec, schema, fit, ledger, rid, plan, rngs[6], step)
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
            ledger_record=ledger_facts(ledger, spec, rid),
            numerics=sampler_note(rngs[1]),
            engine=fit.engine,
            gates=[g.as_dict() for g in gates],
            compared_rows=len(fit.real[0]),
        )
        if spec.checks.enabled:
            _run_advisory(spec, schema, fit, gates, document, staging, rngs[5], step)
        step("write_bundle")

        def seal(public_sha256: str | None, internal_sha256: str) -> None:
            nonlocal sealed
            status = "released" if passed else "gated"
            ledger.finish(
                rid,
                status,
                {
                    "manifest_sha256": public_sha256 or internal_sha256,
                    "public_manifest_sha256": public_sha256,
                    "internal_manifest_sha256": internal_sha256,
                    "bundle": str(dest.resolve()),
                },
            )
            sealed = True

        path = write_bundle(staging, dest, fit.synthetic, document, publish=passed, seal=seal)
        record.reserved = False
        if gates:
            _gate_artifact(rid, gates)
        _artifacts(rid, document, path, published=passed)
        if not passed:
            stopped = GateError(failed_gates_message(gates, str(dest / "internal")))
            stopped.internal_dir = str(dest / "internal")
            raise stopped
        release_event("completed", release_id=rid, dataset=spec.dataset.name, ledger=ledger, bundle=path)
    except BaseException as e:
        _record_failure(record, ledger, e, staging, sealed)
        safe = scrub(e, f"stage '{record.stage}'") if isinstance(e, Exception) else e
        if safe is e:
            raise
        raise safe from None  # Prefect logs the flow's exception message: never an unscrubbed one
    finally:
        if ledger is not None:
            ledger.close()
    untrack(flow_run.id)
    return str(path)


def _record_failure(
    record: RunRecord, ledger: Ledger | None, error: BaseException, staging: Path, sealed: bool
) -> None:
    """The body's own failure record: close the reservation (charged the stages spent),
    write ``<out>/failures/``, emit ``.gated``, ``.refused`` or ``.failed``."""
    if record.reserved and ledger is not None:
        _close_failed(ledger, record.release_id, record.stage, error, sealed)
    write_failure_record(
        record.out, record.release_id, record.stage, error, staging if staging.exists() else None
    )
    kind = (
        "gated"
        if isinstance(error, GateError)
        else "refused"
        if isinstance(error, BudgetRefused)
        else "failed"
    )
    release_event(
        kind,
        release_id=record.release_id,
        dataset=record.dataset,
        ledger=ledger,
        error=error,
        stage=record.stage,
    )
    record.handled = True


def _close_failed(ledger: Ledger, rid: str, stage: str, error: BaseException, sealed: bool) -> None:
    """Mark the attempt failed (charged the stages it spent), also when it was sealed but the
    bundle could not be moved into place; if the ledger itself is what failed, the
    reservation stays open and keeps the whole plan charged (fail closed)."""
    try:
        ledger.finish(rid, "failed", {"stage": stage, "error": type(error).__name__}, after_seal=sealed)
    except DPReleaseError as e:
        logging.getLogger("dprelease").warning(
            "release '%s' stays reserved (charged its whole plan) in the ledger: %s", rid, e
        )
