"""A data file drawn from the public schema alone, for the rehearsal before the reserve
(``flows/rehearsal.py``): the release path that needs no confidential value runs on it,
so that whatever fails on the spec fails before any budget is reserved.

Every declared cell of every modelled column that a value can fall in appears in at least
one row: each interval bin (the value the decoder makes at its centre; an interval of an
integer column that holds no whole number can hold no record either), each atom and each
``values`` point exactly, the missing cell
(an empty cell, or the declared missing token's empty cell), every level and category,
every one-hot member (and ``none``); two more rows hold every continuous and date
column at its lower and at its upper bound at once (the extremes a derived formula
meets). Columns are independent cyclic permutations of their cells (a fixed public seed),
so no two columns are identical. The file has the dataset's own layout and format: id,
drop and derived columns (read past), indicator columns of one-hot groups, dates as ISO
8601 text, CSV or Parquet as ``dataset.path`` says. Nothing here reads the data.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.mechanisms.calendar import to_iso
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.spec import ReleaseSpec
from dprelease.spec.columns import DerivedSpec, DropSpec, IdSpec, OneHotSpec
from dprelease.spec.resources import rehearsal_rows

__all__ = ["REHEARSAL_SEED", "model_values", "rehearsal_rows", "write_rehearsal_file"]

REHEARSAL_SEED = 20261126  # public: the permutations of the cells


def _cells(c: Continuous) -> np.ndarray:
    """One value per cell of ``c`` (model units): an interval's centre, an atom or a
    ``values`` point exactly, NaN for the missing cell (as the decoder makes them)."""
    return c.from_bins(np.arange(c.n_bins), np.full(c.n_bins, 0.5))


def _bounds(c: Continuous) -> tuple[float, float]:
    """The column's extremes as the file may hold them (whole numbers for ``integer``,
    the extreme points of ``values``)."""
    if c.values is not None:
        return min(c.values), max(c.values)
    if c.integer:
        return float(math.ceil(c.lower)), float(math.floor(c.upper))
    return c.lower, c.upper


def model_values(schema: Schema, rows: int) -> pd.DataFrame:
    """The modelled columns' values (continuous and dates in model units, NaN where
    missing; labels for categorical columns): rows 0 and 1 at the bounds, then each
    column's cells in a fixed public permutation, repeated."""
    out: dict[str, object] = {}
    for j, c in enumerate(schema.columns):
        rng = np.random.default_rng([REHEARSAL_SEED, j])
        if isinstance(c, Continuous):
            cells = _cells(c)
            order = rng.permutation(len(cells))
            body = cells[order][np.arange(rows - 2) % len(cells)]
            out[c.name] = np.r_[_bounds(c), body]
        else:
            values = np.array(c.values, dtype=object)
            order = rng.permutation(len(values))
            body = values[order][np.arange(rows) % len(values)]
            out[c.name] = pd.array(body, dtype="str")
    return pd.DataFrame(out)


def _file_columns(spec: ReleaseSpec, model: pd.DataFrame) -> pd.DataFrame:
    """``model`` in the dataset file's layout: declared order, one-hot groups as their
    indicators, dates as ISO text, a declared missing token as an empty cell, id, drop
    and derived columns as placeholder text the readers leave out."""
    schema = spec.public_schema()
    tokens = spec.missing_tokens()
    out: dict[str, object] = {}
    for name, declared in spec.columns.items():
        if isinstance(declared, IdSpec):
            out[name] = [f"rehearsal-{i}" for i in range(len(model))]
        elif isinstance(declared, DropSpec | DerivedSpec):
            out[name] = ["" for _ in range(len(model))]
        elif isinstance(declared, OneHotSpec):
            for k in declared.columns:
                out[k] = (model[name] == k).astype(np.int64).to_numpy()
        else:
            c = schema[name]
            values = model[name]
            if isinstance(c, Continuous) and c.calendar is not None:
                out[name] = to_iso(values.to_numpy(float), c.calendar)
            elif isinstance(c, Continuous) and c.integer:
                out[name] = values.astype("Int64")
            elif name in tokens:
                out[name] = values.mask(values == tokens[name], None)
            else:
                out[name] = values
    return pd.DataFrame(out)


def write_rehearsal_file(spec: ReleaseSpec, folder: Path) -> tuple[Path, pd.DataFrame]:
    """Write the rehearsal table into ``folder`` in the format of ``dataset.path`` (CSV,
    gzipped CSV or Parquet); returns its path and the modelled columns' values."""
    schema = spec.public_schema()
    model = model_values(schema, rehearsal_rows(spec))
    table = _file_columns(spec, model)
    kind = input_format_of(spec.dataset.path)
    path = folder / f"rehearsal.{kind}"
    if kind == "parquet":
        table.to_parquet(path, index=False)
    else:
        table.to_csv(path, index=False, na_rep="")
    return path, model


def input_format_of(path: Path) -> str:
    """``parquet``, ``csv.gz`` or ``csv`` by the name alone (the file need not exist);
    the readers' own rule (``engines.header.input_format``) refuses any other name."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    return "csv.gz" if name.endswith(".gz") else "csv"
