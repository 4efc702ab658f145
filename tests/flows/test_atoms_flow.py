"""Issue 16 through the real flow (memory and local engines): a zero-inflated amount with
a declared atom and output precision, and a numeric column with a declared finite support.
The published CSV holds exact zeros at about the real rate, only declared support values,
at most the declared decimals; a value outside the support is refused by name."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.inputs import InputRefused
from dprelease.flows.release import release
from dprelease.mechanisms import factor_marginals
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.accuracy import describe, expected_error
from dprelease.spec import load_spec
from tests.helpers import assert_nothing_published, cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "income": {"type": "continuous", "bounds": [0, 5000], "atoms": [0], "decimals": 2},
    "kids": {"type": "continuous", "bounds": [0, 3], "values": [0, 0.5, 1, 3]},
    "group": {"type": "nominal", "categories": ["a", "b"]},
}
ZEROS = 0.4
MECHANISM = {"name": "factor_gauss", "params": {"target": "group"}}  # with the refine stage


def _table(n: int = 3_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], n)
    income = np.where(rng.random(n) < ZEROS, 0.0, rng.uniform(1, 5000, n))
    return pd.DataFrame({"income": income, "kids": rng.choice([0, 0.5, 1, 3], n), "group": group})


def _spec(folder, engine):
    output = {"formats": ["csv"]}  # the local engine's default is Parquet
    return write_spec(
        folder,
        _table(),
        schema=SCHEMA,
        checks={"target": "group"},
        mechanism=MECHANISM,
        engine=engine,
        output=output,
    )


@pytest.mark.parametrize("engine", [{"name": "memory"}, {"name": "local", "chunk_rows": 1_000}])
def test_atoms_support_and_precision_reach_the_published_table(tmp_path, engine):
    release(str(_spec(tmp_path, engine)), str(tmp_path / "out"), release_id="atoms", insecure_seed=3)
    public = tmp_path / "out" / "atoms" / "public"
    text = (public / "synthetic.csv").read_text().splitlines()
    syn = pd.read_csv(public / "synthetic.csv")
    # the atom: exact zeros at about the real rate (σ of the noisy count ≈ 26 of 3,000 rows)
    assert abs(np.mean(syn["income"] == 0.0) - ZEROS) < 0.05
    assert syn["income"].between(0, 5000).all()
    # at most two decimals, as printed
    incomes = [line.split(",")[0] for line in text[1:]]
    assert all(re.fullmatch(r"\d+(\.\d{1,2})?", v) for v in incomes), incomes[:5]
    # the declared support only, and every value of it
    assert set(syn["kids"]) == {0.0, 0.5, 1.0, 3.0}
    doc = json.loads((public / "release.json").read_text())
    spent = {m["statistic"]: m for m in doc["privacy"]["ledger"]["measurements"]}
    assert spent["histogram[kids]"]["sensitivity"] == pytest.approx(2**0.5)
    # the published histograms are over the groups the public rule gives for the fitted n
    spec = load_spec(tmp_path / "spec.yaml")
    plan = plan_budget("zcdp", 1.0, 1e-6, spec.stage_weights())
    n_fitted = doc["privacy"]["rows_fitted"]
    groups = factor_marginals.cells_for(spec.public_schema(), plan.stage("marginals"), n_fitted)
    assert [spent[f"histogram[{c}]"]["dimension"] for c in SCHEMA] == groups.n_groups
    assert groups.n_groups[1] == 4  # a declared support is never merged
    # the accuracy statement: one entry per measurement, from its noise scale and n alone
    accuracy = {a["statistic"]: a for a in doc["privacy"]["accuracy"]}
    assert set(accuracy) == set(spent)
    kids = spent["histogram[kids]"]
    n_fit = doc["privacy"]["rows_fitted"]
    assert accuracy["histogram[kids]"] == expected_error(
        "histogram[kids]", "gaussian", kids["noise_scale"], 4, n_fit
    )
    report = (tmp_path / "out" / "atoms" / "internal" / "report.html").read_text()
    assert "expected error" in report and describe(accuracy["histogram[kids]"]) in report


def test_a_value_outside_the_declared_support_is_refused_by_name(tmp_path):
    bad = _table()
    bad.loc[7, "kids"] = 2.0
    spec = write_spec(tmp_path, bad, schema=SCHEMA, checks={"target": "group"}, mechanism=MECHANISM)
    with pytest.raises(InputRefused) as e:
        release(str(spec), str(tmp_path / "out"), release_id="bad", insecure_seed=3)
    assert "kids" in e.value.detail and "declared numbers (values: ...)" in e.value.detail
    assert "kids" not in str(e.value)  # what Prefect stores names no column
    assert_nothing_published(tmp_path / "out", "bad")


def test_declared_bins_the_noise_swamps_are_warned_about_in_validate_and_the_flows_log(tmp_path, caplog):
    """Issue 33: ``bins: 256`` keeps income's 256 cells (factor_gauss does not merge a
    declared ``bins``); at ε = 1 and 3,000 rows the noise swamps them, and both
    ``dprelease validate`` and the release's log say what the merge rule would keep."""
    schema = {**SCHEMA, "income": {**SCHEMA["income"], "bins": 256}}
    spec = write_spec(tmp_path, _table(), schema=schema, checks={"target": "group"}, mechanism=MECHANISM)
    said = "column 'income': bins: 256 keeps 256 cells; at privacy.epsilon 1 and n = "
    rule = "the merge rule would keep"
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert said in cli_text(result.output) and rule in cli_text(result.output)
    caplog.set_level("WARNING")
    release(str(spec), str(tmp_path / "out"), release_id="binned", insecure_seed=3)
    assert said in caplog.text and rule in caplog.text
