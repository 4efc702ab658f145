"""End to end: the release flow under a period budget whose periods the spec declares disjoint
(three releases across two UTC calendar months, the ledger's clock set by the test, each month's
account checked after each, the per-person all-time figure the larger month's; a fourth refused
before the data is read, as without the declaration; release.json's and README's policy and
``audit verify`` re-deriving the period account), and a deployment's run refused without a
budget policy (the deployment id set through Prefect's own runtime override,
``PREFECT__RUNTIME__DEPLOYMENT__ID``).

The releases run the flow directly under the session's Prefect server, not through a deployment
and a worker: a worker's runs happen in another process, whose clock a test cannot set."""

import json
import re
from datetime import datetime

import pytest
from typer.testing import CliRunner

import dprelease.ledger.database as database
from dprelease.cli.main import app
from dprelease.engines.inputs import InputRefused
from dprelease.flows.release import release
from dprelease.ledger import BudgetRefused, Ledger
from dprelease.records.audit import verify_bundle
from tests.helpers import adult_rows, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]
MONTHLY = {"length": "P1M", "epsilon": 1.0, "delta": 1e-6, "disjoint": True}


@pytest.fixture
def clock(monkeypatch):
    class Clock:
        now = ""

    monkeypatch.setattr(database, "now", lambda: datetime.fromisoformat(Clock.now))
    return Clock


def _account(out, rid):
    return json.loads((out / rid / "public" / "release.json").read_text())["privacy"]["ledger_record"]


def test_three_releases_across_two_months(tmp_path, clock):
    spec = write_spec(
        tmp_path,
        adult_rows(300),
        checks={"enabled": False},
        privacy={"epsilon": 0.6, "delta": 1e-6, "period": MONTHLY},
    )
    out, url = tmp_path / "out", f"sqlite:///{tmp_path / 'out' / 'ledger.db'}"
    seen = []
    for rid, when, month, count in [
        ("nov-a", "2026-11-10T03:00:00+00:00", "2026-11", 1),
        ("nov-b", "2026-11-30T23:59:00+00:00", "2026-11", 2),
        ("dec-a", "2026-12-01T00:00:00+00:00", "2026-12", 1),
    ]:
        clock.now = when
        release(str(spec), str(out), release_id=rid)
        record = _account(out, rid)
        with Ledger(url) as led:
            spend, n = led.period_spends("adult", led.period_budget("adult"))[month]
            everything = led.spend_so_far("adult", 1e-6)
        this = record["period"]["this_period"]
        assert (this["period"], this["releases_counted"], n) == (month, count, count)
        assert this["spent_epsilon"] == pytest.approx(spend.epsilon) and spend.epsilon <= 1.0
        assert record["period"]["all_time"]["spent_epsilon"] == pytest.approx(everything.epsilon)
        assert record["period"]["all_time"]["releases_counted"] == len(seen) + 1
        seen.append(spend.epsilon)
        assert record["period"]["all_time"]["per_person_epsilon"] == pytest.approx(max(seen))
        assert record["period"]["disjoint"] is True and record["policy"]["kind"] == "period"
        covers = " ".join(record["policy"]["covers"].split())
        assert "The steward declared the periods disjoint (privacy.period.disjoint)" in covers
        assert "if it is false" in covers and "composition of k period budgets" in covers
    assert seen[1] > seen[0] and seen[2] == pytest.approx(seen[0], rel=0.2)  # December starts afresh
    assert record["period"]["all_time"]["spent_epsilon"] > 1.0 >= seen[1]  # the sum; per person, November
    assert this["resets"] == "2027-01-01T00:00:00+00:00"
    readme = (out / "dec-a" / "public" / "README.txt").read_text()
    assert "Privacy unit: one record: one row of the input table" in readme
    assert "Budget policy: " + record["policy"]["covers"] in " ".join(readme.split())
    checks = verify_bundle(out / "nov-b", url)
    period = {c.name: c for c in checks if c.name in ("period budget", "release's period", "period account")}
    assert len(period) == 3 and all(c.ok for c in period.values()), period
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    shown = CliRunner().invoke(app, ["audit", "show", str(out / "dec-a")], terminal_width=200)
    said = " ".join(shown.output.split())
    assert (
        "period budget of 'adult': epsilon 1, delta 1e-06 per P1M (UTC calendar periods); in period 2026-12"
        in said
    )
    assert (
        "it resets at 2027-01-01T00:00Z. All time: epsilon" in said and "3 release(s) in 2 period(s)" in said
    )
    assert f"periods declared disjoint, per person all time: epsilon {seen[1]:.6g}" in said

    (tmp_path / "data.csv").write_text("not the data\x00")  # never read when refused
    clock.now = "2026-11-30T23:59:30+00:00"  # a third in November is refused before any read
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "nov-c"])
    words = " ".join(result.output.split())
    assert result.exit_code == 4, result.output
    assert "period budget of dataset 'adult'" in words and "in period 2026-11" in words
    assert "until the period resets at 2026-12-01T00:00Z" in words
    assert not (out / "nov-c").exists()

    doc_path = out / "nov-b" / "public" / "release.json"  # a bundle that denies the declaration
    doc = json.loads(doc_path.read_text())
    doc["privacy"]["ledger_record"]["period"]["disjoint"] = False
    doc_path.write_text(json.dumps(doc))
    (policy,) = [c for c in verify_bundle(out / "nov-b", url) if c.name == "period budget"]
    assert not policy.ok


