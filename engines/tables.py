"""Reading the confidential table and converting it to and from bin indices.

Plain functions (no Prefect): the tasks call them. Error messages name the file, the
column and the rule; they never quote a data value or a count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from dprelease.engines.header import DataError, OneHot, check_columns, input_format
from dprelease.mechanisms.calendar import to_units
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import MixedRows

__all__ = [
    "NUMERIC_NA",
    "DataError",
    "bins_to_table",
    "check_columns",
    "clip_to_bounds",
    "input_format",
    "map_unknown",
    "numbers",
    "read_table",
    "rows_to_table",
    "table_to_bins",
    "table_to_rows",
]

NUMERIC_NA = ["", "NA", "NaN", "nan", "null", "NULL"]


def read_table(
    path: Path | pa.Table,
    schema: Schema,
    missing: dict[str, str],
    ignored: Sequence[str] = (),
    one_hot: Mapping[str, OneHot] | None = None,
) -> pd.DataFrame:
    """CSV (optionally gzipped) or Parquet. Categorical columns are read as text; a
    declared ``missing`` token replaces empty cells of its column; the ``ignored`` columns
    (declared ``id``, ``drop`` or ``derived``) must be in the header and are left out; a
    ``one_hot`` group's indicators become its nominal column (``one_hot_categories``).
    ``path`` may be an Arrow table in memory, read as a Parquet file's table is."""
    numeric = [c.name for c in schema.columns if isinstance(c, Continuous) and c.calendar is None]
    text = [c.name for c in schema.columns if not isinstance(c, Continuous) or c.calendar is not None]
    kind = "parquet" if isinstance(path, pa.Table) else input_format(path)
    try:
        if isinstance(path, pa.Table):
            df = path.to_pandas()
        else:
            df = pd.read_parquet(path) if kind == "parquet" else _read_csv(path, numeric, text)
    except Exception as e:  # parser errors may quote raw lines: report the kind only
        where = "the table given" if isinstance(path, pa.Table) else f"dataset file '{path}'"
        raise DataError(
            f"{where} could not be read ({type(e).__name__}); check that it "
            "is a complete, well-formed file with one header row"
        ) from None
    check_columns(list(df.columns), schema, ignored=ignored, one_hot=one_hot)
    if kind == "parquet":
        _plain_numbers(df, numeric)
    for name, group in (one_hot or {}).items():
        df[name] = one_hot_categories(df, name, group)
    df = df[schema.names].copy()
    for c in schema.columns:
        if isinstance(c, Continuous) and c.calendar is not None:
            df[c.name] = calendar_units(df[c.name], c)
    for name in (c.name for c in schema.columns if not isinstance(c, Continuous)):
        col = df[name]
        categorical = isinstance(col.dtype, pd.CategoricalDtype)  # a Parquet dictionary: fixed categories
        if categorical or not (pd.api.types.is_string_dtype(col) or col.isna().all()):
            df[name] = col.astype("string").astype(str).where(col.notna())
        if name in missing:
            df[name] = df[name].fillna(missing[name])
    return df


def _plain_numbers(df: pd.DataFrame, numeric: list[str]) -> None:
    """A Parquet file written from pandas' nullable numbers (``Int64``, ``Float64``) comes
    back with those dtypes; as the CSV reader does, make them numpy's int64 (no missing
    value) or float64 (NaN where missing), in place, so the number rule sees numbers."""
    for name in numeric:
        col = df[name]
        masked = isinstance(col.dtype, pd.api.extensions.ExtensionDtype) and hasattr(col.dtype, "numpy_dtype")
        if masked and pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            df[name] = col.to_numpy(float, na_value=np.nan) if col.isna().any() else col.to_numpy()


