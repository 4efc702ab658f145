"""Events and failure hooks of the release flow, without a deployment: what each outcome
emits, what the hooks record, and how a deployment's run is named after its slot."""

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

import dprelease.flows.delivery as delivery
import dprelease.flows.events as events
import dprelease.flows.hooks as hooks
import dprelease.flows.release as release_module
from dprelease.flows.release import release
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import plan_budget
from tests.helpers import adult_rows, real_run_only, write_spec


@pytest.fixture
def emitted(monkeypatch):
    seen = []
    monkeypatch.setattr(delivery, "emit_event", lambda **kw: seen.append(kw))
    return seen


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_each_outcome_emits_its_event_with_the_budget(tmp_path, emitted):
    spec = write_spec(
        tmp_path,
        adult_rows(300),
        checks={"enabled": False},
        privacy={"epsilon": 1.0, "lifetime_epsilon": 1.2},
    )
    out = tmp_path / "out"
    ok = Path(release(str(spec), str(out))).name  # named <dataset>-<time> by the flow
    with pytest.raises(Exception, match="lifetime budget"):
        release(str(spec), str(out), release_id="no")
    kinds = [(e["event"], e["resource"]["prefect.resource.id"]) for e in emitted]
    assert kinds == [
        ("dprelease.release.completed", f"dprelease.release.{ok}"),
        ("dprelease.release.refused", "dprelease.release.no"),
    ]
    runs = [
        r["prefect.resource.name"]
        for e in emitted
        for r in e["related"]
        if r["prefect.resource.role"] == "flow-run"
    ]
    assert runs == [ok, "no"]  # each flow run is named by its release id
    done, refused = (e["payload"] for e in emitted)
    assert done["lifetime"]["epsilon"] == 1.2 and 0 < done["epsilon_spent"] <= 1.0
    assert done["bundle"].endswith(ok) and "message" not in done
    assert refused["epsilon_spent"] == 0.0 and "the next release can take" in refused["message"]
    text = json.dumps(emitted, default=str)
    assert "Female" not in text and "Private" not in text  # no data values


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_the_failure_hook_records_what_the_body_could_not(tmp_path, emitted):
    out = tmp_path / "out"
    with pytest.raises(Exception, match="does not exist"):
        release(str(tmp_path / "missing.yaml"), str(out))
    (record,) = list((out / "failures").iterdir())
    failure = json.loads((record / "failure.json").read_text())
    assert failure["stage"] == "load_spec (failed)" and failure["error"] == "SpecError"
    assert [e["event"] for e in emitted] == ["dprelease.release.failed"]
    payload = emitted[0]["payload"]
    assert payload["error"] == "SpecError" and payload["stage"] == "load_spec" and "message" not in payload


def test_the_crash_hook_closes_the_reservation(tmp_path, emitted):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    plan = plan_budget("pure", 0.3, 0.0, {"a": 1.0, "b": 2.0, "c": 1.0})
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="r", mechanism="m", plan=plan, lifetime=None)
        led.spend("r", ["a", "b"], plan)
    record = events.RunRecord(tmp_path / "out", "r", "d")
    record.ledger_url, record.reserved, record.stage = url, True, "estimate_private_moments"
    run_id = "00000000-0000-0000-0000-000000000001"
    events.track(run_id, record)
    state = SimpleNamespace(message="Execution was aborted", result=lambda raise_on_failure: None)
    hooks.on_crashed(None, SimpleNamespace(id=run_id, parameters={}), state)
    with Ledger(url) as led:
        (r,) = led.releases()
    spent = plan.stage("a").epsilon + plan.stage("b").epsilon  # only the spent stages
    assert r["status"] == "failed" and r["epsilon"] == pytest.approx(spent)
    (folder,) = list((tmp_path / "out" / "failures").iterdir())
    assert json.loads((folder / "failure.json").read_text())["stage"] == "estimate_private_moments (crashed)"
    assert emitted[0]["event"] == "dprelease.release.failed"
    payload = emitted[0]["payload"]
    assert payload["failure_record"] == str(folder.resolve()) and payload["failure_host"]  # the real path
    assert payload["crashed"] is True and payload["ledger_status"] == "failed"  # closed by the hook
    assert payload["stages_spent"] == ["a", "b"] and payload["stages_planned"] == ["a", "b", "c"]
    assert (
        payload["epsilon_spent"] != 0.225 and payload["spent"] == "ε = 0.225, δ = 0"
    )  # exact, and for people


