"""Issue 7 end to end: a real ``prefect server`` on loopback, the process work pool, the
deployment from ``deploy/prefect.yaml``, the automations from ``deploy/automations.py``,
and a worker that runs one scheduled release (``--run-once``); then a second run that the
lifetime budget refuses. Every process the test starts is stopped at the end."""

from __future__ import annotations

import re
import sys
import threading
import time
from http.server import HTTPServer
from pathlib import Path

import pytest
import yaml

from dprelease.ledger import Ledger
from tests.deploy.conftest import BIN, DEPLOYMENT, ROOT, Webhook, api, cli
from tests.helpers import adult_rows, write_spec

pytestmark = pytest.mark.deploy


@pytest.fixture(scope="module")
def alerts():
    Webhook.received.clear()
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", Webhook.received
    server.shutdown()


def _trigger_and_work(env, spec: Path, out: Path) -> dict:
    """Run the deployment now with this spec, let one worker pass pick it up, return the
    flow run once it is final."""
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
    )
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", text).group(1)
    cli(
        env, str(BIN / "prefect"), "worker", "start", "--pool", "dprelease-process", "--run-once", timeout=600
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = api(env, "GET", f"/flow_runs/{run_id}")
        if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        time.sleep(1)
    pytest.fail(f"flow run {run_id} did not finish: {run['state']}")


def _events(env, name: str) -> list[dict]:
    """Events named ``name`` about a release; waits up to 30 s for them to be stored."""
    body = {
        "filter": {"event": {"name": [name]}, "any_resource": {"id_prefix": ["dprelease.release."]}},
        "limit": 50,
    }
    deadline = time.monotonic() + 30
    while True:
        found = api(env, "POST", "/events/filter", json=body)["events"]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(1)


def test_scheduled_release_and_refusal_through_a_real_server(server, alerts, tmp_path):
    env = server
    hook_url, received = alerts
    deploy_file = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    (spec_cfg,) = deploy_file["deployments"]
    assert spec_cfg["concurrency_limit"] == 1 and spec_cfg["schedules"][0]["timezone"]

    cli(env, str(BIN / "prefect"), "work-pool", "create", "dprelease-process", "--type", "process")
    cli(env, str(BIN / "prefect"), "--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml")
    listed = cli(env, sys.executable, "deploy/automations.py", "--webhook-url", hook_url)
    assert listed.count("dprelease: ") == 5
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
    completed = _events(env, "dprelease.release.completed")
    assert [e["resource"]["prefect.resource.id"] for e in completed] == [f"dprelease.release.{bundle.name}"]
    payload = completed[0]["payload"]
    assert 0 < payload["epsilon_spent"] <= 1.0 and payload["lifetime"]["epsilon"] == 1.2
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        assert payload["lifetime"]["next_epsilon_max"] == pytest.approx(led.headroom("adult").epsilon)

    slot = api(env, "GET", "/v2/concurrency_limits/dprelease-dataset-adult")  # flows/concurrency.py
    assert (slot["limit"], slot["active_slots"]) == (1, 0)
    second = _trigger_and_work(env, spec, out)
    assert second["state"]["type"] == "FAILED"
    refused = _events(env, "dprelease.release.refused")
    assert len(refused) == 1 and "lifetime budget" in refused[0]["payload"]["message"]
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        statuses = sorted(r["status"] for r in led.releases())
    assert statuses == ["refused", "released"]
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
