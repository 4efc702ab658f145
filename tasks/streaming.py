"""The streaming release steps (engines ``local`` and ``dask``) as Prefect tasks.

``scan_input`` (pass 1: GX validation of every chunk, fitted-row histograms, check
samples) → ``measure_marginals`` (noise on the summed histograms) →
``stream_moments`` (pass 2: ZᵀZ summed over chunks, then noise once) → ``project`` →
``write_synthetic`` (sample, decode, validate and write chunk by chunk).

Policy for all: ``cache_policy=NO_CACHE, persist_result=False``: they read or hold
confidential rows or statistics, and draw fresh randomness for one release. Logs carry
only public facts (n, chunk counts, file names).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.spec import ContinuousSpec, ReleaseSpec
from mechanisms import factor_gauss as fg
from mechanisms.accounting import BudgetPlan
from mechanisms.latent import LatentCode, from_latent
from mechanisms.marginals import measure_counts
from mechanisms.rowkeys import RowKeys
from mechanisms.schema import Continuous, Schema
from mechanisms.synthesizer import Stage
from tasks.bundle import csv_header, io_error
from tasks.chunks import ChunkJob, Scan, add_counts
from tasks.engines import DaskEngine, LocalEngine
from tasks.files import write_json
from tasks.scrub import scrub_errors
from tasks.tables import bins_to_table
from tasks.validate import failing_rules, refuse_input, refuse_output

__all__ = [
    "Synthetic",
    "chunk_job",
    "measure_marginals",
    "project",
    "scan_input",
    "stream_moments",
    "write_synthetic",
]

Progress = Callable[[int], None] | None
_CSV_BODY = pa_csv.WriteOptions(include_header=False, quoting_style="needed")


def chunk_job(spec: ReleaseSpec, keys: RowKeys) -> ChunkJob:
    continuous = {n: c for n, c in spec.columns.items() if isinstance(c, ContinuousSpec)}
    return ChunkJob(
        schema=spec.public_schema(),
        missing=spec.missing_tokens(),
        clip=tuple(n for n, c in continuous.items() if c.out_of_bounds == "clip"),
        other={n: c.other for n, c in spec.columns.items() if n not in continuous and c.unknown == "other"},
        keys=keys,
        holdout_fraction=spec.checks.holdout_fraction,
        sample_rows=spec.checks.sample_rows,
    )


@task(name="scan_input", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def scan_input(
    engine: LocalEngine | DaskEngine, job: ChunkJob, internal_dir: Path, progress: Progress = None
) -> Scan:
    """Pass 1. Every chunk is validated with the schema's GX suite; the counts summed over
    chunks go to ``internal/validation_input.json``; a broken rule is reported by column
    and rule (as by the memory engine) before any noise is drawn."""
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
    get_run_logger().info("pass 1: %d rows validated and counted (%s engine)", scan.rows, engine.name)
    return scan


@task(name="encode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def measure_marginals(
    scan: Scan, schema: Schema, plan: BudgetPlan, params: fg.FactorGaussParams, rng: np.random.Generator
) -> Stage:
    """Stage 1 from the summed histograms of the fitted rows (noise drawn once, here)."""
    marginals = measure_counts(scan.counts, schema.names, plan.stage("marginals"), rng=rng)
    code = fg.code_from_marginals(marginals, scan.fitted, schema)
    return Stage(code, tuple(marginals))


@task(name="estimate_private_moments", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def stream_moments(
    engine: LocalEngine | DaskEngine,
    job: ChunkJob,
    code: LatentCode,
    fitted: int,
    plan: BudgetPlan,
    params: fg.FactorGaussParams,
    rng: np.random.Generator,
    progress: Progress = None,
) -> Stage:
    """Pass 2: ZᵀZ summed over the chunks' fitted rows, then ``measure_moment_sum`` once."""
    total = engine.run(functools.partial(job.moments, code=code, params=params), np.add, progress)
    bound = params.bound(len(job.schema))
    moments = fg.measure_moment_sum(total, fitted, bound, plan.stage("moments"), rng=rng)
    get_run_logger().info("pass 2: latent second moment measured (%s engine)", engine.name)
    return Stage((moments, code), (moments,))


@task(name="project_and_sample", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def project(state: tuple, params: fg.FactorGaussParams) -> Stage:
    """The factor model's correlation (post-processing); sampling happens in chunks."""
    moments, code = state
    corr, r = fg.latent_model(moments, code, params)
    return Stage((corr, code), facts=fg.model_facts(params, r))


@dataclass
class Synthetic:
    """How many chunks ``write_synthetic`` wrote, and the first ``sample`` rows it kept
    (fresh i.i.d. draws, so a uniform sample) for the checks."""

    chunks: int
    sample: pd.DataFrame = field(repr=False)


def _arrow_schema(schema: Schema) -> pa.Schema:
    def kind(c) -> pa.DataType:
        if isinstance(c, Continuous):
            return pa.int64() if c.integer else pa.float64()
        return pa.string()

    return pa.schema([(c.name, kind(c)) for c in schema.columns])


@task(name="decode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def write_synthetic(
    state: tuple[np.ndarray, LatentCode],
    schema: Schema,
    m: int,
    chunk_rows: int,
    formats: list[str],
    sample_rows: int,
    staging: Path,
    rng: np.random.Generator,
    progress: Progress = None,
) -> Synthetic:
    """m rows in chunks of ``chunk_rows``: z ~ N(0, Σ), decoded through the private CDFs,
    validated with the schema's suite (counts summed into
    ``internal/validation_output.json``), appended to ``public/synthetic.parquet`` and/or
    ``synthetic.csv``. Post-processing only; memory holds one chunk and the sample."""
    from expectations.suite import validate_table

    corr, code = state
    public = staging / "public"
    arrow = _arrow_schema(schema)
    records, kept, done, chunks = None, [], 0, 0
    kept_rows = 0
    parquet = csv = None
    try:
        if "parquet" in formats:
            parquet = pq.ParquetWriter(public / "synthetic.parquet", arrow)
        if "csv" in formats:
            csv = pa.OSFile(str(public / "synthetic.csv"), "wb")
            csv.write(csv_header(list(schema.names)))
        while done < m:
            k = min(chunk_rows, m - done)
            bins = from_latent(fg.sample_latent(corr, k, rng=rng), code)
            table = bins_to_table(bins, schema, rng=rng)
            _, recs = validate_table(table, schema, "output")
            records = recs if records is None else add_counts(records, recs)
            frame = pa.Table.from_pandas(table, schema=arrow, preserve_index=False)
            if parquet is not None:
                parquet.write_table(frame)
            if csv is not None:
                pa_csv.write_csv(frame, csv, _CSV_BODY)
            if kept_rows < sample_rows:
                kept.append(table.iloc[: sample_rows - kept_rows])
                kept_rows += len(kept[-1])
            done, chunks = done + k, chunks + 1
            if progress is not None:
                progress(done)
    except OSError as e:  # disk full, not writable: a clear error; the staging folder goes
        spent = " (the budget this run spent stays spent: its noise was drawn)"
        raise io_error("writing the synthetic data", staging.parent, e, spent) from None
    finally:
        for sink in (parquet, csv):
            if sink is not None:
                sink.close()
    write_json(staging / "internal" / "validation_output.json", {"rows": m, "results": records})
    refuse_output(failing_rules(records))
    names = ", ".join(f"synthetic.{f}" for f in formats)
    get_run_logger().info("wrote %d synthetic rows in %d chunks: %s", m, chunks, names)
    return Synthetic(chunks, pd.concat(kept, ignore_index=True))
