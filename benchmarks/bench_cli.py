"""Out-of-process measurements: the real ``dprelease`` CLI (Prefect flow, GX, CSV writing).

Item 2 (``scale``: one million rows through the CLI release, and the mechanism in-process on
the same rows) and item 3 (``demo``: ``make demo`` wall time); the CLI-running helpers are
shared with item 14 (``bench_stream``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil
import yaml
from bench_inprocess import mechanism_file
from common import REPO, VENV_BIN, median, timed

from dprelease.flows import DEMO_SPEC

POLL_S = 0.1
SCALE_ROWS = 1_000_000
SCALE_SEED = 0
PREFECT_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
}

_LOG = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) \| \w+\s*\| (.*)$")
_TASK_DONE = re.compile(r"^Task run '(\w+)-\w+' - Finished in state")


@dataclass
class CliRun:
    """One CLI run: wall time, peak RSS (whole process tree, and the CLI process alone)
    sampled every ``POLL_S`` seconds, and phase times parsed from Prefect's INFO log."""

    command: str
    wall_s: float
    peak_rss_tree_mb: float
    peak_rss_main_mb: float
    phases: dict[str, float] = field(default_factory=dict)


def prefect_env(home: Path) -> dict[str, str]:
    """The inherited environment without any PREFECT_* setting (a configured API URL would
    bypass the temporary server), plus a private PREFECT_HOME and the settings above."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, **PREFECT_ENV, "PREFECT_HOME": str(home)}


def _tree_rss(proc: psutil.Process) -> tuple[int, int]:
    """(RSS of the process and all its descendants, RSS of the process) in bytes."""
    try:
        main = proc.memory_info().rss
        children = proc.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0, 0
    total = main
    for c in children:
        try:
            total += c.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total, main


def _log_times(text: str, launched: datetime) -> list[tuple[float, str]]:
    """(seconds since launch, message) for each timestamped log line (local HH:MM:SS.mmm)."""
    out = []
    for line in text.splitlines():
        m = _LOG.match(line.strip())
        if not m:
            continue
        t = datetime.combine(launched.date(), datetime.strptime(m.group(1), "%H:%M:%S.%f").time())
        if t < launched - timedelta(hours=1):  # the run crossed midnight
            t += timedelta(days=1)
        out.append(((t - launched).total_seconds(), m.group(2)))
    return out


def _phases(events: list[tuple[float, str]], wall_s: float) -> dict[str, float]:
    """Split the wall time at the log events the verbose CLI prints. Task phases end at
    each task's "Finished" line, so they include Prefect's per-task bookkeeping."""

    def first(prefix: str) -> float | None:
        return next((t for t, msg in events if msg.startswith(prefix)), None)

    server = first("prefect - Starting temporary server")
    begin = next((t for t, msg in events if "Beginning flow run" in msg), None)
    end = next((t for t, msg in events if msg.startswith("Flow run") and "Finished in state" in msg), None)
    if server is None or begin is None or end is None:
        return {}
    phases = {
        "startup (imports, CLI) until the server starts": server,
        "Prefect temporary server start (the CLI imports the flow meanwhile)": begin - server,
    }
    previous = begin
    for t, msg in events:
        m = _TASK_DONE.match(msg)
        if m and begin <= t <= end:
            phases[f"task {m.group(1)}"] = t - previous
            previous = t
    phases["flow run teardown"] = end - previous
    phases["server stop and exit"] = wall_s - end
    return phases


def run_cli(args: list[str], env: dict[str, str], workdir: Path) -> CliRun:
    """Run the CLI, polling the RSS of its process tree until it exits."""
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    launched = datetime.now()
    with out_path.open("w") as out, err_path.open("w") as err:
        t0 = time.perf_counter()
        proc = psutil.Popen(args, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        peak_tree = peak_main = 0
        while proc.poll() is None:
            tree, main = _tree_rss(proc)
            peak_tree, peak_main = max(peak_tree, tree), max(peak_main, main)
            time.sleep(POLL_S)
        wall = time.perf_counter() - t0
    text = out_path.read_text() + "\n" + err_path.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)} failed ({proc.returncode}):\n{text[-3000:]}")
    return CliRun(
        command=shlex.join(args),
        wall_s=wall,
        peak_rss_tree_mb=peak_tree / 2**20,
        peak_rss_main_mb=peak_main / 2**20,
        phases=_phases(_log_times(text, launched), wall),
    )


def dprelease() -> str:
    return str(VENV_BIN / "dprelease")


# -------------------------------------------------------------------------------- item 2: scale


def write_big_adult(folder: Path, rows: int, seed: int) -> Path:
    """``rows`` Adult rows drawn with replacement (raw text, so missing tokens stay as is),
    and a spec with the demo's schema pointing at them, δ at most 1/(10·rows); returns the
    spec's path."""
    raw = pd.read_csv(DEMO_SPEC.parent / "adult.csv.gz", dtype=str, keep_default_na=False)
    idx = np.random.default_rng(seed).integers(0, len(raw), rows)
    csv = folder / f"adult_{rows}.csv"
    raw.iloc[idx].to_csv(csv, index=False)
    doc = yaml.safe_load(DEMO_SPEC.read_text())
    doc["dataset"]["path"] = str(csv)
    doc["release_id"] = f"bench-{rows}"
    # δ must stay below 1/n (check_rows refuses δ ≥ 1/n): the demo's 1e-6 is 1/n at 1M rows.
    doc["privacy"]["delta"] = min(doc["privacy"]["delta"], 0.1 / rows)
    spec = folder / f"adult_{rows}.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return spec


