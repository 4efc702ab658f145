"""Declared interval edges (``edges``: public cut points, issue 40): every value falls in the
interval the edges give and decodes back inside it, a declared set of edges is never merged
nor cut again, and a bad declaration is refused by ``dprelease validate``, naming the column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.mechanisms import factor_marginals
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.marginals import histogram
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from tests.helpers import cli_text, write_spec
from tests.properties import property_settings


@st.composite
def declared(draw: st.DrawFn) -> Continuous:
    """A column on [0, 1000] with 1–20 increasing inner edges, maybe on the log scale."""
    inner = draw(st.lists(st.floats(0.5, 999.5), min_size=1, max_size=20, unique=True))
    return Continuous(
        "x",
        0.0,
        1000.0,
        transform=draw(st.sampled_from(["identity", "log"])),
        cuts=(0.0, *sorted(inner), 1000.0),
    )


@pytest.mark.property
@property_settings(150)
@given(declared(), st.lists(st.floats(0, 1000), min_size=1, max_size=50), st.floats(0, 1))
def test_a_value_falls_in_the_declared_interval_and_decodes_inside_it(column, xs, u):
    x = np.array(xs)
    cells = column.to_bins(x)
    edges = np.array(column.cuts)
    expected = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    assert np.array_equal(cells, expected) and column.n_bins == len(edges) - 1
    back = column.from_bins(cells, np.full(len(x), u))
    tol = 1e-9 * 1000
    assert np.all(back >= edges[cells] - tol) and np.all(back <= edges[cells + 1] + tol)


def test_declared_edges_are_never_merged_nor_cut_at_quantiles(rng):
    """30 rows at ε = 0.1: the rule would merge 64 cells; 20 declared edges stay 19 cells."""
    edges = (0.0, *np.linspace(1, 900, 18).round(1), 1000.0)
    schema = Schema((Continuous("x", 0.0, 1000.0, cuts=edges), Nominal("c", ("a", "b"))))
    counts = [histogram(schema.columns[0].to_bins(rng.uniform(0, 1000, 30)), 19), np.array([15.0, 15.0])]
    part = plan_budget("zcdp", 0.1, 1e-6, {"marginals": 1.0}).stage("marginals")
    stage = factor_marginals.measure_one_way(counts, 30, schema, part, "quantiles", rng=rng)
    assert stage.cells.n_groups == [19, 2] and stage.cuts == ()


@pytest.mark.parametrize(
    ("edges", "says"),
    [
        ([0, 50, 20, 100], "edges must increase strictly from the lower bound (0) to the upper bound (100)"),
        ([5, 50, 100], "edges must increase strictly from the lower bound (0)"),
        ([0, 100, "x"], "edges"),
    ],
)
def test_validate_refuses_bad_edges_naming_the_column(tmp_path: Path, edges, says):
    schema = {
        "wait": {"type": "continuous", "bounds": [0, 100], "edges": edges},
        "s": {"type": "nominal", "categories": ["a", "b"]},
    }
    spec = write_spec(tmp_path, schema=schema, checks={"target": "s"})
    got = CliRunner().invoke(app, ["validate", str(spec)])
    text = cli_text(got.output)
    assert got.exit_code != 0 and "wait" in text and says in text, text
