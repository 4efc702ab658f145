"""The published noisy tables (``mechanisms.tables``, ``mechanisms.axes``): through each
marginal mechanism's own code, every count table it measures carries axes under which its
values are the exact counts plus noise of the recorded scale; the noise's quantiles and the
inverse-variance combination are those of the theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms import aim, factor_gauss, mst
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.axes import Axis
from dprelease.mechanisms.tables import Noise, NoisyTable, combine, combined_cells, noisy_tables
from tests.mechanisms.small import SMALL, small_rows

CASES = {
    "factor_gauss": (factor_gauss.FactorGauss(), factor_gauss.FactorGaussParams(target="flag")),
    "mst": (mst.MST(), mst.MSTParams(iters=30)),
    "aim": (aim.AIM(), aim.AIMParams(rounds=4, round_iters=10, iters=30, target="flag")),
}
COUNT_TABLES = ("histogram[", "pair[", "marginal[")


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_count_table_is_its_axes_exact_counts_plus_the_recorded_noise(name):
    synth, params = CASES[name]
    rng = np.random.default_rng(4)
    rows = small_rows(3000, rng)
    plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(SMALL, params))
    fit = synth.fit(rows, SMALL, plan, params, m=500, rng=rng)
    counted = [m for m in fit.measurements if m.name.startswith(COUNT_TABLES)]
    assert counted and all(m.axes for m in counted)  # a count table is never published without its layout
    tables = noisy_tables(fit.measurements)
    assert [t.name for t in tables] == [m.name for m in counted]
    z = []
    for t in tables:
        exact = np.zeros(t.values.shape)
        columns = [SMALL.names.index(a.column) for a in t.axes]
        np.add.at(exact, tuple(a.groups[rows.bins[:, c]] for a, c in zip(t.axes, columns, strict=True)), 1)
        assert exact.sum() == len(rows.bins)
        z.append(np.ravel(t.values - exact) / t.cell_sd)
    z = np.concatenate(z)
    # N(0, 1) per cell: the pooled mean within 4 standard errors, the s.d. within 4 of its own
    assert abs(z.mean()) < 4 / math.sqrt(len(z))
    assert abs(z.std() - 1) < 4 / math.sqrt(2 * len(z))


def test_gaussian_and_laplace_quantiles_are_the_theorys():
    g = Noise(((1.0, "gaussian", 3.0, 4),))
    assert math.isclose(g.quantile(0.95), stats.norm.ppf(0.95) * 6.0)
    for q in (0.75, 0.95):  # one Laplace(b) cell: F⁻¹(q) = −b·ln(2(1 − q))
        lap = Noise(((1.0, "laplace", 2.0, 1),))
        assert math.isclose(lap.quantile(q), -2.0 * math.log(2 * (1 - q)), rel_tol=0.02)
    many = Noise(((1.0, "laplace", 1.0, 400),))  # a sum of 400: nearly Gaussian of s.d. √800
    assert math.isclose(many.quantile(0.95), stats.norm.ppf(0.95) * math.sqrt(800), rel_tol=0.03)


def test_inverse_variance_combination():
    a, b = Noise(((1.0, "gaussian", 1.0, 1),)), Noise(((1.0, "gaussian", 2.0, 1),))
    value, noise = combine([(10.0, a), (20.0, b)])
    assert math.isclose(value, (10 / 1 + 20 / 4) / (1 + 1 / 4))
    assert math.isclose(noise.variance, 1 / (1 + 1 / 4))


def test_a_table_is_combined_with_the_margins_of_tables_on_the_same_cells():
    x, y = Axis("x", np.array([0, 0, 1])), Axis("y", np.array([0, 1]))
    one = NoisyTable("histogram[x]", "s", (x,), np.array([5.0, 7.0]), "gaussian", 1.0)
    two = NoisyTable("pair[x,y]", "s", (x, y), np.array([[1.0, 2.0], [3.0, 4.0]]), "gaussian", 1.0)
    other = NoisyTable("histogram[x]'", "s", (Axis("x", np.array([0, 1, 1])),), np.zeros(2), "gaussian", 1.0)
    family, values, noise = combined_cells(one, [one, two, other])
    assert [t.name for t in family] == ["histogram[x]", "pair[x,y]"]  # other groups: not combined
    # the pair's margin has 2 cells of noise per entry: weights 2/3 and 1/3
    assert np.allclose(values, [2 / 3 * 5 + 1 / 3 * 3, 2 / 3 * 7 + 1 / 3 * 7])
    assert math.isclose(noise.variance, 1 / (1 + 1 / 2))


def test_an_axis_must_use_every_group():
    with pytest.raises(ValueError, match="every group"):
        Axis("x", np.array([0, 2]))
