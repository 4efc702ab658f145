"""Shared helpers of the benchmarks: the machine, timing, the Adult data and its split."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import psutil
from sklearn.model_selection import train_test_split

from engines.tables import read_table
from flows.cli import DEMO_SPEC
from mechanisms.schema import Schema
from spec import ReleaseSpec, load_spec

REPO = Path(__file__).resolve().parents[1]
# The venv's own bin folder (not resolved: .venv/bin/python is a symlink to the base interpreter).
VENV_BIN = Path(sys.executable).parent
SPLIT_SEED = 0
TEST_FRACTION = 0.2

T = TypeVar("T")


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """What a reader needs to compare figures: cores, CPU, RAM, versions, load, commit."""
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain")
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {
            p: version(p) for p in ("numpy", "pandas", "scikit-learn", "prefect", "great_expectations")
        },
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "commit": commit + ("+uncommitted changes" if dirty not in ("", "unknown") else ""),
    }


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """(result, wall seconds) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


@dataclass(frozen=True)
class Adult:
    """The embedded demo: its spec, public schema and the table as ``read_table`` reads it."""

    spec: ReleaseSpec
    schema: Schema
    table: pd.DataFrame

    def split(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The fixed 80/20 split (seed 0): 26,048 training and 6,513 test rows."""
        train, test = train_test_split(self.table, test_size=TEST_FRACTION, random_state=SPLIT_SEED)
        return train.reset_index(drop=True), test.reset_index(drop=True)


def load_adult() -> Adult:
    spec = load_spec(DEMO_SPEC)
    schema = spec.public_schema()
    return Adult(spec, schema, read_table(spec.data_path, schema, spec.missing_tokens()))


def standalone(run, render, argv) -> int:
    """``python benchmarks/<module>.py [--quick]``: run one item and print its section
    (``run.py --only ITEM`` also stores it in results.json and BENCHMARKS.md)."""
    f = run("--quick" in argv)
    f.setdefault("machine", machine())
    print("\n".join(render(f)))
    return 0
