"""Groups placed by private mass (``resolution.mass_groups``, ``factor_marginals.measure_one_way``
with ``cuts="quantiles"``): invariants over any column and any private distribution, the
quantile property on exact distributions, and the stage's budget and cut points."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.mechanisms import factor_marginals
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.marginals import histogram
from dprelease.mechanisms.resolution import cut_points, mass_groups
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from tests.properties import property_settings


@st.composite
def columns(draw: st.DrawFn) -> Continuous:
    """A continuous column with 2..80 intervals, maybe atoms, maybe a missing cell."""
    intervals = draw(st.integers(2, 80))
    atoms = draw(st.lists(st.sampled_from([0.0, 0.25, 3.0, 7.5, 10.0]), max_size=3, unique=True))
    transform = draw(st.sampled_from(["identity", "log"]))
    return Continuous(
        "x",
        0.0,
        10.0,
        atoms=tuple(atoms),
        intervals=intervals,
        transform=transform,
        missing=draw(st.booleans()),
    )


@pytest.mark.property
@property_settings(150)
@given(columns(), st.data())
def test_groups_are_contiguous_runs_with_atoms_alone_and_at_most_k_interval_groups(column, data):
    weights = data.draw(st.lists(st.floats(0, 1), min_size=column.n_bins, max_size=column.n_bins))
    k = data.draw(st.integers(1, column.n_intervals))
    groups = mass_groups(column, np.array(weights), k)
    assert groups[0] == 0 and set(np.diff(groups)) <= {0, 1}  # numbered in cell order, contiguous
    alone = column.atom_cells
    for cell in np.flatnonzero(alone):
        assert np.sum(groups == groups[cell]) == 1, "an atom or the missing cell shares its group"
    assert len(np.unique(groups[~alone])) <= k + len(column.cell_atoms)  # an atom may split a run
    points = cut_points(column, groups)
    assert points == sorted(points) and all(column.lower < v < column.upper for v in points)


@pytest.mark.property
@property_settings(100)
@given(st.integers(8, 200), st.integers(2, 16), st.integers(0, 2**32 - 1))
def test_on_an_exact_distribution_each_group_holds_about_one_kth_of_the_mass(intervals, k, seed):
    """The quantile property: a group's mass is at most 1/k plus the largest cell's (a
    cut falls between cells), whatever the shape; equal widths give no such bound."""
    column = Continuous("x", 0.0, 1.0, intervals=intervals)
    p = np.random.default_rng(seed).dirichlet(np.full(intervals, 0.3))
    groups = mass_groups(column, p, k)
    mass = np.bincount(groups, weights=p)
    assert mass.max() <= 1 / k + 2 * p.max() + 1e-12


def _skewed(n: int, rng: np.random.Generator) -> np.ndarray:
    """A log-normal-ish column on [0, 100]: most rows in the first tenth of the range."""
    return np.clip(rng.lognormal(1.0, 0.8, n), 0, 100)


def test_quantile_cuts_follow_the_mass_where_equal_widths_do_not(rng):
    """800 rows at ε = 0.3: the public rule merges the column's 64 cells into k groups;
    equal widths leave over 80 % of the rows in one group, private quantiles give no group
    more than its largest declared cell and 1/k (noise aside)."""
    schema = Schema((Continuous("x", 0.0, 100.0), Nominal("c", ("a", "b"))))
    x = _skewed(800, rng)
    counts = [histogram(schema.columns[0].to_bins(x), 64), np.array([400.0, 400.0])]
    plan = plan_budget("zcdp", 0.3, 1e-6, {"marginals": 1.0})
    part = plan.stage("marginals")
    equal = factor_marginals.measure_one_way(counts, 800, schema, part, "equal", rng=rng)
    quantiles = factor_marginals.measure_one_way(counts, 800, schema, part, "quantiles", rng=rng)
    k = factor_marginals.cells_for(schema, part, 800).n_groups[0]
    assert 2 <= k < 64 and equal.cuts == () and equal.facts == {}
    assert quantiles.cells.n_groups[0] <= k
    largest = [max(s.coarse[0]) / 800 for s in (equal, quantiles)]
    cell = max(counts[0]) / 800  # no cut splits a declared cell
    assert largest[0] > 0.8 and largest[1] <= cell + 1 / k + 0.05, (largest, cell, k)
    assert (
        list(quantiles.facts["cuts"]) == ["x"]
        and len(quantiles.facts["cuts"]["x"]) == quantiles.cells.n_groups[0] - 1
    )
    assert [m.name for m in quantiles.measurements] == ["cuts[x]", "histogram[x]", "histogram[c]"]


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_a_cut_column_spends_its_share_and_no_more(notion, rng):
    """The cut column's two histograms split its part ``CUT_SHARE`` : rest; every part sums
    to at most the stage's share, and ``marginal_noise`` (the forecasts') states the
    histogram's noise as drawn."""
    schema = Schema((Continuous("x", 0.0, 100.0), Nominal("c", ("a", "b"))))
    counts = [histogram(schema.columns[0].to_bins(_skewed(800, rng)), 64), np.array([400.0, 400.0])]
    plan = plan_budget(notion, 0.3, 1e-6 if notion == "zcdp" else 0.0, {"marginals": 1.0})
    part = plan.stage("marginals")
    stage = factor_marginals.measure_one_way(counts, 800, schema, part, "quantiles", rng=rng)
    share = {m.name: m.rho if notion == "zcdp" else m.epsilon for m in stage.measurements}
    assert math.fsum(share.values()) <= part.share
    assert share["cuts[x]"] == pytest.approx(factor_marginals.CUT_SHARE * part.share / 2)
    assert share["histogram[x]"] == pytest.approx((1 - factor_marginals.CUT_SHARE) * part.share / 2)

    class Params:
        cuts: factor_marginals.Cuts = "quantiles"

    forecast = factor_marginals.marginal_noise(schema, Params(), plan, 800)
    drawn = {m.name: m.scale for m in stage.marginals}
    assert [f.scale for f in forecast] == pytest.approx([drawn["histogram[x]"], drawn["histogram[c]"]])


