"""Issue 7 end to end: a real ``prefect server`` on loopback, the process work pool, the
deployment from ``deploy/prefect.yaml``, the automations from ``deploy/automations.py``,
and a worker that runs one scheduled release (``--run-once``); then a second run that the
lifetime budget refuses. Issue 32 on the same server: a deployment's run whose spec has no
budget policy is refused before any read, and three runs across two UTC months under a
period budget, the worker's ledger clock moved by a test-only ``sitecustomize``
(tests/deploy/clock). Every process the tests start is stopped at the end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from http.server import HTTPServer
from pathlib import Path

import pytest
import yaml

from dprelease.ledger import Ledger, show
from dprelease.spec.sections import NEEDS_POLICY
from tests.deploy.conftest import BIN, DEPLOYMENT, ROOT, Webhook, api, cli
from tests.helpers import adult_rows, write_spec

pytestmark = pytest.mark.deploy
CLOCK = Path(__file__).parent / "clock"  # its sitecustomize.py sets the ledger's clock from a file


@pytest.fixture(scope="module")
def alerts():
    Webhook.received.clear()
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", Webhook.received
    server.shutdown()


_WORKER_LOG: dict[str, str] = {}
"""What the worker printed while it ran each flow run, by run id."""


def _refused(run: dict) -> None:
    """An expected refusal ends the run Completed, named Refused, with the reason as its
    message, and its worker's log holds no traceback and no ERROR line (issue 42)."""
    assert (run["state"]["type"], run["state"]["name"]) == ("COMPLETED", "Refused"), run["state"]
    log = _WORKER_LOG[run["id"]]
    assert "Traceback" not in log and "| ERROR" not in log, log[-3000:]
    assert "refused; nothing was read or spent" in log, log[-3000:]


def _trigger_and_work(env, spec: Path, out: Path, *params: str, worker_env=None) -> dict:
    """Run the deployment now with this spec (and ``params``, ``name=value``), let one worker
    pass (its environment ``worker_env``, default ``env``) pick it up, return the flow run
    once it is final."""
    text = cli(
        env,
        str(BIN / "prefect"),
        "deployment",
        "run",
        DEPLOYMENT,
        "--param",
        f"spec_path={spec}",
        "--param",
        f"out_dir={out}",
        *(arg for p in params for arg in ("--param", p)),
    )
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", text).group(1)
    worker = [str(BIN / "prefect"), "worker", "start", "--pool", "dprelease-process", "--run-once"]
    done = subprocess.run(
        worker, env=worker_env or env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    _WORKER_LOG[run_id] = done.stdout + done.stderr
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = api(env, "GET", f"/flow_runs/{run_id}")
        if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        time.sleep(1)
    pytest.fail(f"flow run {run_id} did not finish: {run['state']}")


def _events(env, name: str, release: str, wait: float = 30) -> list[dict]:
    """Events named ``name`` about the release ``release``; waits up to ``wait`` s for them
    to be stored."""
    body = {
        "filter": {"event": {"name": [name]}, "any_resource": {"id": [f"dprelease.release.{release}"]}},
        "limit": 50,
    }
    deadline = time.monotonic() + wait
    while True:
        found = api(env, "POST", "/events/filter", json=body)["events"]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(1)


@pytest.fixture(scope="module")
def deployed(server, alerts):
    """The server with the work pool, ``deploy/prefect.yaml``'s deployment and the
    automations (notifying ``alerts``); returns the env and what the automations script printed."""
    cli(server, str(BIN / "prefect"), "work-pool", "create", "dprelease-process", "--type", "process")
    deploy = ("--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml")
    cli(server, str(BIN / "prefect"), *deploy)
    listed = cli(server, sys.executable, "deploy/automations.py", "--webhook-url", alerts[0])
    return server, listed


def test_scheduled_release_and_refusal_through_a_real_server(deployed, alerts, tmp_path):
    env, listed = deployed
    _, received = alerts
    deploy_file = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    (spec_cfg,) = deploy_file["deployments"]
    assert spec_cfg["concurrency_limit"] == 1 and spec_cfg["schedules"][0]["timezone"]
    assert listed.count("dprelease: ") == 7  # deploy/automations.py: NAMES
    dep = api(env, "GET", "/deployments/name/" + DEPLOYMENT)
    assert dep["schedules"][0]["schedule"]["cron"] == spec_cfg["schedules"][0]["cron"]
    assert dep["enforce_parameter_schema"] is True

    spec = write_spec(
        tmp_path,
        adult_rows(400),
        checks={"enabled": False},
        privacy={"epsilon": 1.0, "delta": 1e-6, "lifetime_epsilon": 1.2},
    )
    out = tmp_path / "out"

    first = _trigger_and_work(env, spec, out)
    assert first["state"]["type"] == "COMPLETED", first["state"]
    (bundle,) = [p for p in out.iterdir() if p.name.startswith("adult-")]
    assert (bundle / "public" / "synthetic.csv").is_file()
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        (rel,) = led.releases()
    assert rel["release_id"] == bundle.name and rel["status"] == "released"
    assert first["name"] == bundle.name  # the flow run is named by its release id (its slot's time)
    keys = {
        a["key"]
        for a in api(
            env, "POST", "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [first["id"]]}}}
        )
    }
    assert {f"{bundle.name}-budget", f"{bundle.name}-summary", f"{bundle.name}-bundle"} <= keys
    completed = _events(env, "dprelease.release.completed", bundle.name)
    assert [e["resource"]["prefect.resource.id"] for e in completed] == [f"dprelease.release.{bundle.name}"]
    payload = completed[0]["payload"]
    assert 0 < payload["epsilon_spent"] <= 1.0 and payload["lifetime"]["epsilon"] == 1.2
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        assert payload["lifetime"]["next_epsilon_max"] == pytest.approx(led.headroom("adult").epsilon)

    slot = api(env, "GET", "/v2/concurrency_limits/dprelease-dataset-adult")  # flows/concurrency.py
    assert (slot["limit"], slot["active_slots"]) == (1, 0)
    second = _trigger_and_work(env, spec, out)
    _refused(second)
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        rows = [(r["status"], r["release_id"]) for r in led.releases()]
    assert sorted(status for status, _ in rows) == ["refused", "released"]
    (refused_id,) = [rid for status, rid in rows if status == "refused"]
    refused = _events(env, "dprelease.release.refused", refused_id)
    assert len(refused) == 1 and "lifetime budget" in refused[0]["payload"]["message"]
    expected = {"dprelease: a release was published", "dprelease: a release was refused or gated"}
    deadline = time.monotonic() + 60  # the automations notify the webhook
    while time.monotonic() < deadline and not expected <= {r["subject"] for r in received}:
        time.sleep(1)
    by_subject = {r["subject"]: r["body"] for r in received}
    assert expected <= set(by_subject), sorted(by_subject)
    assert "dprelease: a release run failed or crashed" not in by_subject  # one alert per outcome
    assert "The ledger's reason: lifetime budget" in by_subject["dprelease: a release was refused or gated"]
    assert f"The release {bundle.name} of dataset adult" in by_subject["dprelease: a release was published"]
    assert "ε = " in by_subject["dprelease: a release was published"]


def test_a_deployment_run_without_a_budget_policy_is_refused_before_any_read(deployed, tmp_path):
    env, _ = deployed
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})  # the demo's privacy: no policy
    (tmp_path / "data.csv").write_text("not the data\x00")  # read, it would fail as unparsable data
    out = tmp_path / "out"
    run = _trigger_and_work(env, spec, out, "release_id=no-policy")
    _refused(run)
    (refused,) = _events(env, "dprelease.release.refused", "no-policy")
    assert NEEDS_POLICY in refused["payload"]["message"]
    assert not _events(env, "dprelease.release.failed", "no-policy", wait=0)  # sent with it if at all
    assert not (out / "ledger.db").exists() and not (out / "no-policy").exists()  # nothing opened or spent


