"""Bad input gets a clear error naming the column and the rule, and never a value or a
count (those stay in the internal report)."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger

from engines.inputs import InputValidationError
from engines.tables import DataError, read_table
from spec import load_spec
from tasks.validate import validate_input
from tests.flows.helpers import adult_rows, write_spec

TOY_SCHEMA = {
    "x": {"type": "continuous", "bounds": [0.0, 1.0]},
    "k": {"type": "continuous", "bounds": [0, 10], "integer": True},
    "c": {"type": "nominal", "categories": ["a", "b"]},
    "o": {"type": "ordinal", "levels": ["lo", "hi"], "missing": "NA"},
}


def _toy(tmp_path, csv: str):
    (tmp_path / "data.csv").write_text(csv)
    return load_spec(write_spec(tmp_path, checks={}, schema=TOY_SCHEMA))


def _validate(spec, tmp_path):
    with disable_run_logger():
        return validate_input.fn(spec, tmp_path / "internal")


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
    spec = _toy(tmp_path, "x,k,c,o\n" + body)
    with pytest.raises(InputValidationError, match=re.escape(f"column '{column}': {rule}")) as err:
        _validate(spec, tmp_path)
    assert not re.search(r"\d+ rows?", str(err.value))  # counts stay internal
    report = json.loads((tmp_path / "internal" / "validation_input.json").read_text())
    failed = [r for r in report["results"] if not r["success"] and r["column"] == column]
    assert failed and all("partial_unexpected_list" not in r for r in report["results"])


def test_declared_missing_token_is_a_level(tmp_path):
    spec = _toy(tmp_path, "x,k,c,o\n0.5,3,a,lo\n0.2,0,b,\n")
    df = _validate(spec, tmp_path)
    assert list(df["o"]) == ["lo", "NA"]


def test_adult_sample_with_missing_tokens_passes(tmp_path):
    spec = load_spec(write_spec(tmp_path, adult_rows(300)))
    assert len(_validate(spec, tmp_path)) == 300


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            ["x", "k", "c", "o", "extra"],
            "the data header has 1 column(s) the schema does not declare (not shown",
        ),
        (["x", "k", "c"], "column 'o' is declared in the schema but missing from the data"),
    ],
)
def test_header_mismatch(columns, message, tmp_path):
    row = {"x": 0.5, "k": 1, "c": "a", "o": "lo", "extra": 1}
    spec = _toy(tmp_path, pd.DataFrame([{c: row[c] for c in columns}]).to_csv(index=False))
    with pytest.raises(DataError, match=re.escape(message)):
        _validate(spec, tmp_path)


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff\xfe garbage \x00" * 50, b'x,k,c,o\n0.5,3,a,lo\n0.5,3,"a,lo\n', b""],
    ids=["binary", "unterminated-quote", "empty-file"],
)
def test_unreadable_files(content, tmp_path):
    spec = load_spec(write_spec(tmp_path, checks={}, schema=TOY_SCHEMA))
    (tmp_path / "data.csv").write_bytes(content)
    with pytest.raises(DataError, match=r"could not be read \(\w+\)"):
        _validate(spec, tmp_path)


def test_no_rows(tmp_path):
    spec = _toy(tmp_path, "x,k,c,o\n")
    with pytest.raises(DataError, match="has no data rows"):
        _validate(spec, tmp_path)


def test_missing_file(tmp_path):
    spec = load_spec(write_spec(tmp_path, checks={}, schema=TOY_SCHEMA))
    with pytest.raises(DataError, match=re.escape("does not exist; fix dataset.path")):
        _validate(spec, tmp_path)


def test_parquet_input(tmp_path):
    df = pd.DataFrame({"x": [0.1, 0.9], "k": np.array([1, 2]), "c": ["a", "b"], "o": ["hi", None]})
    df.to_parquet(tmp_path / "data.parquet")
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": "data.parquet"})
    )
    assert list(_validate(spec, tmp_path)["o"]) == ["hi", "NA"]


def test_read_table_keeps_text_categories(tmp_path):
    spec = _toy(tmp_path, "x,k,c,o\n0.5,3,a,NA\n")
    df = read_table(spec.data_path, spec.public_schema(), spec.missing_tokens())
    assert df["o"].tolist() == ["NA"]  # the token itself, not a float NaN


def test_write_csv_round_trips_awkward_text(tmp_path):
    from bundle.write import write_csv

    df = pd.DataFrame({"a,b": [1, 2], "c": pd.array(['x,"y"', "plain"], dtype="str")})
    write_csv(df, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == '"a,b",c'
    back = pd.read_csv(tmp_path / "t.csv", dtype={"c": str})
    assert back["a,b"].tolist() == [1, 2] and back["c"].tolist() == ['x,"y"', "plain"]


def test_text_far_down_a_numeric_column_is_a_type_error(tmp_path):
    """Text past the reader's first block (types are inferred from it) still turns the
    whole column into text, so the expectation names the column and no parser message
    quoting the value reaches the user."""
    rows = "".join(f"0.5,{i % 10},a,lo\n" for i in range(150_000))
    spec = _toy(tmp_path, "x,k,c,o\n" + rows + "0.5,oops,a,lo\n")
    with pytest.raises(InputValidationError, match=re.escape("column 'k': values must be whole numbers")):
        _validate(spec, tmp_path)
