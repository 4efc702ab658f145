"""``dprelease deploy check --prefect-file`` refuses, before anything is registered, a
deployment that would fail or be refused at its first slot (issue 42): no budget policy in its
spec, a pull step whose ``{{ $DPRELEASE_HOME }}`` is unset in this shell, a ledger of an older
format; and passes the repository's own ``deploy/prefect.yaml``. No Prefect server is asked."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from typer.testing import CliRunner

from dprelease.cli.main import app
from tests.helpers import ROOT, cli_text

FIXTURE = ROOT / "tests" / "fixtures" / "v0.2.0"


def _prefect_file(folder: Path, spec: str, out: str = "releases") -> Path:
    doc = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    doc["deployments"][0]["parameters"] = {"spec_path": spec, "out_dir": out}
    path = folder / "prefect.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _check(path: Path, home: str | None, monkeypatch) -> tuple[int, str]:
    if home is None:
        monkeypatch.delenv("DPRELEASE_HOME", raising=False)
    else:
        monkeypatch.setenv("DPRELEASE_HOME", home)
    result = CliRunner().invoke(app, ["deploy", "check", "--prefect-file", str(path)], terminal_width=400)
    return result.exit_code, cli_text(result.output)


def test_the_repositorys_deployment_passes(tmp_path, monkeypatch):
    """deploy/prefect.yaml's deployment, its out_dir moved out of the checkout (whose releases/
    may hold a ledger of an earlier version)."""
    path = _prefect_file(tmp_path, "flows/demo/adult-monthly.yaml", str(tmp_path / "out"))
    code, text = _check(path, str(ROOT), monkeypatch)
    assert code == 0 and "every check holds" in text, text


def test_a_spec_without_a_budget_policy_is_refused_before_it_is_deployed(tmp_path, monkeypatch):
    code, text = _check(_prefect_file(tmp_path, "flows/demo/adult.yaml"), str(ROOT), monkeypatch)
    assert code == 1 and "declares no budget policy" in text and "dp-release/adult-monthly: spec" in text, (
        text
    )


def test_an_unset_dprelease_home_is_refused(tmp_path, monkeypatch):
    code, text = _check(ROOT / "deploy" / "prefect.yaml", None, monkeypatch)
    assert code == 1 and "DPRELEASE_HOME unset" in text, text


def test_a_ledger_of_an_older_format_is_named_with_the_migration(tmp_path, monkeypatch):
    out = tmp_path / "releases"
    out.mkdir()
    shutil.copy(FIXTURE / "ledger.db", out / "ledger.db")
    path = _prefect_file(tmp_path, "flows/demo/adult-monthly.yaml", str(out))
    code, text = _check(path, str(ROOT), monkeypatch)
    assert code == 1 and "is in format 1" in text and "dprelease ledger migrate" in text, text
