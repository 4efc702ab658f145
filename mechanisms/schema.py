"""The declared public schema: the only source of bounds, levels, categories and bins.

Nothing in this module looks at data. Every column is discretised on *public* bins:

* continuous: equal-width bins on the public bounds (on the ``log1p`` scale for
  ``transform="log"``); one bin per integer when ``integer`` is set and the range holds
  at most ``MAX_INTEGER_BINS`` integers; otherwise ``DEFAULT_BINS`` bins;
* ordinal: one bin per level, in the declared order;
* nominal: one bin per category, in the declared order.

A column's *bin index* is the integer the synthesizers work with; ``Continuous.to_bins``
and ``Continuous.from_bins`` map raw values to and from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np

from mechanisms.errors import SchemaError

__all__ = [
    "DEFAULT_BINS",
    "MAX_INTEGER_BINS",
    "Column",
    "Continuous",
    "Nominal",
    "Ordinal",
    "Schema",
]

MAX_INTEGER_BINS = 128
DEFAULT_BINS = 64


@dataclass(frozen=True)
class Continuous:
    """A numeric column with public bounds ``[lower, upper]``."""

    name: str
    lower: float
    upper: float
    integer: bool = False
    transform: Literal["identity", "log"] = "identity"

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
                f"column '{self.name}': transform 'log' (log1p) needs lower bound ({self.lower}) >= 0"
            )
        if self.integer and math.ceil(self.lower) > math.floor(self.upper):
            raise SchemaError(f"column '{self.name}': the bounds hold no integer")

    kind = "continuous"

    @property
    def one_bin_per_integer(self) -> bool:
        return self.integer and self._n_integers <= MAX_INTEGER_BINS

    @property
    def _n_integers(self) -> int:
        return math.floor(self.upper) - math.ceil(self.lower) + 1

    @property
    def n_bins(self) -> int:
        return self._n_integers if self.one_bin_per_integer else DEFAULT_BINS

    @property
    def edges(self) -> np.ndarray:
        """Bin edges on the working scale (raw for integers-as-bins, else transformed)."""
        if self.one_bin_per_integer:
            lo = math.ceil(self.lower)
            return np.arange(lo, lo + self.n_bins + 1, dtype=float) - 0.5
        return np.linspace(self._forward(self.lower), self._forward(self.upper), self.n_bins + 1)

    @overload
    def _forward(self, x: float) -> float: ...

    @overload
    def _forward(self, x: np.ndarray) -> np.ndarray: ...

    def _forward(self, x: np.ndarray | float) -> np.ndarray | float:
        """To the working scale: log1p for ``transform="log"`` (unless integers-as-bins)."""
        return np.log1p(x) if self.transform == "log" and not self.one_bin_per_integer else x

    def _inverse(self, t: np.ndarray) -> np.ndarray:
        return np.expm1(t) if self.transform == "log" and not self.one_bin_per_integer else t

    def to_bins(self, values: np.ndarray) -> np.ndarray:
        """Bin index of each value; values must already lie within the public bounds."""
        t = self._forward(np.asarray(values, dtype=float))
        idx = np.searchsorted(self.edges, t, side="right") - 1
        return np.clip(idx, 0, self.n_bins - 1).astype(np.int32)

    def to_unit(self, values: np.ndarray) -> np.ndarray:
        """Position in [0, 1] of each value on the public working scale (log1p for
        ``transform="log"``): (f(x) − f(lower)) / (f(upper) − f(lower))."""
        lo, hi = self._forward(self.lower), self._forward(self.upper)
        t = self._forward(np.asarray(values, dtype=float))
        return np.clip((t - lo) / (hi - lo), 0.0, 1.0)

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        """Inverse of ``to_unit`` after clipping to [0, 1]; rounded for integer columns."""
        lo, hi = self._forward(self.lower), self._forward(self.upper)
        x = np.clip(self._inverse(lo + np.clip(unit, 0.0, 1.0) * (hi - lo)), self.lower, self.upper)
        if self.integer:
            x = np.clip(np.round(x), math.ceil(self.lower), math.floor(self.upper))
        return x

    def from_bins(self, bins: np.ndarray, uniform: np.ndarray) -> np.ndarray:
        """A value uniform inside each bin (working scale), back-transformed, rounded
        for integer columns and clipped to the public bounds."""
        edges = self.edges
        t = edges[bins] + uniform * (edges[bins + 1] - edges[bins])
        x = np.clip(self._inverse(t), self.lower, self.upper)
        if self.integer:
            x = np.clip(np.round(x), math.ceil(self.lower), math.floor(self.upper))
        return x


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
