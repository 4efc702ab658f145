"""The advice a release draws from its own noisy tables, as a steward and an analyst meet it
(issue 40: twoyear's stotal was 22.6 % zeros, the synthetic column had none, and nothing
said so): `dprelease release` prints it, naming the column and the declaration to add;
release.json and the public report hold it; the public audit re-derives it from tables/ and
catches an edited one."""

import html
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import dprelease
from dprelease.bundle.files import sha256
from dprelease.cli.main import app
from tests.helpers import cli_text, write_spec
from tests.mechanisms.test_advice import _table

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "total": {"type": "continuous", "bounds": [0.0, 100.0], "bins": 16},
    "spent": {"type": "continuous", "bounds": [0.0, 1000.0], "bins": 20},
    "age": {"type": "continuous", "bounds": [18, 80], "integer": True},
    "kind": {"type": "nominal", "categories": ["a", "b", "c"]},
}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    folder = tmp_path_factory.mktemp("advice")
    data = _table(20_000, np.random.default_rng(0), spike=True, tail=True)
    spec = write_spec(
        folder, data, schema=SCHEMA, checks={"enabled": False}, dataset={"name": "spiky", "path": "data.csv"}
    )
    got = CliRunner().invoke(
        app,
        [
            "release",
            str(spec),
            "--out",
            str(folder / "out"),
            "--release-id",
            "spiky-1",
            "--insecure-seed",
            "3",
        ],
    )
    return got, folder / "out" / "spiky-1"


def test_the_release_prints_the_advice_naming_column_and_declaration(released):
    got, _ = released
    text = cli_text(got.output)
    assert got.exit_code == 0, text
    assert "advice: column 'total': " in text and "atoms: [<that value>] keeps it exact" in text
    assert "advice: column 'spent': " in text and " above 300, the highest 14 of its 20 cells" in text
    assert "engine: memory (every row in memory" in text  # issue 42: which engine ran


def test_the_advice_is_published_and_the_public_audit_re_derives_it(released, tmp_path):
    _, bundle = released
    public = bundle / "public"
    doc = json.loads((public / "release.json").read_text())
    assert [(a["column"], a["kind"]) for a in doc["advice"]] == [("total", "spike"), ("spent", "empty_end")]
    assert html.escape("column 'total': ") in (public / "report.html").read_text()
    checks = dprelease.audit.verify(public, public=True).checks
    assert [c.ok for c in checks if c.group == "advice"] == [True]
    # an edited advice (the spike left out), rehashed, is caught without the ledger
    doc["advice"] = doc["advice"][1:]
    (public / "release.json").write_text(json.dumps(doc))
    manifest = json.loads((public / "manifest.json").read_text())
    manifest["files"]["release.json"] = sha256(public / "release.json")
    (public / "manifest.json").write_text(json.dumps(manifest))
    failed = [c for c in dprelease.audit.verify(public, public=True).failed if c.group == "advice"]
    assert len(failed) == 1 and "tables/ give 2" in failed[0].detail
