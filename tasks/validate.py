"""``validate_input`` and ``validate_output``: the schema's GX suite on the input table
and on the synthetic table.

Policy: both see row-level data (confidential input, or the release before it is
published), so ``cache_policy=NO_CACHE`` (inputs are never hashed) and
``persist_result=False`` (never written to Prefect's result store). Their reports go
to ``internal/`` only; an error message names the column and the rule, never a count.
Great Expectations is imported on first use (``check_table``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.files import write_json
from dprelease.engines.inputs import InputRefused
from dprelease.engines.road import Report, checked_input, checked_output
from dprelease.engines.tables import DataError
from dprelease.mechanisms.schema import Schema
from dprelease.spec import ReleaseSpec
from dprelease.tasks.scrub import scrub_errors

__all__ = ["validate_input", "validate_output"]


def _to_internal(internal_dir: Path) -> Report:
    """The road's reports as ``internal/<name>.json`` (confidential: with counts)."""

    def report(name: str, content: Mapping[str, object]) -> None:
        write_json(internal_dir / f"{name}.json", dict(content))
        if name.startswith("validation_"):
            results = content.get("results")
            n = len(results) if isinstance(results, list) else 0
            get_run_logger().info(
                "%s table checked against %d expectations", name.removeprefix("validation_"), n
            )

    return report


@task(name="validate_input", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_input(spec: ReleaseSpec, internal_dir: Path) -> pd.DataFrame:
    """``engines.road.checked_input``: read the confidential table, apply the declared
    policies (counts to ``internal/clipping.json``) and check it against the public schema.
    A refusal is raised as ``InputRefused``: its message names no column or rule (``detail``
    does)."""
    try:
        return checked_input(spec, report=_to_internal(internal_dir))
    except DataError as e:  # a data-dependent outcome: Prefect hears only that and where
        raise InputRefused.of(e, "validate_input") from None


@task(name="validate_output", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def validate_output(synthetic: pd.DataFrame, schema: Schema, internal_dir: Path) -> None:
    """``engines.road.checked_output``: the synthetic table must conform to the same public
    schema (a failure is a bug)."""
    checked_output(synthetic, schema, _to_internal(internal_dir))
