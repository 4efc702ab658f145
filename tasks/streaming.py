"""The streaming release steps (engines ``local`` and ``dask``) as Prefect tasks, for a
synthesizer that declares ``Streaming`` (its statistics are sums over rows).

``scan_input`` (pass 1: GX validation of every chunk, fitted-row histograms, check
samples) → ``stream_encode`` (the encode step from the summed histograms: noise once) →
``stream_estimate`` (pass 2: the statistic summed over chunks, then noise once) →
``stream_sample`` → ``stream_decode`` (draw, decode, validate and write chunk by chunk).

Policy for all: ``cache_policy=NO_CACHE, persist_result=False``: they read or hold
confidential rows or statistics, and draw fresh randomness for one release. Logs carry
only public facts (n, chunk counts, file names).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.files import write_json
from dprelease.bundle.published import Layout
from dprelease.bundle.stream import Synthetic, write_synthetic_chunks
from dprelease.engines.chunks import ChunkJob, Scan
from dprelease.engines.inputs import InputRefused, failing_rules, refuse_input, refuse_output
from dprelease.engines.runners import DaskEngine, LocalEngine
from dprelease.engines.tables import DataError, bins_to_table
from dprelease.engines.value_grid import measure_value_grid
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.rowkeys import RowKeys
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import Draws, Stage, Streaming
from dprelease.mechanisms.value_grid import GRID_STAGE
from dprelease.spec import ReleaseSpec
from dprelease.tasks.scrub import scrub_errors

__all__ = [
    "Synthetic",
    "chunk_job",
    "scan_input",
    "stream_decode",
    "stream_encode",
    "stream_estimate",
    "stream_sample",
    "stream_value_grid",
    "streaming_steps",
]

Progress = Callable[[int], None] | None


def streaming_steps(spec: ReleaseSpec) -> Streaming:
    """The spec's synthesizer's streaming steps (the spec refuses a streaming engine for a
    synthesizer without them)."""
    steps = MECHANISMS[spec.mechanism.name].streaming
    if steps is None:
        raise ValueError(f"{spec.mechanism.name} has no streaming steps")
    return steps


def chunk_job(spec: ReleaseSpec, keys: RowKeys) -> ChunkJob:
    return ChunkJob(
        schema=spec.public_schema(),
        missing=spec.missing_tokens(),
        clip=tuple(spec.clip_columns()),
        other=spec.other_tokens(),
        keys=keys,
        holdout_fraction=spec.checks.holdout_fraction,
        sample_rows=spec.checks.sample_rows,
        chunk_sum=streaming_steps(spec).chunk_sum,
        ignored=tuple(spec.ignored_columns()),
        one_hot=spec.one_hot(),
        value_grid=spec.mechanism.value_grid,
    )


@task(name="scan_input", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def scan_input(
    engine: LocalEngine | DaskEngine, job: ChunkJob, internal_dir: Path, progress: Progress = None
) -> Scan:
    """Pass 1. Every chunk is validated with the schema's GX suite; the counts summed over
    chunks go to ``internal/validation_input.json``; a broken rule is reported by column
    and rule (as by the memory engine) before any noise is drawn, as an ``InputRefused``
    whose message names neither (its ``detail`` does)."""
    try:
        scan = engine.run(job.scan, functools.partial(Scan.combine, k=job.sample_rows), progress)
        if job.clip or job.other:
            write_json(
                internal_dir / "clipping.json",
                {"note": "cells changed by the declared policies (confidential)", **scan.changed},
            )
        write_json(
            internal_dir / "validation_input.json",
            {
                "rows": scan.rows,
                "chunks": scan.chunks,
                "validated": f"every row, in chunks ({engine.name} engine)",
                "results": scan.validation,
            },
        )
        refuse_input(failing_rules(scan.validation))
    except DataError as e:  # a data-dependent outcome: Prefect hears only that and where
        raise InputRefused.of(e, "validate_input") from None
    get_run_logger().info("pass 1: %d rows validated and counted (%s engine)", scan.rows, engine.name)
    return scan


@task(name="stream_encode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_encode(
    steps: Streaming, scan: Scan, schema: Schema, plan: BudgetPlan, params: Any, rng: np.random.Generator
) -> Stage:
    """The encode step from the summed histograms of the fitted rows (noise drawn once)."""
    if scan.counts is None:
        raise DataError("internal error: pass 1 counted no histograms")
    return steps.encode(scan.counts, scan.fitted, schema, plan, params, rng)


@task(name="stream_estimate", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_estimate(
    steps: Streaming,
    engine: LocalEngine | DaskEngine,
    job: ChunkJob,
    state: Any,
    fitted: int,
    plan: BudgetPlan,
    params: Any,
    rng: np.random.Generator,
    progress: Progress = None,
) -> Stage:
    """Pass 2: the statistic summed over the chunks' fitted rows, then the estimate step
    on the sum (noise drawn once, here, never per chunk)."""
    total = engine.run(functools.partial(job.statistic, state=state, params=params), np.add, progress)
    stage = steps.estimate(total, fitted, state, plan, params, rng)
    get_run_logger().info(
        "pass 2: %d statistic(s) measured (%s engine)", len(stage.measurements), engine.name
    )
    return stage


@task(name="stream_sample", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_sample(steps: Streaming, state: Any, params: Any) -> Stage:
    """Post-processing before the chunked draw (e.g. the factor model's correlation)."""
    return steps.sample(state, params)


@task(name="stream_value_grid", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_value_grid(scan: Scan, schema: Schema, plan: BudgetPlan, rng: np.random.Generator) -> Stage:
    """Stage ``grid`` on pass 1's summed grid counts (``engines.value_grid``); the stage's
    state is the kept points that ``stream_decode`` places the values on."""
    if scan.grids is None:
        raise DataError("internal error: pass 1 counted no grid points")
    stage = measure_value_grid(scan.grids, schema, plan.stage(GRID_STAGE), rng)
    get_run_logger().info("value grid: %d column(s)", len(stage.measurements))
    return stage


@task(name="stream_decode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_decode(
    state: Draws,
    schema: Schema,
    m: int,
    chunk_rows: int,
    formats: list[str],
    sample_rows: int,
    staging: Path,
    rng: np.random.Generator,
    progress: Progress = None,
    layout: Layout | None = None,
    finish: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
) -> Synthetic:
    """m fresh rows in chunks of ``chunk_rows`` (``Draws.draw``), decoded to the
    schema's values (then ``finish``ed: the value grid's placement), validated with the
    schema's GX suite chunk by chunk and appended to ``public/``
    (``bundle.stream.write_synthetic_chunks``). Post-processing only."""
    from dprelease.expectations.suite import validate_table  # GX is heavy: import on first use

    synthetic = write_synthetic_chunks(
        lambda k: (finish or _same)(bins_to_table(state.draw(k, rng).bins, schema, rng=rng)),
        lambda table: validate_table(table, schema, "output")[1],
        schema,
        m,
        chunk_rows,
        formats,
        sample_rows,
        staging,
        progress,
        layout=layout,
    )
    refuse_output(failing_rules(synthetic.validation))
    names = ", ".join(f"synthetic.{f}" for f in formats)
    get_run_logger().info("wrote %d synthetic rows in %d chunks: %s", m, synthetic.chunks, names)
    return synthetic


def _same(table: pd.DataFrame) -> pd.DataFrame:
    return table
