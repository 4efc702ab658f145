"""Reading the confidential table (``engines.inputs.read_input`` → ``engines.tables.
read_table``): a missing, unreadable, truncated or mislabelled file and a header that is
not exactly the schema's columns are refused with a ``DataError`` that names the file or
the declared columns, never a cell (a header line may hold a record). The rules on the
values are the validation task's (tests/tasks/test_validate_input.py)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pandas as pd
import pytest

from dprelease.engines.header import check_columns
from dprelease.engines.inputs import read_input
from dprelease.engines.tables import DataError, read_table
from dprelease.spec import load_spec
from tests.helpers import TOY_GOOD, TOY_HEADER, TOY_SCHEMA, toy_spec, write_spec


def _truncated_parquet(path: Path) -> None:
    pd.DataFrame({"x": [0.5] * 50, "k": [3] * 50, "c": ["a"] * 50, "o": ["lo"] * 50}).to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _truncated_gzip(path: Path) -> None:
    data = gzip.compress((TOY_HEADER + TOY_GOOD * 2000).encode())
    path.write_bytes(data[: len(data) // 2])


def _not_parquet(path: Path) -> None:
    path.write_text(TOY_HEADER + TOY_GOOD)


@pytest.mark.parametrize(
    ("name", "make"),
    [("data.parquet", _truncated_parquet), ("data.csv.gz", _truncated_gzip), ("data.parquet", _not_parquet)],
    ids=["truncated-parquet", "truncated-csv-gz", "csv-named-parquet"],
)
def test_unreadable_or_truncated_files(name, make, tmp_path):
    make(tmp_path / name)
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": name})
    )
    with pytest.raises(
        DataError, match=r"dataset file '.*" + re.escape(name) + r"' could not be read \(\w+\)"
    ):
        read_input(spec)


@pytest.mark.parametrize(
    "content",
    [b"\x00\xff\xfe garbage \x00" * 50, b'x,k,c,o\n0.5,3,a,lo\n0.5,3,"a,lo\n', b""],
    ids=["binary", "unterminated-quote", "empty-file"],
)
def test_unreadable_files(content, tmp_path):
    spec = load_spec(write_spec(tmp_path, checks={}, schema=TOY_SCHEMA))
    (tmp_path / "data.csv").write_bytes(content)
    with pytest.raises(DataError, match=r"could not be read \(\w+\)"):
        read_input(spec)


def test_missing_file(tmp_path):
    spec = load_spec(write_spec(tmp_path, checks={}, schema=TOY_SCHEMA))
    with pytest.raises(DataError, match=re.escape("does not exist; fix dataset.path")):
        read_input(spec)


def test_a_folder_is_not_taken_for_a_missing_file(tmp_path):
    """Issue 30: a folder given as the data path is named as a folder, not as missing."""
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": "data.csv"})
    )
    (tmp_path / "data.csv").mkdir()
    with pytest.raises(
        DataError, match=r"dataset file '.*data\.csv' is a folder, not a file; fix dataset\.path"
    ):
        read_input(spec)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("x,k,c,o,extra", "the data header has 1 column(s) the schema does not declare (not shown"),
        ("x,k,c", "column 'o' is declared in the schema but missing from the data"),
        (
            "x,K,c,o",
            "line looks like a header); column 'k' is declared in the schema but missing",
        ),
        ("x,k,c,o,x", "columns ['x'] appear more than once in the data header"),
        ("x,k,c,o,39,39", "1 column name(s) appear more than once in the data header"),
    ],
    ids=["extra", "missing", "case", "duplicate", "duplicate-undeclared"],
)
def test_header_mismatch(header, message, tmp_path):
    width = len(header.split(","))
    row = ",".join((["0.5", "3", "a", "lo"] + ["0.1"] * 4)[:width])
    spec = toy_spec(tmp_path, f"{header}\n{row}\n")
    with pytest.raises(DataError, match=re.escape(message)):
        read_input(spec)


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
def test_header_of_a_table_written_by_pandas(columns, message, tmp_path):
    row = {"x": 0.5, "k": 1, "c": "a", "o": "lo", "extra": 1}
    spec = toy_spec(tmp_path, pd.DataFrame([{c: row[c] for c in columns}]).to_csv(index=False))
    with pytest.raises(DataError, match=re.escape(message)):
        read_input(spec)


def test_a_file_without_header_never_quotes_its_first_record(tmp_path):
    spec = toy_spec(tmp_path, "0.5,3,secret-a,lo\n0.25,4,b,hi\n")
    with pytest.raises(DataError) as raised:
        read_input(spec)
    message = str(raised.value)
    assert "4 column(s) the schema does not declare" in message
    assert "secret-a" not in message and "0.5" not in message


@pytest.mark.parametrize(
    "header",
    [
        "x,k,c,o,39",  # a number
        "x,k,c,o,hi",  # a declared level: a record's value
        "x,k,c,o,jane.doe@example.org",  # not a column name
        "x,k,c,o," + "a" * 41,  # too long
        "x,zip code 75011,k9,o2,o3",  # fewer than half of the declared columns
    ],
    ids=["number", "declared-value", "not-an-identifier", "too-long", "mostly-undeclared"],
)
def test_a_header_that_may_be_a_record_is_counted_not_quoted(header, tmp_path):
    """Issue 18: the CLI's check before Prefect (``quote=True``) names undeclared header
    names only when the line looks like a header; the flow's readers never do."""
    TOY = toy_spec(tmp_path, TOY_HEADER + "\n" + TOY_GOOD).public_schema()
    with pytest.raises(DataError) as raised:
        check_columns(header.split(","), TOY, quote=True)
    message = str(raised.value)
    assert "column(s) the schema does not declare (not shown" in message
    assert all(word not in message for word in ("39", "'hi'", "jane", "aaaa", "75011", "k9"))


def test_a_real_header_is_named_only_where_the_steward_alone_reads_it(tmp_path):
    TOY = toy_spec(tmp_path, TOY_HEADER + "\n" + TOY_GOOD).public_schema()
    with pytest.raises(DataError, match=re.escape("does not declare: ['extra', 'K']")):
        check_columns(["x", "k", "c", "o", "extra", "K"], TOY, quote=True)
    with pytest.raises(DataError) as raised:  # the flow's readers: counted
        check_columns(["x", "k", "c", "o", "extra"], TOY)
    assert "extra" not in str(raised.value).split("schema's columns")[0]


def test_read_table_keeps_text_categories(tmp_path):
    spec = toy_spec(tmp_path, "x,k,c,o\n0.5,3,a,NA\n")
    df = read_table(spec.data_path, spec.public_schema(), spec.missing_tokens())
    assert df["o"].tolist() == ["NA"]  # the token itself, not a float NaN