def test_cuts_is_checked_by_name():
    from dprelease.mechanisms.aim import AIMParams
    from dprelease.mechanisms.factor_gauss import FactorGaussParams
    from dprelease.mechanisms.mst import MSTParams

    for params in (FactorGaussParams, AIMParams, MSTParams):
        with pytest.raises(ValueError, match=r"params.cuts \('even'\) must be one of quantiles, equal"):
            params(cuts="even")


def _encode_only(mechanism: str, schema: Schema, plan, params):
    """The flow's ``encode`` task alone (aim's estimate, mbi's, is slow and measures no cut)."""
    from prefect.logging import disable_run_logger

    from dprelease.mechanisms.primitives import noise_rngs
    from dprelease.tasks.synthesis import encode
    from tests.wiring import rows_of

    def run(table: pd.DataFrame) -> list:
        with disable_run_logger():
            return list(
                encode.fn(
                    mechanism, rows_of(table, schema), schema, plan, params, noise_rngs(0, 7)[0]
                ).measurements
            )

    return run


@pytest.mark.parametrize("mechanism", ["factor_gauss", "aim"])
def test_neighbours_measure_cuts_and_groups_within_their_recorded_sensitivity(mechanism):
    """Through the flow's own tasks (all of factor_gauss's; aim's ``encode``, where its one-way
    stage is), on random replace-one neighbours of a 400-row table whose skewed column the rule
    cuts by private mass (k ≥ ``MIN_CUT_GROUPS``): ``cuts[x]`` and the histogram over the groups
    it places each change by at most the Δ they record (the neighbour replays the first table's
    releases, so both are measured over the same groups); a record moving cell attains Δ in both."""
    from dprelease.mechanisms.registry import MECHANISMS
    from tests.wiring import compare, flow_stages, rows_of

    schema = Schema((Continuous("x", 0.0, 100.0), Nominal("c", ("a", "b"))))
    synth = MECHANISMS[mechanism]
    params = synth.params_type()
    plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(schema, params))
    if mechanism == "factor_gauss":
        stages = flow_stages(mechanism, schema, plan, params)
        run = lambda t: stages(rows_of(t, schema))  # noqa: E731
    else:
        run = _encode_only(mechanism, schema, plan, params)
    rng = np.random.default_rng(5)
    seen: set[str] = set()
    for _ in range(12):
        d = pd.DataFrame({"x": _skewed(400, rng), "c": rng.choice(["a", "b"], 400)})
        d2 = d.copy()
        d2.loc[int(rng.integers(400))] = {"x": float(rng.uniform(0, 100)), "c": str(rng.choice(["a", "b"]))}
        for c in compare(run, d, d2):
            assert c.within, c
            seen.add(c.name)
    assert {"cuts[x]", "histogram[x]"} <= seen
    d = pd.DataFrame({"x": _skewed(400, rng), "c": rng.choice(["a", "b"], 400)})
    lo, hi = d.copy(), d.copy()
    lo.loc[0], hi.loc[0] = {"x": 0.5, "c": "a"}, {"x": 99.5, "c": "b"}
    moved = {c.name: c for c in compare(run, lo, hi)}
    assert moved["cuts[x]"].ratio == pytest.approx(1.0) and moved["histogram[x]"].ratio == pytest.approx(1.0)
