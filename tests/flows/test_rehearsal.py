"""The rehearsal before the reserve (issue 30): the release path that needs no confidential
value runs on a table drawn from the public schema alone, so a spec that would fail after
the noise is drawn is refused before anything is reserved.

* the rehearsal table holds every declared cell of every column, read back through the
  release's own reader (``test_the_rehearsal_table_holds_every_declared_cell``);
* the invariant, by fault injection: a failure injected into each post-noise step's
  spec-dependent code is caught by the rehearsal, through the real flow, with no ledger
  opened and nothing published (``test_a_failure_after_the_noise_is_caught_before_the_reserve``);
* derived formulas and id formats, column by column;
* ``dprelease validate`` rehearses too.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.inputs import read_input
from dprelease.engines.rehearsal import model_values, rehearsal_rows, write_rehearsal_file
from dprelease.engines.tables import table_to_bins
from dprelease.flows.rehearsal import RehearsalError, _rehearsal_spec, rehearse
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Continuous
from dprelease.spec import load_spec
from tests.helpers import DEMO_DIR, adult_rows, assert_nothing_published, cli_text, write_spec

KINDS = {  # every kind of column a spec can declare
    "age": {"type": "continuous", "bounds": [18, 90], "integer": True},
    "income": {"type": "continuous", "bounds": [0, 500000], "transform": "log", "atoms": [0]},
    "net": {"type": "continuous", "bounds": [-1e6, 1e6], "transform": "asinh", "scale": 1000.0, "atoms": [0]},
    "score": {"type": "continuous", "bounds": [-5.5, 5.5], "missing": "allowed", "decimals": 2},
    "kids": {"type": "continuous", "bounds": [0, 4], "values": [0, 1, 2, 3.5]},
    "born": {"type": "date", "bounds": ["1930-01-01", "2008-12-31"], "missing": "allowed"},
    "seen": {"type": "datetime", "bounds": ["2024-01-01T00:00", "2024-12-31T23:00"], "resolution": "hour"},
    "edu": {"type": "ordinal", "levels": ["low", "mid", "high"], "missing": "NA"},
    "region": {
        "type": "nominal",
        "categories": ["n", "s", "e", "w", "other"],
        "missing": "?",
        "unknown": "other",
        "other": "other",
    },
    "health": {"type": "one_hot", "columns": ["good", "fair", "bad"], "none": "unknown"},
    "person": {"type": "id", "format": "P-{:07d}"},
    "notes": {"type": "drop"},
    "agesq": {"type": "derived", "formula": "age ** 2", "integer": True},
    "sex": {"type": "nominal", "categories": ["f", "m"]},
    "flag": {"type": "nominal", "categories": ["0", "1"]},  # tokens that are plain numbers
}


def _kinds_spec(tmp_path, **overrides):
    """A spec with every kind of column (its data file is never read by the rehearsal)."""
    (tmp_path / "data.csv").write_text("")
    base = {
        "schema": KINDS,
        "checks": {"target": "sex", "holdout_fraction": 0.1, "gates": {"tvd_1way": {"max": 0.5}}},
    }
    return load_spec(write_spec(tmp_path, **{**base, **overrides}))


@pytest.mark.parametrize("engine", ["memory", "local"])
def test_the_rehearsal_table_holds_every_declared_cell(tmp_path, engine):
    """Read back through the release's own reader (``read_input``: one-hot groups, dates,
    missing tokens, id/drop/derived columns read past), every cell of every modelled
    column is present, and rows 0 and 1 hold every continuous column's bounds."""
    spec = _kinds_spec(tmp_path, engine={"name": engine})
    path, model = write_rehearsal_file(spec, tmp_path)
    schema = spec.public_schema()
    table, _ = read_input(_rehearsal_spec(spec, path, rehearsal_rows(spec)))
    bins = table_to_bins(table, schema)
    for j, c in enumerate(schema.columns):
        assert set(bins[:, j]) == set(range(c.n_bins)), c.name
    assert table["age"].iloc[:2].tolist() == [18, 90]
    assert table["income"].iloc[:2].tolist() == [0, 500000]
    assert table["kids"].iloc[:2].tolist() == [0, 3.5]
    assert len(table) == len(model) == rehearsal_rows(spec)


def test_the_demo_rehearsal_table_covers_the_demo_schema(tmp_path):
    """Every cell a value can fall in: on a log-scale integer column (capital_gain) the
    narrow intervals near 0 hold no whole number, so no record can be there either."""
    spec = load_spec(write_spec(tmp_path, adult_rows(10)))
    schema = spec.public_schema()
    bins = table_to_bins(model_values(schema, rehearsal_rows(spec)), schema)
    for j, c in enumerate(schema.columns):
        if isinstance(c, Continuous) and c.integer:
            reachable = set(c.to_bins(np.arange(math.ceil(c.lower), math.floor(c.upper) + 1)))
        else:
            reachable = set(range(c.n_bins))
        assert set(bins[:, j]) == reachable, c.name
    assert len(set(bins[:, 10])) == 60 < schema.columns[10].n_bins  # capital_gain: 5 cells unreachable


def test_every_kind_of_column_rehearses(tmp_path):
    """The whole path on every kind of column, gates and a holdout: it passes."""
    done = rehearse(_kinds_spec(tmp_path), "kinds", insecure_seed=1)
    assert done.rows == rehearsal_rows(_kinds_spec(tmp_path)) and done.warnings == ()


