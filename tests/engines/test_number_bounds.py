"""Issue 17: in a continuous column, ±inf and numbers too large for the bounds (a cell of
ten million digits included) break the bounds rule, never the whole-number rule of an
``integer: true`` column, which applies to the values inside the bounds only; a whole
number written as a float (51.0, as an export may write it) is a whole number. The
refusal names the column and the rule, never the value, and a huge cell is read in
about the time of a normal one (as a float: ±inf), never as a Python int."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pandas as pd
import pytest

from dprelease.engines.inputs import InputValidationError
from dprelease.engines.tables import read_table
from dprelease.spec import load_spec
from tests.helpers import TOY_GOOD, TOY_HEADER, TOY_SCHEMA, toy_schema, toy_spec, validate, write_spec

BIG = "9" * 10_000_000  # a 10 MB cell
BOUNDS_RULE = (
    "column 'k': values must lie within the public bounds [0, 10] (or declare `out_of_bounds: clip`)"
)
WHOLE_RULE = "column 'k': values must be whole numbers (integer: true)"


def _results(tmp_path) -> dict[str, bool]:
    report = json.loads((tmp_path / "internal" / "validation_input.json").read_text())
    return {r["rule"]: r["success"] for r in report["results"] if r["column"] == "k"}


@pytest.mark.parametrize(
    "cell",
    ["inf", "-inf", "Infinity", "1e999", "1e300", "-12", BIG, "-" + BIG, BIG + ".5"],
    ids=["inf", "-inf", "Infinity", "1e999", "1e300", "below", "10MB", "-10MB", "10MB-fraction"],
)
def test_infinite_and_huge_values_break_the_bounds_rule(cell, tmp_path):
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + f"0.5,{cell},a,lo\n")
    with pytest.raises(InputValidationError) as err:
        validate(spec, tmp_path)
    message = str(err.value)
    assert BOUNDS_RULE in message and "whole numbers" not in message
    assert not re.search(r"999|1e|Infinity|-12", message)  # never the value
    results = _results(tmp_path)
    assert results["values must be numbers"] and results["values must be whole numbers (integer: true)"]


@pytest.mark.parametrize("cells", [("51.0", "3"), ("3.0", "7.00"), ("1e1", "0")], ids=["51.0", "x.00", "1e1"])
def test_whole_numbers_written_as_floats_are_whole(cells, tmp_path):
    bounds = toy_schema(k={"bounds": [0, 60]})
    spec = toy_spec(tmp_path, TOY_HEADER + "".join(f"0.5,{c},a,lo\n" for c in cells), bounds)
    df = validate(spec, tmp_path)
    assert list(df["k"]) == [float(c) for c in cells]


def test_a_parquet_float_column_of_whole_numbers_is_whole(tmp_path):
    pd.DataFrame({"x": [0.1, 0.9], "k": [3.0, 7.0], "c": ["a", "b"], "o": ["lo", "hi"]}).to_parquet(
        tmp_path / "data.parquet"
    )
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": "data.parquet"})
    )
    assert list(validate(spec, tmp_path)["k"]) == [3.0, 7.0]


@pytest.mark.parametrize(
    ("cell", "rule"),
    [("3.5", WHOLE_RULE), ("10.5", BOUNDS_RULE), ("inf", BOUNDS_RULE)],
    ids=["fraction-inside", "fraction-outside", "inf"],
)
def test_the_whole_number_rule_applies_inside_the_bounds(cell, rule, tmp_path):
    """A fraction inside the bounds breaks the whole-number rule; one outside them is
    out of bounds (the rule reported first), and the whole-number rule holds."""
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + f"0.5,{cell},a,lo\n")
    with pytest.raises(InputValidationError, match=re.escape(rule)):
        validate(spec, tmp_path)
    assert _results(tmp_path)["values must be whole numbers (integer: true)"] is (rule == BOUNDS_RULE)


@pytest.mark.parametrize("cell", [BIG, "-" + BIG, "inf"], ids=["10MB", "-10MB", "inf"])
def test_clip_moves_huge_values_to_the_bounds(cell, tmp_path):
    spec = toy_spec(
        tmp_path, TOY_HEADER + TOY_GOOD + f"0.5,{cell},a,lo\n", toy_schema(k={"out_of_bounds": "clip"})
    )
    df = validate(spec, tmp_path)
    assert df["k"].dtype == np.int64 and df["k"].iloc[-1] == (0 if cell.startswith("-") else 10)


def test_a_huge_cell_is_read_as_a_float_in_linear_time(tmp_path):
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD * 1000 + f"0.5,{BIG},a,lo\n" + TOY_GOOD * 1000)
    started = time.perf_counter()
    df = read_table(spec.data_path, spec.public_schema(), spec.missing_tokens())
    took = time.perf_counter() - started
    assert df["k"].dtype == np.float64 and df["k"].iloc[2000] == np.inf and len(df) == 4001
    assert took < 3.0, took  # about 0.2 s: pyarrow refuses the cell, pandas reads it as text
