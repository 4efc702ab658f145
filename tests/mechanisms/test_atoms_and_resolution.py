"""Issue 16: atoms, a declared finite support, declared bins and output precision
(``mechanisms.schema.Continuous``), and the resolution factor_gauss models each column at
(``mechanisms.resolution``): chosen from public facts only, atoms never merged, a group's
private mass kept when its rows are placed back in the declared cells."""

import inspect
import math
import re

import numpy as np
import pytest

from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms import factor_marginals
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.errors import SchemaError
from dprelease.mechanisms.resolution import MIN_GROUPS, NOISE_TVD, column_groups, group_count, resolve
from dprelease.mechanisms.schema import DEFAULT_BINS, Continuous, Nominal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

INCOME = Continuous("income", 0, 5000, atoms=(0.0,), intervals=8, decimals=2)
HOURS = Continuous("hours", 1, 99, integer=True, atoms=(40.0,))
KIDS = Continuous("kids", 0, 3, values=(0.0, 0.5, 1.0, 3.0))


def test_an_atom_is_a_cell_of_its_own_and_decodes_to_exactly_its_value(rng):
    assert INCOME.n_bins == 8 + 1 and INCOME.cell_labels()[0] == "=0"
    x = np.r_[np.zeros(50), rng.uniform(0, 5000, 50)]
    cells = INCOME.to_bins(x)
    assert set(cells[:50]) == {0} and 0 not in set(cells[50:])  # only an exact 0 is the atom
    back = INCOME.from_bins(cells, rng.random(100))
    assert np.all(back[:50] == 0.0) and np.all(back[50:] > 0)
    np.testing.assert_array_equal(INCOME.to_bins(back), cells)


def test_an_atom_inside_the_range_sits_between_its_neighbour_intervals():
    col = Continuous("x", 0.0, 8.0, atoms=(4.0,), intervals=8)
    assert col.cell_labels() == ["0.5", "1.5", "2.5", "3.5", "=4", "4.5", "5.5", "6.5", "7.5"]
    np.testing.assert_array_equal(col.to_bins(np.array([3.9, 4.0, 4.1])), [3, 4, 5])


