"""End to end: the release flow against the ledger (lifetime budgets, fail-closed spends,
reruns), and ``dprelease audit`` / ``dprelease ledger`` on real bundles."""

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.inputs import InputRefused
from dprelease.flows.release import release
from dprelease.ledger import BudgetRefused, Ledger
from dprelease.mechanisms.accounting import zcdp_rho
from dprelease.mechanisms.lifetime import Charge, compose_lifetime
from dprelease.records.audit import verify_bundle
from dprelease.tasks.scrub import UnexpectedError
from dprelease.tasks.synthesis import TASKS
from tests.helpers import adult_rows, in_rehearsal, real_run_only, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]
SMALL = {"enabled": False}


def _spec(tmp_path, **privacy):
    return write_spec(
        tmp_path, adult_rows(300), checks=SMALL, privacy={"epsilon": 1.0, "delta": 1e-6, **privacy}
    )


def test_lifetime_budget_refuses_before_the_data_is_read(tmp_path):
    spec = _spec(tmp_path, lifetime_epsilon=1.2)
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="first")
    (tmp_path / "data.csv").write_text("this is not the data\x00")  # never read: refused first
    runner = CliRunner()
    result = runner.invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "second"])
    assert result.exit_code == 4, result.output
    assert (
        "lifetime budget of dataset 'adult'" in result.output
        and "The largest epsilon the next release can take" in result.output
    )
    assert not (out / "second").exists() and not list(out.glob(".staging-*"))
    (record,) = [p for p in (out / "failures").iterdir() if p.name.startswith("second")]
    assert json.loads((record / "failure.json").read_text())["error"] == "BudgetRefused"
    shown = runner.invoke(app, ["ledger", "show", "--json", "--ledger", f"sqlite:///{out / 'ledger.db'}"])
    assert shown.exit_code == 0, shown.output
    by_id = {r["release_id"]: r for r in json.loads(shown.output)}
    # issue 18: `ledger show` finds the ledger of --out, or of a plain path (file or folder)
    for where in (["--out", str(out)], ["--ledger", str(out / "ledger.db")], ["--ledger", str(out)]):
        text = runner.invoke(app, ["ledger", "show", *where], terminal_width=200)
        assert text.exit_code == 0, text.output
        words = " ".join(text.output.split())
        assert "first" in words and "the next release can take epsilon up to" in words
    missing = runner.invoke(app, ["ledger", "show", "--out", str(tmp_path / "elsewhere")])
    assert missing.exit_code == 2 and "there is no ledger at" in missing.output
    assert by_id["first"]["status"] == "released" and 0 < by_id["first"]["epsilon"] <= 1.0
    assert {s["stage"] for s in by_id["first"]["stages"]} == {"marginals", "moments", "refine"}
    assert (by_id["second"]["status"], by_id["second"]["epsilon"], by_id["second"]["stages"]) == (
        "refused",
        0.0,
        [],
    )
    doc = json.loads((out / "first" / "public" / "release.json").read_text())
    life = doc["privacy"]["ledger_record"]["lifetime"]
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:  # issue 18: rho's add, not epsilons
        first = led.charge("first")
    at, most = life["next_epsilon_at_delta"], life["next_epsilon_max"]
    assert at == life["delta"] and most > 1.2 - life["spent_epsilon"]  # more than the difference

    def total(eps: float) -> float:
        return compose_lifetime([first, Charge("zcdp", zcdp_rho(eps, at), eps, at)], at).epsilon

    assert total(most) <= 1.2 < total(most * 1.001)


