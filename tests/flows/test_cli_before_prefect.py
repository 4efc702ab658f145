"""What the CLI refuses before Prefect starts (issue 17): an output folder that cannot be
written, a release folder that exists (a dangling symlink included), and what dead runs
left in ``--out`` is recovered first. The flow is replaced by a tripwire: none of these
may reach it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dprelease.bundle.staging import prepare_staging
from dprelease.cli.main import app
from dprelease.ledger import Ledger
from tests.helpers import PURE_PLAN, adult_rows, cli_text, record_release, write_spec


@pytest.fixture(autouse=True)
def _no_flow(monkeypatch):
    import dprelease.cli.main
    import dprelease.flows.release

    def tripwire(*args, **kwargs):
        raise AssertionError("the flow started")

    monkeypatch.setattr(dprelease.flows.release, "release", tripwire)
    monkeypatch.setattr(dprelease.cli.main.console, "width", 1000)


def _run(*args: str):
    started = time.perf_counter()
    result = CliRunner().invoke(app, list(args))
    return result, cli_text(result.output), time.perf_counter() - started


@pytest.mark.parametrize("where", ["proc", "file", "below a file"])
def test_an_unwritable_out_is_refused_at_once(tmp_path, where):
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})
    (tmp_path / "f").write_text("x")
    out = {"proc": Path("/proc/dprelease-out"), "file": tmp_path / "f", "below a file": tmp_path / "f" / "o"}[
        where
    ]
    result, text, took = _run("release", str(spec), "--out", str(out))
    assert result.exit_code == 2, text
    assert f"output folder '{out}' is not writable" in text and "nothing was read or spent" in text
    assert took < 3.0


def test_a_dangling_symlink_at_the_release_folder_is_a_taken_id(tmp_path):
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})
    out = tmp_path / "out"
    out.mkdir()
    (out / "r1").symlink_to(tmp_path / "gone")
    result, text, took = _run("release", str(spec), "--out", str(out), "--release-id", "r1")
    assert result.exit_code == 4, text
    assert "release 'r1' already exists" in text and "(a symlink)" in text
    assert not (out / "ledger.db").exists() and took < 3.0


def test_the_next_release_recovers_a_dead_runs_staging_first(tmp_path):
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        held = prepare_staging(out, "dead")
        led.reserve(dataset="adult", release_id="dead", mechanism="m", plan=PURE_PLAN, lifetime=None)
        (held.path / "internal" / "utility.json").write_text("{}")
        os.close(held.fd)  # killed
    with pytest.raises(AssertionError, match="the flow started"):
        CliRunner().invoke(app, ["release", str(spec), "--out", str(out)], catch_exceptions=False)
    [record] = (out / "failures").glob("dead-*/failure.json")
    assert json.loads(record.read_text())["recovered"]["ledger_status"] == "reserved"
    assert (record.parent / "internal" / "utility.json").is_file()
    assert not list(out.glob(".staging-*"))
    result, text, _ = _run("ledger", "settle", "dead", "--out", str(out), "--reason", "test")
    assert result.exit_code == 0, text
    assert "settled as failed, charged epsilon=0" in text
    result, text, _ = _run("ledger", "settle", "dead", "--out", str(out), "--reason", "test")
    assert result.exit_code == 2 and "already closed" in text


def test_a_lifetime_refusal_and_a_bad_header_are_found_before_prefect(tmp_path):
    """Issue 18, item 4: the ledger's refusal and the data file's header are checked before
    Prefect starts (the tripwire flow never runs), in under 3 s. The refusal is recorded as
    the flow records it: a refused row that costs nothing and a failure record."""
    spec = write_spec(
        tmp_path, adult_rows(50), checks={"enabled": False}, privacy={"epsilon": 1.0, "lifetime_epsilon": 1.2}
    )
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        record_release(led, "earlier", lifetime=(1.2, 1e-6), dataset="adult")
    result, text, took = _run("release", str(spec), "--out", str(out), "--release-id", "next")
    assert result.exit_code == 4, text
    assert (
        "lifetime budget of dataset 'adult'" in text
        and "The largest epsilon the next release can take" in text
    )
    assert took < 3.0
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        (row,) = led.entries(release_id="next")
    assert row["status"] == "refused" and not row["epsilon"]  # costs nothing
    (record,) = (out / "failures").glob("next-*/failure.json")
    assert json.loads(record.read_text())["error"] == "BudgetRefused"

    renamed = adult_rows(50).rename(columns={"sex": "gender"})
    (tmp_path / "other").mkdir()
    spec = write_spec(tmp_path / "other", renamed, checks={"enabled": False})
    result, text, took = _run("release", str(spec), "--out", str(tmp_path / "out2"))
    assert result.exit_code == 2, text
    assert "the data header has column(s) the schema does not declare: ['gender']" in text
    assert "column 'sex' is declared in the schema but missing from the data" in text and took < 3.0


def test_auto_is_refused_by_the_ledger_before_it_counts_or_chooses(tmp_path):
    """``mechanism: auto`` through ``dprelease release``: the ledger's pre-check comes first
    (its decision does not depend on the choice: ``ReleaseSpec.ledger_plan``), so the rows
    are neither counted nor the rule applied, and the refused row names ``auto`` (the demo
    schema, 1,000 rows, on which the rule would choose aim). The flow never runs; that no
    byte of the file is read is held by tests/flows/test_reads_before_reserve.py."""
    spec = write_spec(
        tmp_path,
        adult_rows(1_000),
        checks={"enabled": False},
        mechanism={"name": "auto", "params": {"target": "income"}},
        privacy={"epsilon": 1.0, "lifetime_epsilon": 1.2},
    )
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        record_release(led, "earlier", lifetime=(1.2, 1e-6), dataset="adult")
    result, text, _ = _run("release", str(spec), "--out", str(out), "--release-id", "next")
    assert result.exit_code == 4, text
    assert "lifetime budget" in text and "mechanism auto chose" not in text
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        (row,) = led.entries(release_id="next")
    assert row["status"] == "refused" and row["mechanism"] == "auto"
