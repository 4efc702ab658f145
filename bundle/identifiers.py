"""The published table's columns: fresh identifiers for ``type: id`` columns, and the
declared order without the ``type: drop`` ones. Nothing here reads a confidential value:
an identifier is ``format.format(i)`` for the synthetic row's position i = 1…m."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from mechanisms.calendar import to_iso
from mechanisms.schema import Continuous, Schema

__all__ = ["fresh_identifiers", "publishable"]


def fresh_identifiers(fmt: str, start: int, k: int) -> list[str]:
    """Identifiers of rows start+1 … start+k."""
    return [fmt.format(i) for i in range(start + 1, start + k + 1)]


def publishable(
    table: pd.DataFrame,
    schema: Schema,
    identifiers: Mapping[str, str],
    columns: Sequence[str],
    start: int = 0,
) -> pd.DataFrame:
    """``table`` (the modelled columns) as published: a fresh identifier column per
    declared ``id``, in the published ``columns`` order, rows numbered from ``start`` + 1;
    an ``integer`` column with ``missing: allowed`` (floats with NaN in the model's table)
    as nullable integers, written as 51 and an empty cell; a date column (whole units of
    its resolution) as ISO 8601 text (``mechanisms.calendar``)."""
    integers = [c.name for c in schema.columns if isinstance(c, Continuous) and c.integer and c.missing]
    dates = {c.name: c.calendar for c in schema.columns if isinstance(c, Continuous) and c.calendar}
    if not identifiers and not integers and not dates and list(table.columns) == list(columns):
        return table
    out = table.copy()
    for name in integers:
        if name not in dates:
            out[name] = out[name].astype("Int64")
    for name, unit in dates.items():
        out[name] = pd.array(to_iso(out[name].to_numpy(float), unit), dtype="str")
    for name, fmt in identifiers.items():
        out[name] = fresh_identifiers(fmt, start, len(table))
    return out[list(columns)]
