"""Issue 18: an expected failure ends with the error panel only. Prefect's ERROR records of
the failed task and flow run, tracebacks included, stay off the terminal unless
``--verbose`` (they still reach the run's log in Prefect and the failure record). Run as a
user runs it: the real ``dprelease`` in a subprocess, whose stderr is the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import adult_rows, write_spec

BIN = Path(sys.executable).parent


def _release(spec: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # a temporary server
    env.pop("PREFECT_LOGGING_LEVEL", None)  # the CLI's own default
    return subprocess.run(
        [str(BIN / "dprelease"), "release", str(spec), "--out", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.e2e
def test_a_data_error_shows_the_panel_and_no_traceback_unless_verbose(tmp_path):
    data = adult_rows(300)
    data.loc[5, "race"] = "Martian"
    spec = write_spec(tmp_path, data, checks={"enabled": False})
    quiet = _release(spec, tmp_path / "out", "--release-id", "quiet")
    assert quiet.returncode == 2, quiet.stderr
    assert "dprelease: error" in quiet.stderr and "column 'race'" in quiet.stderr
    assert "Traceback" not in quiet.stderr and "Encountered exception" not in quiet.stderr
    assert len(quiet.stderr.splitlines()) < 20, quiet.stderr
    loud = _release(spec, tmp_path / "out", "--release-id", "loud", "--verbose")
    assert loud.returncode == 2, loud.stderr
    assert "Traceback" in loud.stderr and "dprelease: error" in loud.stderr


@pytest.mark.parametrize(
    ("utility", "verdict"),
    [
        ({"tvd_1way": {"mean": 0.01}, "pmse": {"pmse": 0.01, "worst": 0.25}}, "good"),
        ({"tvd_1way": {"mean": 0.01}, "pmse": {"pmse": 0.05, "worst": 0.25}}, "fair"),
        ({"tvd_1way": {"mean": 0.54}, "pmse": {"pmse": 0.01, "worst": 0.25}}, "poor"),
        ({"tvd_1way": {"mean": 0.01}, "pmse": {"pmse": 0.24, "worst": 0.25}}, "poor"),
        ({"pmse": {"pmse": None, "worst": 0.25}}, "unknown"),
    ],
)
def test_the_quality_verdict_is_the_worst_of_its_parts(utility, verdict):
    from dprelease.checks.verdict import quality_line

    assert quality_line(utility)[0] == verdict
