"""The one in-process fit road, without Prefect: read → validate → fit → decode.

Written once, here, and run two ways:

- the release flow (``flows/pipeline.py``, memory engine, and its rehearsal) runs it with
  ``Steps`` that wrap each step in its Prefect task (``tasks/synthesis.py``,
  ``tasks/validate.py``: thin wrappers of the functions below) and each mechanism step in the
  ledger's spend bracket;
- ``dprelease.synthesize`` and the benchmarks run it with ``DIRECT``: the same functions,
  called in this process, no ledger (``fit_table``).

The streaming engines' road (pass 1, pass 2, chunked draws) is different by nature: its
statistics are sums over chunks (``tasks/streaming.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from dprelease.engines.inputs import (
    InputValidationError,
    check_rows,
    failing_rules,
    fitted_rows,
    read_input,
    refuse_input,
    refuse_output,
)
from dprelease.engines.tables import rows_to_table, table_to_bins, table_to_rows
from dprelease.engines.value_grid import value_grid
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.auto import AUTO
from dprelease.mechanisms.primitives import Measurement, Streams
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import MixedRows, Stage
from dprelease.mechanisms.value_grid import GRID_STAGE
from dprelease.spec import ReleaseSpec

__all__ = [
    "DIRECT",
    "Fitted",
    "RoadStep",
    "Steps",
    "Synthesised",
    "checked_input",
    "checked_output",
    "decode_step",
    "encode_step",
    "estimate_step",
    "fit_table",
    "grid_step",
    "sample_step",
    "synthesise",
]

T = TypeVar("T")
RoadStep = Literal[
    "encode", "estimate_private_moments", "project_and_sample", "decode", "place_on_value_grid"
]
Spend = Literal["encode", "estimate", "sample", "grid"]
Record = Callable[[tuple[Measurement, ...]], None]
Report = Callable[[str, Mapping[str, object]], None]
"""Where a step's confidential report goes (``internal/<name>.json`` in a release)."""


def checked_input(
    spec: ReleaseSpec, table: pa.Table | None = None, report: Report | None = None
) -> pd.DataFrame:
    """Read the confidential table (the spec's file, or ``table`` in memory), apply the
    declared policies and check it against the schema's GX suite; ``InputValidationError``
    names each failing column and its rule. ``report`` receives the policies' counts
    (``clipping``) and the suite's results (``validation_input``), with counts."""
    from dprelease.expectations.suite import validate_table  # GX is heavy: import on first use

    df, changed = read_input(spec, table)
    if df.empty:
        where = "the table" if table is not None else f"dataset file '{spec.data_path}'"
        raise InputValidationError(f"{where} has no data rows")
    if changed is not None and report is not None:
        report("clipping", changed)
    suite, records = validate_table(df, spec.public_schema(), "input")
    if report is not None:
        report("validation_input", {"suite": suite, "results": records, "rows": len(df)})
    refuse_input(failing_rules(records))
    return df


def checked_output(synthetic: pd.DataFrame, schema: Schema, report: Report | None = None) -> None:
    """The synthetic table must conform to the same public schema (a failure is a bug)."""
    from dprelease.expectations.suite import validate_table

    suite, records = validate_table(synthetic, schema, "output")
    if report is not None:
        report("validation_output", {"suite": suite, "results": records, "rows": len(synthetic)})
    refuse_output(failing_rules(records))


def encode_step(
    mechanism: str,
    rows: MixedRows,
    schema: Schema,
    plan: BudgetPlan,
    params: object,
    rng: np.random.Generator,
) -> Stage[object]:
    """Confidential rows → the mechanism's encoding (may measure, e.g. marginals)."""
    return MECHANISMS[mechanism].encode(rows, schema, plan, params, rng)


def estimate_step(
    mechanism: str, state: object, plan: BudgetPlan, params: object, rng: np.random.Generator
) -> Stage[object]:
    """The private moments (second moments, loadings, means)."""
    return MECHANISMS[mechanism].estimate(state, plan, params, rng)


def sample_step(
    mechanism: str, state: object, params: object, m: int, rng: np.random.Generator
) -> Stage[object]:
    """Projection and sampling of m rows (post-processing, or a last measurement)."""
    return MECHANISMS[mechanism].sample(state, params, m, rng)


def decode_step(
    mechanism: str, state: object, schema: Schema, params: object, rng: np.random.Generator
) -> pd.DataFrame:
    """Synthetic rows → values of the schema's types (post-processing)."""
    return rows_to_table(MECHANISMS[mechanism].decode(state, schema, params, rng), schema, rng=rng)


