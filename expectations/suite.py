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
import numpy as np
import pandas as pd
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations.expectation import ColumnMapExpectation
from great_expectations.expectations.metrics.map_metric_provider import (
    ColumnMapMetricProvider,
    column_condition_partial,
)

from dprelease.mechanisms.calendar import to_iso
from dprelease.mechanisms.schema import Continuous, Ordinal, Schema, on_support

for _name in [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]:
    logging.getLogger(_name).setLevel(logging.WARNING)  # GX sets some of its loggers to INFO

__all__ = ["RESULT_FORMAT", "build_suite", "validate_table"]

RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
# integer: true columns too: a whole number may be stored as a float (51.0); the
# whole-number rule checks the values, after the bounds rule has caught ±inf and huge ones
_NUMBER_TYPES = "int64 Int64 int32 Int32 int16 int8 uint8 uint16 uint32 float64 Float64 float32".split()


class ColumnValuesWholeWithinBounds(ColumnMapMetricProvider):
    """The metric behind ``ExpectColumnValuesToBeWholeNumbers`` (GX registers it when the
    class is defined). Per value: outside [min_value, max_value] (±inf and huge values
    included: the bounds rule's business), or a whole number (51.0 is one)."""

    condition_metric_name = "column_values.whole_within_bounds"
    condition_value_keys = ("min_value", "max_value")

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(cls, column: pd.Series, min_value: float, max_value: float, **kwargs: Any) -> pd.Series:
        return ~column.between(min_value, max_value) | (column == np.floor(column))


class ExpectColumnValuesToBeWholeNumbers(ColumnMapExpectation):
    """The values of an ``integer: true`` column inside the public bounds are whole
    numbers, whatever the column's dtype; values outside them are left to the bounds rule,
    so ``inf`` or a huge number is reported as out of bounds, not as a fraction."""

    min_value: float
    max_value: float
    map_metric = "column_values.whole_within_bounds"
    success_keys = ("min_value", "max_value", "mostly")


class ColumnValuesOnSupport(ColumnMapMetricProvider):
    """The metric behind ``ExpectColumnValuesToBeOnSupport``: per value, does it equal the
    declared number nearest to it (``mechanisms.schema.on_support``: within
    ±½·10^−decimals, or a relative ``VALUES_RTOL``)? Text is never on the support (the
    type rule names it)."""

    condition_metric_name = "column_values.on_support"
    condition_value_keys = ("value_set", "decimals")

    @column_condition_partial(engine=PandasExecutionEngine)
    def _pandas(
        cls, column: pd.Series, value_set: list[float], decimals: int | None, **kwargs: Any
    ) -> pd.Series:
        x = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
        support = np.sort(np.array(value_set, dtype=float))
        return pd.Series(on_support(x, support, decimals), index=column.index)


class ExpectColumnValuesToBeOnSupport(ColumnMapExpectation):
    """The values of a column with a declared finite support (``values``) are those
    numbers, equality judged as ``Continuous.to_bins`` counts them (``on_support``)."""

    value_set: list[float]
    decimals: int | None = None
    map_metric = "column_values.on_support"
    success_keys = ("value_set", "decimals", "mostly")


def _rule(column: str, rule: str) -> dict:
    return {"column": column, "rule": rule}


def build_suite(schema: Schema, name: str) -> gx.ExpectationSuite:
    """One suite per schema; each expectation's ``meta`` holds the human rule, in the
    order a steward should fix them (a later rule may fail only because an earlier did)."""
    expectations: list[gx.expectations.Expectation] = []
    for c in schema.columns:
        if isinstance(c, Continuous):
            if not c.missing:
                expectations.append(
                    gxe.ExpectColumnValuesToNotBeNull(
                        column=c.name,
                        meta=_rule(
                            c.name,
                            "missing values (empty, NA, NaN) are not allowed in a continuous column "
                            "(or declare `missing: allowed`)",
                        ),
                    )
                )
            if c.calendar is None:
                kind, bounds = "numbers", f"[{c.lower:g}, {c.upper:g}] (or declare `out_of_bounds: clip`)"
            else:
                lo, hi = to_iso(np.array([c.lower, c.upper]), c.calendar)
                kind, bounds = f"ISO 8601 dates (e.g. {lo})", f"[{lo}, {hi}] at {c.calendar} resolution"
            expectations += [
                gxe.ExpectColumnValuesToBeInTypeList(
                    column=c.name, type_list=_NUMBER_TYPES, meta=_rule(c.name, f"values must be {kind}")
                ),
                gxe.ExpectColumnValuesToBeBetween(
                    column=c.name,
                    min_value=c.lower,
                    max_value=c.upper,
                    meta=_rule(c.name, f"values must lie within the public bounds {bounds}"),
                ),
            ]
            if c.integer and c.calendar is None:
                expectations.append(
                    ExpectColumnValuesToBeWholeNumbers(
                        column=c.name,
                        min_value=c.lower,
                        max_value=c.upper,
                        meta=_rule(c.name, "values must be whole numbers (integer: true)"),
                    )
                )
            if c.values is not None:
                expectations.append(
                    ExpectColumnValuesToBeOnSupport(
                        column=c.name,
                        value_set=list(c.values),
                        decimals=c.decimals,
                        meta=_rule(c.name, _support_rule(c)),
                    )
                )
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


def _support_rule(c: Continuous) -> str:
    """The ``values`` rule: how equality is judged, and how to relax it (never a value
    of the data: only the declared count and precision)."""
    n = len(c.values or ())
    hint = (
        "declare decimals: d to match the numbers to d decimal places"
        if c.decimals is None
        else "declare fewer decimals to match more coarsely"
    )
    return f"values must be among the {n} declared numbers (values: ...), {c.values_equality}; or {hint}"


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
