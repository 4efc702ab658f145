"""``dprelease query``: a count among the fitted rows, with an interval, from a release's
published files only (``public/`` or a copy of it): the noisy tables, their noise, the
public schema and the synthetic rows. Nothing here reads confidential data or spends budget.

The interval comes from ``mechanisms.queries.answer`` (analytic or bracket, when measured
tables hold every column of the query); when none does, from the release's replicates and
model checks (``mechanisms.replicates``; method *model*), kept inside the Fréchet bounds,
or the bounds alone (method *bounds*) for a release without replicates. The method is
always stated. The point estimate is the tables' unbiased combined estimate when the method
is analytic, else the synthetic rows' share times n. Integer bounds are rounded inward (the
true count is an integer) and clamped to [0, n].
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.bundle.replicates import read_replicates
from dprelease.mechanisms.calendar import to_units
from dprelease.mechanisms.queries import FULL, PARTIAL, Condition, QueryError, answer, coverage
from dprelease.mechanisms.replicates import HeldOut, half_width, kappa, multiplier
from dprelease.mechanisms.schema import Column, Continuous, Schema
from dprelease.mechanisms.tables import NoisyTable
from dprelease.records.audit import load_document, public_spec
from dprelease.records.table_checks import load_tables

__all__ = [
    "Published",
    "QueryError",
    "QueryResult",
    "answer_where",
    "conditions",
    "parse_where",
    "run_query",
]


@dataclass(frozen=True)
class QueryResult:
    """A count among the ``n`` rows the mechanism was fitted on, with its interval.

    ``count`` is the point estimate, ``count_lower``/``count_upper`` the interval at
    ``level``; ``share*`` the same divided by n. ``method``: analytic (a sum of measured
    cells: the interval is exact), bracket (measured tables cut a cell: the interval holds
    the count between the cells inside and those touching the condition) or bounds (no
    measured table holds every column: Fréchet bounds, valid and wide) or model (no measured
    table holds every column: the synthetic rows' count ± the replicates' error and the
    model's calibrated bias, within the bounds; its coverage is measured, not proven). ``tables``: the
    published tables used. ``synthetic_count``: the synthetic rows' count scaled to n.
    ``where``: the conditions as read. ``target``: the rows counted (the target of inference).
    """

    count: int
    count_lower: int
    count_upper: int
    share: float
    share_lower: float
    share_upper: float
    level: float
    method: str
    n: int
    synthetic_count: float
    tables: tuple[str, ...]
    where: tuple[str, ...]
    target: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """The result as a one-row DataFrame, its columns the fields (``tables`` and
        ``where`` joined with "; ")."""
        row = {k: "; ".join(v) if isinstance(v, tuple) else v for k, v in self.as_dict().items()}
        return pd.DataFrame([row])

    def _repr_html_(self) -> str:
        """A notebook's view: the sentence ``str`` gives, then the one-row table."""
        return f"<p>{html.escape(str(self))}</p>{self.to_frame().to_html(index=False)}"

    def __str__(self) -> str:
        return (
            f"{' and '.join(self.where)}: {self.count:,} of {self.n:,} fitted rows "
            f"({self.share:.2%}); {self.level:.0%} interval {self.count_lower:,} to {self.count_upper:,} "
            f"({self.share_lower:.2%} to {self.share_upper:.2%}); method: {self.method}"
        )


def parse_where(items: Sequence[str]) -> dict[str, Any]:
    """``--where COLUMN=VALUE`` items as a ``where`` mapping: ``a..b`` an inclusive range
    (either end may be left out), another value a category or a number; a column given
    twice takes either value (a set)."""
    out: dict[str, Any] = {}
    for item in items:
        column, sep, value = item.partition("=")
        if not sep or not column:
            raise QueryError(f"--where '{item}': write COLUMN=VALUE or COLUMN=LOW..HIGH")
        if ".." in value:
            lo, _, hi = value.partition("..")
            out[column] = (lo or None, hi or None)
        elif column in out:
            before = out[column]
            out[column] = [*(before if isinstance(before, list) else [before]), value]
        else:
            out[column] = value
    return out


def conditions(schema: Schema, where: Mapping[str, Any]) -> list[Condition]:
    """``where`` read against the public schema: ``{column: value}`` a category (or, on a
    numeric column, one value), ``{column: [v1, v2]}`` a set, ``{column: (lo, hi)}`` an
    inclusive range (numbers, or ISO dates on a date column; None for an open end)."""
    if not where:
        raise QueryError("give at least one condition (where={column: value})")
    out = []
    for name, value in where.items():
        if name not in schema.names:
            raise QueryError(f"no column '{name}' in the release's schema; its columns: {schema.names}")
        out.append(_condition(schema[name], value))
    return out


def _condition(column: Column, value: Any) -> Condition:
    if not isinstance(column, Continuous):
        if isinstance(value, tuple):
            raise QueryError(f"column '{column.name}' is categorical: give a category or a list, not a range")
        values = value if isinstance(value, list) else [value]
        return Condition(column.name, values=tuple(str(v) for v in values))
    if isinstance(value, list):
        raise QueryError(f"column '{column.name}' is numeric: give a value or a range (lo, hi), not a list")
    lo, hi = value if isinstance(value, tuple) else (value, value)
    return Condition(column.name, lo=_number(column, lo, -math.inf), hi=_number(column, hi, math.inf))


def _number(column: Continuous, value: Any, open_end: float) -> float:
    if value is None:
        return open_end
    if column.calendar is not None:
        try:
            return float(to_units(np.array([np.datetime64(str(value))]), column.calendar)[0])
        except ValueError:
            raise QueryError(f"column '{column.name}': '{value}' is not an ISO 8601 date") from None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise QueryError(f"column '{column.name}' is numeric: '{value}' is not a number") from None


def _synthetic(folder: Path, doc: ReleaseDocument, conds: list[Condition]) -> pd.DataFrame:
    """The published synthetic rows' queried columns."""
    outputs = doc.outputs
    name = next((n for n, o in outputs.items() if o.format == "parquet"), None)
    cols = [c.column for c in conds]
    if name is not None:
        frame = pd.read_parquet(folder / name, columns=cols)
    else:
        name = next((n for n, o in outputs.items() if o.format == "csv"), "synthetic.csv")
        frame = pd.read_csv(folder / name, usecols=cols, keep_default_na=False, na_values=[""], dtype=str)
    return frame


def _values(column: Continuous, v: pd.Series) -> np.ndarray:
    if column.calendar is not None:
        return to_units(pd.to_datetime(v, errors="coerce").to_numpy(), column.calendar)
    return pd.to_numeric(v, errors="coerce").to_numpy(float)


def _meets(schema: Schema, frame: pd.DataFrame, c: Condition) -> np.ndarray:
    """Which synthetic rows meet condition ``c``."""
    v = frame[c.column]
    if c.values is not None:
        return v.astype(str).isin(c.values).to_numpy()
    column = schema[c.column]
    assert isinstance(column, Continuous)
    x = _values(column, v)
    return (x >= c.lo) & (x <= c.hi)


def _cells(column: Column, v: pd.Series) -> np.ndarray:
    """The declared cell of each synthetic value."""
    if isinstance(column, Continuous):
        return column.to_bins(_values(column, v)).astype(np.int64)
    index = {value: k for k, value in enumerate(column.values)}
    return v.astype(str).map(index).fillna(0).to_numpy(np.int64)


@dataclass(frozen=True)
class Published:
    """What a query reads of a release, in memory: the public ``schema``, the noisy
    ``tables``, n, the ``target`` statement, the synthetic rows (the queried columns at
    least), and the replicates' declared ``cells`` (K, n, columns named ``replicate_names``)
    with the model ``checks``, or None for a release without replicates."""

    schema: Schema
    tables: list[NoisyTable]
    n: int
    target: str
    synthetic: pd.DataFrame
    replicate_cells: np.ndarray | None = None
    replicate_names: tuple[str, ...] = ()
    checks: tuple[HeldOut, ...] = ()


def _model(pub: Published, conds: list[Condition], marks: dict[str, np.ndarray], level: float) -> float:
    """The model route's half-width on declared cells: each row weighs the product over
    conditions of 1 (its cell meets it), 0 (it does not), or for a cell a range cuts, the
    share of the synthetic rows in that cell that meet it; the replicates' errors against
    the synthetic rows' own count, and κ calibrated on the checks at (1 + level)/2, scaled
    by the share of the query's column pairs no published table holds (``_unmeasured``)."""
    assert pub.replicate_cells is not None
    frame, n = pub.synthetic, pub.n
    weights = []
    for c in conds:
        cells, meets = _cells(pub.schema[c.column], frame[c.column]), _meets(pub.schema, frame, c)
        w = (marks[c.column] == FULL).astype(float)
        for cell in np.flatnonzero(marks[c.column] == PARTIAL):
            inside = cells == cell
            w[cell] = meets[inside].mean() if inside.any() else 0.5
        weights.append((w, cells, pub.replicate_names.index(c.column)))
    base = float(np.prod([w[cells] for w, cells, _ in weights], axis=0).sum()) * n / len(frame)
    reps = pub.replicate_cells
    counts = np.array(
        [np.prod([w[reps[k, :, j]] for w, _, j in weights], axis=0).sum() for k in range(len(reps))]
    )
    k = kappa(pub.checks, (1 + level) / 2, multiplier(len(reps), level))
    return half_width(counts - base, base, k * _unmeasured(pub.tables, [c.column for c in conds]), level)


def _unmeasured(tables: Sequence[NoisyTable], columns: Sequence[str]) -> float:
    """The share of the query's column pairs that no published table holds (a public fact).
    The checks calibrate κ on a pair the model fitted without measuring; a query whose pairs
    are all measured leans on no unmeasured relation of two columns (0: its bias is the
    three-way interaction's), one with one of three pairs unmeasured on a third of them. An
    empirical rule, its coverage measured (``benchmarks/bench_intervals.py``: factor_gauss,
    Adult and the generated table, seeds 1-3, every case ≥ 0.90 at level 0.9)."""
    pairs = [(a, b) for i, a in enumerate(columns) for b in columns[i + 1 :]]
    if not pairs:
        return 1.0
    held = sum(any({a, b} <= set(t.columns) for t in tables) for a, b in pairs)
    return 1.0 - held / len(pairs)


def answer_where(pub: Published, where: Mapping[str, Any], level: float = 0.9) -> QueryResult:
    """The count of the fitted rows meeting ``where``, its interval at ``level`` and how it
    was made, from what was published (``run_query`` reads it from a folder)."""
    schema, n = pub.schema, pub.n
    conds = conditions(schema, where)
    marks = {c.column: coverage(schema[c.column], c) for c in conds}
    got = answer(pub.tables, marks, n, level)
    meets = np.logical_and.reduce([_meets(schema, pub.synthetic, c) for c in conds])
    synthetic = float(meets.mean()) * n if len(pub.synthetic) else 0.0
    method: str = got.method
    low, high = got.lower, got.upper
    if method == "bounds" and pub.replicate_cells is not None:
        hw = _model(pub, conds, marks, level)
        method, low, high = "model", max(synthetic - hw, got.lower), min(synthetic + hw, got.upper)
    lower = min(max(math.ceil(low - 1e-9), 0), n)
    upper = max(min(math.floor(high + 1e-9), n), lower)
    point = got.estimate if got.estimate is not None else synthetic
    count = int(min(max(round(point), lower), upper))
    return QueryResult(
        count,
        lower,
        upper,
        count / n,
        lower / n,
        upper / n,
        level,
        method,
        n,
        synthetic,
        got.tables,
        tuple(c.describe() for c in conds),
        pub.target,
    )


def published_folder(bundle: Path) -> tuple[ReleaseDocument, Path]:
    """release.json and the folder of the published files (a bundle's ``public/`` or a copy)."""
    doc, folder = load_document(bundle)
    if folder.name == "internal":
        raise QueryError(
            f"release '{doc.release_id}' published nothing (a gate stopped it): nothing to query"
        )
    if not doc.tables:
        raise QueryError(
            f"release '{doc.release_id}' publishes no noisy tables (made before they were published, "
            "or by a mechanism that measures none): its counts have no interval"
        )
    return doc, folder


def run_query(bundle: Path, where: Mapping[str, Any], level: float = 0.9) -> QueryResult:
    """The count of rows meeting ``where``, its interval at ``level`` and how it was made,
    from the published files of ``bundle`` (only the queried columns are read)."""
    doc, folder = published_folder(bundle)
    schema = public_spec(doc).public_schema()
    conds = conditions(schema, where)
    index, tables = load_tables(folder)
    names = tuple(c.column for c in conds)
    pub = Published(
        schema, tables, int(index["rows_fitted"]), index["target"], _synthetic(folder, doc, conds)
    )
    if doc.replicates:
        replicates, cells = read_replicates(folder, names)
        checks = tuple(HeldOut(**h) for h in replicates["checks"])
        pub = replace(pub, replicate_cells=cells, replicate_names=names, checks=checks)
    return answer_where(pub, where, level)
