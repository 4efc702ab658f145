"""The input in chunks: reading, per-chunk work, and combining (plain functions, no Prefect).

Both streaming engines (``engines.runners``) run the *same* functions on each chunk and
combine the results the same way; only where the chunk boundaries fall differs (pyarrow
batches on one machine, byte ranges or row groups on Dask). Every per-row random choice
is keyed by the row's position in the file (``mechanisms.rowkeys``), so the combined
statistics do not depend on the boundaries: equal up to floating-point summation order.

Reading: every CSV column is read as text and the continuous ones converted here, per
chunk: int64 when every cell is a whole number, else float64, else left as text for the
schema's type rule to name (the memory engine's reader gives the same types). Parquet
columns keep their stored types. A CSV value may not contain a line break (both engines
split the file at line ends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from fsspec.utils import read_block

from dprelease.engines.header import OneHot
from dprelease.engines.tables import (
    DataError,
    calendar_units,
    check_columns,
    clip_to_bounds,
    input_format,
    map_unknown,
    numbers,
    one_hot_categories,
    table_to_bins,
)
from dprelease.engines.value_grid import fitted_grid_counts
from dprelease.mechanisms.rowkeys import RowKeys, holdout_mask, row_uniforms
from dprelease.mechanisms.schema import Continuous, Schema

__all__ = [
    "ChunkJob",
    "Scan",
    "add_counts",
    "block_bytes",
    "local_chunks",
    "read_csv_range",
    "read_row_group",
]

_PRIORITY = "__priority__"


def block_bytes(path: Path, chunk_rows: int) -> int:
    """Bytes per chunk of about ``chunk_rows`` rows: the mean line length of the first MiB
    (of the uncompressed text) times ``chunk_rows``."""
    with pa.input_stream(str(path), compression="detect") as f:
        head = f.read(1 << 20)
    per_row = max(len(head) / max(head.count(b"\n"), 1), 8.0)
    return int(min(max(chunk_rows * per_row, 1 << 16), (1 << 31) - 1))


def _convert(names: list[str]) -> pa_csv.ConvertOptions:
    return pa_csv.ConvertOptions(column_types={c: pa.string() for c in names}, strings_can_be_null=False)


def local_chunks(path: Path, chunk_rows: int) -> Iterator[pa.Table]:
    """The local engine's chunks, read one at a time: Parquet batches of ``chunk_rows``, or
    CSV blocks of whole lines (``block_bytes`` long, decompressed on the fly for .csv.gz)
    each parsed on its own. Not pyarrow's streaming CSV reader: it reads ahead without
    bound, so its memory grows with the file (BENCHMARKS.md §14).
    A malformed file is reported by kind, never by the parser's message (which may quote
    a row)."""
    try:
        if input_format(path) == "parquet":
            for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows):
                yield pa.Table.from_batches([batch])
            return
        step = block_bytes(path, chunk_rows)
        with pa.input_stream(str(path), compression="detect") as f:
            header, pending = None, b""
            while block := f.read(step):
                pending += block
                end = pending.rfind(b"\n") + 1  # whole lines only; a partial one waits
                if not end:
                    continue
                lines, pending = pending[:end], pending[end:]
                if header is None:
                    first = lines.index(b"\n") + 1
                    header, lines = lines[:first], lines[first:]
                if lines:
                    yield _parse(header + lines)
            if pending.strip():
                yield _parse((header or b"") + pending)
    except (pa.ArrowInvalid, OSError) as e:
        raise _unreadable(path, e) from None


def _unreadable(path: Path, e: Exception) -> DataError:
    return DataError(
        f"dataset file '{path}' could not be read ({type(e).__name__}); check that it is a complete, "
        "well-formed file with one header row and no line breaks inside values"
    )


def _parse(data: bytes) -> pa.Table:
    """Whole CSV lines (a header line first) as a table, every column as text."""
    try:
        names = pa_csv.read_csv(pa.py_buffer(data[: data.find(b"\n") + 1] or data)).column_names
        return pa_csv.read_csv(pa.py_buffer(data), convert_options=_convert(names))
    except pa.ArrowInvalid as e:
        raise DataError(
            f"a block of the dataset file could not be read ({type(e).__name__}); check that it is a "
            "complete, well-formed CSV file with one header row and no line breaks inside values"
        ) from None


def read_csv_range(path: str, offset: int, length: int | None) -> pa.Table:
    """One Dask chunk: the whole lines that begin in [offset, offset + length) (fsspec's
    ``read_block``, the splitter behind ``dask.dataframe.read_csv``; ``length`` None: the
    whole, possibly compressed, file), with the file's first line prepended after the
    first range. The worker reads the bytes, the header included, itself: a task's
    arguments are a path and two offsets, never file content (Dask prints a failed task's
    arguments in its log, and a file without a header line would have a record there)."""
    with fsspec.open(path, "rb", compression="infer") as f:
        if length is None:
            return _parse(f.read())
        header = f.readline()
        block = read_block(f, offset, length, delimiter=b"\n")
    return _parse(block if offset == 0 else header + block)


def read_row_group(path: str, index: int) -> pa.Table:
    """One Parquet row group (a Dask engine's chunk of a Parquet input)."""
    return pq.ParquetFile(path).read_row_group(index)


def to_frame(
    table: pa.Table,
    schema: Schema,
    missing: dict[str, str],
    ignored: Sequence[str] = (),
    one_hot: Mapping[str, OneHot] | None = None,
) -> pd.DataFrame:
    """A chunk as the validation suite sees it: the schema's columns in order (the
    ``ignored`` ones checked present, then left out), continuous ones numeric where they
    can be, text cells empty → missing → the declared token; a ``one_hot`` group's
    indicators → its category (``one_hot_categories``)."""
    check_columns(table.column_names, schema, ignored=ignored, one_hot=one_hot)
    data = {}
    for c in schema.columns:
        if one_hot and c.name in one_hot:
            indicators = table.select(list(one_hot[c.name][0])).to_pandas()
            data[c.name] = one_hot_categories(indicators, c.name, one_hot[c.name])
            continue
        col = table.column(c.name)
        if isinstance(c, Continuous):
            if c.calendar is not None:
                data[c.name] = calendar_units(col.to_pandas(), c)
            else:
                data[c.name] = numbers(col)
            continue
        text = col.cast(pa.string()).to_pandas() if not pa.types.is_string(col.type) else col.to_pandas()
        text = text.where(text != "")
        data[c.name] = text.fillna(missing[c.name]) if c.name in missing else text
    return pd.DataFrame(data)


def _total(a: int | None, b: int | None) -> int | None:
    """A count GX reports for some expectations only (``None`` for a type rule)."""
    return None if a is None and b is None else (a or 0) + (b or 0)


def add_counts(a: list[dict], b: list[dict]) -> list[dict]:
    """Per-expectation validation records of two chunks as one (counts add up)."""
    out = []
    for x, y in zip(a, b, strict=True):
        out.append(
            {
                **x,
                "success": x["success"] and y["success"],
                "element_count": _total(x["element_count"], y["element_count"]),
                "unexpected_count": _total(x["unexpected_count"], y["unexpected_count"]),
                "raised_exception": x["raised_exception"] or y["raised_exception"],
            }
        )
    return out


def _smallest(a: pd.DataFrame, b: pd.DataFrame, k: int) -> pd.DataFrame:
    return pd.concat([a, b], ignore_index=True).nsmallest(k, _PRIORITY, keep="first").reset_index(drop=True)


@dataclass
class Scan:
    """Pass 1 over some rows: their count, the fitted count, the number of chunks (a
    function of the file's byte length: confidential, for ``internal/`` only), the
    validation records (confidential counts), the policy counts, the fitted rows'
    histograms and, for ``mechanism.value_grid``, their grid counts (``None`` once a chunk
    broke the schema), and uniform samples (bottom-k by a positional priority) of fitted
    and held-out rows for the checks."""

    rows: int
    fitted: int
    chunks: int
    validation: list[dict] = field(repr=False)
    changed: dict[str, dict[str, int]] = field(repr=False)
    counts: list[np.ndarray] | None = field(repr=False)
    fitted_sample: pd.DataFrame = field(repr=False)
    held_sample: pd.DataFrame = field(repr=False)
    grids: list[np.ndarray] | None = field(default=None, repr=False)

    @property
    def valid(self) -> bool:
        return all(r["success"] for r in self.validation)

    def combine(self, other: Scan, k: int) -> Scan:
        counts, grids = (
            None if mine is None or theirs is None else [a + b for a, b in zip(mine, theirs, strict=True)]
            for mine, theirs in ((self.counts, other.counts), (self.grids, other.grids))
        )
        changed = {
            kind: {c: n + other.changed[kind][c] for c, n in cols.items()}
            for kind, cols in self.changed.items()
        }
        return Scan(
            self.rows + other.rows,
            self.fitted + other.fitted,
            self.chunks + other.chunks,
            add_counts(self.validation, other.validation),
            changed,
            counts,
            _smallest(self.fitted_sample, other.fitted_sample, k),
            _smallest(self.held_sample, other.held_sample, k),
            grids,
        )

    def samples(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The check samples in file order, without their priority column."""

        def clean(df: pd.DataFrame) -> pd.DataFrame:
            return df.sort_values("__row__").drop(columns=[_PRIORITY, "__row__"]).reset_index(drop=True)

        return clean(self.fitted_sample), clean(self.held_sample)


@dataclass(frozen=True)
class ChunkJob:
    """What every chunk needs to know: the public schema and the spec's policies, the row
    keys, the holdout fraction, the check-sample size and the synthesizer's per-chunk
    statistic (``Streaming.chunk_sum``). Pickled to Dask workers."""

    schema: Schema
    missing: dict[str, str]
    clip: tuple[str, ...]
    other: dict[str, str]
    keys: RowKeys
    holdout_fraction: float
    sample_rows: int
    chunk_sum: Callable[..., np.ndarray]
    ignored: tuple[str, ...] = ()
    one_hot: dict[str, OneHot] = field(default_factory=dict)
    value_grid: bool = False  # pass 1 also counts the grid columns' points (``mechanisms.value_grid``)

    def frame(self, table: pa.Table) -> tuple[pd.DataFrame, dict[str, dict[str, int]]]:
        """The chunk as a table with the declared policies applied, and their counts."""
        df = to_frame(table, self.schema, self.missing, self.ignored, self.one_hot)
        return df, {
            "out_of_bounds_clipped": clip_to_bounds(df, self.schema, list(self.clip)),
            "unknown_mapped_to_other": map_unknown(df, self.schema, self.other),
        }

    def scan(self, table: pa.Table, start: int) -> Scan:
        """Pass 1 on rows start … start+len−1: GX validation, then (if valid) histograms of
        the fitted rows and the samples."""
        from dprelease.expectations.suite import validate_table  # GX is heavy: import on first use

        df, changed = self.frame(table)
        n = len(df)
        _, records = validate_table(df, self.schema, "input")
        held = holdout_mask(self.keys.holdout, start, n, self.holdout_fraction)
        priority = row_uniforms(self.keys.sample, start, n, 1)[:, 0]
        tagged = df.assign(**{_PRIORITY: priority, "__row__": np.arange(start, start + n)})
        counts = grids = None
        if all(r["success"] for r in records):
            bins = table_to_bins(df, self.schema)[~held]
            counts = [np.bincount(bins[:, j], minlength=k) for j, k in enumerate(self.schema.n_bins)]
            if self.value_grid:
                grids = fitted_grid_counts(df[~held], self.schema)
        k = self.sample_rows
        return Scan(
            n,
            int(n - held.sum()),
            1,
            records,
            changed,
            counts,
            tagged[~held].nsmallest(k, _PRIORITY, keep="first"),
            tagged[held].nsmallest(k, _PRIORITY, keep="first"),
            grids,
        )

    def statistic(self, table: pa.Table, start: int, state: Any, params: Any) -> np.ndarray:
        """Pass 2 on rows start … start+len−1: the synthesizer's statistic of the fitted
        rows (exact), given the encode step's state."""
        df, _ = self.frame(table)
        fitted = ~holdout_mask(self.keys.holdout, start, len(df), self.holdout_fraction)
        bins = table_to_bins(df[fitted], self.schema)
        dither = row_uniforms(self.keys.dither, start, len(df), bins.shape[1])[fitted]
        return self.chunk_sum(bins, dither, state, params)
