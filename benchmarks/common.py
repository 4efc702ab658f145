"""Shared helpers of the experiments: the machine, timing, the Adult data and its split,
summaries over seeds or trials, named random streams and the command that reruns an item.

Experiments import from here; nothing here imports an experiment or the renderer.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import psutil
from scipy import stats
from sklearn.model_selection import train_test_split

from dprelease.engines.tables import read_table
from dprelease.flows import DEMO_SPEC
from dprelease.mechanisms.schema import Schema
from dprelease.spec import ReleaseSpec, load_spec

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results.json"
# The venv's own bin folder (not resolved: .venv/bin/python is a symlink to the base interpreter).
VENV_BIN = Path(sys.executable).parent
SPLIT_SEED = 0
TEST_FRACTION = 0.2

T = TypeVar("T")


def run_command(item: str, quick: bool = False) -> str:
    """The command that reruns one item (``--quick`` appended when asked)."""
    return f".venv/bin/python benchmarks/run.py --only {item}" + (" --quick" if quick else "")


# ---------------------------------------------------------------------------------------- the machine


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def git(*args: str) -> str:
    """The output of ``git ARGS`` in the repository ("unknown" when git fails)."""
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def load_avg() -> float:
    """The 1-minute load average, rounded as the figures store it."""
    return round(os.getloadavg()[0], 2)


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
    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain")
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {
            p: version(p) for p in ("numpy", "pandas", "scikit-learn", "prefect", "great_expectations")
        },
        "load_avg_1m": load_avg(),
        "commit": commit + ("+uncommitted changes" if dirty not in ("", "unknown") else ""),
    }


# ---------------------------------------------------------------------------------------- timing


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """(result, wall seconds) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------- summaries


def _ci95(v: np.ndarray) -> float:
    """Half-width of the two-sided 95 % t-interval of the mean (0 for one value)."""
    n = len(v)
    return float(stats.t.ppf(0.975, n - 1) * v.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0


STATISTICS: dict[str, Callable[[np.ndarray], Any]] = {
    "mean": lambda v: float(v.mean()),
    "sd": lambda v: float(v.std(ddof=1)) if len(v) > 1 else 0.0,
    "ci95": _ci95,
    "min": lambda v: float(v.min()),
    "max": lambda v: float(v.max()),
    "n": len,
    "values": lambda v: [float(a) for a in v],
}
"""What ``summary`` can report, by the key it stores it under."""


MEAN_SD = ("mean", "sd", "n", "values")  # the default: mean ± sd over trials, and the values
MEAN_RANGE = ("mean", "min", "max", "per_seed")  # mean [min, max] over seeds, the values as given


def summary(values: Sequence[float], fields: Sequence[str] = MEAN_SD) -> dict[str, Any]:
    """The ``fields`` of ``values`` (over seeds or trials), in that order: any key of
    ``STATISTICS`` (the sd has ddof 1, 0 for one value), or ``per_seed``: the values as given."""
    v = np.asarray(values, dtype=float)
    return {f: list(values) if f == "per_seed" else STATISTICS[f](v) for f in fields}


# ---------------------------------------------------------------------------------------- random streams


def stream_rng(base: int, streams: Mapping[str, int], stream: str, *key: int) -> np.random.Generator:
    """``default_rng([base, streams[stream], *key])``: a named stream, every draw reproducible alone."""
    return np.random.default_rng([base, streams[stream], *key])


# ---------------------------------------------------------------------------------------- the Adult data


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
