"""The upgrade and rollback guide (``docs/operator/upgrade.md``) runs as shown: every ``$``
command, in order, with the exit code it gives, against a ledger and a bundle made by
dprelease 0.2.0 (``tests/fixtures/v0.2.0``). ``$PREVIOUS`` is dprelease 0.2.0 itself, taken
from this repository's history (``git archive`` of ``PREVIOUS_COMMIT``) and run with this
environment's packages; without the history (a shallow clone) the test is skipped."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.docs.guides import ROOT, Command, steps
from tests.docs.test_guide_commands import _env

GUIDE = ROOT / "docs" / "operator" / "upgrade.md"
FIXTURE = ROOT / "tests" / "fixtures" / "v0.2.0"
PREVIOUS_COMMIT = "1d7dcbbc9c7eb6e9803010450cbefe185cbdd109"
"""The last commit of 0.2.0: the one that made the fixture."""


def _previous(into: Path) -> Path:
    """dprelease 0.2.0's source under ``into``, and a ``.venv/bin/dprelease`` that runs it."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS_COMMIT],
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"this checkout's history does not hold {PREVIOUS_COMMIT[:10]} (0.2.0)")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="tar")
    script = into / ".venv" / "bin" / "dprelease"
    script.parent.mkdir(parents=True)
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{into}" exec "{sys.executable}" -c "import sys, dprelease; '
        f"assert dprelease.__file__.startswith('{into}'), dprelease.__file__; "
        'sys.argv[0] = \'dprelease\'; from dprelease.cli.main import main; main()" "$@"\n'
    )
    script.chmod(0o755)
    return into


@pytest.mark.deploy
def test_the_upgrade_guide_runs_as_shown_from_0_2_0_and_back(tmp_path: Path):
    previous = _previous(tmp_path / "dprelease-0.2.0")
    releases = tmp_path / "releases"
    releases.mkdir()
    shutil.copy(FIXTURE / "ledger.db", releases / "ledger.db")
    shutil.copytree(FIXTURE / "fixture-2", releases / "fixture-2")
    for name in ("spec.yaml", "data.csv"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    env = _env(tmp_path)
    env.update(
        LEDGER=f"sqlite:///{releases / 'ledger.db'}",
        RELEASES=str(releases),
        SPEC=str(tmp_path / "spec.yaml"),
        PREVIOUS=str(previous),
    )
    commands = [s for s in steps(GUIDE.read_text(encoding="utf-8")) if isinstance(s, Command)]
    assert any("ledger migrate" in c.line for c in commands)
    said: dict[str, str] = {}
    for step in commands:
        run = subprocess.run(
            ["bash", "-c", step.line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == step.exit_code, f"$ {step.line}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        said.setdefault(step.line, " ".join(run.stdout.split()))
    assert "dprelease 0.3.0" in said["dprelease --version"]
    assert "older than this version's" in said['dprelease ledger show --ledger "$LEDGER"']
    assert (
        "bundle format │ ok │ 1:" in said['dprelease audit verify "$RELEASES/fixture-2" --ledger "$LEDGER"']
    )
    upgraded = json.loads((releases / "after-upgrade" / "public" / "release.json").read_text())
    assert upgraded["bundle_format"] == 2 and upgraded["software"]["versions"]["dprelease"] == "0.3.0"
    rolled_back = json.loads((releases / "after-rollback" / "public" / "release.json").read_text())
    assert "bundle_format" not in rolled_back and rolled_back["software"]["versions"]["dprelease"] == "0.2.0"
