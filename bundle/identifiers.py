"""The published table's columns: fresh identifiers for ``type: id`` columns, and the
declared order without the ``type: drop`` ones. Nothing here reads a confidential value:
an identifier is ``format.format(i)`` for the synthetic row's position i = 1…m."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

__all__ = ["fresh_identifiers", "publishable"]


def fresh_identifiers(fmt: str, start: int, k: int) -> list[str]:
    """Identifiers of rows start+1 … start+k."""
    return [fmt.format(i) for i in range(start + 1, start + k + 1)]


def publishable(
    table: pd.DataFrame,
    identifiers: Mapping[str, str],
    columns: Sequence[str],
    start: int = 0,
    integers: Sequence[str] = (),
) -> pd.DataFrame:
    """``table`` (the modelled columns) with a fresh identifier column per declared
    ``id``, in the published ``columns`` order; rows numbered from ``start`` + 1. The
    ``integers`` columns (``integer: true`` with ``missing: allowed``: floats with NaN in
    the model's table) become nullable integers, written as 51 and an empty cell."""
    if not identifiers and not integers and list(table.columns) == list(columns):
        return table
    out = table.copy()
    for name in integers:
        out[name] = out[name].astype("Int64")
    for name, fmt in identifiers.items():
        out[name] = fresh_identifiers(fmt, start, len(table))
    return out[list(columns)]
