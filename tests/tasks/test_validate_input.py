"""The ``validate_input`` task (its body, ``.fn``, without Prefect): the schema's rules
(the GX suite) refuse a table whose values break them with an ``InputValidationError``
naming the column and the rule, never a value or a count (those stay in
``internal/validation_input.json``): wrong types, NaN and ±inf in a continuous column,
values outside the public bounds, unknown categories, missing cells, and a table without
rows. The declared ``clip``/``other`` policies are in test_validate_policies.py; reading
the file in tests/engines/test_read_refusals.py."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest

from dprelease.engines.inputs import InputValidationError
from dprelease.engines.tables import DataError
from dprelease.spec import load_spec
from tests.helpers import (
    TOY_GOOD,
    TOY_HEADER,
    TOY_SCHEMA,
    adult_rows,
    toy_schema,
    toy_spec,
    validate,
    write_spec,
)

TWO_LEVELS = toy_schema(o={"levels": ["lo", "hi"]})  # the ordinal column without 'mid'


def _no_counts(message: str) -> None:
    """Our messages about the data never carry a count of affected rows or cells."""
    assert not re.search(r"\d+ (rows?|cells?|values?)\b", message), message


CASES = [
    # (what is wrong, CSV body after the header, column, rule text)
    ("above bound", "0.5,3,a,lo\n1.5,3,a,lo\n", "x", "values must lie within the public bounds [0, 1]"),
    ("infinite", "0.5,3,a,lo\ninf,3,a,lo\n", "x", "values must lie within the public bounds [0, 1]"),
    ("NaN", "0.5,3,a,lo\nNaN,3,a,lo\n", "x", "missing values (empty, NA, NaN) are not allowed"),
    ("empty numeric", "0.5,3,a,lo\n,3,a,lo\n", "x", "missing values (empty, NA, NaN) are not allowed"),
    ("text in numbers", "0.5,3,a,lo\nabc,3,a,lo\n", "x", "values must be numbers"),
    (
        "fraction in integer",
        "0.5,3,a,lo\n0.5,3.5,a,lo\n",
        "k",
        "values must be whole numbers (integer: true)",
    ),
    ("unknown category", "0.5,3,a,lo\n0.5,3,zz,lo\n", "c", "values must be among the 2 declared categories"),
    (
        "missing category",
        "0.5,3,a,lo\n0.5,3,,lo\n",
        "c",
        "missing values are not allowed; declare `missing: <token>`",
    ),
    ("unknown level", "0.5,3,a,lo\n0.5,3,a,mid\n", "o", "values must be among the 3 declared levels"),
]


@pytest.mark.parametrize(("case", "body", "column", "rule"), CASES, ids=[c[0] for c in CASES])
def test_input_errors_name_column_and_rule(case, body, column, rule, tmp_path):
    spec = toy_spec(tmp_path, "x,k,c,o\n" + body, TWO_LEVELS)
    with pytest.raises(InputValidationError, match=re.escape(f"column '{column}': {rule}")) as err:
        validate(spec, tmp_path)
    assert not re.search(r"\d+ rows?", str(err.value))  # counts stay internal
    report = json.loads((tmp_path / "internal" / "validation_input.json").read_text())
    failed = [r for r in report["results"] if not r["success"] and r["column"] == column]
    assert failed and all("partial_unexpected_list" not in r for r in report["results"])


GZIPPED = [c for c in CASES if c[0] in ("text in numbers", "unknown category")]


@pytest.mark.parametrize(("case", "body", "column", "rule"), GZIPPED, ids=[c[0] for c in GZIPPED])
def test_a_gzipped_csv_is_refused_the_same_way(case, body, column, rule, tmp_path):
    """A .csv.gz (the demo's format) is decompressed by the reader and refused by the same
    rules: the message names the column and the rule, never the value."""
    (tmp_path / "data.csv.gz").write_bytes(gzip.compress(("x,k,c,o\n" + body).encode()))
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TWO_LEVELS, dataset={"name": "toy", "path": "data.csv.gz"})
    )
    with pytest.raises(InputValidationError, match=re.escape(f"column '{column}': {rule}")) as err:
        validate(spec, tmp_path)
    assert "abc" not in str(err.value) and "zz" not in str(err.value)


def test_declared_missing_token_is_a_level(tmp_path):
    spec = toy_spec(tmp_path, "x,k,c,o\n0.5,3,a,lo\n0.2,0,b,\n", TWO_LEVELS)
    df = validate(spec, tmp_path)
    assert list(df["o"]) == ["lo", "NA"]


def test_adult_sample_with_missing_tokens_passes(tmp_path):
    spec = load_spec(write_spec(tmp_path, adult_rows(300)))
    assert len(validate(spec, tmp_path)) == 300


def test_parquet_input(tmp_path):
    df = pd.DataFrame({"x": [0.1, 0.9], "k": np.array([1, 2]), "c": ["a", "b"], "o": ["hi", None]})
    df.to_parquet(tmp_path / "data.parquet")
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TWO_LEVELS, dataset={"name": "toy", "path": "data.parquet"})
    )
    assert list(validate(spec, tmp_path)["o"]) == ["hi", "NA"]


def test_text_far_down_a_numeric_column_is_a_type_error(tmp_path):
    """Text past the reader's first block (types are inferred from it) still turns the
    whole column into text, so the expectation names the column and no parser message
    quoting the value reaches the user."""
    rows = "".join(f"0.5,{i % 10},a,lo\n" for i in range(150_000))
    spec = toy_spec(tmp_path, "x,k,c,o\n" + rows + "0.5,oops,a,lo\n", TWO_LEVELS)
    with pytest.raises(InputValidationError, match=re.escape("column 'k': values must be numbers")):
        validate(spec, tmp_path)


def test_csv_cut_mid_row_names_the_columns_it_lacks(tmp_path):
    """A CSV cut off inside its last row: the short row's cells are missing, and the
    rules name the columns."""
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,3")
    with pytest.raises(InputValidationError, match=re.escape("column 'c': missing values are not allowed")):
        validate(spec, tmp_path)


@pytest.mark.parametrize(
    ("frame", "column", "rule"),
    [
        ({"x": ["0.5", "abc"]}, "x", "values must be numbers"),
        ({"k": [1.5, 2.0]}, "k", "values must be whole numbers (integer: true)"),
        ({"x": [True, False]}, "x", "values must be numbers"),
        ({"c": [1, 2]}, "c", "values must be among the 2 declared categories"),
    ],
    ids=["text-in-number", "fraction-in-integer", "bool-in-number", "numbers-in-category"],
)
def test_wrong_types(frame, column, rule, tmp_path):
    df = pd.DataFrame({"x": [0.5, 0.2], "k": [3, 4], "c": ["a", "b"], "o": ["lo", "hi"]})
    for name, values in frame.items():
        df[name] = values
    df.to_parquet(tmp_path / "data.parquet")
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": "data.parquet"})
    )
    with pytest.raises(InputValidationError, match=re.escape(f"column '{column}': {rule}")) as err:
        validate(spec, tmp_path)
    _no_counts(str(err.value))


@pytest.mark.parametrize("name", ["data.csv", "data.parquet"])
def test_empty_data(name, tmp_path):
    if name.endswith(".csv"):
        (tmp_path / name).write_text(TOY_HEADER)
    else:
        pd.DataFrame({c: pd.Series([], dtype=str) for c in TOY_SCHEMA}).to_parquet(tmp_path / name)
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": name})
    )
    with pytest.raises(
        InputValidationError, match=re.escape(f"dataset file '{tmp_path / name}' has no data rows")
    ):
        validate(spec, tmp_path)


def test_no_rows(tmp_path):
    spec = toy_spec(tmp_path, "x,k,c,o\n", TWO_LEVELS)
    with pytest.raises(DataError, match="has no data rows"):
        validate(spec, tmp_path)


@pytest.mark.parametrize("policy", ["reject", "clip"])
@pytest.mark.parametrize(
    ("cell", "rule"),
    [
        ("NaN", "missing values (empty, NA, NaN) are not allowed in a continuous column"),
        ("", "missing values (empty, NA, NaN) are not allowed in a continuous column"),
        ("inf", "values must lie within the public bounds [0, 1]"),
        ("-inf", "values must lie within the public bounds [0, 1]"),
    ],
    ids=["nan", "empty", "inf", "-inf"],
)
def test_nan_and_inf_in_a_continuous_column(policy, cell, rule, tmp_path):
    """NaN is missing, not out of bounds: an error under both policies. ±inf is out of
    bounds: the bounds rule under reject, the nearer bound under clip."""
    spec = toy_spec(
        tmp_path, TOY_HEADER + TOY_GOOD + f"{cell},3,a,lo\n", toy_schema(x={"out_of_bounds": policy})
    )
    if policy == "clip" and "inf" in cell:
        df = validate(spec, tmp_path)
        assert df["x"].iloc[-1] == (1.0 if cell == "inf" else 0.0)
        return
    with pytest.raises(InputValidationError, match=re.escape(f"column 'x': {rule}")) as err:
        validate(spec, tmp_path)
    _no_counts(str(err.value))


def test_out_of_bounds_reject(tmp_path):
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,11,a,lo\n")
    with pytest.raises(InputValidationError) as err:
        validate(spec, tmp_path)
    message = str(err.value)
    assert (
        "column 'k': values must lie within the public bounds [0, 10] (or declare `out_of_bounds: clip`)"
        in (message)
    )
    _no_counts(message)
    assert not (tmp_path / "internal" / "clipping.json").exists()  # no policy declared


def test_unknown_category_reject(tmp_path):
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,3,zz,lo\n0.5,3,a,medium\n")
    with pytest.raises(InputValidationError) as err:
        validate(spec, tmp_path)
    message = str(err.value)
    assert "column 'c': values must be among the 2 declared categories" in message
    assert "column 'o': values must be among the 4 declared levels" in message  # 3 + the missing token
    assert "`unknown: other`" in message
    _no_counts(message)


LOG_VALUES = {"type": "continuous", "bounds": [0.0, 4.0], "values": [0.693147, 1.94591, 3.258097]}


def test_declared_values_match_within_the_declared_decimals(tmp_path):
    """Issue 33: the file prints log(26) as 3.258096, the spec declares 3.258097. With
    decimals: 5 the value is the declared one (and reads as it); without, the refusal says
    how equality is judged and how to relax it, never the file's value."""
    body = "x,k,c,o,lk\n0.5,3,a,lo,3.258096\n0.2,7,b,hi,0.693147\n"
    schema = {**TWO_LEVELS, "lk": {**LOG_VALUES, "decimals": 5}}
    df = validate(toy_spec(tmp_path, body, schema), tmp_path)
    assert list(df["lk"]) == [3.258096, 0.693147]  # validated as on the support
    exact = {**TWO_LEVELS, "lk": LOG_VALUES}
    with pytest.raises(InputValidationError) as err:
        validate(toy_spec(tmp_path, body, exact), tmp_path)
    message = str(err.value)
    assert (
        "column 'lk': values must be among the 3 declared numbers (values: ...), equal within a relative "
        "1e-9 (|x − v| ≤ 1e-9·|v|); or declare decimals: d to match the numbers to d decimal places"
    ) in message
    assert "3.258096" not in message
    _no_counts(message)
