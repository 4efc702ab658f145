"""What the CLI checks of the input before Prefect starts, and the readers share: the file
(exists, is a file, is readable, has a supported format) and its header against the public
schema. Only the header record is read: it is the file's structure, not a record (and
``check_columns`` quotes undeclared names only when the line looks like a header). Also the
file's row count, from its structure alone (``data_lines``): ``mechanism: auto`` chooses on it.
Light imports only (no pandas or pyarrow at import time), so the CLI answers in seconds."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from dprelease.mechanisms.errors import DataError
from dprelease.mechanisms.schema import Continuous, Schema

OneHot = tuple[tuple[str, ...], str | None]
"""A one-hot group: its indicator columns in the file, and the category of a row with
none set (None: exactly one must be set)."""

__all__ = ["DataError", "check_columns", "data_lines", "input_format", "read_header"]

_HEADER_BYTES = 1 << 20  # a header record longer than 1 MiB is not a header
_BLOCK_BYTES = 1 << 20  # the line count reads this much at a time


def input_format(path: Path) -> str:
    """``csv`` (optionally gzipped) or ``parquet``, from the file name."""
    if path.is_dir():
        raise DataError(
            f"dataset file '{path}' is a folder, not a file; fix dataset.path in the spec (or the data path "
            "given) to name a CSV (.csv, .csv.gz) or Parquet file"
        )
    if not path.is_file():
        raise DataError(f"dataset file '{path}' does not exist; fix dataset.path in the spec")
    if path.suffix.lower() == ".parquet":
        return "parquet"
    if "".join(path.suffixes[-2:]).lower().endswith((".csv", ".csv.gz")):
        return "csv"
    raise DataError(f"dataset file '{path}' must end in .csv, .csv.gz or .parquet")


class HeaderTooLong(Exception):
    """The first record goes on past ``_HEADER_BYTES``."""


def _first_record(f: io.BufferedIOBase) -> list[str] | None:
    """The first CSV record of the binary file ``f`` (UTF-8, a BOM dropped; None if the
    file is empty). The csv module asks for physical lines one at a time, as it needs
    them: a quoted name may hold a line break, so a record may span lines; none is read
    past the record's end, nor past ``_HEADER_BYTES`` (``HeaderTooLong``)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()

    def lines() -> Iterator[str]:
        left = _HEADER_BYTES
        while True:
            if left == 0:  # the record goes on past the limit
                raise HeaderTooLong
            line = f.readline(left)
            if not line:
                return
            left -= len(line)
            if left == 0 and not line.endswith(b"\n"):
                raise HeaderTooLong
            yield decoder.decode(line, final=not line.endswith(b"\n"))

    return next(csv.reader(lines(), strict=True), None)


def read_header(path: Path) -> list[str]:
    """The column names in the first record of ``path`` (CSV, gzipped CSV) or in its schema
    (Parquet), without reading a record. Refuses a missing, unreadable or empty file."""
    kind = input_format(path)
    if not os.access(path, os.R_OK):
        raise DataError(f"dataset file '{path}' is not readable by this user; fix its permissions")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        opener = gzip.open if path.suffix.lower() == ".gz" else open
        with opener(path, "rb") as f:
            record = _first_record(f)
    except HeaderTooLong:
        raise DataError(
            f"dataset file '{path}' has no header record within its first {_HEADER_BYTES >> 20} MiB; it "
            "must start with a header row of column names"
        ) from None
    except Exception as e:  # parser errors may quote raw bytes: report the kind only
        raise DataError(
            f"dataset file '{path}' could not be read ({type(e).__name__}); check that it is a complete, "
            "well-formed file with one header row"
        ) from None
    if not record or (len(record) == 1 and not record[0].strip()):
        raise DataError(f"dataset file '{path}' is empty; it must start with a header line")
    return record