@pytest.mark.parametrize(
    ("formula", "refused", "warned"),
    [
        ("log(x - 20)", "gives no finite value for any values within the declared bounds", None),
        ("log(x)", None, "gives no finite value for some values within the declared bounds (e.g. x=0)"),
        ("1 / (x + 1)", None, None),
    ],
)
def test_derived_formulas_are_tried_on_the_declared_values(tmp_path, formula, refused, warned):
    """Each formula on every rehearsal row (x from 0 to 10, the bounds included): empty
    everywhere is refused, naming the column; empty somewhere is a warning naming a point."""
    schema = {
        "x": {"type": "continuous", "bounds": [0, 10]},
        "y": {"type": "derived", "formula": formula},
        "c": {"type": "nominal", "categories": ["a", "b"]},
    }
    (tmp_path / "data.csv").write_text("")
    spec = load_spec(write_spec(tmp_path, schema=schema, checks={"enabled": False}))
    if refused:
        with pytest.raises(RehearsalError, match=re.escape(f"column 'y': formula {formula!r} {refused}")):
            rehearse(spec, "f", insecure_seed=1)
        return
    warnings = rehearse(spec, "f", insecure_seed=1).warnings
    assert warnings == (
        (f"column 'y': formula {formula!r} {warned}; those cells are published empty",) if warned else ()
    )


# ---------------------------------------------------------------- the invariant, by fault injection


def _boom(*args, **kwargs):
    raise RuntimeError("injected")


def _mechanism_step(step: str):
    """Replace the spec's mechanism's ``step`` by one that fails."""

    def patch(monkeypatch):
        monkeypatch.setattr(MECHANISMS["factor_gauss"], step, _boom)  # the instance's step shadows the method

    return patch


def _attribute(module: str, name: str):
    def patch(monkeypatch):
        monkeypatch.setattr(f"dprelease.{module}.{name}", _boom)

    return patch


# Every step after the first noise draw, at the spec-dependent code it runs: the step the
# rehearsal must name, and how the failure is injected.
POST_NOISE = [
    ("estimate_private_moments", _mechanism_step("estimate")),
    ("project_and_sample", _mechanism_step("sample")),
    ("decode", _mechanism_step("decode")),
    ("decode", _attribute("engines.road", "rows_to_table")),
    ("validate_output", _attribute("engines.road", "refuse_output")),
    ("check_gates", _attribute("tasks.post_release", "gate_metrics")),
    ("check_gates", _attribute("tasks.post_release", "decide")),
    ("release_document", _attribute("bundle.document", "account")),
    ("release_document", _attribute("flows.pipeline", "ledger_facts")),
    ("write_report", _attribute("tasks.post_release", "render_report")),
    ("write_bundle", _attribute("flows.pipeline", "publishable")),
    ("write_bundle", _attribute("bundle.write", "write_csv")),
    ("write_bundle", _attribute("bundle.write", "readme")),
]


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    ("step", "inject"), POST_NOISE, ids=[f"{s}-{i}" for i, (s, _) in enumerate(POST_NOISE)]
)
def test_a_failure_after_the_noise_is_caught_before_the_reserve(tmp_path, monkeypatch, step, inject):
    """Through the real flow: the rehearsal meets the injected failure first, names its step,
    and the release stops before the ledger is even opened (nothing reserved, read or
    published); the failure record names the rehearsal."""
    from dprelease.flows.release import release

    spec = write_spec(
        tmp_path, adult_rows(300), checks={"target": "income", "gates": {"tvd_1way": {"max": 0.9}}}
    )
    out = tmp_path / "out"
    inject(monkeypatch)
    with pytest.raises(RehearsalError, match=re.escape(f"at step '{step}' (RuntimeError: injected)")):
        release(str(spec), str(out), release_id="r", insecure_seed=1)
    assert not (out / "ledger.db").exists()  # the ledger was never opened: nothing reserved
    assert_nothing_published(out, "r")
    (record,) = (out / "failures").iterdir()
    failure = json.loads((record / "failure.json").read_text())
    assert failure["stage"] == "rehearse (failed)" and failure["error"] == "RehearsalError"


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_a_streaming_writer_failure_is_caught_before_the_reserve(tmp_path, monkeypatch):
    from dprelease.flows.release import release

    spec = write_spec(tmp_path, adult_rows(300), engine={"name": "local", "chunk_rows": 1_000})
    monkeypatch.setattr("dprelease.tasks.streaming.write_synthetic_chunks", _boom)
    with pytest.raises(RehearsalError, match=re.escape("at step 'decode' (RuntimeError: injected)")):
        release(str(spec), str(tmp_path / "out"), release_id="r", insecure_seed=1)
    assert not (tmp_path / "out" / "ledger.db").exists()


# ---------------------------------------------------------------- dprelease validate


def test_validate_rehearses_the_release(tmp_path, monkeypatch):
    spec = write_spec(tmp_path, adult_rows(300))
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert "rehearsal passed" in cli_text(result.output)
    monkeypatch.setattr("dprelease.tasks.post_release.render_report", _boom)
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2
    assert "fails its rehearsal at step 'write_report' (RuntimeError: injected)" in cli_text(result.output)


def test_the_demo_spec_rehearses_in_seconds():
    """The demo's rehearsal: its 101-row table (hours-per-week's 99 integer cells and the two
    bound rows) through every step, in seconds (``benchmarks/`` measures it against the release)."""
    done = rehearse(load_spec(DEMO_DIR / "adult.yaml"), "demo", insecure_seed=1)
    assert done.rows == 101 and done.seconds < 30