def one_hot_categories(df: pd.DataFrame, name: str, group: OneHot) -> pd.Series:
    """A one-hot group's indicator columns → its category per row (the indicator's name,
    or ``none`` where all are 0). Each indicator must be 0 or 1 (numbers, booleans or
    their text) and at most one may be 1 in a row (exactly one without ``none``); else a
    ``DataError`` naming the column or the group and the rule, never a value or a count."""
    columns, none = group
    ones = np.zeros(len(df), dtype=np.int64)
    first = np.full(len(df), len(columns), dtype=np.int64)
    for k, c in enumerate(columns):
        x = pd.to_numeric(
            df[c].astype("string").str.strip().replace({"True": "1", "False": "0"}), errors="coerce"
        )
        if not x.isin([0, 1]).all():
            raise DataError(
                f"column '{c}': values must be 0 or 1 (an indicator of the one_hot group '{name}')"
            )
        set_here = x.to_numpy(dtype=float) == 1
        first[set_here & (first == len(columns))] = k
        ones += set_here
    if (ones > 1).any():
        raise DataError(
            f"one_hot group '{name}' ({', '.join(columns)}): at most one indicator may be 1 in a row"
        )
    if none is None and (ones == 0).any():
        raise DataError(
            f"one_hot group '{name}' ({', '.join(columns)}): exactly one indicator must be 1 in a row "
            "(or declare none: <label> for a row with none set)"
        )
    labels = np.array([*columns, none if none is not None else ""], dtype=object)
    return pd.Series(labels[first], index=df.index, dtype="str")


def calendar_units(col: pd.Series, c: Continuous) -> pd.Series:
    """A date or timestamp column (ISO 8601 text, or a Parquet file's dates) → whole units
    of the column's resolution since the epoch (``mechanisms.calendar``), NaN where empty.
    A cell that is not an ISO 8601 date stays as its text, so the suite's type rule
    refuses it, naming the column ("values must be ISO 8601 dates")."""
    assert c.calendar is not None, c.name
    empty = col.isna() | (col.astype("string") == "").fillna(True)
    parsed = pd.to_datetime(col.where(~empty), format="ISO8601", errors="coerce", utc=True)
    units = pd.Series(to_units(parsed.dt.tz_localize(None).to_numpy(), c.calendar), index=col.index)
    bad = parsed.isna() & ~empty
    return units.astype(object).where(~bad, col) if bad.any() else units


def _read_csv(path: Path, numeric: list[str], text: list[str]) -> pd.DataFrame:
    """pyarrow's multithreaded reader; pandas, every column as text, where pyarrow refuses
    the file (e.g. a cell longer than its block), so a malformed file is reported by kind,
    never by a parser message quoting a row. A numeric column that comes back as text
    goes through ``numbers`` (text anywhere in it keeps it text, for the type rule)."""
    try:
        table = pa_csv.read_csv(
            path,
            convert_options=pa_csv.ConvertOptions(
                column_types={c: pa.string() for c in text},
                null_values=NUMERIC_NA,
                strings_can_be_null=False,
            ),
        )
        df = table.to_pandas()
        for c in set(text) & set(df.columns):
            df[c] = df[c].where(df[c] != "")  # an empty text cell is a missing value
    except pa.ArrowInvalid:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values={c: [""] for c in text})
    for c in set(numeric) & set(df.columns):
        if pd.api.types.is_string_dtype(df[c]):
            df[c] = numbers(pa.array(df[c], type=pa.string(), from_pandas=True)).set_axis(df.index)
    return df


def numbers(col: pa.Array | pa.ChunkedArray) -> pd.Series:
    """A continuous column read as text → int64 if every present cell is a whole number,
    else float64 (a number beyond the float range becomes ±inf, for the bounds rule: a cell
    of millions of digits is parsed in linear time, never as a Python int), else the text,
    for the type rule; the NA tokens are missing values. Shared by the memory engine's
    reader and the streaming engines' chunks (``engines.chunks``)."""
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return col.to_pandas()
    col = pc.if_else(pc.is_in(col, pa.array(NUMERIC_NA)), pa.scalar(None, col.type), col)
    for kind in (pa.int64(), pa.float64()):
        try:
            return pc.cast(col, kind).to_pandas()
        except pa.ArrowInvalid:
            continue
    return col.to_pandas()