def test_a_declared_support_is_decoded_exactly_and_snapped_from_the_unit_scale():
    assert KIDS.n_bins == 4 and KIDS.n_intervals == 0
    np.testing.assert_array_equal(KIDS.to_bins(np.array([0.0, 0.5, 1.0, 3.0])), [0, 1, 2, 3])
    np.testing.assert_array_equal(KIDS.from_bins(np.array([3, 2, 1, 0]), np.zeros(4)), [3.0, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(KIDS.from_unit(np.array([0.0, 0.2, 0.7, 1.0])), [0.0, 0.5, 3.0, 3.0])


LOGS = tuple(round(math.log(k), 6) for k in (2, 7, 26))  # 0.693147, 1.94591, 3.258097


def test_a_value_equal_within_the_declared_decimals_is_the_declared_value():
    """Issue 33: the file holds log(26) as 3.258096, the spec 3.258097. With decimals: 5 they
    are equal (|x − v| ≤ 5e-6): validation (``on_support``), reading (``to_bins``) and
    decoding agree on the declared value's cell; a number off by more is not on the support."""
    col = Continuous("lk", 0.0, 4.0, values=LOGS, decimals=5)
    x = np.array([0.693147, 1.945910, 3.258096, 3.2580965, 3.258093, 3.258103, 2.0, np.nan])
    np.testing.assert_array_equal(col.on_support(x), [True] * 5 + [False] * 3)
    cells = col.to_bins(x[:5])
    np.testing.assert_array_equal(cells, [0, 1, 2, 2, 2])
    np.testing.assert_array_equal(col.from_bins(cells, np.zeros(5)), [*LOGS, LOGS[2], LOGS[2]])
    assert "equal within decimals: 5, i.e. ±5e-6" in col.values_equality


def test_without_decimals_a_value_equals_a_declared_one_within_a_relative_1e9():
    col = Continuous("lk", 0.0, 4.0, values=LOGS)
    v = LOGS[2]
    assert col.on_support(np.array([v, v * (1 + 0.9e-9), v * (1 - 0.9e-9)])).all()
    assert not col.on_support(np.array([v * (1 + 1.1e-9), 3.258096])).any()
    assert col.values_equality == "equal within a relative 1e-9 (|x − v| ≤ 1e-9·|v|)"


def test_declared_values_must_be_told_apart_at_their_precision():
    with pytest.raises(SchemaError, match=re.escape("column 'a': values 0.1 and 0.2 must lie further apart")):
        Continuous("a", 0, 1, values=(0.1, 0.2, 0.5), decimals=0)
    assert Continuous("a", 0, 1, values=(0.1, 0.2, 0.3), decimals=1).n_bins == 3  # touching windows


def test_decimals_round_the_output_and_bins_set_the_interval_count(rng):
    back = INCOME.from_bins(rng.integers(1, 9, 1000), rng.random(1000))
    np.testing.assert_array_equal(back, np.round(back, 2))
    assert Continuous("x", 0.0, 1.0, intervals=10).n_bins == 10
    assert Continuous("age", 17, 90, integer=True, intervals=10).n_bins == 10  # declared bins win


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Continuous("a", 0, 1, atoms=(2.0,)), "column 'a': atoms [2.0] must be finite and within"),
        (lambda: Continuous("a", 0, 1, atoms=(0.5, 0.5)), "column 'a': atoms must be distinct"),
        (lambda: Continuous("a", 0, 9, integer=True, atoms=(0.5,)), "atoms must be whole numbers"),
        (lambda: Continuous("a", 0, 1, values=(0.0,)), "values must list at least 2 numbers"),
        (lambda: Continuous("a", 0, 1, values=(0.0, 1.0), intervals=4), "values (a finite support) excludes"),
        (lambda: Continuous("a", 0, 1, intervals=0), "bins (0) must be in 1..1024"),
        (lambda: Continuous("a", 0, 1, decimals=16), "decimals (16) must be in 0..15"),
    ],
)
def test_inconsistent_declarations_are_refused_naming_the_column(make, message):
    with pytest.raises(SchemaError, match=re.escape(message)):
        make()


# ---------------------------------------------------------------- the resolution rule

NOISY = Continuous("x", 0.0, 1.0)


def test_the_rule_reads_only_public_facts():
    """No argument can carry data: n, a noise scale, and the declared column."""
    assert list(inspect.signature(group_count).parameters) == ["n", "mean_abs_noise", "declared"]
    assert list(inspect.signature(column_groups).parameters) == ["column", "n", "mean_abs_noise"]
    assert list(inspect.signature(resolve).parameters) == ["schema", "n", "mean_abs_noise"]
    assert list(inspect.signature(factor_marginals.cells_for).parameters) == ["schema", "stage_part", "n"]


@pytest.mark.parametrize(
    ("n", "e", "declared", "k"),
    [
        (26_048, 28.0, 64, 64),  # Adult at ε = 1: ⌊2·26048·0.25/28⌋ = 465 ≥ 64, as declared
        (442, 25.0, 64, 8),  # ⌊8.84⌋
        (1_000, 25.0, 64, 20),  # ⌊20.0⌋
        (50, 25.0, 64, 2),  # ⌊1.0⌋ = 1 → MIN_GROUPS
        (442, 25.0, 1, 1),  # never more than declared
        (100, 0.0, 64, 64),  # no noise: as declared
    ],
)
def test_the_group_count_is_the_documented_formula(n, e, declared, k):
    assert group_count(n, e, declared) == k
    if e > 0 and declared > MIN_GROUPS:
        assert k == min(declared, max(MIN_GROUPS, math.floor(2 * n * NOISE_TVD / e)))


