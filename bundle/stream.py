"""Synthetic rows written chunk by chunk (the streaming engines' decode step): appended
to ``public/synthetic.parquet`` and/or ``synthetic.csv``, each chunk validated, the
validation counts summed into ``internal/validation_output.json``, and the first rows
kept as the checks' sample. Memory holds one chunk and the sample."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dprelease.bundle.files import write_json
from dprelease.bundle.published import Layout, publishable
from dprelease.bundle.write import csv_header, io_error
from dprelease.engines.chunks import add_counts
from dprelease.mechanisms.schema import Continuous, Schema

__all__ = ["Synthetic", "write_synthetic_chunks"]

_CSV_BODY = pa_csv.WriteOptions(include_header=False, quoting_style="needed")


@dataclass
class Synthetic:
    """How many chunks were written, the first ``sample_rows`` rows kept (fresh i.i.d.
    draws, so a uniform sample) for the checks, and the summed validation records."""

    chunks: int
    sample: pd.DataFrame = field(repr=False)
    validation: list[dict] = field(repr=False)


def _arrow_schema(layout: Layout) -> pa.Schema:
    """The published columns' types: numbers for continuous columns (not dates, ISO
    text), one-hot indicators, derived columns and tokens that are plain numbers
    (``Layout.numbers``); text for the rest (categories, dates, identifiers)."""
    schema = layout.schema
    indicators = {k for group in layout.one_hot.values() for k in group}

    def kind(name: str) -> pa.DataType:
        c = schema[name] if name in schema.names else None
        if isinstance(c, Continuous) and c.calendar is None:
            return pa.int64() if c.integer else pa.float64()
        if name in indicators:
            return pa.int64()
        if name in layout.numbers:
            return layout.numbers[name]
        if name in layout.derived:
            return pa.int64() if layout.derived[name].integer else pa.float64()
        return pa.string()

    return pa.schema([(name, kind(name)) for name in layout.columns])


def write_synthetic_chunks(
    draw: Callable[[int], pd.DataFrame],
    validate: Callable[[pd.DataFrame], list[dict]],
    schema: Schema,
    m: int,
    chunk_rows: int,
    formats: list[str],
    sample_rows: int,
    staging: Path,
    progress: Callable[[int], None] | None = None,
    *,
    layout: Layout | None = None,
) -> Synthetic:
    """``draw(k)`` k rows as a table, ``validate`` them (validation records), append them to
    the formats asked for, published by ``layout`` (``bundle.published.publishable``;
    default: the schema's columns as modelled); the checks' sample keeps the modelled
    columns only. An OSError is a clear error saying the budget stays spent."""
    public = staging / "public"
    layout = layout or Layout(schema, tuple(schema.names))
    columns = list(layout.columns)
    arrow = _arrow_schema(layout)
    records, kept, done, chunks = None, [], 0, 0
    kept_rows = 0
    parquet = csv = None
    try:
        if "parquet" in formats:
            parquet = pq.ParquetWriter(public / "synthetic.parquet", arrow)
        if "csv" in formats:
            csv = pa.OSFile(str(public / "synthetic.csv"), "wb")
            csv.write(csv_header(columns))
        while done < m:
            k = min(chunk_rows, m - done)
            table = draw(k)
            recs = validate(table)
            records = recs if records is None else add_counts(records, recs)
            published = publishable(table, layout, start=done)
            frame = pa.Table.from_pandas(published, schema=arrow, preserve_index=False)
            if parquet is not None:
                parquet.write_table(frame)
            if csv is not None:
                pa_csv.write_csv(frame, csv, _CSV_BODY)
            if kept_rows < sample_rows:
                kept.append(table.iloc[: sample_rows - kept_rows])
                kept_rows += len(kept[-1])
            done, chunks = done + k, chunks + 1
            if progress is not None:
                progress(done)
    except OSError as e:  # disk full, not writable: a clear error; the staging folder goes
        spent = " (the budget this run spent stays spent: its noise was drawn)"
        raise io_error("writing the synthetic data", staging.parent, e, spent) from None
    finally:
        for sink in (parquet, csv):
            if sink is not None:
                sink.close()
    write_json(staging / "internal" / "validation_output.json", {"rows": m, "results": records})
    return Synthetic(chunks, pd.concat(kept, ignore_index=True), records or [])
