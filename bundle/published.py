"""The published table's columns: fresh identifiers for ``type: id`` columns, one-hot
groups written back as indicators, derived columns computed from the decoded values, dates
as ISO text, nominal and ordinal tokens that are plain numbers as numbers, and the declared
order without the ``type: drop`` ones. Nothing here reads a confidential value: it sees
the synthetic table and the public spec only (an identifier is ``format.format(i)`` for the
synthetic row's position i = 1…m)."""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from dprelease.mechanisms.calendar import to_iso
from dprelease.mechanisms.formula import Formula
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.spec import ReleaseSpec

__all__ = ["Derived", "Layout", "fresh_identifiers", "number_type", "publishable"]


def number_type(tokens: Sequence[str]) -> pa.DataType | None:
    """``int64`` or ``float64`` when every token is a plain number, one that the CSV
    writer prints back exactly as the token ("0", "-3", "2.5"; not "01", "1.0", "1e5",
    "nan", " 1"; nor "-0" beside "0": equal numbers); else None (text). pyarrow quotes
    every text cell, a number never, so such tokens are published as numbers, like one-hot
    indicators and derived columns."""
    text = pa.array(list(tokens), pa.string())
    for kind in (pa.int64(), pa.float64()):
        try:
            numbers = pc.cast(text, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        if kind == pa.float64() and not pc.all(pc.is_finite(numbers)).as_py():
            continue
        if len(set(numbers.to_pylist())) < len(tokens):
            continue
        printed = io.BytesIO()
        pa_csv.write_csv(pa.table({"t": numbers}), printed, pa_csv.WriteOptions(include_header=False))
        if printed.getvalue().decode().splitlines() == list(tokens):
            return kind
    return None


def fresh_identifiers(fmt: str, start: int, k: int) -> list[str]:
    """Identifiers of rows start+1 … start+k."""
    return [fmt.format(i) for i in range(start + 1, start + k + 1)]


@dataclass(frozen=True)
class Derived:
    """A derived column: its formula and output precision (``integer``, ``decimals``)."""

    formula: Formula
    integer: bool = False
    decimals: int | None = None

    def values(self, table: pd.DataFrame) -> pd.Series:
        """The formula on the decoded (numeric) columns; NaN where a column is missing."""
        x = self.formula.evaluate({n: table[n].to_numpy(float, na_value=np.nan) for n in self.formula.names})
        x = np.where(np.isfinite(x), x, np.nan)
        if self.integer:
            return pd.Series(pd.array(np.round(x), dtype="Int64"), index=table.index)
        return pd.Series(np.round(x, self.decimals) if self.decimals is not None else x, index=table.index)


@dataclass(frozen=True)
class Layout:
    """How the modelled columns (``schema``) become the published ``columns``."""

    schema: Schema
    columns: tuple[str, ...]
    identifiers: Mapping[str, str] = field(default_factory=dict)
    one_hot: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    derived: Mapping[str, Derived] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: ReleaseSpec) -> Layout:
        return cls(
            spec.public_schema(),
            tuple(spec.output_columns()),
            spec.identifiers(),
            {name: columns for name, (columns, _) in spec.one_hot().items()},
            {n: Derived(d.compiled(), d.integer, d.decimals) for n, d in spec.derived().items()},
        )

    @functools.cached_property
    def numbers(self) -> dict[str, pa.DataType]:
        """Published nominal and ordinal columns whose declared tokens are all plain
        numbers (``number_type``), and the number type they are published as."""
        kinds = {
            c.name: number_type(c.values)
            for c in self.schema.columns
            if not isinstance(c, Continuous) and c.name in self.columns
        }
        return {name: kind for name, kind in kinds.items() if kind is not None}

    @property
    def plain(self) -> bool:
        """Published as modelled: nothing to add, convert or reorder."""
        convert = any(
            isinstance(c, Continuous) and (c.calendar or (c.integer and c.missing))
            for c in self.schema.columns
        )
        return (
            not (self.identifiers or self.one_hot or self.derived or convert or self.numbers)
            and list(self.columns) == self.schema.names
        )


def publishable(table: pd.DataFrame, layout: Layout, start: int = 0) -> pd.DataFrame:
    """``table`` (the modelled columns, decoded) as published: derived columns computed
    from it first (on numbers); an ``integer`` column with ``missing: allowed`` (floats
    with NaN in the model's table) as nullable integers, written as 51 and an empty cell;
    a date column as ISO 8601 text; tokens that are plain numbers as those numbers
    (``Layout.numbers``); a one-hot group as its indicators (0/1, at most one set: the
    modelled category's); fresh identifiers; the published column order."""
    if layout.plain:
        return table
    out = table.copy()
    for name, d in layout.derived.items():
        out[name] = d.values(table)
    for name, kind in layout.numbers.items():
        out[name] = out[name].astype(kind.to_pandas_dtype())
    for c in layout.schema.columns:
        if isinstance(c, Continuous) and c.calendar is not None:
            out[c.name] = pd.array(to_iso(out[c.name].to_numpy(float), c.calendar), dtype="str")
        elif isinstance(c, Continuous) and c.integer and c.missing:
            out[c.name] = out[c.name].astype("Int64")
    for name, indicators in layout.one_hot.items():
        category = out[name].to_numpy()
        for k in indicators:
            out[k] = (category == k).astype(np.int64)
    for name, fmt in layout.identifiers.items():
        out[name] = fresh_identifiers(fmt, start, len(table))
    return out[list(layout.columns)]