def test_groups_are_contiguous_and_atoms_are_never_merged():
    gain = Continuous("g", 0, 99999, integer=True, transform="log", atoms=(0.0, 99999.0))
    for col in (INCOME, HOURS, gain):
        g = column_groups(col, n=300, mean_abs_noise=25.0)
        assert len(g) == col.n_bins and g[0] == 0 and np.all(np.diff(g) >= 0) and np.all(np.diff(g) <= 1)
        atom_cells = [c for c, label in enumerate(col.cell_labels()) if label.startswith("=")]
        if col is HOURS:  # a cell per integer: the declared atom's integer is the cell
            atom_cells = [40 - 1]
        for c in atom_cells:
            assert np.sum(g == g[c]) == 1, (col.name, c)
    for col in (KIDS, Continuous("x", 0, 1, intervals=64), Nominal("c", ("a", "b", "c"))):
        np.testing.assert_array_equal(column_groups(col, 10, 1e6), np.arange(col.n_bins))


def test_placing_rows_back_keeps_each_groups_mass_and_stays_inside_it(rng):
    schema = Schema((NOISY, HOURS))
    cells = resolve(schema, 60, [25.0, 25.0])  # ⌊2·60·0.25/25⌋ = 1 → MIN_GROUPS
    assert cells.n_groups == [MIN_GROUPS, 1 + MIN_GROUPS + 1]  # hours: [1..39], 40, [41..99] (split in 2)
    probs = [np.array([0.2, 0.8]), np.array([0.1, 0.5, 0.3, 0.1])]
    private = cells.with_private(schema, probs)
    groups = np.column_stack([rng.choice(2, 20_000, p=probs[0]), rng.choice(4, 20_000, p=probs[1])])
    fine = private.fine(groups, rng)
    for j in range(2):
        np.testing.assert_array_equal(cells.groups[j][fine[:, j]], groups[:, j])  # inside its group
    assert np.all(fine[groups[:, 1] == 1, 1] == 39)  # the atom's group is the atom's cell
    # the piecewise-linear density rises from group 0 (0.2/0.5) to group 1 (0.8/0.5) inside
    # group 0: its upper cells get more of its rows than its lower ones
    low = fine[groups[:, 0] == 0, 0]
    assert np.mean(low >= 16) > 0.55


def test_factor_gauss_measures_the_groups_with_the_histogram_sensitivity(rng):
    """Through the stage's own code path (``fg.encode``): on a small table each column's
    histogram has one value per group (a merged column's groups placed by private mass), a
    merged column is also measured over its declared
    cells (``cuts[...]``), every recorded Δ is a histogram's (√2), and the synthetic rows
    are in declared cells (atoms exact)."""
    schema = Schema((INCOME, HOURS, NOISY, Nominal("c", ("a", "b"))))
    n = 300
    bins = np.column_stack(
        [
            np.where(rng.random(n) < 0.4, 0, rng.integers(1, 9, n)),
            rng.integers(0, 99, n),
            rng.integers(0, 64, n),
            rng.integers(0, 2, n),
        ]
    ).astype(np.int32)
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    enc = fg.encode(bins, schema, plan.stage("marginals"), fg.FactorGaussParams(), rng=rng)
    expected = factor_marginals.cells_for(schema, plan.stage("marginals"), n).n_groups
    histograms = {m.name: len(m.value) for m in enc.marginals if m.name.startswith("histogram[")}
    assert list(histograms) == [f"histogram[{c}]" for c in schema.names]
    assert list(histograms.values()) == enc.code.cells.n_groups and expected[2] < DEFAULT_BINS
    merged = [c.name for c, e in zip(schema.columns, expected, strict=True) if e < c.n_bins]
    assert [k == c.n_bins for c, k in zip(schema.columns, histograms.values(), strict=True)] == [
        c.name not in merged for c in schema.columns
    ]
    cuts = {m.name: len(m.value) for m in enc.marginals if m.name.startswith("cuts[")}
    assert cuts == {f"cuts[{c}]": schema[c].n_bins for c in merged} and "x" in merged
    assert {m.sensitivity for m in enc.marginals} == {math.sqrt(2)}
    fit = fg.FactorGauss().fit(MixedRows(bins), schema, plan, fg.FactorGaussParams(), m=2_000, rng=rng)
    out = fit.rows.bins
    assert all(out[:, j].max() < k for j, k in enumerate(schema.n_bins))
    assert 0.25 < np.mean(out[:, 0] == 0) < 0.55  # the atom's share is modelled (0.4 real)
