"""The Python API without Prefect: ``Spec.load`` validates as the CLI does, ``synthesize``
marks its table and writes no ledger, the process's Prefect server is started once, and
the CLI takes its exit codes from one table."""

from __future__ import annotations

import copy
import typing
import warnings

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import dprelease
from dprelease.cli.main import app
from dprelease.flows import prefect_server
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import shown_up as _up
from tests.helpers import DEMO_DIR, DEMO_SPEC, adult_rows, cli_text, record_release, write_spec
from tests.properties import property_settings


def test_a_valid_spec_loads_from_a_file_and_from_a_dict(tmp_path):
    path = write_spec(tmp_path, adult_rows(20))
    from_file, from_dict = dprelease.Spec.load(path), dprelease.Spec.load(yaml.safe_load(path.read_text()))
    assert from_file.model.model_dump() == {**from_dict.model.model_dump(), "base_dir": tmp_path}
    assert from_file.data_path == tmp_path / "data.csv"


def test_an_invalid_spec_names_the_field_as_cli_validate_does(tmp_path):
    raw = {**copy.deepcopy(DEMO_SPEC), "privacy": {"epsilon": -1.0, "delta": 1e-6}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(dprelease.errors.SpecError) as raised:
        dprelease.Spec.load(raw)
    cli = cli_text(CliRunner().invoke(app, ["validate", str(path)]).output)
    fields = str(raised.value).split(":", 1)[1].strip()
    assert "spec field 'privacy.epsilon'" in fields and " ".join(fields.split()) in cli


def test_the_demo_spec_resolves_its_data_beside_it():
    demo = dprelease.Spec.demo()
    assert demo.dataset == "adult" and demo.data_path.is_file() and "income" in demo.columns


def test_synthesize_returns_a_marked_table_and_writes_no_ledger(tmp_path, monkeypatch):
    import dprelease.expectations.suite  # GX, on import, sends warnings to logging: before pytest.warns

    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, adult_rows(400), checks={"enabled": False})
    with pytest.warns(dprelease.NotForPublication):
        df = dprelease.synthesize(pd.read_csv(DEMO_DIR / "adult.csv.gz").head(400), spec, seed=3)
    assert df.attrs["dprelease"]["fit_for_publication"] is False
    assert list(df.columns) == dprelease.Spec.load(spec).columns and len(df) == 400
    assert not list(tmp_path.rglob("*.db"))


def test_the_process_server_is_started_once(monkeypatch):
    """Two API blocks share one temporary server, which serves as PREFECT_API_URL in each."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    started = []

    class FakeProcess:
        def poll(self):
            return None

    class FakeServer:
        def __init__(self, port):
            started.append(port)
            self.api_url, self.server_process = f"http://127.0.0.1:{port}/api", FakeProcess()

        def ready(self, timeout: float) -> None:
            pass

        def stop(self):
            pass

    monkeypatch.setattr(prefect_server, "TemporaryServer", FakeServer)
    monkeypatch.setattr(prefect_server, "_SHARED", [])
    monkeypatch.setattr(prefect_server, "_drain", lambda: None)
    seen = []
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        for _ in range(2):
            with prefect_server.process_api():
                seen.append(PREFECT_API_URL.value())
    assert len(started) == 1 and seen == [f"http://127.0.0.1:{started[0]}/api"] * 2


def test_the_cli_takes_its_exit_codes_from_the_table(tmp_path, monkeypatch):
    """A lifetime refusal exits with the code the table gives ``BudgetRefused`` (4 by default)."""
    from dprelease.cli import console
    from dprelease.ledger import BudgetRefused

    monkeypatch.setattr(console, "exit_codes", lambda: ((BudgetRefused, 9),))
    spec = write_spec(
        tmp_path, adult_rows(50), checks={"enabled": False}, privacy={"epsilon": 1.0, "lifetime_epsilon": 1.2}
    )
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        record_release(led, "earlier", lifetime=(1.2, 1e-6), dataset="adult")
    with warnings.catch_warnings():
        result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "next"])
    assert result.exit_code == 9, result.output
    assert console.exit_code(BudgetRefused("x")) == 9


@property_settings(300)
@given(st.floats(min_value=1e-300, max_value=1e6, allow_nan=False, allow_infinity=False))
def test_a_shown_privacy_loss_is_rounded_up_never_down(x):
    """``Release.epsilon``, ``delta`` and ``rho`` read 12 significant digits (issue 41: ε
    printed 0.9999999999999999), never below the ledger's value."""
    shown = _up(x)
    assert shown >= x and shown - x <= 1e-11 * x + 1e-300


def test_the_api_annotations_resolve():
    """``typing.get_type_hints`` on the API (issue 41: NameError, its types were imported
    for type checkers only)."""
    for f in (dprelease.release, dprelease.query, dprelease.synthesize, dprelease.Spec.load):
        typing.get_type_hints(f)
    typing.get_type_hints(dprelease.Release)


def test_a_ledger_summary_reads_in_a_few_lines(tmp_path):
    """Issue 41: ``ledger.show()``'s repr was 10 KB on one line."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    led = Ledger(url)
    for k in range(40):
        record_release(led, f"r{k}", dataset=f"d{k % 3}")
    shown = repr(dprelease.ledger.show(url))
    lines = shown.splitlines()
    assert len(lines) == 4 and "40 release(s), chain intact" in lines[0], shown
    assert all(line.startswith("  d") and "spent (" in line for line in lines[1:]), shown
    assert len(shown) < 600