def _period_account(out: Path, rid: str) -> dict:
    """release.json's period block: this period's and the all-time account."""
    record = json.loads((out / rid / "public" / "release.json").read_text())["privacy"]["ledger_record"]
    return record["period"]


def test_three_scheduled_runs_across_two_months_under_a_period_budget(deployed, tmp_path):
    """Epsilon 1 per UTC calendar month, a release of epsilon 1: the worker's ledger clock at
    2026-11-30T23:58Z publishes, at 23:59Z refuses before reading data (the month is spent),
    at 2026-12-01T00:00Z publishes again (a new month)."""
    env, _ = deployed
    clock = tmp_path / "clock"
    worker_env = {**env, "PYTHONPATH": str(CLOCK), "DPRELEASE_TEST_CLOCK_FILE": str(clock)}
    monthly = {"length": "P1M", "epsilon": 1.0, "delta": 1e-6}
    spec = write_spec(
        tmp_path,
        adult_rows(400),
        checks={"enabled": False},
        privacy={"epsilon": 1.0, "delta": 1e-6, "period": monthly},
    )
    out, data = tmp_path / "out", (tmp_path / "data.csv").read_bytes()

    def run(rid: str, when: str) -> dict:
        clock.write_text(when)
        return _trigger_and_work(env, spec, out, f"release_id={rid}", worker_env=worker_env)

    def months() -> dict[str, tuple[float, int]]:
        account = show(out=out).accounts["adult"]
        assert account.period is not None and str(account.period.length) == "P1M"
        return {p.period: (p.spent.epsilon, p.releases) for p in account.periods}

    assert run("nov-a", "2026-11-30T23:58:00+00:00")["state"]["type"] == "COMPLETED"
    november = months()  # the month of the worker's clock (its rows' times are checked below)
    assert list(november) == ["2026-11"] and november["2026-11"][1] == 1
    assert 0.99 < november["2026-11"][0] <= 1.0
    record = _period_account(out, "nov-a")
    assert record["this_period"]["period"] == "2026-11" and record["this_period"]["releases_counted"] == 1
    assert record["this_period"]["resets"] == "2026-12-01T00:00:00+00:00"

    (tmp_path / "data.csv").write_text("not the data\x00")  # refused before it is read
    _refused(run("nov-b", "2026-11-30T23:59:00+00:00"))
    (refused,) = _events(env, "dprelease.release.refused", "nov-b")
    said = refused["payload"]["message"]
    assert "period budget of dataset 'adult'" in said and "in period 2026-11" in said, said
    assert "until the period resets at 2026-12-01T00:00Z" in said, said
    assert months() == november  # nothing more charged
    assert not _events(env, "dprelease.release.failed", "nov-b", wait=0) and not (out / "nov-b").exists()
    # the next slot of the spent month: refused for the very same reason, so not paged again
    _refused(run("nov-c", "2026-11-30T23:59:30+00:00"))
    (again,) = _events(env, "dprelease.release.refused-again", "nov-c")
    assert again["payload"]["message"] == said
    assert not _events(env, "dprelease.release.refused", "nov-c", wait=0)

    (tmp_path / "data.csv").write_bytes(data)
    assert run("dec-a", "2026-12-01T00:00:00+00:00")["state"]["type"] == "COMPLETED"
    by_month = months()
    assert list(by_month) == ["2026-11", "2026-12"] and by_month["2026-12"][1] == 1
    assert by_month["2026-12"][0] == pytest.approx(by_month["2026-11"][0])  # December starts afresh
    record = _period_account(out, "dec-a")
    assert (record["this_period"]["period"], record["this_period"]["releases_counted"]) == ("2026-12", 1)
    assert record["this_period"]["resets"] == "2027-01-01T00:00:00+00:00"
    assert record["all_time"]["releases_counted"] == 2
    assert record["all_time"]["spent_epsilon"] == pytest.approx(show(out=out).accounts["adult"].spent.epsilon)
    started = {r["release_id"]: (r["status"], r["started"]) for r in show(out=out).releases}
    assert started == {
        "nov-a": ("released", "2026-11-30T23:58:00+00:00"),
        "nov-b": ("refused", "2026-11-30T23:59:00+00:00"),
        "nov-c": ("refused", "2026-11-30T23:59:30+00:00"),
        "dec-a": ("released", "2026-12-01T00:00:00+00:00"),
    }