def test_a_deployment_run_is_named_after_its_slot(monkeypatch):
    slot = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    now = datetime(2026, 12, 1, 2, 7, 31, tzinfo=UTC)
    monkeypatch.setattr(release_module, "deployment", SimpleNamespace(id=None))
    assert release_module._slot_time(now) == now  # a direct call
    monkeypatch.setattr(release_module, "deployment", SimpleNamespace(id="d"))
    monkeypatch.setattr(release_module, "flow_run", SimpleNamespace(scheduled_start_time=slot))
    assert release_module._slot_time(now) == slot  # a late or retried run keeps its slot's id
    spec = SimpleNamespace(release_id=None, dataset=SimpleNamespace(name="adult"))
    from dprelease.spec import ReleaseSpec

    assert ReleaseSpec.resolved_release_id(spec, release_module._slot_time(now)) == "adult-20261201t020000z"


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_a_hostile_release_id_never_names_a_folder(tmp_path, emitted):
    out = tmp_path / "deep" / "out"
    with pytest.raises(Exception, match="must match"):
        release(str(tmp_path / "spec.yaml"), str(out), release_id="../../escaped")
    assert not list(tmp_path.rglob("escaped*"))
    (record,) = list((out / "failures").iterdir())
    assert record.name.startswith("flow-run-")  # named by its flow run: it has no release id (issue 38)
    assert json.loads((record / "failure.json").read_text())["release_id"] is None
    (event,) = emitted
    assert event["payload"]["release_id"] is None and "unknown" not in json.dumps(event)


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("where", ["task", "flow"])
def test_an_unexpected_message_never_reaches_a_log(where, tmp_path, monkeypatch, caplog, emitted):
    """A library error quoting a value (here 'age=4242') is logged by Prefect only by type;
    its text stays in the failure record's internal/traceback.txt."""
    import dprelease.engines.road as road
    import dprelease.mechanisms.factor_gauss as fg
    from dprelease.tasks.scrub import UnexpectedError

    def leak(*args, **kwargs):
        raise ValueError("cannot handle age=4242")

    module, name = (fg, "measure_moments") if where == "task" else (road, "table_to_rows")
    monkeypatch.setattr(module, name, real_run_only(getattr(module, name), leak))  # data-dependent
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    caplog.set_level("DEBUG")
    with pytest.raises(UnexpectedError) as raised:
        release(str(spec), str(out), release_id="leak")
    assert "4242" not in str(raised.value) and "ValueError" in str(raised.value)
    assert "UnexpectedError" in caplog.text  # Prefect's own failure logs are captured here
    assert "4242" not in caplog.text and "4242" not in json.dumps(emitted, default=str)
    (record,) = list((out / "failures").iterdir())
    assert "4242" in (record / "internal" / "traceback.txt").read_text()
    failure = json.loads((record / "failure.json").read_text())
    assert failure["error"] == "ValueError" and "4242" not in json.dumps(failure)


def test_the_summary_states_the_budget_account_and_the_chain_head(tmp_path):
    from dprelease.records.artifacts import bundle_location, release_artifacts

    document = {
        "mechanism": {"name": "factor_gauss"},
        "privacy": {
            "accountant": "pure",
            "synthetic_rows": 10,
            "ledger": {"measurements": [], "stages": [], "totals": {"epsilon": 1.0, "delta": 0.0}},
        },
    }
    plan = plan_budget("pure", 1.0, 0.0, {"a": 1.0})
    where = bundle_location(tmp_path / "r", None, published=True)
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        led.reserve(dataset="d", release_id="r", mechanism="m", plan=plan, lifetime=(3.0, 1e-5))
        summary = release_artifacts("r", document, where, [], published=True, ledger=led, dataset="d")[-1]
        room, (seq, digest) = led.headroom("d"), led.head()
    assert (
        "- budget policy of dataset `d`: lifetime budget (ε = 3, δ = 1e-05); spent ε = 1;" in summary["data"]
    )
    assert f"the next release can take ε ≤ {room.epsilon:.6g}\n" in summary["data"]
    assert f"- ledger chain head: row {seq}, sha256 `{digest}`" in summary["data"]
