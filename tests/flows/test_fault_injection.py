"""Releases killed with SIGKILL at random points (issue 17), the way a power cut or an
out-of-memory killer meets them: the real CLI in a subprocess, with Prefect's temporary
server, into one ``--out`` and one SQLite ledger. After every kill and the recovery the
next run performs, the invariants hold:

* the ledger's hash chain is intact;
* every attempt is closed, or ``reserved`` and settleable (its process is gone);
* nothing confidential lies outside a bundle's ``internal/`` or ``failures/``: no staging
  folder, no lock file;
* no process of the killed run is left (Prefect's temporary server dies with the CLI);

and at the end a release runs to completion. ``DPRELEASE_FAULT_RUNS`` sets the number of
kills (default 5, to keep ``make test`` short; issue 17 ran 8); the kill times are seeded,
and a run that finishes before its kill time is not counted (the next ones aim earlier).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dprelease.ledger import Ledger
from dprelease.records.recovery import recover, settle
from tests.helpers import adult_rows, write_spec

RUNS = int(os.environ.get("DPRELEASE_FAULT_RUNS", "5"))
DPRELEASE = str(Path(sys.executable).parent / "dprelease")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING"
    )
    return env


def _release(spec: Path, out: Path, rid: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [DPRELEASE, "release", str(spec), "--out", str(out), "--release-id", rid, "--insecure-seed", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _processes_of(home: Path) -> list[int]:
    """Live processes whose environment names this test's PREFECT_HOME (the CLI and its
    temporary Prefect server)."""
    found = []
    marker = f"PREFECT_HOME={home}".encode()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if (
                marker in (p / "environ").read_bytes().split(b"\0")
                and (p / "stat").read_text().split()[2] != "Z"
            ):
                found.append(int(p.name))
        except OSError:
            continue
    return found


def _wait_gone(home: Path, timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := _processes_of(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.deploy
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_releases_killed_at_random_points_leave_nothing_behind(tmp_path):
    spec = write_spec(tmp_path, adult_rows(400))
    out, home = tmp_path / "out", tmp_path / "prefect"
    env = _env(home)
    assert _release(spec, out, "whole-0", env).wait(timeout=300) == 0  # Prefect creates its database
    started = time.monotonic()
    assert _release(spec, out, "whole-1", env).wait(timeout=300) == 0
    full = time.monotonic() - started  # a warm run's time: the kills fall within it
    rng = np.random.default_rng(20261124)
    alive_at_kill: list[int] = []  # per kill: the run's processes then (CLI, temporary server)
    for i in range(3 * RUNS):  # a run that ends before its kill time does not count as a kill
        if len(alive_at_kill) == RUNS:
            break
        proc = _release(spec, out, f"killed-{i}", env)
        time.sleep(rng.uniform(0.2, 0.95) * full)
        if proc.poll() is None:
            alive_at_kill.append(len(_processes_of(home)))
            proc.send_signal(signal.SIGKILL)
        else:  # the machine got faster than the timed run: aim earlier
            full *= 0.8
        proc.wait()
        assert _wait_gone(home) == [], f"run {i}: processes left after SIGKILL"
        with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
            recover(out, led)  # what the next release into out does first
            assert led.verify_chain() == [], f"run {i}"
            for r in led.releases():
                if r["status"] == "reserved":
                    settle(led, r["release_id"], out, reason="fault-injection test")
            assert {r["status"] for r in led.releases()} <= {"released", "gated", "failed", "refused"}
        leftovers = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
        assert leftovers == [], f"run {i}: {leftovers}"
        for bundle in (p for p in out.iterdir() if p.is_dir() and p.name != "failures"):
            assert sorted(q.name for q in bundle.iterdir()) in (["internal", "public"], ["internal"]), bundle
    print(f"full run {full:.1f} s; processes at each kill {alive_at_kill}")
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        spent = [r for r in led.releases() if r["release_id"].startswith("killed") and r["epsilon"]]
    assert len(alive_at_kill) == RUNS and max(alive_at_kill) >= 2  # killed mid-run, server up
    assert spent  # some were killed after drawing noise
    assert _release(spec, out, "whole-2", env).wait(timeout=300) == 0
    assert (out / "whole-2" / "public" / "synthetic.csv").is_file()
    assert _wait_gone(home) == []
