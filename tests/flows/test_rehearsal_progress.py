"""Issue 38, defect 3: "with 60 columns, the rehearsal ran 9 minutes printing nothing". The
rehearsal tells the terminal of ``validate`` (and the release's progress line) which step it
is at, and, while a step runs long, how long it has run (``flows.progress.heartbeat``)."""

from __future__ import annotations

import threading
import time

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows import progress
from tests.helpers import TOY_GOOD, TOY_HEADER, cli_text, toy_schema, write_spec


def test_a_long_step_beats_and_a_short_one_does_not(monkeypatch):
    told: list[tuple[str, str | None]] = []
    monkeypatch.setattr(progress, "_progress", lambda stage, detail: told.append((stage, detail)))
    before = threading.active_count()
    with progress.heartbeat("rehearse", every=0.2) as tell:
        tell("step 'encode'")
        time.sleep(0.05)
        tell("step 'estimate_private_moments'")
        time.sleep(0.75)
    assert threading.active_count() == before  # the beating thread ended with the block
    assert told[:2] == [("rehearse", "step 'encode'"), ("rehearse", "step 'estimate_private_moments'")]
    beats = [d for _, d in told[2:]]
    assert 2 <= len(beats) <= 4, told
    assert all(d.startswith("step 'estimate_private_moments' (still running, ") for d in beats), beats


def test_without_a_display_nothing_is_told_and_no_thread_starts(monkeypatch):
    monkeypatch.setattr(progress, "_progress", None)
    before = threading.active_count()
    with progress.heartbeat("rehearse", every=0.01) as tell:
        assert threading.active_count() == before
        tell("step 'encode'")


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "data.csv").write_text(TOY_HEADER + TOY_GOOD + "0.4,2,a,mid\n")
    return write_spec(
        tmp_path, schema=toy_schema(), checks={"enabled": False}, privacy={"epsilon": 100.0, "delta": 1e-6}
    )


def test_validate_shows_the_forecast_and_each_rehearsal_step(toy):
    result = CliRunner().invoke(app, ["validate", str(toy)], env={"COLUMNS": "300"})
    text = cli_text(result.output)
    assert result.exit_code == 0, text
    assert "forecast: rehearsal: at most about" in text and "forecast: release: at most about" in text
    steps = ["writing a", "step 'validate_input'", "step 'encode'", "step 'decode'", "step 'write_bundle'"]
    places = [text.index(f"rehearsal: {s}") for s in steps]
    assert places == sorted(places), text
    assert text.index("forecast: rehearsal") < places[0] < text.index("rehearsal passed")
    assert "forecast for the input's 3 fitted rows: release: at most about" in text