def release_run(
    spec: Path, root: Path, label: str, home: Path, release_id: str | None = None, api_url: str | None = None
) -> CliRun:
    """``dprelease release SPEC --out DIR --insecure-seed 1 --verbose`` with PREFECT_HOME
    ``home``, against a running Prefect server if ``api_url`` is given."""
    work = root / label
    work.mkdir(parents=True)
    args = [
        dprelease(),
        "release",
        str(spec),
        "--out",
        str(work / "out"),
        "--insecure-seed",
        "1",
        "--verbose",
    ]
    if release_id is not None:
        args += ["--release-id", release_id]
    env = prefect_env(home) | ({"PREFECT_API_URL": api_url} if api_url else {})
    return run_cli(args, env, work)


@contextmanager
def prefect_server(home: Path, workdir: Path) -> Iterator[str]:
    """``prefect server start`` on a free loopback port; yields its API URL, then stops it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (workdir / "server.log").open("w")
    proc = subprocess.Popen(
        [str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=prefect_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prefect server did not start; see {workdir / 'server.log'}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def scale_cli(spec_big: Path, root: Path) -> dict[str, Any]:
    """Steady state: one PREFECT_HOME whose database a first, discarded run creates (as on a
    steward's machine after its first release; item 3 reports that cold cost), then the
    1M-row release and the 32k-row demo data through the same CLI."""
    home = root / "prefect-home"
    home.mkdir(parents=True)
    release_run(DEMO_SPEC, root, "warm-up", home, release_id="bench-warm-up")
    big = release_run(spec_big, root, "big", home)
    small = release_run(DEMO_SPEC, root, "adult", home, release_id="bench-adult")
    with prefect_server(home, root) as url:  # how scheduled releases run: a long-lived server
        big_server = release_run(spec_big, root, "big-server", home, api_url=url)
        small_server = release_run(DEMO_SPEC, root, "adult-server", home, "bench-adult-server", url)
    csv_mb = (spec_big.parent / f"{spec_big.stem}.csv").stat().st_size / 2**20
    return {
        "big": asdict(big),
        "adult": asdict(small),
        "big_server": asdict(big_server),
        "adult_server": asdict(small_server),
        "data_dependent_s": big.wall_s - small.wall_s,
        "wall_ratio": big.wall_s / small.wall_s,
        "input_csv_mb": csv_mb,
    }


def scale(repeats: int) -> dict[str, Any]:
    """Item 2's figures: write the big CSV, time the mechanism in-process on it (as item 1,
    ``repeats`` seeds), then run the CLI on it and on the Adult demo data."""
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-scale-") as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        spec, make_s = timed(lambda: write_big_adult(root / "data", SCALE_ROWS, SCALE_SEED))
        print(f"  wrote {SCALE_ROWS:,} rows in {make_s:.1f} s; timing the mechanism in-process", flush=True)
        inprocess = mechanism_file(spec, repeats, load_repeats=3)
        print("  running the CLI on 1M rows, then on the Adult demo data", flush=True)
        cli = scale_cli(spec, root)
        # Reproducible paths: the temporary root becomes $TMP, the venv a relative path.
        for run in (cli["big"], cli["adult"]):
            run["command"] = (
                run["command"].replace(str(root), "$TMP").replace(str(REPO) + "/", "").replace(str(REPO), ".")
            )
    return {"rows": SCALE_ROWS, "seed": SCALE_SEED, "make_csv_s": make_s, "inprocess": inprocess, "cli": cli}


# --------------------------------------------------------------------------------- item 3: demo


def demo_runs(warm_repeats: int) -> dict[str, Any]:
    """``dprelease demo --out DIR`` with one PREFECT_HOME: the first run creates Prefect's
    database (a first-ever run), the next ``warm_repeats`` reuse it (any later run)."""
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-demo-") as tmp:
        root = Path(tmp)
        env = prefect_env(root / "prefect-home")
        (root / "prefect-home").mkdir()
        runs = []
        for i in range(1 + warm_repeats):
            work = root / f"run{i}"
            work.mkdir()
            runs.append(run_cli([dprelease(), "demo", "--out", str(work / "out")], env, work))
    warm = runs[1:]
    return {
        "cold": asdict(runs[0]),
        "warm_wall_s": [r.wall_s for r in warm],
        "warm_median_s": median([r.wall_s for r in warm]),
        "warm_peak_rss_tree_mb": max(r.peak_rss_tree_mb for r in warm),
        "command": runs[0].command,
    }


REHEARSE = """
import json, sys, time
from dprelease.flows.rehearsal import rehearse
from dprelease.spec import load_spec
spec = load_spec(sys.argv[1])
rehearse(spec)  # the first also imports GX and the mechanisms, as the flow has by then
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    done = rehearse(spec)
    times.append(time.perf_counter() - t0)
print(json.dumps({"rows": done.rows, "wall_s": times}))
"""


def rehearsal_runs(repeats: int) -> dict[str, Any]:
    """The rehearsal before the reserve on the demo spec, in one process after a first run
    (the release's flow has imported GX and the mechanisms by then): ``repeats`` times,
    vetted noise as a release draws it."""
    out = subprocess.run(
        [str(VENV_BIN / "python"), "-c", REHEARSE, str(DEMO_SPEC), str(repeats)],
        cwd=REPO,
        env=prefect_env(Path(tempfile.gettempdir())),
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return {**found, "median_s": median(found["wall_s"])}


def demo() -> dict[str, Any]:
    """Item 3's figures: one first-ever run and two later runs, the command with $TMP, and the
    rehearsal's time in the same session (its share of a later run)."""
    result = demo_runs(warm_repeats=2)
    cmd = result["command"].split(" --out ")[0].replace(str(REPO) + "/", "")
    result["command"] = f"{cmd} --out $TMP/out"
    result["rehearsal"] = rehearsal_runs(repeats=3)
    return result
