"""``mechanism: auto`` through the real flow: the rule's choice on the public n (counted
without parsing a value, after the ledger's pre-check and before the rehearsal and the
reserve), the chosen mechanism's plan in the ledger, the choice and its facts in
``release.json`` (true on every engine: the n and fitted rows the release has), and ``audit
verify`` on the result; the CLI says what was chosen."""

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
    assert why["rows"] == doc["privacy"]["input_rows_n_public"] == n
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


def test_on_a_streaming_engine_the_rule_sees_the_rows_the_release_fits(tmp_path):
    """The local engine holds each row out by a coin: ``dprelease release`` chooses on the
    rows that coin keeps with the release's own row keys, so ``chosen_by`` states the n and
    the fitted rows the release has, and the CLI says what was chosen. Before, the rule took
    n − ⌊f·n⌋ (800 here) and the release fitted another count in 96.8 % of draws (1 −
    P(Binomial(1000, 0.8) = 800); with this seed, 818)."""
    spec = write_spec(
        tmp_path,
        _table(1_000),
        schema=SCHEMA,
        mechanism={"name": "auto"},
        checks={"enabled": True, "holdout_fraction": 0.2, "sample_rows": 200},
        engine={"name": "local", "chunk_rows": 1_000},
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["release", str(spec), "--out", str(out), "--release-id", "s", "--insecure-seed", "3"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "s" / "public" / "release.json").read_text())
    why, privacy = doc["mechanism"]["chosen_by"], doc["privacy"]
    assert why["n_fitted"] == privacy["rows_fitted"] != 800, (why, privacy["rows_fitted"])
    assert why["rows"] == privacy["input_rows_n_public"] == 1_000
    assert "mechanism auto chose factor_gauss: 2 of 4 columns continuous" in " ".join(result.output.split())