def data_lines(path: Path) -> int:
    """The data rows of ``path`` from its structure alone, never parsing a value: a Parquet
    file's footer (its row count), or a CSV file's lines after the first, a line being a run
    of bytes between line ends (LF, CRLF or CR, as the CSV readers take them; an empty line
    is no row, as they skip it), decompressed on the fly for .csv.gz. The bytes are scanned
    for line ends only, so no record's content can make the count fail; a value that holds a
    line break counts as two rows, and the readers, which find one record, then disagree
    (``engines.inputs.check_rows`` refuses that, after the reserve). Public under replace-one."""
    kind = input_format(path)
    if not os.access(path, os.R_OK):
        raise DataError(f"dataset file '{path}' is not readable by this user; fix its permissions")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return int(pq.read_metadata(path).num_rows)
        import numpy as np

        lines, after_end = 0, True  # after_end: the byte before the block ended a line
        opener = gzip.open if path.suffix.lower() == ".gz" else open
        with opener(path, "rb") as f:
            while block := f.read(_BLOCK_BYTES):
                byte = np.frombuffer(block, np.uint8)
                ends = (byte == ord("\n")) | (byte == ord("\r"))
                lines += int((~ends & np.concatenate(([after_end], ends[:-1]))).sum())  # lines begun
                after_end = bool(ends[-1])
    except Exception as e:  # a reader's errors may quote raw bytes: report the kind only
        raise DataError(
            f"dataset file '{path}' could not be read ({type(e).__name__}); check that it is a complete, "
            "well-formed file"
        ) from None
    return max(lines - 1, 0)


def declared_kinds(path: Path) -> dict[str, tuple[str, str]] | None:
    """A Parquet file's declared column types as draft kinds (``spec.draft``): integers →
    ``integer``, floats → ``continuous``, dates and timestamps → ``date``/``datetime``,
    text, categories and booleans → ``nominal``; each with the type it came from. None
    for CSV, whose text carries no declared type (the values would have to be read)."""
    if input_format(path) != "parquet":
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {}
    for f in pq.read_schema(path):
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        kind = (
            "integer"
            if pa.types.is_integer(t)
            else "continuous"
            if pa.types.is_floating(t) or pa.types.is_decimal(t)
            else "date"
            if pa.types.is_date(t)
            else "datetime"
            if pa.types.is_timestamp(t)
            else "nominal"
            if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)
            else None
        )
        if kind is not None:
            out[f.name] = (kind, f"the Parquet type {f.type}")
    return out


_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[ .-][A-Za-z0-9_]+)*")


def _header_names(extra: list[str], columns: list[str], schema: Schema) -> list[str] | None:
    """The undeclared names of a header line, when the line is a header and not a record
    (a file without a header line has its first record there): every one looks like a
    column name (an identifier of at most 40 characters, words joined by ' ', '.' or '-',
    not a number), none is a declared category or level (a record's values would be), and
    at least half of the declared columns are on the line. Otherwise None: count only."""
    values = {v for c in schema.columns if not isinstance(c, Continuous) for v in c.values}
    if 2 * sum(c in columns for c in schema.names) < len(schema.names):
        return None
    if all(len(e) <= 40 and _COLUMN_NAME.fullmatch(e) and e not in values for e in extra):
        return extra
    return None


def check_columns(
    columns: list[str],
    schema: Schema,
    *,
    quote: bool = False,
    ignored: Sequence[str] = (),
    one_hot: Mapping[str, OneHot] | None = None,
) -> None:
    """The data's header must hold exactly the schema's columns (a ``one_hot`` group's
    indicator columns in place of its name) and the ``ignored`` ones (declared ``id``,
    ``drop`` or ``derived``: read past, never modelled), in any order. Undeclared
    names come from the confidential file, so they are counted, never shown, except with
    ``quote`` (the CLI's check before Prefect starts, whose message reaches only the
    steward's terminal) when the line looks like a header (``_header_names``): in a file
    whose header line is missing they would be a record. The flow's readers never quote
    them: their messages reach Prefect's logs and the failure record."""
    groups = one_hot or {}
    modelled = [i for n in schema.names for i in (groups[n][0] if n in groups else (n,))]
    expected = [*modelled, *ignored]
    declared = set(expected)
    extra = [c for c in columns if c not in declared]
    absent = [c for c in expected if c not in columns]
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        named = [c for c in dup if c in declared]
        what = f"columns {named}" if len(named) == len(dup) else f"{len(dup)} column name(s)"
        raise DataError(f"{what} appear more than once in the data header; each column must appear once")
    if extra or absent:
        parts = []
        if extra:
            names = _header_names(extra, columns, schema) if quote else None
            parts.append(
                f"the data header has column(s) the schema does not declare: {names} (declare them in the "
                "spec's schema, or drop them from the file)"
                if names is not None
                else f"the data header has {len(extra)} column(s) the schema does not declare (not shown: "
                "names read from the data file; `dprelease release` names them before it starts when the "
                "line looks like a header)"
            )
        parts += [f"column '{c}' is declared in the schema but missing from the data" for c in absent]
        raise DataError("; ".join(parts) + f"; make the data header exactly the schema's columns: {expected}")
