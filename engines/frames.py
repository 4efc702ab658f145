"""A pandas DataFrame given to the Python API (``dprelease.release``, ``dprelease.synthesize``)
as the table the engines read: checked column by column, then converted to Arrow, before
Prefect starts and before anything is reserved, so that data the engines cannot read is
refused with every column named and its rule, never as a raw pyarrow or pandas error.

The caller passed the frame, so the message may name its columns and their types (never a
value or a count); it goes to the caller alone, never to Prefect, a log or a file. What the
schema can read (``engines.tables.read_table`` on the Parquet file written from the frame):

- the argument is a DataFrame (a Series is one column: ``series.to_frame()``);
- its column names are text, one level (no MultiIndex), each once, and each meets the
  spec's rule for text (``spec.text``), since a name it refuses can be declared by no spec;
- each column holds numbers or booleans (numpy, pandas' nullable or Arrow types), text,
  dates and times (``datetime64``, with or without a time zone), or categories of one of
  those; an ``object`` column holds one kind of value throughout: text, numbers, booleans
  or dates (``datetime.date``), with ``None``, NaN or ``pd.NA`` where missing (pandas'
  ``infer_dtype`` says which);
- its text is Unicode (a lone surrogate, which no file can hold, is refused).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dprelease.engines.header import DataError
from dprelease.spec.text import text_problem, visible

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["frame_input", "write_frame"]

READABLE = "numbers, booleans, text or dates"
_INFERRED = {
    "string": "text",
    "empty": "missing",
    "integer": "numbers",
    "floating": "numbers",
    "mixed-integer-float": "numbers",
    "boolean": "booleans",
    "date": "dates",
    "datetime": "dates",
    "datetime64": "dates",
}
"""pandas' ``infer_dtype`` of an object column (missing values skipped) → what the schema reads."""
_HINTS = {
    "decimal": "convert it with .astype(float)",
    "bytes": "decode it to text with .str.decode('utf-8')",
    "mixed": "make it one kind: .astype(str) for text, pd.to_numeric(...) for numbers",
    "mixed-integer": "make it one kind: .astype(str) for text, pd.to_numeric(...) for numbers",
}


def _name(label: Any) -> str:
    """A column's label as a message quotes it: text quoted, escaped; anything else with its type."""
    if isinstance(label, str):
        return f"'{visible(label)}'"
    return f"{visible(str(label))[:40]} ({type(label).__name__})"


def _arrow_kind(t: pa.DataType) -> str | None:
    """What the schema reads in an Arrow column of type ``t`` (not a dictionary, which pandas
    cannot read back from Parquet as an Arrow type: ``.astype('category')``; not half floats,
    which the validation does not take for numbers: ``.astype(float)``)."""
    import pyarrow as pa

    if pa.types.is_integer(t) or (pa.types.is_floating(t) and not pa.types.is_float16(t)):
        return "numbers"
    if pa.types.is_boolean(t):
        return "booleans"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "dates"
    return None


def _object_problem(values: pd.Series | pd.Index) -> str | None:
    """What an object column (or categories) holds that the schema cannot read, or None."""
    import pandas as pd

    inferred = pd.api.types.infer_dtype(values, skipna=True)
    if inferred in _INFERRED:
        return None
    kinds = sorted({type(v).__name__ for v in values if not _missing(v)})
    return (
        f"an object column must hold one kind of value throughout ({READABLE}, None or NaN where missing), "
        f"but it holds {', '.join(kinds[:6])}{' and more' if len(kinds) > 6 else ''}: "
        + _HINTS.get(inferred, f"convert it to {READABLE}")
    )


