"""End to end: a dataset is its schema, not its name. A release of the demo schema under a new
dataset name, into a ledger where 'adult' released it, is refused before anything is read
(exit 4, a ``refused`` row, a message naming both names and what to do), by ``dprelease
release`` and by ``dprelease.release``; with ``--new-dataset REASON`` (``new_dataset=``) it
publishes, and the reason is in the ledger and in ``dprelease ledger show``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import dprelease
from dprelease.cli.main import app
from dprelease.ledger import Ledger
from dprelease.spec import load_spec
from tests.helpers import PURE_PLAN, adult_rows, cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]


def _renamed(tmp_path, name="adult-copy"):
    """A spec of the demo schema named ``name``, and a ledger in which 'adult' (the same
    schema) has released; the spec's data file is not a table (never read when refused)."""
    folder = tmp_path / name
    folder.mkdir()
    spec = write_spec(folder, None, checks={"enabled": False}, dataset={"name": name, "path": "data.csv"})
    (folder / "data.csv").write_bytes(b"\xff not a table")
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        fingerprint = load_spec(spec).public_schema().fingerprint
        led.reserve(
            dataset="adult", release_id="a1", mechanism="m", plan=PURE_PLAN, lifetime=None, schema=fingerprint
        )
        led.finish("a1", "failed")
    return spec, folder, out


def test_the_cli_refuses_a_renamed_dataset_and_publishes_it_when_declared_new(tmp_path):
    spec, folder, out = _renamed(tmp_path)
    runner = CliRunner()
    refused = runner.invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "copy1"])
    text = cli_text(refused.output)
    assert refused.exit_code == 4, text
    assert "dataset 'adult-copy' has the same public schema" in text and "as dataset 'adult'" in text
    assert "set dataset.name: adult in the spec" in text and '--new-dataset "REASON"' in text
    assert "Nothing was read or spent" in text and not (out / "copy1").exists()
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        assert [r["status"] for r in led.entries(release_id="copy1")] == ["refused"]
    adult_rows(300).to_csv(folder / "data.csv", index=False)
    reason = "a public training copy of the demo data"
    args = ["release", str(spec), "--out", str(out), "--release-id", "copy2", "--new-dataset", reason]
    published = runner.invoke(app, args)
    assert published.exit_code == 0, cli_text(published.output)
    assert (out / "copy2" / "public" / "release.json").is_file()
    shown = cli_text(runner.invoke(app, ["ledger", "show", "--out", str(out)], terminal_width=300).output)
    assert "adult-copy: declared a new dataset at release 'copy2'" in shown and f"reason: {reason}" in shown


def test_the_api_refuses_a_renamed_dataset_unless_new_dataset_says_why(tmp_path):
    spec, folder, out = _renamed(tmp_path, "adult-api")
    with pytest.raises(
        dprelease.errors.BudgetRefused, match="dataset 'adult-api' has the same public schema"
    ) as refused:
        dprelease.release(spec, out=out, release_id="api1")
    said = str(refused.value)  # issue 41: the API's caller reads the argument, not the CLI's option
    assert 'new_dataset="REASON": the reason is recorded' in said and "--new-dataset" not in said, said
    with pytest.raises(dprelease.errors.DPReleaseError, match=r"^new_dataset= \(' '\) must say"):
        dprelease.release(spec, out=out, release_id="api2", new_dataset=" ")
    adult_rows(300).to_csv(folder / "data.csv", index=False)
    r = dprelease.release(spec, out=out, release_id="api3", new_dataset="another table")
    assert r.dataset == "adult-api"
    summary = dprelease.ledger.show(out=out)
    (api3,) = [x for x in summary.releases if x["release_id"] == "api3"]
    assert api3["status"] == "released" and api3["events"][0]["detail"]["new_dataset"] == "another table"
    assert [e["release_id"] for e in summary.accounts["adult-api"].schema] == ["api3"]
