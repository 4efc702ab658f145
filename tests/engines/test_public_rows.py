"""The input's public n without parsing a value (``engines.header.data_lines``, behind
``engines.inputs.public_rows``), what ``mechanism: auto`` chooses on before the reserve:

* it is a count of lines and nothing else: on any bytes at all, in any block size, plain
  or gzipped, it returns the number of lines after the first and never fails (so no record,
  however malformed, can turn the ledger's refusal into a data-dependent error);
* on a well-formed file (LF, CRLF or CR line ends, empty lines, no final line end, gzip,
  Parquet) it is the number of records each engine's reader finds;
* the rule's fitted rows are the rows each engine fits: the memory engine's holdout split,
  the streaming engines' per-row coin with the release's own row keys;
* where the readers find another number (a value holding a line break), ``check_rows``
  refuses the file before any noise, on every engine, and ``dprelease validate`` says why.
"""

from __future__ import annotations

import functools
import gzip
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines import header
from dprelease.engines.chunks import Scan, local_chunks
from dprelease.engines.header import data_lines
from dprelease.engines.inputs import (
    InputValidationError,
    check_rows,
    holdout_split,
    public_rows,
    read_input,
    resolve_mechanism,
)
from dprelease.engines.runners import LocalEngine
from dprelease.engines.tables import read_table
from dprelease.mechanisms.rowkeys import RowKeys
from dprelease.spec import load_spec
from dprelease.tasks.streaming import chunk_job
from tests.helpers import TOY_SCHEMA, cli_text, write_spec
from tests.properties import property_settings

pytestmark = pytest.mark.property


def _reference(data: bytes) -> int:
    """Lines after the first: runs of bytes that are not line ends."""
    return max(len(re.findall(rb"[^\r\n]+", data)) - 1, 0)


@given(data=st.binary(max_size=400), block=st.integers(1, 9), gz=st.booleans())
@example(data=b"a\r\n1\r\n\r\n2", block=1, gz=False)  # CRLF across a block boundary, no final line end
@example(data=b"\n\n\r\r", block=2, gz=True)
@property_settings(200)
def test_the_count_is_lines_and_never_fails(tmp_path_factory, monkeypatch, data, block, gz):
    monkeypatch.setattr(header, "_BLOCK_BYTES", block)
    path = tmp_path_factory.mktemp("lines") / ("data.csv.gz" if gz else "data.csv")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert data_lines(path) == _reference(data)


ROW = st.tuples(
    st.floats(0, 1).map(lambda x: f"{x:.3f}"),
    st.integers(0, 10).map(str),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["lo", "mid", "hi", "NA"]),
).map(",".join)


