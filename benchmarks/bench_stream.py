"""Item 14: streaming releases through the CLI: 100k, 1M and 10M rows × 15 columns
(Adult resampled with replacement) on the local engine, and the Dask engine (LocalCluster,
2 worker processes) against the local engine at 1M rows.

Each release is the real ``dprelease release SPEC --insecure-seed 1 --verbose`` with one
warm PREFECT_HOME (a first, discarded run creates Prefect's database), the demo's schema,
checks and gates, ``engine.chunk_rows`` 250,000 and δ = 0.1/n. Wall time and peak RSS of
the whole process tree (CLI, Prefect's temporary server, Dask workers) sampled every
0.1 s; phases from Prefect's log. ``--quick`` skips the 10M-row release.

``run(quick)`` returns the JSON-serialisable figures; ``render/stream.py`` writes the section.
``.venv/bin/python benchmarks/bench_stream.py [--quick]`` runs it and prints the section.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import yaml
from bench_cli import release_run
from common import load_avg

from dprelease.flows import DEMO_SPEC

SIZES = (100_000, 1_000_000, 10_000_000)
CHUNK_ROWS = 250_000


def write_resampled_adult(folder: Path, rows: int, seed: int) -> Path:
    """``rows`` Adult rows drawn with replacement (raw text, written 1M rows at a time)."""
    raw = pa_csv.read_csv(
        DEMO_SPEC.parent / "adult.csv.gz",
        convert_options=pa_csv.ConvertOptions(strings_can_be_null=False, column_types={}),
    )
    rng = np.random.default_rng(seed)
    path = folder / f"adult_{rows}.csv"
    with pa.OSFile(str(path), "wb") as sink, pa_csv.CSVWriter(sink, raw.schema) as writer:
        for start in range(0, rows, 1_000_000):
            picks = rng.integers(0, raw.num_rows, min(1_000_000, rows - start))
            writer.write_table(raw.take(pa.array(picks)))
    return path


def stream_spec(folder: Path, data: Path, rows: int, engine: dict[str, Any]) -> Path:
    doc = yaml.safe_load(DEMO_SPEC.read_text())
    doc["dataset"]["path"] = str(data)
    doc["release_id"] = f"stream-{engine['name']}-{rows}"
    doc["privacy"]["delta"] = min(doc["privacy"]["delta"], 0.1 / rows)  # δ < 1/n
    doc["engine"] = engine
    path = folder / f"{engine['name']}_{rows}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return path


def _fit(ns: list[int], walls: list[float]) -> dict[str, float]:
    """Least-squares line wall = a + b·n; b in seconds per million rows."""
    b, a = np.polyfit(np.asarray(ns, float) / 1e6, np.asarray(walls, float), 1)
    return {"intercept_s": float(a), "s_per_million_rows": float(b)}


def run(quick: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    load_start = load_avg()
    sizes = SIZES[:-1] if quick else SIZES
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-stream-") as tmp:
        root = Path(tmp)
        home = root / "prefect-home"
        home.mkdir()
        local = {"name": "local", "chunk_rows": CHUNK_ROWS}
        warm = stream_spec(root, write_resampled_adult(root, 100_000, seed=0), 100_000, local)
        release_run(warm, root, "warm-up", home, release_id="warm-up")
        runs = []
        for rows in sizes:
            data = write_resampled_adult(root, rows, seed=rows)
            mb = data.stat().st_size / 2**20
            r = release_run(stream_spec(root, data, rows, local), root, f"local-{rows}", home)
            runs.append({"engine": "local", "rows": rows, "input_csv_mb": mb, **asdict(r)})
            if rows == 1_000_000:
                dask = {"name": "dask", "chunk_rows": CHUNK_ROWS, "workers": 2}
                r = release_run(stream_spec(root, data, rows, dask), root, "dask-1000000", home)
                dask_run = {"engine": "dask", "rows": rows, "input_csv_mb": mb, **asdict(r)}
            data.unlink()
    local_runs = [r for r in runs if r["engine"] == "local"]
    at_1m = next(r for r in local_runs if r["rows"] == 1_000_000)
    return {
        "quick": quick,
        "chunk_rows": CHUNK_ROWS,
        "runs": local_runs,
        "dask": dask_run,
        "dask_over_local_1m": dask_run["wall_s"] / at_1m["wall_s"],
        "fit": _fit([r["rows"] for r in local_runs], [r["wall_s"] for r in local_runs]),
        "load_avg_1m": {"start": load_start, "end": load_avg()},
        "wall_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("stream", run))
