"""The public layout of a noisy count table: which column each axis counts and how the
column's declared cells are grouped along it.

A table measured over columns (c₁, …, c_k) (ascending, as ``graphical.table_counts``
counts them) is flattened row-major with c₁ slowest; along axis i, declared cell d of
c_i is counted in group ``groups[d]``. The groups are public: they come from the schema,
the public n and the plan (``resolution.resolve``), never from the data. An ``Axis`` is
what turns a measurement's flat vector into a table a reader can label (``tables``) and
a query into a sum of its cells (``queries``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.resolution import Cells

__all__ = ["Axis", "axes_of", "check_axes", "table_shape"]


@dataclass(frozen=True)
class Axis:
    """One axis of a count table: the ``column``'s name and, per declared cell, its group
    (0..k−1, every group used, so the axis has k = ``size`` entries)."""

    column: str
    groups: np.ndarray = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        g = np.asarray(self.groups, dtype=np.int64)
        if g.ndim != 1 or not len(g):
            raise ValueError(f"axis '{self.column}': groups must be a non-empty vector")
        if g.min() < 0 or not np.array_equal(np.unique(g), np.arange(int(g.max()) + 1)):
            raise ValueError(f"axis '{self.column}': every group 0..k-1 must hold a declared cell")
        object.__setattr__(self, "groups", g)

    @property
    def size(self) -> int:
        """k, the number of groups along this axis."""
        return int(self.groups.max()) + 1

    def members(self, group: int) -> np.ndarray:
        """The declared cells counted in ``group``."""
        return np.flatnonzero(self.groups == group)

    def same_cells(self, other: Axis) -> bool:
        """Whether both axes count one column over the same groups of its cells."""
        return self.column == other.column and np.array_equal(self.groups, other.groups)


def axes_of(cells: Cells, names: Sequence[str], columns: Sequence[int]) -> tuple[Axis, ...]:
    """The axes of a table over ``columns`` (indices into ``names``, ascending) counted over
    the public groups ``cells``."""
    return tuple(Axis(names[c], cells.groups[c]) for c in columns)


def table_shape(axes: Sequence[Axis]) -> tuple[int, ...]:
    """The table's shape, one entry per axis: the cells it holds are their product."""
    return tuple(a.size for a in axes)


def check_axes(axes: Sequence[Axis], size: int, name: str) -> None:
    """ValueError unless a flat vector of ``size`` entries fits the table of ``axes``."""
    if axes and math.prod(table_shape(axes)) != size:
        raise ValueError(
            f"measurement '{name}': {size} values do not fill its table of shape {table_shape(axes)}"
        )
