"""``validate_input`` and ``validate_output``: the schema's GX suite on the input table
and on the synthetic table.

Policy: both see row-level data (confidential input, or the release before it is
published), so ``cache_policy=NO_CACHE`` (inputs are never hashed) and
``persist_result=False`` (never written to Prefect's result store). Their reports go
to ``internal/`` only; an error message names the column and the rule, never a count.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.spec import ContinuousSpec, ReleaseSpec
from mechanisms.errors import DPReleaseError
from mechanisms.registry import MECHANISMS
from mechanisms.schema import Schema
from tasks.files import write_json
from tasks.scrub import scrub_errors
from tasks.tables import DataError, clip_to_bounds, map_unknown, read_table

__all__ = [
    "InputValidationError",
    "check_rows",
    "failing_rules",
    "fitted_rows",
    "read_input",
    "refuse_input",
    "refuse_output",
    "validate_input",
    "validate_output",
]


class InputValidationError(DataError):
    """The input table breaks the public schema."""


def failing_rules(records: list[dict]) -> list[dict]:
    """The first failing rule per column (later rules often fail only because of it)."""
    seen, out = set(), []
    for r in records:
        if not r["success"] and r["column"] not in seen:
            seen.add(r["column"])
            out.append(r)
    return out


def refuse_input(failures: list[dict]) -> None:
    """Raise, naming each failing column and its rule (never a count or a value)."""
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise InputValidationError(
            "the input breaks the public schema:\n  "
            + "\n  ".join(lines)
            + "\nFix the data or the spec's schema; affected-row counts are in the "
            "internal validation report of the failure record."
        )


def refuse_output(failures: list[dict]) -> None:
    """Raise on a synthetic table that breaks the schema (a bug, never the data's fault)."""
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise DPReleaseError("internal error: the synthetic data breaks the schema:\n  " + "\n  ".join(lines))


def check_table(df: pd.DataFrame, schema: Schema, name: str, report: Path) -> list[dict]:
    """Run the suite, write the report (with counts) to ``report``, return failures."""
    from expectations.suite import validate_table  # GX is heavy: import on first use

    suite, records = validate_table(df, schema, name)
    write_json(report, {"suite": suite, "results": records, "rows": len(df)})
    return failing_rules(records)


def read_input(spec: ReleaseSpec) -> tuple[pd.DataFrame, dict | None]:
    """Read the table and apply the columns' declared policies (``out_of_bounds: clip``,
    ``unknown: other``) before validation. Returns the table and, if any column declares
    a policy, the per-column counts of changed cells: confidential, for ``internal/``
    only (never a message, log or public file)."""
    schema = spec.public_schema()
    df = read_table(spec.data_path, schema, spec.missing_tokens())
    continuous = {n: c for n, c in spec.columns.items() if isinstance(c, ContinuousSpec)}
    clip = [n for n, c in continuous.items() if c.out_of_bounds == "clip"]
    other = {n: c.other for n, c in spec.columns.items() if n not in continuous and c.unknown == "other"}
    if not (clip or other):
        return df, None
    return df, {
        "note": "cells changed by the declared policies before validation (confidential)",
        "out_of_bounds_clipped": clip_to_bounds(df, schema, clip),
        "unknown_mapped_to_other": map_unknown(df, schema, other),
    }


def fitted_rows(spec: ReleaseSpec, n: int) -> int:
    """Rows the release is fitted on: n − ⌊holdout_fraction·n⌋, as the flow's holdout split."""
    return n - int(spec.checks.holdout_fraction * n)


def check_rows(spec: ReleaseSpec, n: int, fitted: int | None = None) -> None:
    """Refuse, before any noise is drawn, a table of n rows that is too small for the
    mechanism (``Synthesizer.min_rows`` on the fitted rows), for the post-release checks,
    or for ``privacy.delta`` (δ ≥ 1/n). n is public under replace-one, so the message may
    quote it. ``fitted``: the streaming engines' fitted count (their holdout coin is per
    row); default n − ⌊holdout_fraction·n⌋."""
    if n < 1:
        raise InputValidationError("the input has no data rows; nothing was spent")
    synth = MECHANISMS[spec.mechanism.name]
    fitted = fitted_rows(spec, n) if fitted is None else fitted
    fraction = spec.checks.holdout_fraction
    held = f" ({n - fitted} held out by checks.holdout_fraction {fraction:g})" if fraction else ""
    more = "supply more rows" + (" or lower checks.holdout_fraction" if fraction else "")
    problems = []
    need = synth.min_rows(spec.public_schema(), spec.mechanism_params())
    if fitted < need:
        problems.append(
            f"mechanism {synth.name} needs at least {need} fitted rows (min_rows); the input has {n} "
            f"rows, {fitted} fitted{held}: {more}"
        )
    if spec.checks.enabled:
        m = spec.synthetic_rows or fitted
        if fitted < 2:
            problems.append(
                f"checks.enabled: the post-release checks need at least 2 fitted rows, got {fitted}{held}: "
                f"{more}, or set checks.enabled: false"
            )
        if m < 2:
            problems.append(
                f"synthetic_rows ({m}): the post-release checks need at least 2 synthetic rows; "
                "raise synthetic_rows or set checks.enabled: false"
            )
        if fraction and n - fitted < 1:
            problems.append(
                f"checks.holdout_fraction ({fraction:g}) keeps no row out of {n} (⌊{fraction:g}·{n}⌋ = 0), "
                "so the checks would test on an empty holdout: raise it, set it to 0, or supply more rows"
            )
    delta = spec.privacy.delta
    if delta > 0 and delta >= 1 / n:
        problems.append(
            f"privacy.delta ({delta:g}) must be below 1/n = {1 / n:.3g} for the n = {n} input rows: "
            "with δ ≥ 1/n a mechanism may publish a whole record in the clear and still be "
            f"(ε, δ)-DP. Set privacy.delta ≤ 1/(10 n) = {1 / (10 * n):.3g} or smaller"
        )
    if problems:
        raise InputValidationError(
            f"this release cannot run on the input's {n} rows:\n  "
            + "\n  ".join(problems)
            + "\nNothing was spent."
        )


@task(name="validate_input", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_input(spec: ReleaseSpec, internal_dir: Path) -> pd.DataFrame:
    """Read the confidential table, apply the declared policies (counts to
    ``internal/clipping.json``) and check it against the public schema."""
    schema = spec.public_schema()
    df, changed = read_input(spec)
    if df.empty:
        raise InputValidationError(f"dataset file '{spec.data_path}' has no data rows")
    if changed is not None:
        write_json(internal_dir / "clipping.json", changed)
    report = internal_dir / "validation_input.json"
    refuse_input(check_table(df, schema, "input", report))
    get_run_logger().info("input conforms to the schema (%d expectations)", len(schema) * 2)
    return df


@task(name="validate_output", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_output(synthetic: pd.DataFrame, schema: Schema, internal_dir: Path) -> None:
    """The synthetic table must conform to the same public schema (a failure is a bug)."""
    refuse_output(check_table(synthetic, schema, "output", internal_dir / "validation_output.json"))
