"""``mechanism: auto`` through the real flow: the rule's choice on the public n (counted
before the rehearsal and the reserve), the chosen mechanism's plan in the ledger, the
choice and its facts in ``release.json``, and ``audit verify`` on the result; the CLI says
what was chosen."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows.release import release
from dprelease.mechanisms.auto import MIN_AIM_ROWS
from dprelease.records.audit import verify_bundle
from tests.flows.test_marginal_release import SCHEMA, _table
from tests.helpers import write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

MOSTLY_CATEGORICAL = {name: c for name, c in SCHEMA.items() if name != "income"}  # 1 of 3 continuous


@pytest.mark.parametrize(("n", "chosen"), [(MIN_AIM_ROWS - 1, "factor_gauss"), (MIN_AIM_ROWS, "aim")])
def test_auto_releases_what_the_rule_chooses_and_publishes_why(tmp_path, n, chosen):
    spec = write_spec(
        tmp_path,
        _table(n).drop(columns="income"),
        schema=MOSTLY_CATEGORICAL,
        mechanism={"name": "auto", "params": {"target": "edu"}},
        checks={"target": "sex"},
        output={"formats": ["csv"]},
    )
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="a", insecure_seed=3)
    doc = json.loads((out / "a" / "public" / "release.json").read_text())
    why = doc["mechanism"]["chosen_by"]
    assert doc["mechanism"]["name"] == why["mechanism"] == chosen == doc["spec"]["mechanism"]["name"]
    assert why["n_fitted"] == doc["privacy"]["rows_fitted"] == n and (why["columns"], why["continuous"]) == (
        3,
        1,
    )
    assert why["params"]["target"] == "edu"
    stages = {s["stage"] for s in doc["privacy"]["budget_plan"]["stages"]}
    assert ("select" in stages) == (chosen == "aim")
    failed = [c for c in verify_bundle(out / "a", None) if not c.ok and c.group != "status"]
    assert failed == []


def test_validate_says_what_auto_chooses(tmp_path):
    spec = write_spec(tmp_path, _table(), schema=SCHEMA, mechanism={"name": "auto"}, checks={})
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert "mechanism auto chose factor_gauss: 2 of 4 columns continuous (half or more)" in " ".join(
        result.output.split()
    )
