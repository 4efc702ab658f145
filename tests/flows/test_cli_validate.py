"""Issue 33: ``dprelease validate`` prints one line per column (pass, or the column's first
failing rule) instead of one per expectation, and its final error panel names each failing
column and its rule (never a value or a count); ``--report FILE`` keeps every
expectation's result."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dprelease.cli.console import console
from dprelease.cli.main import app
from tests.helpers import cli_text, toy_schema, write_spec

BOUNDS = "values must lie within the public bounds [0, 1] (or declare `out_of_bounds: clip`)"
CATEGORIES = "values must be among the 2 declared categories"


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setattr(console, "width", 1000)  # the error panel on one line per message line


def _validate(tmp_path, body: str, *extra: str) -> tuple[int, str]:
    (tmp_path / "data.csv").write_text("x,k,c,o\n" + body)
    spec = write_spec(
        tmp_path, schema=toy_schema(), checks={"enabled": False}, privacy={"epsilon": 100.0, "delta": 1e-6}
    )
    result = CliRunner().invoke(app, ["validate", str(spec), *extra], env={"COLUMNS": "1000"})
    return result.exit_code, result.output


def _rows(output: str) -> list[str]:
    """The report table's body lines (before the error panel, which has borders too)."""
    report = output.split("dprelease: error")[0]
    return [line for line in report.splitlines() if line.startswith("│")]


def test_one_line_per_column_and_the_panel_names_the_failing_columns(tmp_path):
    body = "0.5,3,a,lo\n1.5,3,zz,hi\n0.2,7,b,hi\n"
    code, output = _validate(tmp_path, body)
    assert code == 2, output
    rows = _rows(output)
    assert [row.split("│")[1].strip() for row in rows] == ["x", "k", "c", "o"]  # 11 expectations, 4 lines
    assert f"FAIL: {BOUNDS}" in rows[0] and "pass" in rows[1] and f"FAIL: {CATEGORIES}" in rows[2]
    assert "expectations on 4 columns" in output
    panel = cli_text(output[output.index("dprelease: error") :])
    assert f"2 column(s) break the schema: column 'x': {BOUNDS} column 'c': {CATEGORIES}" in panel
    assert "1.5" not in output and "zz" not in output  # rules, never the data's values


def test_a_passing_table_prints_a_pass_per_column_and_the_rehearsal(tmp_path):
    code, output = _validate(tmp_path, "0.5,3,a,lo\n0.2,7,b,hi\n0.4,2,a,mid\n")
    assert code == 0, output
    assert [row.split("│")[2].strip() for row in _rows(output)] == ["pass"] * 4
    assert "rehearsal passed" in cli_text(output) and "no budget was spent" in cli_text(output)


def test_the_report_file_keeps_every_expectations_result(tmp_path):
    code, output = _validate(tmp_path, "0.5,3,a,lo\n1.5,3,zz,hi\n", "--report", str(tmp_path / "r.json"))
    assert code == 2, output
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert len(results) == 11 and "11 expectations on 4 columns" in output
    failed = [r["rule"] for r in results if not r["success"]]
    assert failed[0] == BOUNDS and failed[-1].startswith(CATEGORIES)
