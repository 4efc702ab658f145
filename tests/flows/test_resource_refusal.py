"""Issue 38, defect 3: a release forecast beyond the machine is refused before the rehearsal
and the reserve, at each door: the CLI's and the API's pre-check (``flows.run.before_prefect``),
the flow's body before ``rehearse()`` (a deployment's run has no pre-check), and, once n is
counted, ``check_rows`` before any noise. Nothing is read, reserved or written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.inputs import check_rows
from dprelease.flows import release as flow
from dprelease.flows import run
from dprelease.spec import load_spec
from dprelease.spec.resources import MEMORY_ENV, ResourceRefused
from tests.helpers import adult_rows, cli_text, write_spec


@pytest.fixture
def huge(tmp_path, monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    return write_spec(tmp_path, adult_rows(50), synthetic_rows=10**9)


def test_before_prefect_refuses_it(huge, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ResourceRefused, match=r"^synthetic_rows: the release would need about"):
        run.before_prefect(huge, out, None, None, say=print)
    assert not out.exists()


def test_the_flow_refuses_it_before_the_rehearsal(huge, tmp_path, monkeypatch):
    def rehearse(*args, **kwargs):
        raise AssertionError("the rehearsal ran")

    monkeypatch.setattr(flow, "rehearse", rehearse)
    out = tmp_path / "out"
    with pytest.raises(ResourceRefused, match=r"^synthetic_rows: the release would need about"):
        flow.release.fn(str(huge), str(out), release_id="r")
    assert not (out / "ledger.db").exists() and not list(out.glob(".staging-*"))


def test_check_rows_refuses_it_with_the_counted_n(tmp_path, monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "3")
    spec = load_spec(write_spec(tmp_path, adult_rows(50), privacy={"epsilon": 10.0, "delta": 1e-10}))
    check_rows(spec, 50)
    with pytest.raises(ResourceRefused, match=r"^the input's rows \(n\): the release would need about"):
        check_rows(spec, 10**8)


def test_the_cli_says_what_to_raise(huge, tmp_path):
    result = CliRunner().invoke(
        app, ["release", str(huge), "--out", str(tmp_path / "out"), "--max-memory", "8"]
    )
    text = cli_text(result.output)
    assert result.exit_code == 2, text
    assert (
        "above the ceiling 8 GB (--max-memory); lower synthetic_rows, or raise resources.max_memory_gb"
        in text
    )
    raised = CliRunner().invoke(app, ["validate", str(huge), "--max-memory", "4096", "--max-seconds", "1e6"])
    assert "forecast: release: at most about" in cli_text(raised.output)
