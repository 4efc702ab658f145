"""Issue 19, ``dprelease init --private-epsilon``: bounds and categories discovered under
DP, charged to the dataset's ledger as a release of its own with a bundle that ``audit
verify`` checks; refusals read and spend nothing; a bad column fails without spending."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from flows.audit import verify_bundle
from flows.cli import app
from ledger import Ledger, default_url
from spec.release import ReleaseSpec
from tests.helpers import cli_text

KINDS = ["--kind", "age=integer", "--kind", "income=continuous", "--kind", "sex=nominal"]


def _people(tmp_path, n: int = 4_000):
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            # 30 % zeros, and a tenth of the incomes missing (empty cells)
            "income": np.where(
                rng.random(n) < 0.1, np.nan, np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, 1e5, n))
            ),
            "sex": rng.choice(["f", "m"], n),
            "note": rng.choice(["x", "y"], n),
        }
    )
    table.loc[0, "sex"] = "only-one"
    table.loc[rng.random(n) < 0.1, "income"] = np.nan
    path = tmp_path / "people.csv"
    table.to_csv(path, index=False)
    return path


def _init(path, *extra):
    return CliRunner().invoke(app, ["init", str(path), "--private-epsilon", "1", *extra])


def test_discovered_values_are_charged_audited_and_make_a_valid_spec(tmp_path):
    out = tmp_path / "releases"
    result = _init(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--lifetime-epsilon", "5")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "people.yaml").read_text()
    raw = yaml.safe_load(text)
    age, income, sex = raw["schema"]["age"], raw["schema"]["income"], raw["schema"]["sex"]
    assert 18 <= age["bounds"][0] < age["bounds"][1] <= 91 and age["out_of_bounds"] == "clip"
    assert income["bounds"][0] == 0.0  # 30 % zeros: the atom is its own lower quantile
    assert (
        sex["categories"] == ["f", "m", "(other)"] and sex["other"] == "(other)"
    )  # one-record category dropped
    assert raw["schema"]["note"] == {"type": "FILL"}  # kind unknown: never read
    assert text.count("discovered under DP in people-schema-") == 3 + 3  # each line and its confirm item
    assert raw["privacy"]["lifetime_epsilon"] == 5.0 and raw["privacy"]["lifetime_delta"] == 1e-6
    with Ledger(default_url(out)) as led:
        (done,) = led.releases("people")
        assert (done["status"], done["epsilon"], done["delta"]) == ("released", 1.0, 1e-7)
        bundle = out / done["release_id"]
    checks = verify_bundle(bundle, default_url(out))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert set(doc["discovered"]) == {"age", "income", "sex"} and "only-one" not in json.dumps(doc)
    shown = CliRunner().invoke(app, ["audit", "show", str(bundle)])
    assert shown.exit_code == 0 and "partition selection" in cli_text(shown.output), shown.output
    as_json = json.loads(CliRunner().invoke(app, ["audit", "show", str(bundle), "--json"]).output)
    assert as_json["discovered"]["sex"]["categories"] == ["f", "m"] and as_json["totals"]["delta"] == 1e-7
    raw["schema"]["note"] = {"type": "nominal", "categories": ["x", "y"]}
    del raw["draft"]
    ReleaseSpec.model_validate(raw)  # the discovered values make a spec the release accepts


def test_a_tampered_discovery_bundle_fails_its_audit(tmp_path):
    out = tmp_path / "releases"
    assert _init(_people(tmp_path), *KINDS, "--bundle-out", str(out)).exit_code == 0
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    doc_path = bundle / "public" / "release.json"
    doc = json.loads(doc_path.read_text())
    doc["discovered"]["sex"]["threshold"] = 2.0  # a threshold the noise does not justify
    doc_path.write_text(json.dumps(doc))
    failed = {c.name for c in verify_bundle(bundle, default_url(out)) if not c.ok}
    assert {"schema/categories[sex]", "public/release.json"} <= failed


def test_without_a_known_kind_nothing_is_read_or_charged(tmp_path):
    out = tmp_path / "releases"
    result = _init(_people(tmp_path), "--bundle-out", str(out))
    assert result.exit_code == 2 and "--kind NAME=KIND" in cli_text(result.output)
    assert not out.exists() and not (tmp_path / "people.yaml").exists()


def test_a_lifetime_budget_it_would_exceed_refuses_before_reading(tmp_path):
    out = tmp_path / "releases"
    result = _init(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--lifetime-epsilon", "0.5")
    assert result.exit_code == 4 and "lifetime budget" in cli_text(result.output), result.output
    assert not (tmp_path / "people.yaml").exists()
    with Ledger(default_url(out)) as led:
        assert [r["status"] for r in led.releases("people")] == ["refused"]


def test_text_in_a_numeric_column_fails_naming_it_and_spends_nothing(tmp_path):
    path = _people(tmp_path)
    table = pd.read_csv(path)
    table["age"] = table["age"].astype(str)
    table.loc[7, "age"] = "SECRET-VALUE"
    table.to_csv(path, index=False)
    out = tmp_path / "releases"
    result = _init(path, *KINDS, "--bundle-out", str(out))
    text = cli_text(result.output)
    assert result.exit_code == 2 and "column 'age'" in text and "SECRET" not in text, text
    with Ledger(default_url(out)) as led:
        (row,) = led.releases("people")
        assert row["status"] == "failed" and row["epsilon"] == 0.0
        failed = [r for r in led.entries(dataset="people") if r["status"] == "failed"]
        assert [r["detail"] for r in failed] == [{"stage": "read", "error": "DataError"}]  # no message


def test_a_ledger_on_the_bundle_folder_is_refused_before_anything_is_spent(tmp_path):
    """Issue 30: ``--bundle-out X --ledger X`` (X missing) made X the ledger's file, then
    failed writing the bundle into it after the noise was drawn; now refused first."""
    same = tmp_path / "X"
    result = _init(_people(tmp_path), *KINDS, "--bundle-out", str(same), "--ledger", str(same))
    text = cli_text(result.output)
    assert result.exit_code == 2, result.output
    assert f"--ledger ({same}) must be a file apart from --bundle-out" in text and "ledger.db" in text, text
    assert not same.exists() and not (tmp_path / "people.yaml").exists()  # no ledger, no bundle, no draft


def test_a_bundle_folder_that_cannot_be_made_is_refused_before_the_reserve(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    ledger = tmp_path / "ledger.db"
    Ledger(default_url(tmp_path)).close()  # the dataset's ledger, as a steward keeps it
    result = _init(_people(tmp_path), *KINDS, "--bundle-out", str(blocker / "out"), "--ledger", str(ledger))
    assert result.exit_code == 2 and "is not writable" in cli_text(result.output), result.output
    with Ledger(default_url(tmp_path)) as led:
        assert led.releases("people") == [] and led.entries(dataset="people") == []  # nothing reserved


def test_a_ledger_below_a_file_is_refused_before_the_reserve(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _init(
        _people(tmp_path), *KINDS, "--bundle-out", str(tmp_path / "out"), "--ledger", str(blocker / "l.db")
    )
    text = cli_text(result.output)
    assert result.exit_code == 2 and f"'{blocker}' is a file" in text, result.output


def test_audit_verify_says_which_ledger_it_checked_and_why(tmp_path):
    """Issue 30: without --ledger the audit uses the SQLite ledger the bundle names, and says
    so; a copy whose named ledger is not here says that, and what to pass."""
    out = tmp_path / "releases"
    assert _init(_people(tmp_path), *KINDS, "--bundle-out", str(out)).exit_code == 0
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    named = default_url(out)
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle)])
    text = cli_text(result.output)
    assert result.exit_code == 0, result.output
    assert (
        f"checked against the ledger {named} (from the bundle's release.json; pass --ledger to choose)"
        in text
    )
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle), "--ledger", str(out)])
    assert f"checked against the ledger {named} (--ledger)" in cli_text(result.output), result.output
    (out / "ledger.db").rename(tmp_path / "elsewhere.db")  # a copied bundle: its ledger is not here
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle)])
    text = cli_text(result.output)
    assert result.exit_code == 1
    assert (
        f"no ledger was checked (the bundle's release.json names {named}, which is not a SQLite file here"
        in text
    )


@pytest.mark.parametrize("name", ["a" * 57, "My Data"])
def test_a_dataset_name_no_release_id_can_hold_is_refused_before_the_reserve(tmp_path, name):
    """The discovery is named ``<name>-schema-<time>``, a folder: a name a spec would refuse
    (too long for the id, or not lowercase letters, digits and '-') is refused first."""
    Ledger(default_url(tmp_path)).close()
    result = _init(_people(tmp_path), *KINDS, "--name", name, "--bundle-out", str(tmp_path))
    text = cli_text(result.output)
    assert result.exit_code == 2 and f"the dataset name ({name!r}" in text and "at most 56" in text, text
    with Ledger(default_url(tmp_path)) as led:
        assert led.entries(dataset=name) == []
    assert not list(tmp_path.glob("*-schema-*"))