def test_a_crash_after_noise_keeps_the_spend_and_a_rerun_never_redraws(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    out = tmp_path / "out"

    def crash(*args, **kwargs):
        raise MemoryError("simulated crash while sampling")

    step = TASKS["project_and_sample"]  # the flow runs the road's steps through these tasks
    monkeypatch.setitem(TASKS, "project_and_sample", real_run_only(step, crash))
    with pytest.raises(UnexpectedError, match=r"\(MemoryError\)"):
        release(str(spec), str(out), release_id="crash")
    monkeypatch.undo()
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        (r,) = led.releases()
        assert r["status"] == "failed" and r["epsilon"] > 0  # every stage's noise was drawn
        assert [s["stage"] for s in r["stages"]] == ["marginals", "moments", "refine"]
        assert all(s["measurements"] for s in r["stages"])
    with pytest.raises(
        BudgetRefused, match=r"already drew noise for stage\(s\) \['marginals', 'moments', 'refine'\]"
    ):
        release(str(spec), str(out), release_id="crash")
    assert not (out / "crash").exists()


def test_bad_input_spends_nothing_and_the_same_id_can_run_again(tmp_path):
    data = adult_rows(300)
    data.loc[3, "age"] = "999"
    spec = write_spec(tmp_path, data, checks=SMALL)
    out = tmp_path / "out"
    with pytest.raises(InputRefused, match="refused at stage 'validate_input'") as refused:
        release(str(spec), str(out), release_id="again")
    assert "column 'age'" in refused.value.detail
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        (r,) = led.releases()
        assert (r["status"], r["epsilon"], r["stages"]) == ("failed", 0.0, [])
    adult_rows(300).to_csv(tmp_path / "data.csv", index=False)
    release(str(spec), str(out), release_id="again")
    assert (out / "again" / "public" / "synthetic.csv").is_file()


def test_postgres_ledger_and_audit(tmp_path, postgres_database):
    url = postgres_database
    bundle = release(str(_spec(tmp_path)), str(tmp_path / "out"), release_id="pg", ledger_url=url)
    checks = verify_bundle(tmp_path / "out" / "pg", url)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert not (tmp_path / "out" / "ledger.db").exists()
    internal = json.loads((tmp_path / "out" / "pg" / "internal" / "ledger.json").read_text())
    assert internal == {"url": url}  # where the ledger is: for the steward, never in public/
    assert bundle.endswith("pg")


def test_audit_verify_catches_tampering(tmp_path):
    out = tmp_path / "out"
    release(str(_spec(tmp_path)), str(out), release_id="t")
    bundle, runner = out / "t", CliRunner()
    ok = runner.invoke(app, ["audit", "verify", str(bundle)])
    assert ok.exit_code == 0, ok.output
    shown = runner.invoke(app, ["audit", "show", str(bundle)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "histogram[age]" in shown.output and "no lifetime budget" in shown.output

    # 1. a published file is edited
    csv = bundle / "public" / "synthetic.csv"
    original = csv.read_bytes()
    csv.write_bytes(original.replace(b"Female", b"Male", 1))
    assert [c.name for c in verify_bundle(bundle, None) if not c.ok] == ["public/synthetic.csv"]
    csv.write_bytes(original)

    # 2. a forger lowers a noise scale and re-hashes the manifest: the arithmetic, the published
    #    table of that measurement and the ledger's seal of the manifest all catch it
    doc_path = bundle / "public" / "release.json"
    doc = json.loads(doc_path.read_text())
    (age,) = [r for r in doc["privacy"]["ledger"]["measurements"] if r["statistic"] == "histogram[age]"]
    age["noise_scale"] /= 2
    doc_path.write_text(json.dumps(doc))
    manifest = bundle / "public" / "manifest.json"
    m = json.loads(manifest.read_text())
    from dprelease.bundle.files import sha256

    m["files"]["release.json"] = sha256(doc_path)
    manifest.write_text(json.dumps(m))
    failed = {c.name for c in verify_bundle(bundle, None) if not c.ok}
    (table,) = (bundle / "public" / "tables").glob("*_histogram_age.csv")
    assert failed == {
        "marginals/histogram[age]",
        f"tables/{table.name}",
        "measurements match",
        "closing row seals public/manifest.json",
    }

    # 3. the ledger row of a measurement is edited in the database
    with sqlite3.connect(out / "ledger.db") as db:
        db.execute("UPDATE ledger_entries SET noise_scale = noise_scale * 2 WHERE kind = 'measurement'")
    result = runner.invoke(app, ["audit", "verify", str(bundle)])
    assert result.exit_code == 1  # the message names the first 8 failures; the chain is among all of them
    assert ("ledger", "hash chain") in {(c.group, c.name) for c in verify_bundle(bundle, None) if not c.ok}


def test_a_bundle_that_cannot_be_moved_after_its_seal_ends_failed(tmp_path, monkeypatch):
    import errno
    import os

    import dprelease.bundle.write

    real_replace = os.replace

    def refuse_the_final_rename(src, dst):
        if ".staging-" in str(src) and not str(dst).endswith(".json") and not in_rehearsal():
            raise OSError(errno.EACCES, "Permission denied")
        return real_replace(src, dst)

    monkeypatch.setattr(dprelease.bundle.write.os, "replace", refuse_the_final_rename)
    out = tmp_path / "out"
    with pytest.raises(Exception, match="nothing was published"):
        release(str(_spec(tmp_path)), str(out), release_id="moved")
    monkeypatch.undo()
    assert not (out / "moved").exists() and not list(out.glob(".staging-*"))
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        (r,) = led.releases()
    assert [e["status"] for e in r["events"]] == ["reserved", "released", "failed"]
    assert r["status"] == "failed" and r["epsilon"] > 0  # its noise was drawn: the spend stays
