"""``validate_input`` and ``validate_output``: the schema's GX suite on the input table
and on the synthetic table.

Policy: both see row-level data (confidential input, or the release before it is
published), so ``cache_policy=NO_CACHE`` (inputs are never hashed) and
``persist_result=False`` (never written to Prefect's result store). Their reports go
to ``internal/`` only; an error message names the column and the rule, never a count.
Great Expectations is imported on first use (``check_table``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.files import write_json
from dprelease.engines.inputs import (
    InputRefused,
    InputValidationError,
    failing_rules,
    read_input,
    refuse_input,
    refuse_output,
)
from dprelease.engines.tables import DataError
from dprelease.mechanisms.schema import Schema
from dprelease.spec import ReleaseSpec
from dprelease.tasks.scrub import scrub_errors

__all__ = ["check_table", "validate_input", "validate_output"]


def check_table(df: pd.DataFrame, schema: Schema, name: str, report: Path) -> list[dict]:
    """Run the suite, write the report (with counts) to ``report``, return failures."""
    from dprelease.expectations.suite import validate_table  # GX is heavy: import on first use

    suite, records = validate_table(df, schema, name)
    write_json(report, {"suite": suite, "results": records, "rows": len(df)})
    get_run_logger().info("%s table checked against %d expectations", name, len(records))
    return failing_rules(records)


@task(name="validate_input", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_input(spec: ReleaseSpec, internal_dir: Path) -> pd.DataFrame:
    """Read the confidential table, apply the declared policies (counts to
    ``internal/clipping.json``) and check it against the public schema. A refusal is raised
    as ``InputRefused``: its message names no column or rule (``detail`` does)."""
    schema = spec.public_schema()
    try:
        df, changed = read_input(spec)
        if df.empty:
            raise InputValidationError(f"dataset file '{spec.data_path}' has no data rows")
        if changed is not None:
            write_json(internal_dir / "clipping.json", changed)
        report = internal_dir / "validation_input.json"
        refuse_input(check_table(df, schema, "input", report))
    except DataError as e:  # a data-dependent outcome: Prefect hears only that and where
        raise InputRefused.of(e, "validate_input") from None
    return df


@task(name="validate_output", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_output(synthetic: pd.DataFrame, schema: Schema, internal_dir: Path) -> None:
    """The synthetic table must conform to the same public schema (a failure is a bug)."""
    refuse_output(check_table(synthetic, schema, "output", internal_dir / "validation_output.json"))
