"""What the CLI shows while a release runs: the flow's steps (``STAGES``) and a callback
told each step as it starts and, for streaming passes, how many rows they have done; while
the rehearsal runs, which of its steps it is at and, every ``HEARTBEAT_SECONDS`` of a long
step, how long it has run (``heartbeat``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module before the flow's heavy modules
    from dprelease.flows.events import RunRecord

__all__ = [
    "HEARTBEAT_SECONDS",
    "STAGES",
    "heartbeat",
    "rows_done",
    "set_progress",
    "step_detail",
    "step_reached",
]

HEARTBEAT_SECONDS = 10.0
"""How often a long step says it is still running (``heartbeat``)."""

STAGES = {
    "rehearse": "rehearsing the release on a table drawn from the public schema (no data read)",
    "allocate_budget": "allocating and reserving the privacy budget (ledger)",
    "validate_input": "validating the input against the public schema (GX)",
    "encode": "encoding (and any private marginals or thresholds)",
    "estimate_private_moments": "measuring the private moments",
    "project_and_sample": "projecting and sampling",
    "decode": "decoding to the schema's types",
    "place_on_value_grid": "finding the values each grid column takes (noisy) and placing the synthetic ones",
    "validate_output": "validating the synthetic data (GX)",
    "check_gates": "testing the gates (noisy metrics, differentially private)",
    "build_replicates": "re-running the mechanism on its synthetic rows (the query intervals' replicates)",
    "release_document": "writing the release document (the budget's account, the accuracy statement)",
    "check_utility": "checking utility (internal report)",
    "check_linkage": "checking record linkage (internal report)",
    "write_report": "writing the internal report",
    "write_bundle": "writing the release bundle",
}

_progress: Callable[[str, str | None], None] | None = None


def set_progress(callback: Callable[[str, str | None], None] | None) -> None:
    """Register a callback told the name of each stage as it starts, and then (streaming
    engines) how far it has got, e.g. "1,250,000 rows" (the CLI's display)."""
    global _progress
    _progress = callback


def rows_done(stage: str) -> Callable[[int], None]:
    def tell(rows: int) -> None:
        if _progress is not None:
            _progress(stage, f"{rows:,} rows")

    return tell


def step_detail(stage: str) -> Callable[[str], None]:
    """A callback that tells the display what ``stage`` is doing now (e.g. a check's step)."""

    def tell(detail: str) -> None:
        if _progress is not None:
            _progress(stage, detail)

    return tell


def step_reached(record: RunRecord, step: str) -> None:
    """The run reached ``step``: the progress display, and the stage a failure names."""
    record.stage = step
    if _progress is not None:
        _progress(step, None)


@contextmanager
def heartbeat(stage: str, every: float = HEARTBEAT_SECONDS) -> Iterator[Callable[[str], None]]:
    """Within the block, the returned callable tells the display what ``stage`` is doing
    (e.g. the rehearsal's step); while one thing runs longer than ``every`` seconds, the
    display is told again every ``every`` seconds, with the time it has run. Without a
    display (``set_progress``) nothing is told and no thread is started."""
    if _progress is None:
        yield lambda detail: None
        return
    shown = _progress
    lock = threading.Lock()
    now: list = ["", time.monotonic(), time.monotonic()]  # what is running, since when, last told

    def tell(detail: str) -> None:
        with lock:
            at = time.monotonic()
            now[:] = [detail, at, at]
        shown(stage, detail)

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every / 10):
            with lock:
                detail, since, told = now
                at = time.monotonic()
                due = bool(detail) and at - told >= every
                if due:
                    now[2] = at
            if due:
                shown(stage, f"{detail} (still running, {at - since:.0f} s)")

    beater = threading.Thread(target=beat, name="dprelease-heartbeat", daemon=True)
    beater.start()
    try:
        yield tell
    finally:
        stop.set()
        beater.join()