def clip_to_bounds(df: pd.DataFrame, schema: Schema, columns: list[str]) -> dict[str, int]:
    """``out_of_bounds: clip``: move values of ``columns`` outside the *declared* bounds
    (±inf included) to the nearer bound, in place; returns the number of clipped cells per
    column (confidential: for ``internal/`` only). NaN stays NaN (missing is not out of
    bounds; the suite refuses it), and a column holding text is left for the type rule.
    An integer column is clipped to the whole numbers inside the bounds; one read as
    floats only because of a huge or infinite value becomes integers again."""
    counts = {}
    for name in columns:
        c = schema[name]
        assert isinstance(c, Continuous), name  # the spec allows clip on continuous columns only
        col = df[name]
        if not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            continue
        lower, upper = (math.ceil(c.lower), math.floor(c.upper)) if c.integer else (c.lower, c.upper)
        outside = (col < lower) | (col > upper)
        counts[name] = int(outside.sum())
        col = col.clip(lower, upper)
        if c.integer and pd.api.types.is_float_dtype(col):
            present = col.dropna()
            if (present == np.floor(present)).all():
                col = col.astype("Int64" if col.isna().any() else "int64")
        df[name] = col
    return counts


def map_unknown(df: pd.DataFrame, schema: Schema, other: dict[str, str]) -> dict[str, int]:
    """``unknown: other``: a value of column ``name`` that is not declared becomes
    ``other[name]`` (a declared value), in place; returns the number of mapped cells per
    column (confidential: for ``internal/`` only). A missing cell is not mapped: a declared
    ``missing`` token has already replaced it, else the suite refuses it."""
    counts = {}
    for name, token in other.items():
        col = df[name]
        c = schema[name]
        assert not isinstance(c, Continuous), name  # unknown: other is for nominal/ordinal columns
        unknown = col.notna() & ~col.isin(c.values)
        counts[name] = int(unknown.sum())
        df[name] = col.mask(unknown, token)
    return counts


def table_to_bins(df: pd.DataFrame, schema: Schema) -> np.ndarray:
    """(n, p) int32 bin indices on the public bins; the table must have passed validation."""
    out = np.empty((len(df), len(schema)), dtype=np.int32)
    for j, c in enumerate(schema.columns):
        if isinstance(c, Continuous):
            out[:, j] = c.to_bins(df[c.name].to_numpy(dtype=float))
        else:
            found = pc.index_in(pa.array(df[c.name]), value_set=pa.array(list(c.values), pa.string()))
            codes = found.fill_null(-1).to_numpy()
            if np.any(codes < 0):
                raise DataError(f"column '{c.name}': values must be in the declared list")
            out[:, j] = codes
    return out


def table_to_rows(df: pd.DataFrame, bins: np.ndarray, schema: Schema) -> MixedRows:
    """The public numeric view: ``bins`` plus continuous values on [0, 1] of the public
    working scale (``Continuous.to_unit``); NaN in the other columns."""
    unit = np.full(bins.shape, np.nan)
    for j, c in enumerate(schema.columns):
        if isinstance(c, Continuous):
            unit[:, j] = c.to_unit(df[c.name].to_numpy(dtype=float))
    return MixedRows(bins, unit)


def rows_to_table(rows: MixedRows, schema: Schema, *, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic rows → a table with the schema's columns and types. A continuous column
    comes from ``rows.unit`` where the synthesizer set it, else from a uniform draw inside
    its bin."""
    return bins_to_table(rows.bins, schema, rng=rng, unit=rows.unit)


def bins_to_table(
    bins: np.ndarray, schema: Schema, *, rng: np.random.Generator, unit: np.ndarray | None = None
) -> pd.DataFrame:
    """Synthetic bin indices → a table with the schema's columns and types; a continuous
    column with values in ``unit`` (no NaN) is decoded from them instead of its bins."""
    data = {}
    for j, c in enumerate(schema.columns):
        if isinstance(c, Continuous):
            if unit is not None and not np.isnan(unit[:, j]).any():
                values = c.from_unit(unit[:, j])
            else:
                values = c.from_bins(bins[:, j], np.asarray(rng.random(bins.shape[0])))
            # whole numbers; floats with NaN when the column may be missing (as the reader
            # gives it; the published files write them as integers, ``bundle.published``)
            data[c.name] = values.astype(np.int64) if c.integer and not c.missing else values
        else:
            labels = pa.DictionaryArray.from_arrays(pa.array(bins[:, j]), pa.array(list(c.values)))
            data[c.name] = pd.array(labels.cast(pa.string()), dtype="str")
    return pd.DataFrame(data)
