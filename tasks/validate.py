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

from flows.spec import ReleaseSpec
from mechanisms.errors import DPReleaseError
from mechanisms.schema import Schema
from tasks.files import write_json
from tasks.tables import DataError, read_table

__all__ = ["InputValidationError", "failing_rules", "validate_input", "validate_output"]


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


def check_table(df: pd.DataFrame, schema: Schema, name: str, report: Path) -> list[dict]:
    """Run the suite, write the report (with counts) to ``report``, return failures."""
    from expectations.suite import validate_table  # GX is heavy: import on first use

    suite, records = validate_table(df, schema, name)
    write_json(report, {"suite": suite, "results": records, "rows": len(df)})
    return failing_rules(records)


@task(name="validate_input", cache_policy=NO_CACHE, persist_result=False)
def validate_input(spec: ReleaseSpec, internal_dir: Path) -> pd.DataFrame:
    """Read the confidential table and check it against the public schema."""
    schema = spec.public_schema()
    df = read_table(spec.data_path, schema, spec.missing_tokens())
    if df.empty:
        raise InputValidationError(f"dataset file '{spec.data_path}' has no data rows")
    report = internal_dir / "validation_input.json"
    failures = check_table(df, schema, "input", report)
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise InputValidationError(
            "the input breaks the public schema:\n  "
            + "\n  ".join(lines)
            + "\nFix the data or the spec's schema; affected-row counts are in the "
            "internal validation report of the failure record."
        )
    get_run_logger().info("input conforms to the schema (%d expectations)", len(schema) * 2)
    return df


@task(name="validate_output", cache_policy=NO_CACHE, persist_result=False)
def validate_output(synthetic: pd.DataFrame, schema: Schema, internal_dir: Path) -> None:
    """The synthetic table must conform to the same public schema (a failure is a bug)."""
    failures = check_table(synthetic, schema, "output", internal_dir / "validation_output.json")
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise DPReleaseError("internal error: the synthetic data breaks the schema:\n  " + "\n  ".join(lines))