def grid_step(
    fitted: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, plan: BudgetPlan, rng: np.random.Generator
) -> tuple[Stage[object], pd.DataFrame]:
    """Stage ``grid`` (``engines.value_grid``): the fitted rows' noisy grid counts, and the
    synthetic values moved onto the kept points inside their cells (post-processing)."""
    stage, out = value_grid(fitted, synthetic, schema, plan.stage(GRID_STAGE), rng)
    return stage, out


class Steps(Protocol):
    """How the road's steps run: ``run(step, fn, *args)`` runs ``fn(*args)`` (the flow: its
    Prefect task of that name, which wraps ``fn``); ``spending(step)`` brackets a step that
    draws noise (the flow: the ledger records its stages as spent before it runs)."""

    def run(self, step: RoadStep, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)``, as step ``step``."""
        ...

    def spending(self, step: Spend) -> AbstractContextManager[Record]:
        """The bracket around a step that draws noise; yields the recorder of its measurements."""
        ...


class _Direct:
    """In this process, no ledger: ``dprelease.synthesize``, the benchmarks."""

    def run(self, step: RoadStep, fn: Callable[..., T], *args: object) -> T:
        return fn(*args)

    @contextmanager
    def spending(self, step: Spend) -> Iterator[Record]:
        yield lambda measurements: None


DIRECT: Steps = _Direct()


@dataclass(frozen=True)
class Synthesised:
    """The road's fit: every stage (its measurements and facts; the states may hold
    confidential rows), the fitted rows' bins, the synthetic table and its row count m."""

    stages: tuple[Stage[object], ...]
    bins: np.ndarray
    synthetic: pd.DataFrame
    m: int


def synthesise(
    spec: ReleaseSpec, plan: BudgetPlan, train: pd.DataFrame, streams: Streams, steps: Steps = DIRECT
) -> Synthesised:
    """Type encoding, private moment estimation, projection and sampling, decoding and (when
    the plan has it) the value grid, on the fitted rows ``train``: each step with its own
    stream, each noisy step inside ``steps.spending``."""
    schema, params, name = spec.public_schema(), spec.mechanism_params(), spec.mechanism.name
    bins = table_to_bins(train, schema)  # once: for encode and for the checks
    m = spec.synthetic_rows or len(train)
    rows = table_to_rows(train, bins, schema)
    with steps.spending("encode") as record:
        encoded = steps.run("encode", encode_step, name, rows, schema, plan, params, streams.encode)
        record(encoded.measurements)
    with steps.spending("estimate") as record:
        moments = steps.run(
            "estimate_private_moments", estimate_step, name, encoded.state, plan, params, streams.estimate
        )
        record(moments.measurements)
    with steps.spending("sample") as record:
        sampled = steps.run("project_and_sample", sample_step, name, moments.state, params, m, streams.sample)
        record(sampled.measurements)
    synthetic = steps.run("decode", decode_step, name, sampled.state, schema, params, streams.decode)
    stages = [encoded, moments, sampled]
    if GRID_STAGE in {s.stage for s in plan.stages}:
        with steps.spending("grid") as record:
            grid, synthetic = steps.run(
                "place_on_value_grid", grid_step, train, synthetic, schema, plan, streams.grid
            )
            record(grid.measurements)
        stages.append(grid)
    return Synthesised(tuple(stages), bins, synthetic, m)


@dataclass(frozen=True)
class Fitted:
    """``fit_table``'s result: the spec it ran (``mechanism: auto`` resolved), the road's fit,
    and the forecast's warnings (public facts)."""

    spec: ReleaseSpec
    fit: Synthesised
    warnings: tuple[str, ...]


def fit_table(spec: ReleaseSpec, table: pa.Table | None, streams: Streams) -> Fitted:
    """The whole road in this process, on every row (no holdout), no ledger: the table (in
    memory, or the spec's file when None) read and checked, ``mechanism: auto`` resolved on
    its row count, the row-count refusals, the budget split as a release splits it, the
    fit, and the output checked against the schema."""
    if spec.mechanism.name == AUTO:
        n = table.num_rows if table is not None else None
        if n is None:
            from dprelease.engines.inputs import public_rows

            n = public_rows(spec)
        spec = spec.resolve(fitted_rows(spec, n), rows=n)
    df = checked_input(spec, table)
    warnings = check_rows(spec, len(df))
    fit = synthesise(spec, spec.budget_plan(), df, streams)
    checked_output(fit.synthetic, spec.public_schema())
    return Fitted(spec, fit, tuple(warnings))
