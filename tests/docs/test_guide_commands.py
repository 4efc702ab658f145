"""Every command the README and the steward, analyst and auditor guides show (their
``console`` blocks) runs as shown, in order, in one folder: one release, then what reads it.
A command ends with the exit code the guide gives it (``# exits N``), else 0."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.guides import ROOT, Command, FileShown, sequence

DEMO = ROOT / "flows" / "demo" / "adult.csv.gz"


def _env(tmp_path: Path) -> dict[str, str]:
    """The user's shell: the venv's ``dprelease`` first on PATH, a fresh Prefect home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        GX_ANALYTICS_ENABLED="false",
    )
    return env


def test_the_guides_show_a_whole_release_from_raw_table_to_audit():
    lines = [step.line for step in sequence() if isinstance(step, Command)]
    for start in ("dprelease init ", "dprelease validate ", "dprelease release ", "dprelease audit verify "):
        assert any(line.startswith(start) for line in lines), start
    assert any(line.startswith("dprelease ledger show") for line in lines)
    assert sum(line.startswith("dprelease release ") for line in lines) <= 2  # one release, one refusal


@pytest.mark.e2e
@pytest.mark.deploy  # 105 s of guide commands: the background tier, beside the upgrade guide
def test_every_command_in_the_guides_runs_as_shown(tmp_path: Path):
    (tmp_path / "flows" / "demo").mkdir(parents=True)
    shutil.copy(DEMO, tmp_path / "flows" / "demo" / DEMO.name)  # a checkout's demo table
    env = _env(tmp_path)
    for step in sequence():
        if isinstance(step, FileShown):
            (tmp_path / step.name).write_text(step.text, encoding="utf-8")
            continue
        run = subprocess.run(
            ["bash", "-c", step.line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == step.exit_code, f"$ {step.line}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