def _missing(v: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a list or an array is a value, not a missing one
        return False


def _dtype_problem(col: pd.Series | pd.Index) -> str | None:
    """What makes ``col``'s type one the schema cannot read, or None."""
    import numpy as np
    import pandas as pd

    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        problem = _dtype_problem(dtype.categories)
        return None if problem is None else f"its categories: {problem}"
    if isinstance(dtype, pd.ArrowDtype):
        ok = _arrow_kind(dtype.pyarrow_dtype) is not None
    elif isinstance(dtype, np.dtype):
        if dtype.kind == "O":
            return _object_problem(col)
        ok = dtype.kind in "biufM" and dtype != np.float16  # half floats: not numbers to the validation
    elif isinstance(dtype, pd.SparseDtype):
        ok = False
    else:  # pandas' own: nullable numbers and booleans, text, dates with a time zone
        ok = isinstance(dtype, pd.StringDtype | pd.BooleanDtype | pd.DatetimeTZDtype) or dtype.kind in "iuf"
    if ok:
        return None
    name = str(dtype)
    hint = (
        ".astype(float)"
        if "float16" in name or "halffloat" in name
        else ".astype('category')"
        if "dictionary" in name
        else f"to {READABLE}"
    )
    return f"its type {name} is not one the engines read; convert it: {hint}"


def _columns_problems(df: pd.DataFrame) -> list[str]:
    """Every problem of the column names, then of each column's type, one line each."""
    import pandas as pd

    if isinstance(df.columns, pd.MultiIndex):
        return [
            "the column names are a MultiIndex (several levels); give one level of text, as the spec's "
            "schema names the columns (e.g. df.columns = ['_'.join(c) for c in df.columns])"
        ]
    labels = list(df.columns)
    out = []
    for label in labels:
        if not isinstance(label, str):
            out.append(f"column {_name(label)}: a column name must be text, as the spec's schema names it")
        elif (problem := text_problem(label)) is not None:
            out.append(f"column {_name(label)}: the name {problem}")
    repeated = sorted({visible(str(c)) for c in labels if labels.count(c) > 1})
    if repeated:
        out.append(f"columns {repeated} appear more than once; each column must appear once")
    if out:
        return out
    for label in labels:
        problem = _dtype_problem(df[label])
        if problem is not None:
            out.append(f"column {_name(label)}: {problem}")
    return out


def _to_arrow(df: pd.DataFrame, argument: str) -> pa.Table:
    """``df`` as an Arrow table; a failure names the first column that cannot be converted
    and the error's kind (an Arrow message may quote a value)."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except Exception as whole:
        for label in df.columns:
            try:
                pa.Table.from_pandas(df[[label]], preserve_index=False)
            except UnicodeEncodeError:
                rule = (
                    "its text must be Unicode, but it holds a lone surrogate (U+D800 to U+DFFF), which no "
                    "file can hold; replace it, e.g. with .str.encode('utf-8', 'replace').str.decode('utf-8')"
                )
                break
            except Exception as e:
                rule = (
                    f"it could not be converted to a Parquet column ({type(e).__name__}); convert it to "
                    + READABLE
                )
                break
        else:
            raise DataError(
                f"{argument}: the DataFrame could not be converted to a Parquet table "
                f"({type(whole).__name__})"
            ) from None
    raise DataError(f"{argument}: column {_name(label)}: {rule}") from None


def frame_input(data: object, argument: str = "data") -> Path | pa.Table:
    """``data`` as the engines read it: the path of a file (resolved; the readers refuse a
    missing or unreadable one), or a DataFrame checked and converted to Arrow. Anything else,
    a DataFrame with a column the schema cannot read, or one Arrow cannot convert, is a
    ``DataError`` naming ``argument``, every such column and its rule."""
    import pandas as pd

    if isinstance(data, str | os.PathLike):
        return Path(data).resolve()
    if not isinstance(data, pd.DataFrame):
        hint = " (a Series is one column: pass series.to_frame())" if isinstance(data, pd.Series) else ""
        raise DataError(
            f"{argument} must be a pandas DataFrame or the path of a CSV or Parquet file, not "
            f"{type(data).__name__}{hint}"
        )
    problems = _columns_problems(data)
    if problems:
        raise DataError(
            f"{argument}: the DataFrame holds columns the engines cannot read:\n  "
            + "\n  ".join(problems)
            + "\nNothing was read or spent; fix the DataFrame and call again."
        )
    return _to_arrow(data, argument)


def write_frame(table: pa.Table, folder: Path) -> Path:
    """``table`` as ``folder/data.parquet``, a new file only this user can read (0600)."""
    import pyarrow.parquet as pq

    path = folder / "data.parquet"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        pq.write_table(table, f)
    return path
