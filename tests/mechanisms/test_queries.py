"""Queries answered from noisy tables (``mechanisms.queries``): a condition's marks on a
column's declared cells agree with the column's own ``to_bins`` on any value (property),
and each route's interval covers a known count at least as often as its level says, over
many independent noise draws (analytic: exactly the level, within binomial error)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.mechanisms.axes import Axis
from dprelease.mechanisms.queries import (
    EMPTY,
    FULL,
    NONE,
    Condition,
    QueryError,
    answer,
    coverage,
    group_labels,
)
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.tables import NoisyTable
from tests.properties import property_settings


@st.composite
def columns_and_ranges(draw):
    integer = draw(st.booleans())
    lower = float(draw(st.integers(-50, 50)))
    upper = lower + float(draw(st.integers(1, 400)))
    transform = draw(st.sampled_from(["identity", "log"])) if lower >= 0 else "identity"
    atoms = tuple(sorted(set(draw(st.lists(st.integers(int(lower), int(upper)), max_size=3)))))
    column = Continuous(
        "x",
        lower,
        upper,
        integer=integer,
        transform=transform,
        atoms=tuple(float(a) for a in atoms),
        intervals=draw(st.integers(1, 40)),
        missing=draw(st.booleans()),
    )
    lo, hi = sorted(draw(st.floats(lower - 5, upper + 5, allow_nan=False)) for _ in range(2))
    if draw(st.booleans()):
        lo, hi = math.floor(lo), math.ceil(hi)
    return column, lo, hi


@pytest.mark.property
@property_settings(300)
@given(columns_and_ranges(), st.integers(0, 2**31))
def test_marks_agree_with_the_columns_own_cells(case, seed):
    column, lo, hi = case
    marks = coverage(column, Condition("x", lo=lo, hi=hi))
    rng = np.random.default_rng(seed)
    x = rng.uniform(column.lower, column.upper, 2000)
    x = np.r_[np.round(x) if column.integer else x, column.atoms, lo, hi, column.lower, column.upper]
    x = x[(x >= column.lower) & (x <= column.upper)]
    if column.integer:
        x = np.round(x)
    cells = column.to_bins(x)
    inside = (x >= lo) & (x <= hi)
    assert inside[marks[cells] == FULL].all()
    assert not inside[marks[cells] == NONE].any()
    assert not (marks[cells] == EMPTY).any()  # an empty cell holds no value
    if column.missing:
        assert marks[column.to_bins(np.array([np.nan]))[0]] == NONE


SCHEMA = Schema(
    (
        Continuous("a", 0, 99, integer=True, intervals=10),
        Nominal("b", ("p", "q", "r")),
        Nominal("c", ("u", "v")),
    )
)


def _truth(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.integers(0, 100, n)
    b = (a // 40 + rng.integers(0, 2, n)) % 3
    c = (b == 2) | (rng.random(n) < 0.3)
    return np.column_stack([a, b, c.astype(int)])


def _tables(rows: np.ndarray, rng: np.random.Generator, kind: str) -> list[NoisyTable]:
    groups = [np.arange(10) // 2, np.arange(3), np.arange(2)]  # a's 10 cells in 5 groups
    cells = [SCHEMA.columns[0].to_bins(rows[:, 0].astype(float)), rows[:, 1], rows[:, 2]]
    out = []
    for cols in ((0,), (1,), (2,), (0, 1)):
        axes = tuple(Axis(SCHEMA.names[c], groups[c]) for c in cols)
        exact = np.zeros([a.size for a in axes])
        np.add.at(exact, tuple(groups[c][cells[c]] for c in cols), 1)
        scale = 8.0
        noise = (
            rng.normal(0, scale, exact.shape) if kind == "gaussian" else rng.laplace(0, scale, exact.shape)
        )
        out.append(NoisyTable(f"t{cols}", "s", axes, exact + noise, kind, scale))
    return out


def _query(rng: np.random.Generator) -> list[Condition]:
    picks = rng.choice(3, rng.integers(1, 4), replace=False)
    conds = []
    for c in sorted(picks):
        if c == 0:
            lo = int(rng.integers(0, 100))
            conds.append(Condition("a", lo=lo, hi=lo + int(rng.integers(0, 60))))
        else:
            values = SCHEMA.columns[c].values
            conds.append(
                Condition(SCHEMA.names[c], values=tuple(rng.choice(values, rng.integers(1, len(values)))))
            )
    return conds


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_each_routes_interval_covers_at_its_level(kind):
    rng = np.random.default_rng(20)
    rows = _truth(rng, 3000)
    hits: dict[str, list[bool]] = {}
    for _ in range(1500):
        conds = _query(rng)
        mask = np.ones(len(rows), dtype=bool)
        for c in conds:
            j = SCHEMA.names.index(c.column)
            v = rows[:, j]
            mask &= (
                (v >= c.lo) & (v <= c.hi)
                if c.values is None
                else np.isin(np.array(SCHEMA.columns[j].values)[v], c.values)
            )
        marks = {c.column: coverage(SCHEMA[c.column], c) for c in conds}
        got = answer(_tables(rows, rng, kind), marks, len(rows), 0.9)
        hits.setdefault(got.method, []).append(got.lower <= mask.sum() <= got.upper)
    assert set(hits) == {"analytic", "bracket", "bounds"}
    for method, h in hits.items():
        rate, tol = np.mean(h), 4 * math.sqrt(0.09 / len(h))
        assert rate >= 0.9 - tol, (method, rate, len(h))
        if method == "analytic":  # exact, not merely conservative
            assert rate <= 0.9 + tol, (method, rate, len(h))


def test_labels_and_refusals_speak_the_schemas_terms():
    a = SCHEMA["a"]
    assert group_labels(a, np.arange(10) // 2)[:2] == ["0..19", "20..39"]
    assert group_labels(SCHEMA["b"], np.array([0, 0, 1])) == ["p | q", "r"]
    with pytest.raises(QueryError, match="declares no category"):
        coverage(SCHEMA["b"], Condition("b", values=("z",)))
    with pytest.raises(QueryError, match="categorical"):
        coverage(SCHEMA["b"], Condition("b", lo=0, hi=1))
