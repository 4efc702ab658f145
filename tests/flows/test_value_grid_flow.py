"""``mechanism.value_grid`` as a steward meets it (issue 40, within-cell fidelity): a
DoctorVisits-like table whose age lies on 12 values of a grid nobody declared. Through
`dprelease release`, the synthetic ages sit on the data's values, the plan and the ledger
carry stage ``grid``, release.json publishes the kept points, the public audit passes;
a spec asking for it without a grid column is refused before any budget is spent."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dprelease
from dprelease.cli.main import app
from tests.helpers import cli_text, write_spec
from tests.mechanisms.test_value_grid import GRID_AGES

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "age": {"type": "continuous", "bounds": [0.15, 1.0], "decimals": 2},
    "visits": {"type": "continuous", "bounds": [0, 14], "integer": True},
    "private": {"type": "nominal", "categories": ["no", "yes"]},
}


def _table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    age = rng.choice(GRID_AGES, n)
    return pd.DataFrame(
        {
            "age": age,
            "visits": rng.poisson(1 + age, n).clip(0, 14),
            "private": np.where(rng.random(n) < age, "yes", "no"),
        }
    )


def _release(folder, rid: str, grid: bool, **extra):
    spec = write_spec(
        folder,
        _table(5_000, np.random.default_rng(0)),
        schema=SCHEMA,
        checks={"enabled": False},
        dataset={"name": "doctors", "path": "data.csv"},
        mechanism={"name": "factor_gauss", "value_grid": grid},
        **extra,
    )
    args = ["release", str(spec), "--out", str(folder / "out"), "--release-id", rid, "--insecure-seed", "4"]
    return CliRunner().invoke(app, args), folder / "out" / rid


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return _release(tmp_path_factory.mktemp("grid"), "doctors-1", True)


def test_the_synthetic_values_sit_on_the_datas_grid(released, tmp_path):
    got, bundle = released
    assert got.exit_code == 0, cli_text(got.output)
    synthetic = pd.read_csv(bundle / "public" / "synthetic.csv")
    on_grid = np.isin(synthetic["age"].round(2), GRID_AGES).mean()
    _, without = _release(tmp_path, "doctors-0", False)
    before = np.isin(pd.read_csv(without / "public" / "synthetic.csv")["age"].round(2), GRID_AGES).mean()
    assert on_grid > 0.95 and before < 0.7, (on_grid, before)


def test_the_stage_is_planned_spent_published_and_audited(released):
    _, bundle = released
    public = bundle / "public"
    doc = json.loads((public / "release.json").read_text())
    privacy = doc["privacy"]
    assert "grid" in [s["stage"] for s in privacy["budget_plan"]["stages"]]
    assert "grid" in [s["stage"] for s in privacy["ledger"]["stages"]]
    grid = doc["mechanism"]["facts"]["value_grid"]
    assert set(grid) == {"age"}  # visits has a cell per integer already
    assert sorted(grid["age"]["points"]) == sorted(GRID_AGES.tolist())
    measured = privacy["ledger"]["measurements"]
    assert [m["stage"] for m in measured if m["statistic"] == "grid[age]"] == ["grid"]
    for audit in (dprelease.audit.verify(public, public=True), dprelease.audit.verify(bundle)):
        # the seeded run is marked not fit for publication; every other check passes
        assert [c.group for c in audit.failed] == ["status"], [(c.group, c.detail) for c in audit.failed]


def test_the_streaming_engine_counts_the_grid_in_pass_1_and_places_each_chunk(tmp_path):
    """engine local, chunks of 1,000 rows: the same stage, its counts summed over the chunks
    of pass 1, the values placed chunk by chunk."""
    got, bundle = _release(tmp_path, "doctors-2", True, engine={"name": "local", "chunk_rows": 1_000})
    assert got.exit_code == 0, cli_text(got.output)
    synthetic = pd.read_parquet(bundle / "public" / "synthetic.parquet")
    assert np.isin(synthetic["age"].round(2), GRID_AGES).mean() > 0.95
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert sorted(doc["mechanism"]["facts"]["value_grid"]["age"]["points"]) == sorted(GRID_AGES.tolist())


def test_a_spec_without_a_grid_column_is_refused_before_spending(tmp_path):
    spec = write_spec(
        tmp_path,
        _table(500, np.random.default_rng(1)),
        schema={**SCHEMA, "age": {"type": "continuous", "bounds": [0.15, 1.0]}},
        checks={"enabled": False},
        dataset={"name": "doctors", "path": "data.csv"},
        mechanism={"name": "factor_gauss", "value_grid": True},
    )
    got = CliRunner().invoke(app, ["validate", str(spec)])
    text = cli_text(got.output)
    assert got.exit_code != 0 and "mechanism.value_grid needs a continuous column with a public grid" in text
