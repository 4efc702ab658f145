"""An analyst's road through one demo release, with only its public/ folder: the noisy
tables (every measured table, its standard errors from the ledger's noise scales), the
30-40/>50K question with its interval and method (CLI and API), and the public-only audit
of a copy under another name (and of a tampered one)."""

import json
import math
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dprelease
from dprelease.bundle.files import sha256
from dprelease.cli.main import app
from dprelease.flows.release import release
from tests.helpers import DEMO_DIR, cli_text

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, prefect_harness):
    out = tmp_path_factory.mktemp("tables")
    release(str(DEMO_DIR / "adult.yaml"), str(out), release_id="tables-adult", insecure_seed=11)
    return out / "tables-adult"


@pytest.fixture
def public_copy(bundle, tmp_path):
    """What an analyst downloads: the public folder alone, under a name of their own."""
    copy = tmp_path / "downloaded release"
    shutil.copytree(bundle / "public", copy)
    return copy


def test_every_measured_table_is_published_with_the_ledgers_noise(bundle):
    public = bundle / "public"
    doc = json.loads((public / "release.json").read_text())
    index = json.loads((public / "tables" / "index.json").read_text())
    measured = {r["statistic"]: r for r in doc["privacy"]["ledger"]["measurements"]}
    tables = {t["name"]: t for t in index["tables"]}
    # every count table the ledger records (histograms, pairs) is published; the latent moment
    # and the gates' metrics are not count tables
    assert set(tables) == {s for s in measured if s.startswith(("histogram[", "pair["))}
    assert doc["tables"] == {"index": "tables/index.json", "count": len(tables), "level": 0.9}
    assert index["rows_fitted"] == doc["privacy"]["rows_fitted"]
    for name, entry in tables.items():
        row = measured[name]
        frame = pd.read_csv(public / entry["file"], keep_default_na=False)
        assert len(frame) == row["dimension"]
        assert entry["noise"]["scale"] == row["noise_scale"] and row["mechanism"] == "gaussian"
        assert np.allclose(frame["se"], row["noise_scale"])  # σ per cell, from the ledger
        z = 1.6448536269514722  # the 95% quantile: a 90% two-sided interval
        assert np.allclose(frame["upper"] - frame["noisy_count"], z * row["noise_scale"])
        assert (frame["combined_se"] <= frame["se"] + 1e-9).all()  # combining never adds noise
    age = pd.read_csv(public / tables["histogram[age]"]["file"], keep_default_na=False)
    assert list(age["age"][:3]) == [17, 18, 19]  # labelled in the schema's terms
    assert tables["histogram[age]"]["combined_from"] == ["histogram[age]", "pair[age,income]"]


def test_the_analysts_question_with_its_interval_from_the_cli_and_the_api(public_copy):
    got = CliRunner().invoke(
        app, ["query", str(public_copy), "--where", "age=30..39", "--where", "income=>50K", "--json"]
    )
    assert got.exit_code == 0, cli_text(got.output)
    result = json.loads(got.stdout)
    assert result["method"] == "analytic" and result["tables"] == ["pair[age,income]"]
    assert 0 <= result["count_lower"] <= result["count"] <= result["count_upper"] <= result["n"]
    assert math.isclose(result["share"], result["count"] / result["n"])
    assert "fitted on" in result["target"]
    api = dprelease.query(public_copy, {"age": (30, 39), "income": ">50K"})
    assert (api.count_lower, api.count_upper, api.method) == (
        result["count_lower"],
        result["count_upper"],
        "analytic",
    )
    text = cli_text(CliRunner().invoke(app, ["query", str(public_copy), "--where", "age=30..39"]).output)
    assert "method: analytic" in text and "90% interval" in text


def test_a_query_the_tables_cannot_take_is_refused_by_name(public_copy):
    for where, said in (
        (["agee=3"], "no column 'agee'"),
        (["sex=female"], "declares no category ['female']"),
        (["sex=1..2"], "categorical"),
        (["age=old"], "'old' is not a number"),
        (["age"], "COLUMN=VALUE"),
    ):
        got = CliRunner().invoke(app, ["query", str(public_copy), *[f"--where={w}" for w in where]])
        assert got.exit_code == 2 and said in cli_text(got.output), (where, cli_text(got.output))


def test_public_only_audit_of_a_copy_under_another_name(public_copy):
    got = CliRunner().invoke(app, ["audit", "verify", str(public_copy), "--public"])
    text = cli_text(got.output)
    assert got.exit_code == 1 and "randomness" in text  # the demo's --insecure-seed: flagged, nothing else
    result = dprelease.audit.verify(public_copy, public=True)
    assert [c.name for c in result.failed] == ["randomness"]
    skipped = {(c.group, c.name) for c in result.checks if not c.checked}
    assert skipped == {("ledger", "cross-check"), ("identity", "folder named after its release_id")}
    assert sum(c.group == "tables" and c.ok for c in result.checks) == 57
    assert [c.ok for c in result.checks if c.group == "replicates"] == [True]
    shown = CliRunner().invoke(app, ["audit", "show", str(public_copy)])
    assert shown.exit_code == 0 and "tables-adult" in cli_text(shown.output)


