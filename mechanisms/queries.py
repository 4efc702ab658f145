"""A counting query on the fitted rows, answered from the published noisy tables with an
interval whose coverage follows from the recorded noise alone (post-processing).

A query is a conjunction of conditions, one per column: a category or a set of them, or an
inclusive numeric range. Against a column's declared cells a condition is *full* on a cell
whose every value satisfies it, *partial* on a cell holding values on both sides, *none*
otherwise, *empty* on a cell that can hold no value (an integer column's interval between
two integers: its count is 0 under any condition) (``coverage``); a group of cells is full
when each of its cells is full or empty and one is full, touched when one is full or partial
(a group of empty cells counts 0 and is left out of both sums). Let Q be the true count,
and for a table over groups: I the sum of the cells whose groups are full on every
condition, O the sum over touched groups; then I ≤ Q ≤ O.

Three routes, the first that applies (``answer``):

* **analytic** — some measured tables hold every query column and no cell is partial, so
  Q = I = O is a sum of noisy cells: the inverse-variance combination of the tables'
  sums (``tables.combine``), each given that its cells sum to the public n
  (``NoisyTable.sum_given_total``), ± the noise's exact quantile. Coverage: exactly ``level``.
* **bracket** — the tables hold every column but some cell is partial (a range that cuts
  a cell): [Î − q, Ô + q'] with q, q' the one-sided quantiles at (1 + level)/2, so each side
  fails with probability ≤ (1 − level)/2 (union bound: coverage ≥ ``level``).
* **bounds** — no table holds every column: Fréchet bounds from the tables that do hold
  some. Q ≤ O_S for every table over a subset S of the columns (the query restricted to
  S); Q ≥ Σₖ I_{Sₖ} − (K − 1)·n for a partition S₁…S_K of the columns (Bonferroni). Each
  of the m one-sided bounds used is taken at 1 − (1 − level)/m (union bound: coverage
  ≥ ``level``). Valid, and wide: the model's error is not estimated here.

The target of inference is the count among the rows the mechanism was fitted on (``n``,
public), not the population.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from dprelease.mechanisms.calendar import to_iso
from dprelease.mechanisms.errors import QueryError
from dprelease.mechanisms.schema import Column, Continuous
from dprelease.mechanisms.tables import Noise, NoisyTable, combine

__all__ = ["Answer", "Condition", "QueryError", "answer", "cell_span", "coverage", "group_labels"]

NONE, PARTIAL, FULL, EMPTY = 0, 1, 2, 3


@dataclass(frozen=True)
class Condition:
    """``column`` in the category set ``values``, or in the inclusive range [lo, hi]."""

    column: str
    values: tuple[str, ...] | None = None
    lo: float = -math.inf
    hi: float = math.inf

    def describe(self) -> str:
        if self.values is not None:
            return f"{self.column} in {{{', '.join(self.values)}}}"
        return f"{self.column} in [{self.lo:g}, {self.hi:g}]"


def coverage(column: Column, condition: Condition) -> np.ndarray:
    """Per declared cell of ``column``: FULL, PARTIAL, NONE or EMPTY (see the module doc)."""
    if not isinstance(column, Continuous):
        if condition.values is None:
            raise QueryError(f"column '{column.name}' is categorical: give a category or a list, not a range")
        unknown = sorted(set(condition.values) - set(column.values))
        if unknown:
            raise QueryError(
                f"column '{column.name}' declares no category {unknown}; "
                f"its categories: {list(column.values)}"
            )
        return np.where(np.isin(np.array(column.values, dtype=object), condition.values), FULL, NONE)
    if condition.values is not None:
        raise QueryError(f"column '{column.name}' is numeric: give a range (lo, hi), not categories")
    if condition.lo > condition.hi:
        raise QueryError(
            f"column '{column.name}': the range's low end {condition.lo:g} is above its high end"
        )
    return np.array([_cover_cell(column, c, condition.lo, condition.hi) for c in range(column.n_bins)])


def _cover_cell(column: Continuous, cell: int, lo: float, hi: float) -> int:
    """One cell of a numeric column against [lo, hi]: an atom or a cell per integer is a
    point; an interval cell holds [a, b) of the raw scale ([a, b] for the last), the
    integers in it for an integer column (found with the column's own ``to_bins``)."""
    _, _, item = column._layout
    it = int(item[cell])
    if it == column.missing_item:
        return NONE
    if it < 0 or column.one_bin_per_integer:
        v = column.cell_atoms[-1 - it] if it < 0 else math.ceil(column.lower) + it
        return FULL if lo <= v <= hi else NONE
    e = column._inverse(column.edges)
    a, b = float(e[it]), float(e[it + 1])
    last = it == column.n_intervals - 1
    if column.integer:
        xs = _integers_in(column, cell, a, b)
        if xs is None:
            return EMPTY
        a, b, last = xs[0], xs[1], True
    if lo <= a and b <= hi:
        return FULL
    if a > hi or (b < lo if last else b <= lo):
        return NONE
    return PARTIAL


def _integers_in(column: Continuous, cell: int, a: float, b: float) -> tuple[int, int] | None:
    """The smallest and largest integer the column counts in ``cell`` (an interval from
    about a to b), by its own ``to_bins``; None when it holds none."""
    lo, hi = math.ceil(max(a, column.lower)) - 1, math.floor(min(b, column.upper)) + 1
    lo, hi = max(lo, math.ceil(column.lower)), min(hi, math.floor(column.upper))
    if lo > hi:
        return None
    xs = np.arange(lo, hi + 1, dtype=float)
    inside = xs[column.to_bins(xs) == cell]
    return (int(inside[0]), int(inside[-1])) if len(inside) else None


def cell_span(column: Continuous, cell: int) -> tuple[float, float, bool] | None:
    """A numeric cell's values: (lo, hi, closed) on the raw scale, a point as (v, v, True);
    None for the missing cell or a cell that can hold no value."""
    _, _, item = column._layout
    it = int(item[cell])
    if it == column.missing_item:
        return None
    if it < 0 or column.one_bin_per_integer:
        v = float(column.cell_atoms[-1 - it] if it < 0 else math.ceil(column.lower) + it)
        return v, v, True
    e = column._inverse(column.edges)
    if column.integer:
        xs = _integers_in(column, cell, float(e[it]), float(e[it + 1]))
        return None if xs is None else (float(xs[0]), float(xs[1]), True)
    return float(e[it]), float(e[it + 1]), it == column.n_intervals - 1


def _number(column: Continuous, x: float) -> str:
    if column.calendar is not None:
        return str(to_iso(np.array([math.floor(x)]), column.calendar)[0])
    return f"{x:.6g}"


def group_labels(column: Column, groups: np.ndarray) -> list[str]:
    """A label per group of the column's declared cells, in the terms a query uses: the
    category (several joined by " | "); for a numeric column the value, "lo..hi" for the
    values of an integer or date column, "[lo, hi)" (or "[lo, hi]") for a real range, and
    "missing" (public: the schema and the groups only)."""
    out = []
    for g in range(int(groups.max()) + 1):
        members = np.flatnonzero(groups == g)
        if not isinstance(column, Continuous):
            out.append(" | ".join(column.values[c] for c in members))
            continue
        spans = [s for s in (cell_span(column, int(c)) for c in members) if s is not None]
        if not spans:
            out.append("missing" if column.missing and 0 in members else "(no value)")
            continue
        lo, hi, closed = min(s[0] for s in spans), max(s[1] for s in spans), spans[-1][2]
        if lo == hi:
            out.append(_number(column, lo))
        elif column.integer or column.calendar is not None:
            out.append(f"{_number(column, lo)}..{_number(column, hi)}")
        else:
            out.append(f"[{_number(column, lo)}, {_number(column, hi)}{']' if closed else ')'}")
        if column.missing and 0 in members:
            out[-1] += " or missing"
    return out


@dataclass(frozen=True)
class Answer:
    """The interval [lower, upper] for the count at ``level``, by ``method``, from the named
    ``tables``; ``estimate`` the unbiased combined estimate (analytic only), ``sd`` its
    standard error."""

    method: Literal["analytic", "bracket", "bounds"]
    lower: float
    upper: float
    level: float
    tables: tuple[str, ...]
    estimate: float | None = None
    sd: float | None = None


@dataclass(frozen=True)
class _Sums:
    """One table's inner and outer sums for the query's columns."""

    table: NoisyTable
    inner: tuple[float, Noise] | None  # None: no cell is full
    outer: tuple[float, Noise]
    exact: bool  # inner and outer are the same cells
    key: tuple[bytes, ...]  # the groups of the query's columns (tables sharing it agree)


def _sums(table: NoisyTable, marks: dict[str, np.ndarray], n: int) -> _Sums:
    """Sum ``table`` over the cells full (inner) and touched (outer) by the per-cell
    ``marks``, each given that the table's exact cells sum to n (``sum_given_total``)."""
    columns = [a.column for a in table.axes if a.column in marks]
    margin, per_entry = table.margin(columns)
    full, touched = [], []
    for column in columns:
        axis = next(a for a in table.axes if a.column == column)
        mark = marks[column]
        full.append(
            np.array(
                [
                    bool(np.all(mark[m] >= FULL) and np.any(mark[m] == FULL))
                    for m in map(axis.members, range(axis.size))
                ]
            )
        )
        touched.append(
            np.array(
                [bool(np.any(np.isin(mark[axis.members(g)], (PARTIAL, FULL)))) for g in range(axis.size)]
            )
        )
    inner_mask, outer_mask = _product(full), _product(touched)
    n_in, n_out = int(inner_mask.sum()), int(outer_mask.sum())
    inner = table.sum_given_total(margin, inner_mask, per_entry, n) if n_in else None
    outer = (
        table.sum_given_total(margin, outer_mask, per_entry, n)
        if n_out
        else (float(margin[outer_mask].sum()), table.noise(per_entry))
    )
    key = tuple(next(a for a in table.axes if a.column == c).groups.tobytes() for c in sorted(columns))
    return _Sums(table, inner, outer, bool(np.array_equal(inner_mask, outer_mask)), key)


def _product(masks: Sequence[np.ndarray]) -> np.ndarray:
    out = masks[0]
    for m in masks[1:]:
        out = np.logical_and.outer(out, m)
    return out


def answer(tables: Sequence[NoisyTable], marks: dict[str, np.ndarray], n: int, level: float) -> Answer:
    """The interval for the query whose per-column cell ``marks`` (``coverage``) are given,
    from the noisy ``tables`` of a release of ``n`` fitted rows (see the module doc)."""
    if not 0 < level < 1:
        raise QueryError(f"level {level} must be between 0 and 1")
    columns = set(marks)
    holding = [t for t in tables if columns <= set(t.columns)]
    if holding:
        return _from_holding([_sums(t, marks, n) for t in holding], level)
    return _bounds(tables, marks, n, level)


def _from_holding(sums: list[_Sums], level: float) -> Answer:
    """The analytic or bracket interval from the tables holding every query column: those
    over the same groups combined, and of such families the one whose outer sum has the
    least noise (a public fact: choosing on the noisy values would void the coverage)."""
    families: dict[tuple[bytes, ...], list[_Sums]] = {}
    for s in sums:
        families.setdefault(s.key, []).append(s)
    best = min(families.values(), key=lambda f: combine([s.outer for s in f])[1].sd)
    return _family(best, level)


def _family(sums: list[_Sums], level: float) -> Answer:
    names = tuple(s.table.name for s in sums)
    outer, outer_noise = combine([s.outer for s in sums])
    if sums[0].exact:
        hw = outer_noise.half_width(level)
        return Answer("analytic", outer - hw, outer + hw, level, names, outer, outer_noise.sd)
    q = (1 + level) / 2
    upper = outer + outer_noise.quantile(q)
    inners = [s.inner for s in sums if s.inner is not None]
    if not inners:
        return Answer("bracket", 0.0, upper, level, names)
    inner, inner_noise = combine(inners)
    return Answer("bracket", inner - inner_noise.quantile(q), upper, level, names)


def _bounds(tables: Sequence[NoisyTable], marks: dict[str, np.ndarray], n: int, level: float) -> Answer:
    """Fréchet bounds from tables holding part of the query (see the module doc)."""
    columns = sorted(marks)
    parts = {
        frozenset(cs): [t for t in tables if set(cs) <= set(t.columns)]
        for k in range(1, len(columns))
        for cs in combinations(columns, k)
    }
    parts = {cs: ts for cs, ts in parts.items() if ts}
    covered = set().union(*parts) if parts else set()
    if covered != set(columns):
        missing = sorted(set(columns) - covered)
        raise QueryError(
            f"no published table counts column(s) {missing}: the release measured nothing on them"
        )
    partition = _partition(columns, list(parts))
    sums = {cs: [_sums(t, {c: marks[c] for c in cs}, n) for t in parts[cs]] for cs in parts}
    uppers = [cs for cs in parts if len(cs) == max(len(c) for c in parts)]
    m = len(uppers) + len(partition)
    q = 1 - (1 - level) / m
    upper = min(_one_side(sums[cs], q, "outer") for cs in uppers)
    lower = sum(_one_side(sums[cs], q, "inner") for cs in partition) - (len(partition) - 1) * n
    names = tuple(sorted({s.table.name for cs in (*uppers, *partition) for s in sums[cs]}))
    return Answer("bounds", max(lower, 0.0), min(upper, float(n)), level, names)


def _partition(columns: list[str], covered: list[frozenset[str]]) -> list[frozenset[str]]:
    """A partition of ``columns`` into covered subsets, largest first (greedy): fewer parts
    lose less in the Bonferroni lower bound."""
    left, out = set(columns), []
    for cs in sorted(covered, key=lambda c: (-len(c), sorted(c))):
        if cs <= left:
            out.append(cs)
            left -= cs
    return out


def _one_side(sums: list[_Sums], q: float, side: Literal["inner", "outer"]) -> float:
    """The one-sided bound at q on a subset's inner (lower) or outer (upper) count, from
    the tables holding it (combined by family; the tightest family, chosen on public
    facts: its noise, never its value)."""
    best: tuple[float, float] | None = None
    families: dict[tuple[bytes, ...], list[_Sums]] = {}
    for s in sums:
        families.setdefault(s.key, []).append(s)
    for family in families.values():
        if side == "inner":
            inners = [s.inner for s in family if s.inner is not None]
            if not inners:
                bound, sd = 0.0, 0.0
            else:
                value, noise = combine(inners)
                bound, sd = value - noise.quantile(q), noise.sd
        else:
            value, noise = combine([s.outer for s in family])
            bound, sd = value + noise.quantile(q), noise.sd
        if best is None or sd < best[1]:
            best = (bound, sd)
    assert best is not None
    return best[0]
