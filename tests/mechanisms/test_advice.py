"""The advice a release draws from its own noisy one-way tables (``mechanisms.advice``),
through each marginal mechanism's own fit: a value the data holds many times inside a
continuous cell, and a declared range whose end holds no rows, are named with the
declaration to add; smooth columns inside fitting bounds raise nothing (the noise alone
never does, by the thresholds' ``Z`` noise s.d.)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.advice import advise
from dprelease.mechanisms.axes import Axis
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.tables import NoisyTable, noisy_tables
from tests.properties import property_settings

SCHEMA = Schema(
    (
        Continuous("total", 0.0, 100.0, intervals=16),
        Continuous("spent", 0.0, 1000.0, intervals=20),
        Continuous("age", 18, 80, integer=True),
        Nominal("kind", ("a", "b", "c")),
    )
)


def _table(n: int, rng: np.random.Generator, *, spike: bool, tail: bool) -> pd.DataFrame:
    total = rng.uniform(0, 100, n)
    if spike:
        total[rng.random(n) < 0.226] = 0.0  # twoyear's stotal: 22.6 % zeros
    spent = rng.uniform(0, 300 if tail else 1000, n)
    return pd.DataFrame(
        {
            "total": total.round(2),
            "spent": spent.round(2),
            "age": rng.integers(18, 81, n),
            "kind": rng.choice(["a", "b", "c"], n),
        }
    )


def _advice(mechanism: str, table: pd.DataFrame, seed: int) -> list:
    synth = MECHANISMS[mechanism]
    params = synth.params_type()
    plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(SCHEMA, params))
    rows = table_to_rows(table, table_to_bins(table, SCHEMA), SCHEMA)
    fit = synth.fit(rows, SCHEMA, plan, params, m=len(table), rng=np.random.default_rng(seed))
    return advise(noisy_tables(fit.measurements), SCHEMA, len(table))


@pytest.mark.parametrize("mechanism", ["factor_gauss", "mst"])
def test_a_spike_and_an_empty_end_are_named_with_what_to_declare(mechanism):
    got = _advice(mechanism, _table(5000, np.random.default_rng(0), spike=True, tail=True), seed=0)
    assert [(a.column, a.kind) for a in got] == [("total", "spike"), ("spent", "empty_end")], got
    spike, end = got
    assert "column 'total'" in spike.message and "[0, 6.25)" in spike.message
    assert "atoms: [<that value>]" in spike.message
    assert "above 300" in end.message and "the highest 14 of its 20 cells" in end.message


@pytest.mark.parametrize("seed", range(5))
def test_smooth_columns_in_fitting_bounds_raise_nothing(seed):
    assert (
        _advice("factor_gauss", _table(5000, np.random.default_rng(seed), spike=False, tail=False), seed)
        == []
    )


def test_an_empty_range_beside_a_declared_atom_is_no_advice():
    """Adult's capital_gain: most rows are its atom 0 and few values lie from 1 to 1,910; new
    bounds leaving that range out would cut the atom, so it is not advised."""
    schema = Schema(
        (Continuous("gain", 0.0, 1000.0, intervals=20, atoms=(0.0,)), Nominal("kind", ("a", "b")))
    )
    rng = np.random.default_rng(4)
    gain = np.where(rng.random(20_000) < 0.8, 0.0, rng.uniform(500, 1000, 20_000)).round(2)
    table = pd.DataFrame({"gain": gain, "kind": rng.choice(["a", "b"], 20_000)})
    synth = MECHANISMS["factor_gauss"]
    params = synth.params_type()
    plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(schema, params))
    fit = synth.fit(
        table_to_rows(table, table_to_bins(table, schema), schema),
        schema,
        plan,
        params,
        m=20_000,
        rng=np.random.default_rng(4),
    )
    assert advise(noisy_tables(fit.measurements), schema, 20_000) == []


@property_settings(150)
@given(
    lower=st.floats(-1e6, 1e6, allow_nan=False),
    width=st.floats(1e-3, 1e7, allow_nan=False),
    intervals=st.integers(1, 40),
    integer=st.booleans(),
    atoms=st.integers(0, 2),
    missing=st.booleans(),
    seed=st.integers(0, 2**16),
    n=st.integers(2, 10**7),
)
def test_advice_never_fails_on_any_column_and_any_noisy_counts(
    lower, width, intervals, integer, atoms, missing, seed, n
):
    """The flow draws the advice after the budget is spent: it must never raise, whatever the
    declared column and whatever the noisy counts (negative, zero, far above n)."""
    upper = lower + width
    if integer and math.floor(upper) - math.ceil(lower) < 1:
        upper = math.ceil(lower) + 1.0
    points = tuple(sorted({round(lower + width * k / (atoms + 1), 3) for k in range(1, atoms + 1)}))
    try:
        column = Continuous(
            "x", lower, upper, integer=integer, intervals=intervals, atoms=points, missing=missing
        )
    except ValueError:
        return  # a declaration the schema refuses never reaches a release
    schema = Schema((column,))
    rng = np.random.default_rng(seed)
    groups = np.sort(rng.integers(0, max(column.n_bins // 2, 1), column.n_bins))
    groups = np.unique(groups, return_inverse=True)[1]
    axis = Axis("x", groups)
    values = rng.normal(0, 1, axis.size) * rng.choice([1.0, n / 10, n * 3.0]) + rng.choice(
        [0.0, n / axis.size]
    )
    table = NoisyTable("histogram[x]", "marginals", (axis,), values, "gaussian", float(rng.uniform(0.1, 100)))
    for a in advise([table], schema, n):
        assert a.column == "x" and a.kind in ("spike", "empty_end") and a.message.startswith("column 'x': ")
