"""The release's steps from the reserve to the sealed bundle, shared by the release flow
(``flows/release.py``) and its rehearsal (``flows/rehearsal.py``): allocate and reserve the
budget, validate and encode the input, measure, sample, decode (and place values on the
private value grid) and validate the output, the
DP gates, the release document, the advisory checks and the bundle.

A ``Run`` says where the steps run. In the release, each step is a Prefect task and the
ledger is the dataset's. In the rehearsal, the same steps run as plain functions (each
task's ``.fn``) on a table drawn from the public schema alone, with a throwaway ledger and
output folder: what can fail without confidential values fails there, before the real
reserve (docs/auditor/flow.md, "Nothing spent without a publish").

A step that may draw noise runs inside the ledger's spend bracket (``Ledger.spending``):
its plan stages are recorded as spent before it runs and its measurements after.
Randomness comes from named streams (``primitives.Streams``). Engines (``spec.engine``):
``memory`` reads the table and runs any mechanism; ``local`` and ``dask`` stream a
synthesizer that declares ``Streaming`` in two passes over chunks and write the synthetic
rows chunk by chunk.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
from prefect import get_run_logger
from prefect.runtime import flow_run

from dprelease.bundle.document import release_document
from dprelease.bundle.ledger_record import write_ledger_record
from dprelease.bundle.published import Layout, publishable
from dprelease.bundle.replicates import write_replicates
from dprelease.bundle.tables import write_tables
from dprelease.engines.inputs import InputRefused, check_rows, holdout_split
from dprelease.engines.road import RoadStep, Spend, synthesise
from dprelease.engines.runners import open_engine
from dprelease.engines.tables import DataError, table_to_bins
from dprelease.engines.value_grid import on_value_grid
from dprelease.flows.events import RunRecord
from dprelease.flows.progress import rows_done, step_detail, step_reached
from dprelease.ledger import Ledger, ledger_facts
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.advice import advise
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.gates import GATES_STAGE, GateResult
from dprelease.mechanisms.primitives import Measurement, Streams, sampler_note
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.replicates import LOO_TABLES, MAX_CELLS, REHEARSAL, REPLICATES
from dprelease.mechanisms.synthesizer import Stage, Step
from dprelease.mechanisms.tables import noisy_tables
from dprelease.mechanisms.value_grid import GRID_STAGE
from dprelease.spec import ReleaseSpec
from dprelease.spec.resources import REHEARSAL_CHECK_ROWS
from dprelease.tasks.budget import allocate_budget
from dprelease.tasks.post_release import check_gates, check_linkage, check_utility, write_report
from dprelease.tasks.publish import write_bundle
from dprelease.tasks.replicates import build_replicates
from dprelease.tasks.streaming import (
    chunk_job,
    scan_input,
    stream_decode,
    stream_encode,
    stream_estimate,
    stream_sample,
    stream_value_grid,
    streaming_steps,
)
from dprelease.tasks.synthesis import TASKS
from dprelease.tasks.validate import validate_input, validate_output

__all__ = ["Outcome", "Run", "release_steps"]

T = TypeVar("T")

_log = logging.getLogger("dprelease.release")


@dataclass
class Run:
    """Where the steps run: the spec, the ledger, the release id and the run's record.
    ``rehearsal``: the steps run as plain functions (no Prefect task runs, no row-count
    refusals, which are about the real n; ``tell`` is told each step, for the display).
    ``new_dataset``: the steward's reason why the dataset is new though another dataset name
    holds its schema (``ledger.identity``). ``plan`` is set by the reserve, ``outcome`` just
    before the bundle is written, ``sealed`` once the ledger has sealed the bundle."""

    spec: ReleaseSpec
    ledger: Ledger
    rid: str
    record: RunRecord
    rehearsal: bool = False
    new_dataset: str | None = None
    tell: Callable[[str], None] | None = None
    plan: BudgetPlan = field(init=False)
    outcome: Outcome | None = None
    sealed: bool = False

    def at(self, step: str) -> None:
        """The run reached ``step``: the stage a failure names, and the progress display (a
        rehearsal's through ``tell``)."""
        if self.rehearsal:
            self.record.stage = step
            if self.tell is not None:
                self.tell(f"step '{step}'")
        else:
            step_reached(self.record, step)

    def task(self, step: Any) -> Any:
        """The Prefect task ``step`` in a release; its function (``.fn``) in a rehearsal."""
        return step.fn if self.rehearsal else step

    def rows(self, step: str) -> Callable[[int], None] | None:
        """The progress display's row counter for a streaming pass (none in a rehearsal)."""
        return None if self.rehearsal else rows_done(step)

    def spending(self, step: Step) -> AbstractContextManager[Callable[[tuple[Measurement, ...]], None]]:
        """The ledger's spend bracket around the mechanism's ``step`` (``encode``,
        ``estimate`` or ``sample``): the plan stages it declares (``Synthesizer.spends``)."""
        synth = MECHANISMS[self.spec.mechanism.name]
        planned = {s.stage for s in self.plan.stages}
        declared = [s for s in synth.spends.get(step, ()) if s in planned]
        not_dp = bool(synth.defects(self.spec.mechanism_params()))
        return self.ledger.spending(self.rid, declared, self.plan, not_dp=not_dp)


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


@dataclass(frozen=True)
class Outcome:
    """What the steps published: the release document, the gates' results, and whether
    every gate passed (``public/`` written) or one stopped the release."""

    document: dict
    gates: list[GateResult]
    passed: bool


def _rows_checked(r: Run, n: int, fitted: int | None = None) -> None:
    """``check_rows`` on the real n (refusals before any noise; the forecast's warnings,
    public facts, go to the run's log); a rehearsal's table is small by design, so it is
    not checked."""
    if r.rehearsal:
        return
    try:
        warnings = check_rows(r.spec, n, fitted=fitted)
    except DataError as e:  # a data-dependent outcome: Prefect hears only that and where
        raise InputRefused.of(e, "validate_input") from None
    for message in warnings:
        get_run_logger().warning(message)


@dataclass(frozen=True)
class _FlowSteps:
    """``engines.road.Steps`` in a release: each step is its Prefect task (its function in a
    rehearsal), announced to the progress display; each noisy step is inside the ledger's
    spend bracket (the grid's stage, ``GRID_STAGE``, has its own)."""

    r: Run

    def run(self, step: RoadStep, fn: Callable[..., T], *args: object) -> T:
        self.r.at(step)
        return cast(T, self.r.task(TASKS[step])(*args))  # the task wraps ``fn``

    def spending(self, step: Spend) -> AbstractContextManager[Callable[[tuple[Measurement, ...]], None]]:
        if step == "grid":
            return self.r.ledger.spending(self.r.rid, [GRID_STAGE], self.r.plan)
        return self.r.spending(step)


def _synthesise(r: Run, staging: Path, streams: Streams) -> _Fitted:
    """The memory engine: input validation, the holdout split, then the road
    (``engines.road.synthesise``: type encoding, private moment estimation, projection and
    sampling, decoding, the value grid), then the output's validation."""
    spec, internal = r.spec, staging / "internal"
    r.at("validate_input")
    table = r.task(validate_input)(spec, internal)
    _rows_checked(r, len(table))  # n is public: too few rows, δ ≥ 1/n, noise ≥ n: before any noise
    train, holdout = holdout_split(table, spec.checks.holdout_fraction, streams.holdout)
    fit = synthesise(spec, r.plan, train, streams, _FlowSteps(r))
    r.at("validate_output")
    r.task(validate_output)(fit.synthetic, spec.public_schema(), internal)
    return _Fitted(
        len(table),
        len(train),
        fit.m,
        list(fit.stages),
        (train, fit.bins),
        holdout,
        fit.synthetic,
        fit.synthetic,
        {"name": "memory"},
    )


def _synthesise_streaming(r: Run, staging: Path, streams: Streams) -> _Fitted:
    """The local and dask engines: pass 1 validates every chunk and sums the fitted rows'
    histograms (input validation); the encode step on the sums; pass 2 sums the
    mechanism's statistic and the estimate step measures it once; projection; synthetic
    rows drawn, decoded, validated and written chunk by chunk. The checks see samples."""
    spec = r.spec
    schema, params, steps = spec.public_schema(), spec.mechanism_params(), streaming_steps(spec)
    job = chunk_job(spec, streams.row_keys)  # the keys auto's rule counted the fitted rows with
    engine = open_engine(spec.engine, spec.data_path)
    try:
        r.at("validate_input")
        scan = r.task(scan_input)(engine, job, staging / "internal", r.rows("validate_input"))
        _rows_checked(r, scan.rows, scan.fitted)
        r.at("encode")
        with r.spending("encode") as record:
            encoded = r.task(stream_encode)(steps, scan, schema, r.plan, params, streams.encode)
            record(encoded.measurements)
        r.at("estimate_private_moments")
        with r.spending("estimate") as record:
            moments = r.task(stream_estimate)(
                steps,
                engine,
                job,
                encoded.state,
                scan.fitted,
                r.plan,
                params,
                streams.estimate,
                r.rows("estimate_private_moments"),
            )
            record(moments.measurements)
        facts = engine.describe()
    finally:
        engine.close()
    r.at("project_and_sample")
    with r.spending("sample") as record:
        sampled = r.task(stream_sample)(steps, moments.state, params)
        record(sampled.measurements)
    stages = [encoded, moments, sampled]
    finish = None
    if GRID_STAGE in {s.stage for s in r.plan.stages}:
        r.at("place_on_value_grid")
        with r.ledger.spending(r.rid, [GRID_STAGE], r.plan) as record:
            grid = r.task(stream_value_grid)(scan, schema, r.plan, streams.grid)
            record(grid.measurements)
        stages.append(grid)
        finish = functools.partial(
            on_value_grid, grids=grid.state, schema=schema, n=scan.fitted, rng=streams.grid
        )
    r.at("decode")
    m, k = spec.synthetic_rows or scan.fitted, spec.checks.sample_rows
    written = r.task(stream_decode)(
        sampled.state,
        schema,
        m,
        spec.engine.chunk_rows,
        spec.output_formats,
        k,
        staging,
        streams.decode,
        r.rows("decode"),
        Layout.of(spec),
        finish,
    )
    fitted_sample, held_sample = scan.samples()
    counting = "; before them, a pass counting each chunk's rows" if facts.get("counting_pass") else ""
    return _Fitted(
        scan.rows,
        scan.fitted,
        m,
        stages,
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


def _gates(r: Run, fit: _Fitted, rng: np.random.Generator) -> list[GateResult]:
    """The DP gates: noisy metrics on the compared rows, charged to the ``gates`` stage."""
    if not r.spec.checks.gates:
        return []
    schema = r.spec.public_schema()
    r.at("check_gates")
    bounds = {k: g.model_dump() for k, g in r.spec.checks.gates.items()}
    syn = (fit.synthetic_for_checks, table_to_bins(fit.synthetic_for_checks, schema))
    with r.ledger.spending(r.rid, [GATES_STAGE], r.plan) as record:
        measurements, results = r.task(check_gates)(
            fit.real, syn, schema, bounds, r.plan.stage(GATES_STAGE), rng
        )
        record(measurements)
    fit.stages.append(Stage(None, tuple(measurements)))
    return results


def _advisory_checks(
    r: Run,
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
    utility_args = (fit.real, syn, schema, spec.checks.target, held, internal, utility_rng)
    linkage_args = (fit.real, syn, schema, keeps_order, held, internal, linkage_rng)
    if r.rehearsal:  # the checks' code on a few rows: their cost grows with rows × cells, not their paths
        real, few = _first_rows(fit.real), _first_rows(syn)
        held_few = None if held is None else _first_rows(held)
        utility = check_utility.fn(real, few, schema, spec.checks.target, held_few, internal, utility_rng)
        r.at("check_linkage")
        linkage = check_linkage.fn(real, few, schema, keeps_order, held_few, internal, linkage_rng)
    else:
        checks = (
            check_utility.submit(*utility_args, step_detail("check_utility")),
            check_linkage.submit(*linkage_args, step_detail("check_linkage")),
        )
        for check in checks:  # both end before either's error is raised: neither writes into a moved folder
            check.wait()
        utility = checks[0].result()
        r.at("check_linkage")
        linkage = checks[1].result()
    r.at("write_report")
    r.task(write_report)(
        fit.real, syn, schema, utility, linkage, [g.as_dict() for g in gates], document, internal
    )


def _first_rows(binned: tuple[pd.DataFrame, np.ndarray]) -> tuple[pd.DataFrame, np.ndarray]:
    """A table and its bins cut to ``REHEARSAL_CHECK_ROWS`` rows."""
    return binned[0].iloc[:REHEARSAL_CHECK_ROWS], binned[1][:REHEARSAL_CHECK_ROWS]


def _replicates(r: Run, fit: _Fitted, staging: Path) -> dict | None:
    """``public/replicates/`` (``bundle.replicates``) for a mechanism with a leave-one-out
    check (``Synthesizer.without``) on the memory engine: the mechanism re-run on its own
    synthetic rows with public seeds (the release id's hash), no budget. A rehearsal runs
    the same code with 2 replicates and 1 check. None past ``MAX_CELLS`` (public: n and the
    schema), as for any other mechanism: such a release's queries get bounds."""
    spec = r.spec
    synth = MECHANISMS[spec.mechanism.name]
    schema = spec.public_schema()
    if not synth.leaves_out or spec.engine.streaming or fit.synthetic is None:
        return None
    if REPLICATES * fit.n_fitted * len(schema) > MAX_CELLS:
        return None
    r.at("build_replicates")
    k, most = REHEARSAL if r.rehearsal else (REPLICATES, LOO_TABLES)
    seed = int.from_bytes(hashlib.sha256(r.rid.encode()).digest()[:8], "big")
    measured = [mm for st in fit.stages for mm in st.measurements]
    reps, checks = r.task(build_replicates)(
        spec.mechanism.name,
        table_to_bins(fit.synthetic, schema),
        fit.stages[1].state,
        noisy_tables(measured),
        schema,
        r.plan,
        spec.mechanism_params(),
        fit.n_fitted,
        seed,
        k,
        most,
    )
    return write_replicates(staging / "public", reps, schema.names, checks, seed)


def _undeclared_stages(spec: ReleaseSpec, plan: BudgetPlan) -> list[str]:
    spends = MECHANISMS[spec.mechanism.name].spends
    declared = {s for stages in spends.values() for s in stages} | {GATES_STAGE, GRID_STAGE}
    return sorted({s.stage for s in plan.stages} - declared)


def release_steps(
    r: Run,
    staging: Path,
    dest: Path,
    streams: Streams,
    *,
    started: datetime,
    insecure_seed: int | None,
) -> Outcome:
    """Reserve the plan, run the synthesis, the gates, the document, the advisory checks and
    write the bundle from ``staging`` to ``dest``; the ledger seals it just before the
    rename (``r.sealed``). Raises whatever a step raises (the caller records the failure)."""
    spec, rid, ledger = r.spec, r.rid, r.ledger
    r.at("allocate_budget")
    r.plan = r.task(allocate_budget)(spec, staging / "public", ledger, rid, r.new_dataset)  # before any read
    r.record.reserved = True
    if undeclared := _undeclared_stages(spec, r.plan):
        raise DPReleaseError(
            f"internal error: {spec.mechanism.name} does not say which step spends stage(s) {undeclared}"
        )
    fit = (_synthesise_streaming if spec.engine.streaming else _synthesise)(r, staging, streams)
    gates = _gates(r, fit, streams.gates)
    # a rehearsal's gates run (their metrics and noise) but it always takes the publishing path,
    # the one whose writers must not fail on the spec; its table says nothing about the gates
    passed = r.rehearsal or all(g.passed for g in gates)
    replicated = _replicates(r, fit, staging) if passed else None
    r.at("release_document")
    measured = [mm for st in fit.stages for mm in st.measurements]
    document = release_document(
        spec,
        rid,
        r.plan,
        measured,
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
    document["tables"] = write_tables(staging / "public", measured, spec.public_schema(), fit.n_fitted)
    # what the noisy one-way tables say the schema could declare (post-processing: public)
    document["advice"] = [
        a.as_dict() for a in advise(noisy_tables(measured), spec.public_schema(), fit.n_fitted)
    ]
    if replicated is not None:
        document["replicates"] = replicated
    write_ledger_record(staging / "internal", ledger.url)  # where the ledger is: internal, never public
    if spec.checks.enabled:
        _advisory_checks(r, fit, gates, document, staging, streams.checks)
    r.at("write_bundle")

    def seal(public_sha256: str | None, internal_sha256: str) -> None:
        ledger.finish(
            rid,
            "released" if passed else "gated",
            {
                "manifest_sha256": public_sha256 or internal_sha256,
                "public_manifest_sha256": public_sha256,
                "internal_manifest_sha256": internal_sha256,
                "bundle": str(dest.resolve()),
                "flow_run_id": None if r.rehearsal or flow_run.id is None else str(flow_run.id),
            },
        )
        r.sealed = True

    published = None if fit.synthetic is None else publishable(fit.synthetic, Layout.of(spec))
    r.outcome = Outcome(document, gates, passed)
    r.task(write_bundle)(staging, dest, published, document, publish=passed, seal=seal)
    return r.outcome
