"""``public/tables/``: every noisy count table a release measured, labelled in the public
schema's terms, with its standard error and interval, and the inverse-variance combination
of every measured table that holds its cells (``mechanisms.tables``).

Publishing them costs no budget: each is the output of a mechanism the ledger charged
(post-processing). Per table, ``<k>_<name>.csv`` holds one row per cell: one label column per
axis (``queries.group_labels``), ``noisy_count`` (the measurement), ``se`` (its noise's
standard deviation: σ, or √2·b for Laplace noise), ``lower``/``upper`` at ``LEVEL``, and the
same four for ``combined_*``: the cell estimated from this table and each other table over
a superset of its columns on the same groups (summed over the other axes), weighted by
inverse variance. ``index.json`` says which tables were combined, the noise of each, the
groups of every axis (so that an auditor can re-derive them and a query can use them) and
the target of inference: counts among the rows the mechanism was fitted on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.bundle.files import write_json
from dprelease.bundle.write import write_csv
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.queries import group_labels
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.tables import Noise, NoisyTable, combined_cells, noisy_tables

__all__ = ["INDEX", "LEVEL", "VALUES", "write_tables"]

LEVEL = 0.9
"""The level of the published intervals (a query may ask for another)."""

INDEX = "tables/index.json"
VALUES = ("noisy_count", "se", "lower", "upper")
TARGET = "the {n} rows the mechanism was fitted on (after any holdout), not a population"
NOISE = (
    "each noisy_count is the exact count plus the recorded noise: unbiased, independent across cells and "
    "tables; lower/upper: noisy_count -/+ the noise quantile at the level (exact for Gaussian noise, "
    "simulated from a fixed seed for Laplace); combined_*: this table's cells estimated from every table "
    "listed in combined_from (each summed over its other columns), weighted by inverse variance"
)


def _file(k: int, name: str) -> str:
    return f"tables/{k:02d}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('_')}.csv"


def _frame(
    table: NoisyTable, schema: Schema, combined: tuple[np.ndarray, Noise], level: float
) -> pd.DataFrame:
    labels = [group_labels(schema[a.column], a.groups) for a in table.axes]
    grid = np.meshgrid(*[np.arange(a.size) for a in table.axes], indexing="ij")
    out: dict[str, np.ndarray] = {}
    for a, lab, idx in zip(table.axes, labels, grid, strict=True):
        clash = a.column in VALUES or a.column.startswith("combined_")
        out[f"{a.column} (column)" if clash else a.column] = np.asarray(lab, dtype=object)[idx.ravel()]
    estimates = {"noisy_count": (table.values, table.noise(1)), "combined_count": combined}
    for label, (values, noise) in estimates.items():
        prefix = label.removesuffix("count").removesuffix("noisy_")
        flat, hw = np.ravel(values), noise.half_width(level)
        out[label] = flat
        out[f"{prefix}se"] = np.full(flat.shape, noise.sd)
        out[f"{prefix}lower"] = flat - hw
        out[f"{prefix}upper"] = flat + hw
    return pd.DataFrame(out)


def write_tables(
    public: Path, measurements: Sequence[Measurement], schema: Schema, n_fitted: int, level: float = LEVEL
) -> dict:
    """Write ``public/tables/`` (see the module doc) and return what ``release.json`` says
    of it: the index's path, the number of tables and the level."""
    tables = noisy_tables(measurements)
    (public / "tables").mkdir(exist_ok=True)
    entries = []
    for k, table in enumerate(tables):
        family, values, noise = combined_cells(table, tables)
        name = _file(k, table.name)
        write_csv(_frame(table, schema, (values, noise), level), public / name)
        entries.append(
            {
                "name": table.name,
                "file": name,
                "stage": table.stage,
                "columns": list(table.columns),
                "axes": [{"column": a.column, "groups": a.groups.tolist()} for a in table.axes],
                "noise": {"mechanism": table.mechanism, "scale": table.scale, "cell_se": table.cell_sd},
                "combined_from": [t.name for t in family],
                "combined_se": noise.sd,
                "combined_half_width": noise.half_width(level),
            }
        )
    write_json(
        public / INDEX,
        {
            "level": level,
            "rows_fitted": n_fitted,
            "target": TARGET.format(n=n_fitted),
            "noise": NOISE,
            "tables": entries,
        },
    )
    return {"index": INDEX, "count": len(tables), "level": level}