def test_a_table_altered_and_rehashed_fails_the_public_audit(public_copy):
    index = json.loads((public_copy / "tables" / "index.json").read_text())
    name = index["tables"][0]["file"]
    frame = pd.read_csv(public_copy / name, keep_default_na=False)
    frame["se"] = frame["se"] / 2  # a narrower interval than the noise allows
    frame.to_csv(public_copy / name, index=False)
    manifest = json.loads((public_copy / "manifest.json").read_text())
    manifest["files"][name] = sha256(public_copy / name)
    (public_copy / "manifest.json").write_text(json.dumps(manifest))
    failed = [c for c in dprelease.audit.verify(public_copy, public=True).failed if c.group == "tables"]
    assert [c.name for c in failed] == [name] and "se column" in failed[0].detail


def test_the_release_object_holds_the_tables_and_answers_queries(bundle):
    from dprelease.api import Release

    r = Release._of(bundle, f"sqlite:///{bundle.parent / 'ledger.db'}")
    assert "pair[age,income]" in r.tables and set(r.tables["histogram[sex]"]["sex"]) == {"Female", "Male"}
    assert r.report_path == r.path / "public" / "report.html" and r.report_path.is_file()
    got = r.query({"sex": "Female"})
    assert got.method == "analytic" and got.count_lower <= got.count <= got.count_upper


def test_the_public_report_is_rebuilt_from_the_public_files_alone(bundle, public_copy):
    from dprelease.bundle.public_report import render_public_report

    published = (bundle / "public" / "report.html").read_text(encoding="utf-8")
    assert render_public_report(public_copy) == published  # nothing else went into it
    assert "what it protects" in published and "Inferred by the model" in published
    assert "education × education_num" in published  # a link the model never measured, named
    readme = (bundle / "public" / "README.txt").read_text()
    assert "report.html" in readme and "tables/" in readme


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium in CI: .ci/run installs Debian's chromium")
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    return found


def test_the_public_report_renders_in_a_real_browser(bundle, tmp_path):
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    shot = tmp_path / "report.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 1600})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((bundle / "public" / "report.html").as_uri())
        headings = page.locator("h3").count()
        bars = page.locator(".bar").count()
        page.screenshot(path=str(shot), full_page=False)
        browser.close()
    assert errors == []
    index = json.loads((bundle / "public" / "tables" / "index.json").read_text())
    assert headings == len(index["tables"])  # a picture for every measured table
    one_way = [t for t in index["tables"] if len(t["columns"]) == 1]
    assert bars == sum(len(pd.read_csv(bundle / "public" / t["file"])) for t in one_way)
    assert shot.stat().st_size > 20_000  # a page was drawn, not a blank one


def test_model_checks_off_the_recorded_noise_fail_the_public_audit(public_copy):
    """The replicates' model checks calibrate every model interval: one claiming less noise
    than the ledger recorded for its table (a narrower interval) is caught."""
    path = public_copy / "replicates" / "index.json"
    index = json.loads(path.read_text())
    index["checks"][0]["noise_var"] /= 4
    path.write_text(json.dumps(index))
    manifest = json.loads((public_copy / "manifest.json").read_text())
    manifest["files"]["replicates/index.json"] = sha256(path)
    (public_copy / "manifest.json").write_text(json.dumps(manifest))
    failed = dprelease.audit.verify(public_copy, public=True).failed
    assert [c.group for c in failed] == ["status", "replicates"]  # status: the demo's --insecure-seed
    assert "noise variance" in failed[1].detail


def test_a_release_too_large_for_replicates_publishes_none_and_its_queries_get_bounds(tmp_path, monkeypatch):
    """Past ``MAX_CELLS`` (a public decision on n and the schema) no replicates are built, so
    their memory never fails a release after its spend; a query no table holds gets bounds."""
    import dprelease.flows.pipeline as pipeline

    monkeypatch.setattr(pipeline, "MAX_CELLS", 1)
    release(str(DEMO_DIR / "adult.yaml"), str(tmp_path), release_id="big", insecure_seed=5)
    public = tmp_path / "big" / "public"
    assert not (public / "replicates").exists()
    assert "replicates" not in json.loads((public / "release.json").read_text())
    got = dprelease.query(public, {"age": (30, 39), "race": "White", "sex": "Female"})
    assert got.method == "bounds" and got.count_lower <= got.count <= got.count_upper