@given(
    rows=st.lists(ROW, max_size=40),
    end=st.sampled_from(["\n", "\r\n", "\r"]),
    blank=st.sets(st.integers(0, 41), max_size=4),
    final=st.booleans(),
    fmt=st.sampled_from(["data.csv", "data.csv.gz", "data.parquet"]),
)
@example(rows=["0.500,3,a,lo", "0.200,7,b,NA"], end="\r", blank={0, 2}, final=False, fmt="data.csv.gz")
@example(rows=["0.500,3,a,lo"] * 3, end="\r\n", blank={1}, final=True, fmt="data.csv")
@property_settings(25)
def test_on_a_well_formed_file_the_count_is_the_readers(tmp_path_factory, rows, end, blank, final, fmt):
    """``data_lines`` equals the memory engine's reader and the streaming engines' chunks."""
    folder = tmp_path_factory.mktemp("readers")
    lines = ["x,k,c,o", *rows]
    text = "".join(line + end + (end if i in blank else "") for i, line in enumerate(lines))
    text = text if final else text.rstrip(end)
    path = folder / fmt
    if fmt == "data.parquet":
        frame = pd.DataFrame([r.split(",") for r in rows], columns=["x", "k", "c", "o"], dtype=str)
        frame.to_parquet(path, index=False)
    else:
        path.write_bytes(gzip.compress(text.encode()) if fmt.endswith(".gz") else text.encode())
    spec = load_spec(write_spec(folder, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": fmt}))
    n = public_rows(spec)
    assert n == len(rows)
    if rows:  # the readers refuse a file without data rows, each in its own words
        assert n == len(read_table(path, spec.public_schema(), spec.missing_tokens()))
        assert n == sum(t.num_rows for t in local_chunks(path, 1_000))


def _auto_spec(folder, rows: int, fraction: float, engine: str, csv: str | None = None, **schema):
    rng = np.random.default_rng(rows)
    table = pd.DataFrame(
        {
            "x": rng.random(rows).round(3),
            "k": rng.integers(0, 11, rows),
            "c": rng.choice(["a", "b"], rows),
            "o": rng.choice(["lo", "hi"], rows),
        }
    )
    if csv is None:
        table.to_csv(folder / "data.csv", index=False)
    else:
        (folder / "data.csv").write_text(csv)
    return load_spec(
        write_spec(
            folder,
            schema={**TOY_SCHEMA, **schema},
            mechanism={"name": "auto"},
            checks={"enabled": False, "holdout_fraction": fraction},
            engine={"name": engine, "chunk_rows": 1_000},
        )
    )


@given(
    rows=st.integers(1, 2_500),
    fraction=st.sampled_from([0.0, 0.1, 0.2, 0.5]),
    holdout=st.integers(0, 2**63 - 1),
    engine=st.sampled_from(["memory", "local"]),
)
@property_settings(8)
def test_the_rule_sees_the_rows_the_release_fits(tmp_path_factory, rows, fraction, holdout, engine):
    """The n and fitted rows ``auto`` chooses on (with the release's row keys on a
    streaming engine) are those the engine then reads and fits: the memory engine's split,
    or the local engine's pass 1 over chunks of 1,000 rows with the same keys. Before, the
    rule took n − ⌊f·n⌋ on every engine, and a streaming release fitted another count."""
    folder = tmp_path_factory.mktemp("fitted")
    keys = RowKeys(dither=1, holdout=holdout, sample=2)
    spec = resolve_mechanism(_auto_spec(folder, rows, fraction, engine), keys)
    choice = spec.auto_choice
    if engine == "memory":
        table, _ = read_input(spec)
        fitted = len(holdout_split(table, fraction, np.random.default_rng(holdout))[0])
        read = len(table)
    else:
        job = chunk_job(spec, keys)
        scan = LocalEngine(spec.data_path, 1_000).run(job.scan, functools.partial(Scan.combine, k=100))
        fitted, read = scan.fitted, scan.rows
    assert (choice.rows, choice.n_fitted) == (read, fitted)


LINE_BREAK = 'x,k,c,o,notes\n0.5,3,a,lo,\n0.2,7,b,hi,"one line"\n0.1,1,a,lo,"two\nlines"\n'
"""Three records, four lines: a free-text column (``type: drop``) holds a line break."""


@pytest.mark.parametrize("engine", ["memory", "local"])
def test_a_value_with_a_line_break_is_refused_under_auto(tmp_path, engine):
    """A quoted value holding a line break: the count sees one line more than the readers'
    records, so ``check_rows`` refuses the file (after the reserve, before any noise) on
    either reader, saying what to fix and quoting no value."""
    spec = resolve_mechanism(_auto_spec(tmp_path, 0, 0.0, engine, csv=LINE_BREAK, notes={"type": "drop"}))
    assert spec.auto_choice.rows == 4
    table, _ = read_input(spec)
    read = len(table) if engine == "memory" else sum(t.num_rows for t in local_chunks(spec.data_path, 1_000))
    assert read == 3
    with pytest.raises(InputValidationError, match="a value holds a line break") as refused:
        check_rows(spec, read)
    assert "two" not in str(refused.value)


def test_validate_names_the_line_break_rule(tmp_path):
    spec = _auto_spec(tmp_path, 0, 0.0, "memory", csv=LINE_BREAK, notes={"type": "drop"})
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 2, result.output
    assert "a value holds a line break" in cli_text(result.output) and spec.mechanism.name == "auto"