def test_a_run_refused_at_validation_before_midnight_counts_in_the_month_of_its_retry(tmp_path, clock):
    """A run reserved at 23:50 on 30 November is refused at validation (an age outside the
    schema: nothing drawn); 'nov-b' then takes November; the run's retry at 00:10 on 1
    December, same release_id, is a December attempt (ledger/windows.py): its release.json
    names December and counts it alone there, November holds nov-b's spend (and the first
    attempt, at nothing), and audit verify re-derives the period from the ledger's rows.
    Before, the retry was checked against December but charged to November."""
    rows = adult_rows(300)
    spec = write_spec(
        tmp_path, rows, checks={"enabled": False}, privacy={"epsilon": 0.6, "delta": 1e-6, "period": MONTHLY}
    )
    out, url = tmp_path / "out", f"sqlite:///{tmp_path / 'out' / 'ledger.db'}"
    clock.now = "2026-11-30T23:50:00+00:00"
    rows.assign(age="200").to_csv(tmp_path / "data.csv", index=False)
    with pytest.raises(InputRefused):
        release(str(spec), str(out), release_id="slot")
    rows.to_csv(tmp_path / "data.csv", index=False)
    clock.now = "2026-11-30T23:59:00+00:00"
    release(str(spec), str(out), release_id="nov-b")
    clock.now = "2026-12-01T00:10:00+00:00"
    release(str(spec), str(out), release_id="slot")
    this = _account(out, "slot")["period"]["this_period"]
    with Ledger(url) as led:
        spends = led.period_spends("adult", led.period_budget("adult"))
        assert [e["status"] for e in led.releases("adult")[0]["events"]] == [
            "reserved",
            "failed",
            "reserved",
            "released",
        ]
        assert (this["period"], this["releases_counted"]) == ("2026-12", 1)
        assert this["spent_epsilon"] == spends["2026-12"][0].epsilon == led.charge("slot").epsilon
        assert spends["2026-11"][0].epsilon == led.charge("nov-b").epsilon <= 1.0
    checks = verify_bundle(out / "slot", url)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert [c.detail for c in checks if c.name == "release's period"] == [
        "reserved in 2026-12; the bundle says 2026-12"
    ]


def test_a_deployment_run_without_a_budget_policy_is_refused_before_any_read(tmp_path, monkeypatch):
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    (tmp_path / "data.csv").write_text("not the data\x00")  # never read
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", "0f6b3c1e-5a4e-4a57-9a49-3c2f8e1d7b10")
    out = tmp_path / "out"
    state = release(str(spec), str(out), release_id="scheduled", return_state=True)
    assert (state.type.value, state.name) == ("COMPLETED", "Refused")  # an expected end, no traceback
    assert re.search(r"privacy.period \(e.g. \{length: P1M.*or privacy.lifetime_epsilon", state.message)
    assert f"the spec {spec} of this deployment declares no budget policy" in state.message
    assert not (out / "ledger.db").exists() and not (out / "scheduled").exists()
    (record,) = (out / "failures").iterdir()  # the failure hook's record, called by the body
    assert json.loads((record / "failure.json").read_text())["error"] == "BudgetRefused"
    monkeypatch.delenv("PREFECT__RUNTIME__DEPLOYMENT__ID")  # the same spec from the CLI or the API runs
    with pytest.raises(Exception, match="data") as e:
        release(str(spec), str(out), release_id="direct")
    assert not isinstance(e.value, BudgetRefused)  # it got as far as the (broken) data
