"""Great Expectations suites built from the public schema, and their validation.

Importing this module imports GX (about 3–6 s), so the validation tasks import it lazily.
Results are requested in BASIC format with ``partial_unexpected_count = 0``: counts only,
never a raw value (GX's partial lists and index lists carry raw values). Even the counts
are confidential: they go to ``internal/`` and never into a message or artifact.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
from great_expectations.data_context.types.base import ProgressBarsConfig

from mechanisms.schema import Continuous, Ordinal, Schema

for _name in [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]:
    logging.getLogger(_name).setLevel(logging.WARNING)  # GX sets some of its loggers to INFO

__all__ = ["RESULT_FORMAT", "build_suite", "validate_table"]

RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
_INTEGER_TYPES = ["int64", "Int64", "int32", "Int32", "int16", "int8", "uint8", "uint16", "uint32"]
_FLOAT_TYPES = ["float64", "Float64", "float32"]


def _rule(column: str, rule: str) -> dict:
    return {"column": column, "rule": rule}


def build_suite(schema: Schema, name: str) -> gx.ExpectationSuite:
    """One suite per schema; each expectation's ``meta`` holds the human rule, in the
    order a steward should fix them (a later rule may fail only because an earlier did)."""
    expectations = []
    for c in schema.columns:
        if isinstance(c, Continuous):
            types = _INTEGER_TYPES if c.integer else _INTEGER_TYPES + _FLOAT_TYPES
            kind = "whole numbers (integer: true)" if c.integer else "numbers"
            expectations += [
                gxe.ExpectColumnValuesToNotBeNull(
                    column=c.name,
                    meta=_rule(
                        c.name, "missing values (empty, NA, NaN) are not allowed in a continuous column"
                    ),
                ),
                gxe.ExpectColumnValuesToBeInTypeList(
                    column=c.name, type_list=types, meta=_rule(c.name, f"values must be {kind}")
                ),
                gxe.ExpectColumnValuesToBeBetween(
                    column=c.name,
                    min_value=c.lower,
                    max_value=c.upper,
                    meta=_rule(
                        c.name,
                        f"values must lie within the public bounds [{c.lower:g}, {c.upper:g}] "
                        "(or declare `out_of_bounds: clip`)",
                    ),
                ),
            ]
        else:
            what = "levels" if isinstance(c, Ordinal) else "categories"
            expectations += [
                gxe.ExpectColumnValuesToNotBeNull(
                    column=c.name,
                    meta=_rule(
                        c.name,
                        "missing values are not allowed; declare `missing: <token>` for this "
                        "column to keep them as a category",
                    ),
                ),
                gxe.ExpectColumnValuesToBeInSet(
                    column=c.name,
                    value_set=list(c.values),
                    meta=_rule(
                        c.name,
                        f"values must be among the {len(c.values)} declared {what} "
                        f"(or declare `unknown: other` and `other: <one of the {what}>`)",
                    ),
                ),
            ]
    for i, e in enumerate(expectations):  # GX reports results in its own order
        e.meta = {**(e.meta or {}), "order": i}
    return gx.ExpectationSuite(name=name, expectations=expectations)


@functools.lru_cache(maxsize=8)
def _validator(schema: Schema, name: str) -> tuple[gx.ExpectationSuite, Any]:
    """One ephemeral context, suite and batch definition per (schema, name) and process: a
    streaming engine validates many chunks against them (a context per chunk costs ≈0.4 s)."""
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    definition = (
        ctx.data_sources.add_pandas(f"{name}-source")
        .add_dataframe_asset(f"{name}-table")
        .add_batch_definition_whole_dataframe("all")
    )
    return build_suite(schema, name), definition


def validate_table(df: pd.DataFrame, schema: Schema, name: str) -> tuple[dict, list[dict]]:
    """Validate ``df``; returns the suite (JSON) and one record per expectation:
    column, rule, success and the counts GX reports (confidential)."""
    suite, definition = _validator(schema, name)
    batch = definition.get_batch(batch_parameters={"dataframe": df})
    result = batch.validate(suite, result_format=RESULT_FORMAT)
    records = []
    for r in result.results:
        cfg = r.expectation_config
        res = r.result or {}
        records.append(
            {
                **cfg.meta,
                "expectation": cfg.type,
                "success": bool(r.success),
                "element_count": res.get("element_count"),
                "unexpected_count": res.get("unexpected_count"),
                "raised_exception": bool(r.exception_info.get("raised_exception", False)),
            }
        )
    return suite.to_json_dict(), sorted(records, key=lambda r: r["order"])
