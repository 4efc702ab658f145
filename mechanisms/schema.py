"""The declared public schema: the only source of bounds, levels, categories and bins.

Nothing in this module looks at data. Every column is discretised on *public* bins:

* continuous: equal-width interval bins on the public bounds (on the ``log1p`` scale
  for ``transform="log"``, on asinh(x/scale) for ``transform="asinh"``): the declared
  ``bins`` of them, else one per integer when ``integer`` is set and the range holds at
  most ``MAX_INTEGER_BINS`` integers, else ``DEFAULT_BINS``; plus one cell per declared
  atom (a value such as 0 that many records hold exactly), or, for a declared finite
  support (``values``), one cell per value;
* ordinal: one bin per level, in the declared order;
* nominal: one bin per category, in the declared order.

A column's *bin index* is the integer the synthesizers work with; ``Continuous.to_bins``
and ``Continuous.from_bins`` map raw values to and from it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Literal, cast, overload

import numpy as np

from dprelease.mechanisms.calendar import Unit, to_iso
from dprelease.mechanisms.declared_edges import MAX_INTERVALS, check_edges, check_scale
from dprelease.mechanisms.errors import SchemaError
from dprelease.mechanisms.integers import integer_ranges, keep_in_interval
from dprelease.mechanisms.support import VALUES_RTOL, nearest_index, on_support, scientific, support_tolerance

__all__ = [
    "DEFAULT_BINS",
    "MAX_INTEGER_BINS",
    "MAX_INTERVALS",
    "VALUES_RTOL",
    "Column",
    "Continuous",
    "Nominal",
    "Ordinal",
    "Schema",
    "check_target",
    "on_support",
    "support_tolerance",
]

MAX_INTEGER_BINS = 128
DEFAULT_BINS = 64


@dataclass(frozen=True)
class Continuous:
    """A numeric column with public bounds ``[lower, upper]``.

    Its cells, in value order: the interval bins of the working scale (``intervals`` of
    them, default ``DEFAULT_BINS``; one per integer for a short integer range) and one
    cell per declared ``atoms`` value, placed by value among the intervals. A value equal
    to an atom is counted in the atom's cell and an atom cell decodes to exactly its
    value. ``cuts`` declares the intervals' edges instead of their number (the spec's
    ``edges``: from ``lower`` to ``upper``, on the raw scale; a value is placed inside its
    interval on the working scale). ``values`` declares a finite support instead: one cell per value, no
    intervals; a value counts as the declared value nearest to it when it lies within
    ``support_tolerance`` of it (``on_support``: the validation's rule). ``decimals``
    rounds decoded values (output precision) and, for ``values``, is the precision at
    which a value matches. The working scale is x, log1p(x) (``transform="log"``, lower
    bound ≥ 0) or asinh(x/scale) (``transform="asinh"``, any bounds: linear within about
    ±scale of 0, logarithmic beyond, for a signed heavy-tailed column). ``missing``
    (public: the steward declares that the column may be empty) adds one cell, the lowest,
    for a missing value (NaN): it is counted, modelled and refined as any other cell and
    decodes to NaN, so missingness is carried jointly with the other columns. ``calendar``
    marks a date or timestamp column: whole ``calendar`` units since the epoch
    (``mechanisms.calendar``), read from and written as ISO 8601 text.
    """

    name: str
    lower: float
    upper: float
    integer: bool = False
    transform: Literal["identity", "log", "asinh"] = "identity"
    atoms: tuple[float, ...] = ()
    values: tuple[float, ...] | None = None
    intervals: int | None = None
    decimals: int | None = None
    missing: bool = False
    calendar: Unit | None = None
    scale: float | None = None
    cuts: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise SchemaError(f"column '{self.name}': bounds must be finite numbers")
        if not self.lower < self.upper:
            raise SchemaError(
                f"column '{self.name}': lower bound ({self.lower}) must be below "
                f"the upper bound ({self.upper})"
            )
        if self.transform == "log" and self.lower < 0:
            raise SchemaError(
                f"column '{self.name}': transform 'log' (log1p) needs lower bound ({self.lower}) >= 0; "
                "for a column with negative values use transform: asinh with a public scale"
            )
        check_scale(self)
        if self.integer and math.ceil(self.lower) > math.floor(self.upper):
            raise SchemaError(f"column '{self.name}': the bounds hold no integer")
        for what, points in (("atoms", self.atoms), ("values", self.values or ())):
            self._check_points(what, points)
        if self.values is not None:
            if len(self.values) < 2:
                raise SchemaError(f"column '{self.name}': values must list at least 2 numbers")
            if self.atoms or self.intervals is not None:
                raise SchemaError(f"column '{self.name}': values (a finite support) excludes atoms and bins")
        check_edges(self)
        if self.intervals is not None and not 1 <= self.intervals <= MAX_INTERVALS:
            raise SchemaError(f"column '{self.name}': bins ({self.intervals}) must be in 1..{MAX_INTERVALS}")
        if self.decimals is not None and not 0 <= self.decimals <= 15:
            raise SchemaError(f"column '{self.name}': decimals ({self.decimals}) must be in 0..15")
        if self.values is not None:
            self._check_apart(sorted(self.values))

    def _check_apart(self, support: list[float]) -> None:
        """Two declared values must not both match one number: their tolerance windows
        (``support_tolerance``) may touch but not overlap."""
        tol = support_tolerance(np.array(support), self.decimals)
        gap = np.diff(support)
        close = np.flatnonzero(gap < (tol[:-1] + tol[1:]) * (1 - VALUES_RTOL))
        if close.size:
            a, b = float(support[close[0]]), float(support[close[0] + 1])
            hint = "declare more decimals" if self.decimals is not None else "declare one of them only"
            raise SchemaError(
                f"column '{self.name}': values {a!r} and {b!r} must lie further apart, or one number would "
                f"match both (a number matches a declared value when {self.values_equality}); {hint}"
            )

    @property
    def values_equality(self) -> str:
        """How a number is judged equal to a declared ``values`` number (``on_support``)."""
        rel = scientific(VALUES_RTOL)
        if self.decimals is None:
            return f"equal within a relative {rel} (|x − v| ≤ {rel}·|v|)"
        step = 0.5 * 10.0**-self.decimals
        half = scientific(step) if self.decimals > 3 else f"{step:g}"
        return f"equal within decimals: {self.decimals}, i.e. ±{half} (or a relative {rel})"

    def on_support(self, x: np.ndarray) -> np.ndarray:
        """Per value: does it equal (``values_equality``) the declared value nearest to it,
        the one ``to_bins`` counts it as? NaN never does."""
        support = np.array(self.cell_atoms)
        return on_support(np.asarray(x, dtype=float), support, self.decimals)

    def _check_points(self, what: str, points: tuple[float, ...]) -> None:
        bad = [v for v in points if not (math.isfinite(v) and self.lower <= v <= self.upper)]
        if bad:
            raise SchemaError(
                f"column '{self.name}': {what} {bad} must be finite and within the bounds "
                f"[{self.lower:g}, {self.upper:g}]"
            )
        if len(set(points)) != len(points):
            raise SchemaError(f"column '{self.name}': {what} must be distinct")
        if self.integer and any(v != math.floor(v) for v in points):
            raise SchemaError(f"column '{self.name}': {what} must be whole numbers (integer: true)")

    kind = "continuous"

    @property
    def one_bin_per_integer(self) -> bool:
        """A short integer range (at most ``MAX_INTEGER_BINS`` integers, no ``bins`` or
        ``values`` declared) gets one cell per integer; atoms are then cells already."""
        return (
            self.integer
            and self.values is None
            and self.intervals is None
            and self.cuts is None
            and self._n_integers <= MAX_INTEGER_BINS
        )

    @property
    def _n_integers(self) -> int:
        return math.floor(self.upper) - math.ceil(self.lower) + 1

    @property
    def n_intervals(self) -> int:
        """Interval bins on the working scale (0 for a ``values`` column)."""
        if self.values is not None:
            return 0
        if self.one_bin_per_integer:
            return self._n_integers
        if self.cuts is not None:
            return len(self.cuts) - 1
        return self.intervals if self.intervals is not None else DEFAULT_BINS

    @property
    def cell_atoms(self) -> tuple[float, ...]:
        """The points with a cell of their own: the ``values``, or the atoms (none when
        every integer has its cell already)."""
        if self.values is not None:
            return tuple(sorted(self.values))
        return () if self.one_bin_per_integer else tuple(sorted(self.atoms))

    @property
    def n_bins(self) -> int:
        return self.n_intervals + len(self.cell_atoms) + self.missing

    @property
    def atom_cells(self) -> np.ndarray:
        """Per cell: is it a declared atom (its own cell, or an integer's cell on a column
        with a cell per integer) or the missing cell; such cells are never merged."""
        _, _, item = self._layout
        alone = item < 0
        if self.one_bin_per_integer and self.atoms:
            value = np.arange(self.n_bins) - self.missing + math.ceil(self.lower)
            alone |= np.isin(value, self.atoms) & (item >= 0)
        return alone

    @property
    def missing_item(self) -> int:
        """The ``_layout`` item code of the missing cell (one past the atoms' codes)."""
        return -1 - len(self.cell_atoms)

    @property
    def declared(self) -> bool:
        """Whether the steward chose the cells (``bins``, ``values`` or edges: ``cuts``):
        then no mechanism merges them."""
        return self.values is not None or self.intervals is not None or self.cuts is not None

    @functools.cached_property
    def edges(self) -> np.ndarray:
        """Edges of the interval bins on the working scale (raw for integers-as-bins,
        else transformed): the declared ``cuts``, else equal widths."""
        if self.one_bin_per_integer:
            lo = math.ceil(self.lower)
            return np.arange(lo, lo + self.n_intervals + 1, dtype=float) - 0.5
        if self.cuts is not None:
            return np.asarray(self._forward(np.array(self.cuts, dtype=float)), dtype=float)
        return np.linspace(self._forward(self.lower), self._forward(self.upper), self.n_intervals + 1)

    @functools.cached_property
    def _layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cell of each interval, cell of each atom, and per cell its interval index or
        −1 − its atom index, or ``missing_item``): cells sorted by value, intervals keyed by
        their centre, after the missing cell (cell 0) when the column declares one."""
        k, atoms = self.n_intervals, np.array(self.cell_atoms, dtype=float)
        e = self.edges
        keys = np.r_[(e[:-1] + e[1:]) / 2 if k else np.empty(0), self._forward(atoms)]
        order = np.argsort(keys, kind="stable")  # cell c holds item order[c]
        cell_of = np.empty(len(order), dtype=np.int32)
        cell_of[order] = np.arange(len(order), dtype=np.int32) + self.missing
        item = np.where(order < k, order, -1 - (order - k))
        if self.missing:
            item = np.r_[self.missing_item, item]
        return cell_of[:k], cell_of[k:], item.astype(np.int64)

    @overload
    def _forward(self, x: float) -> float: ...

    @overload
    def _forward(self, x: np.ndarray) -> np.ndarray: ...

    def _forward(self, x: np.ndarray | float) -> np.ndarray | float:
        """To the working scale (unless integers-as-bins): log1p(x) for ``transform="log"``,
        asinh(x/scale) for ``transform="asinh"``."""
        if self.one_bin_per_integer or self.transform == "identity":
            return x
        if self.transform == "log":
            return np.log1p(x)
        return np.arcsinh(x / self._scale)

    def _inverse(self, t: np.ndarray) -> np.ndarray:
        """From the working scale: expm1(t), scale·sinh(t), or t."""
        if self.one_bin_per_integer or self.transform == "identity":
            return t
        if self.transform == "log":
            return np.expm1(t)
        return self._scale * np.sinh(t)

    @property
    def _scale(self) -> float:
        """``scale`` of an asinh column (``__post_init__`` requires it there)."""
        return cast(float, self.scale)

    def to_bins(self, values: np.ndarray) -> np.ndarray:
        """Cell index of each value; values must already lie within the public bounds (and
        in ``values`` when declared: the nearest support point is taken); NaN goes to the
        missing cell of a ``missing`` column (validation refuses it elsewhere)."""
        x = np.asarray(values, dtype=float)
        if self.missing:
            absent = np.isnan(x)
            cells = np.zeros(len(x), dtype=np.int32)
            cells[~absent] = self._value_cells(x[~absent])
            return cells
        return self._value_cells(x)

    def _value_cells(self, x: np.ndarray) -> np.ndarray:
        interval_cell, atom_cell, _ = self._layout
        atoms = np.array(self.cell_atoms)
        if self.values is not None:
            return atom_cell[nearest_index(x, atoms)]
        cells = interval_cell[self._interval_of(x)]
        for a, cell in zip(atoms, atom_cell, strict=True):
            cells[x == a] = cell
        return cells.astype(np.int32)

    def to_unit(self, values: np.ndarray) -> np.ndarray:
        """Position in [0, 1] of each value on the public working scale f (``_forward``):
        (f(x) − f(lower)) / (f(upper) − f(lower))."""
        lo, hi = self._forward(self.lower), self._forward(self.upper)
        t = self._forward(np.asarray(values, dtype=float))
        return np.clip((t - lo) / (hi - lo), 0.0, 1.0)

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        """Inverse of ``to_unit`` after clipping to [0, 1], then ``finish``ed (rounded,
        snapped to the declared ``values``)."""
        lo, hi = self._forward(self.lower), self._forward(self.upper)
        return self.finish(self._inverse(lo + np.clip(unit, 0.0, 1.0) * (hi - lo)))

    def from_bins(self, bins: np.ndarray, uniform: np.ndarray) -> np.ndarray:
        """An atom cell's value exactly, NaN for the missing cell; for an interval cell a
        value at relative position ``uniform`` inside the interval (working scale),
        back-transformed; ``finish``ed."""
        _, _, item = self._layout
        it = item[np.asarray(bins)]
        atoms = np.r_[np.array(self.cell_atoms, dtype=float), np.nan]  # the missing item last
        out = atoms[np.clip(-1 - it, 0, None)]
        inside = it >= 0
        if not inside.any():
            return self.finish(out)
        e, i = self.edges, it[inside]
        out = out.astype(float)
        out[inside] = self._inverse(e[i] + np.asarray(uniform)[inside] * (e[i + 1] - e[i]))
        out = self.finish(out)
        if self.integer and not self.one_bin_per_integer:  # rounded: kept in its cell (integers.py)
            out[inside] = keep_in_interval(out[inside], i, *self._integer_ranges, self.cell_atoms)
        return out

    def _interval_of(self, x: np.ndarray) -> np.ndarray:
        """The interval bin of each raw value (atoms aside)."""
        return np.clip(
            np.searchsorted(self.edges, self._forward(x), side="right") - 1, 0, self.n_intervals - 1
        )

    @functools.cached_property
    def _integer_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        return integer_ranges(self._interval_of, self.lower, self.upper, self.n_intervals, self.cell_atoms)

    def finish(self, x: np.ndarray) -> np.ndarray:
        """Output precision: clipped to the bounds; the nearest declared value of a
        ``values`` column; whole numbers for ``integer``; ``decimals`` places otherwise."""
        x = np.clip(np.asarray(x, dtype=float), self.lower, self.upper)
        if self.values is not None:
            support = np.array(self.cell_atoms)
            return np.where(np.isnan(x), np.nan, support[nearest_index(np.nan_to_num(x), support)])
        if self.integer:
            return np.clip(np.round(x), math.ceil(self.lower), math.floor(self.upper))
        if self.decimals is not None:
            return np.clip(np.round(x, self.decimals), self.lower, self.upper)
        return x

    def cell_labels(self) -> list[str]:
        """A short label per cell, in cell order: an interval's centre, "=v" for an atom."""
        e = self.edges
        centres = self._inverse((e[:-1] + e[1:]) / 2) if self.n_intervals else np.empty(0)
        atoms = self.cell_atoms
        _, _, item = self._layout
        if self.calendar is not None:
            dates = to_iso(np.floor(centres), self.calendar)
            return [str(dates[i]) if i >= 0 else "missing" for i in item]
        return [
            f"{centres[i]:.3g}" if i >= 0 else "missing" if i == self.missing_item else f"={atoms[-1 - i]:g}"
            for i in item
        ]


@dataclass(frozen=True)
class Ordinal:
    """An ordered categorical column; ``levels`` lowest first."""

    name: str
    levels: tuple[str, ...]

    kind = "ordinal"

    def __post_init__(self) -> None:
        _check_labels(self.name, "levels", self.levels)

    @property
    def values(self) -> tuple[str, ...]:
        return self.levels

    @property
    def n_bins(self) -> int:
        return len(self.levels)


@dataclass(frozen=True)
class Nominal:
    """An unordered categorical column."""

    name: str
    categories: tuple[str, ...]

    kind = "nominal"

    def __post_init__(self) -> None:
        _check_labels(self.name, "categories", self.categories)

    @property
    def values(self) -> tuple[str, ...]:
        return self.categories

    @property
    def n_bins(self) -> int:
        return len(self.categories)


Column = Continuous | Ordinal | Nominal


def _check_labels(name: str, what: str, labels: tuple[str, ...]) -> None:
    if len(labels) < 2:
        raise SchemaError(f"column '{name}': {what} must list at least 2 values")
    if len(set(labels)) != len(labels):
        dup = sorted({v for v in labels if labels.count(v) > 1})
        raise SchemaError(f"column '{name}': {what} must be distinct; repeated: {dup}")


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of public column declarations."""

    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        if not self.columns:
            raise SchemaError("schema must declare at least one column")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError(f"schema column names must be distinct: {names}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def n_bins(self) -> list[int]:
        return [c.n_bins for c in self.columns]

    def __len__(self) -> int:
        return len(self.columns)

    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def fingerprint(self) -> str:
        """sha256 of the table's shape: its columns' names, each with the kind of value it
        holds (number, date, category), sorted by name. Not in it: the columns' order, and
        the steward's public choices about a column (bounds, bins, transform, atoms,
        integer, decimals, missing, categories, levels), which change while the data stay
        the same: a copy of a spec with a bound widened has the same fingerprint."""
        shape = sorted(
            (c.name, "category" if not isinstance(c, Continuous) else "date" if c.calendar else "number")
            for c in self.columns
        )
        return hashlib.sha256(json.dumps({"v": 1, "columns": shape}).encode()).hexdigest()


def check_target(schema: Schema, target: str | None) -> None:
    """A mechanism's ``params.target``, when set, names a nominal or ordinal column."""
    if target is None:
        return
    if target not in schema.names:
        raise ValueError(f"params.target ({target!r}) must be a column of the schema")
    if schema[target].kind == "continuous":
        raise ValueError(f"params.target ({target!r}) must be a nominal or ordinal column, not continuous")
