"""``public/replicates/``: what a query over columns no measured table holds needs for its
interval (``mechanisms.replicates``): K replicates of the mechanism re-run on its own
synthetic rows (declared cells, one Parquet file, a ``replicate`` column), and the
leave-one-out checks of its model (``index.json``), from which a query calibrates the
model's relative bias κ at the level it asks. All of it is post-processing of published
rows and noisy tables with public seeds: no budget, and anyone can re-run it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dprelease.bundle.files import write_json
from dprelease.mechanisms.replicates import HeldOut

__all__ = ["REPLICATES_INDEX", "REPLICATES_ROWS", "read_replicates", "write_replicates"]

REPLICATES_INDEX = "replicates/index.json"
REPLICATES_ROWS = "replicates/cells.parquet"


def write_replicates(
    public: Path, reps: np.ndarray, names: Sequence[str], checks: Sequence[HeldOut], seed: int
) -> dict:
    """Write the replicates and the checks; return what ``release.json`` says of them."""
    (public / "replicates").mkdir(exist_ok=True)
    k, n, _ = reps.shape
    columns = {"replicate": pa.array(np.repeat(np.arange(k, dtype=np.uint16), n))}
    for j, name in enumerate(names):
        columns[name] = pa.array(reps[:, :, j].ravel())
    pq.write_table(pa.table(columns), public / REPLICATES_ROWS, compression="zstd")
    write_json(
        public / REPLICATES_INDEX,
        {
            "replicates": k,
            "rows": n,
            "seed": seed,
            "cells": "each column's declared cell index (the public schema's cell order)",
            "method": (
                "replicate k: the release's mechanism, its plan and parameters, fitted on n rows of the "
                "published synthetic rows (their declared cells) with numpy generator [seed, k], drawing n "
                "rows; checks: each measured table left out of the model in turn, its prediction of random "
                "sub-queries against the table's noisy sums (y, p, cells, noise_var per cell, p_var)"
            ),
            "checks": [asdict(c) for c in checks],
        },
    )
    return {"index": REPLICATES_INDEX, "replicates": k, "checks": len(checks)}


def read_replicates(folder: Path, names: Sequence[str]) -> tuple[dict, np.ndarray]:
    """The index and the (K, n, len(names)) cells of the named columns."""
    import json

    index = json.loads((folder / REPLICATES_INDEX).read_text(encoding="utf-8"))
    table = pq.read_table(folder / REPLICATES_ROWS, columns=list(names))
    k, n = index["replicates"], index["rows"]
    cells = np.stack([table.column(c).to_numpy() for c in names], axis=-1) if names else np.empty((k * n, 0))
    return index, cells.reshape(k, n, len(names))