def test_deploy_check_names_each_deployment_that_would_fail_at_its_slot(deployed, tmp_path):
    """``dprelease deploy check`` (issue 42) reads what the server registered: the demo
    deployment holds; one whose spec has no budget policy, one made from another checkout
    (0.2.0) and one deployed with DPRELEASE_HOME unset are each named, with what to do."""
    import httpx

    env, _ = deployed
    run = [str(BIN / "dprelease"), "deploy", "check"]
    ok = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "every check holds" in " ".join(ok.stderr.split()), ok.stdout + ok.stderr
    old = tmp_path / "dprelease-0.2.0"
    (old / "dprelease").mkdir(parents=True)
    (old / "dprelease" / "_version.py").write_text('__version__ = "0.2.0"\n')
    (old / "flows" / "demo").mkdir(parents=True)
    for name in ("adult-monthly.yaml", "adult.csv.gz"):
        (old / "flows" / "demo" / name).write_bytes((ROOT / "flows" / "demo" / name).read_bytes())
    flow_id = api(env, "GET", "/deployments/name/" + DEPLOYMENT)["flow_id"]
    made = []
    for name, directory, spec in (
        ("no-policy", str(ROOT), "flows/demo/adult.yaml"),
        ("old-checkout", str(old), "flows/demo/adult-monthly.yaml"),
        ("home-unset", "", "flows/demo/adult-monthly.yaml"),
    ):
        body = {
            "name": name,
            "flow_id": flow_id,
            "entrypoint": "flows/release.py:release",
            "parameters": {"spec_path": spec, "out_dir": str(tmp_path / "out")},
            "pull_steps": [{"prefect.deployments.steps.set_working_directory": {"directory": directory}}],
        }
        made.append(api(env, "POST", "/deployments/", json=body)["id"])
    try:
        out = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        for dep_id in made:
            httpx.delete(f"{env['PREFECT_API_URL']}/deployments/{dep_id}", timeout=30)
    said = " ".join((out.stdout + out.stderr).replace("│", " ").split())
    assert out.returncode == 1, said
    assert "3 check(s) failed" in said
    for name, check in (("no-policy", "spec"), ("old-checkout", "code"), ("home-unset", "code")):
        assert f"dp-release/{name}: {check}" in said
    assert "declares no budget policy" in said and "dprelease 0.2.0" in said and "DPRELEASE_HOME" in said
