"""Issue 7 end to end: a real ``prefect server`` on loopback, the process work pool, the
deployment from ``deploy/prefect.yaml``, the automations from ``deploy/automations.py``,
and a worker that runs one scheduled release (``--run-once``); then a second run that the
lifetime budget refuses. Every process the test starts is stopped at the end."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
import yaml

from ledger import Ledger
from tests.helpers import adult_rows, write_spec

pytestmark = pytest.mark.deploy
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEPLOYMENT = "dp-release/adult-monthly"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Alerts(BaseHTTPRequestHandler):
    received: ClassVar[list[dict]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def alerts():
    server = HTTPServer(("127.0.0.1", 0), _Alerts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Alerts.received
    server.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``prefect server start`` on loopback with its own PREFECT_HOME; yields the env for
    the CLI and the worker."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "GX_ANALYTICS_ENABLED": "false",
        "DPRELEASE_HOME": str(ROOT),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{env['PREFECT_API_URL']}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (home / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("prefect server did not become healthy in 120 s")
        yield env
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _run(env, *args, timeout=300) -> str:
    out = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def _api(env, method, path, **kw):
    r = httpx.request(method, env["PREFECT_API_URL"] + path, timeout=30, **kw)
    r.raise_for_status()
    return r.json()


def _trigger_and_work(env, spec: Path, out: Path) -> dict:
    """Run the deployment now with this spec, let one worker pass pick it up, return the
    flow run once it is final."""
    text = _run(
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
    _run(
        env, str(BIN / "prefect"), "worker", "start", "--pool", "dprelease-process", "--run-once", timeout=600
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = _api(env, "GET", f"/flow_runs/{run_id}")
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
        found = _api(env, "POST", "/events/filter", json=body)["events"]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(1)


def test_scheduled_release_and_refusal_through_a_real_server(server, alerts, tmp_path):
    env = server
    hook_url, received = alerts
    deploy_file = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    (spec_cfg,) = deploy_file["deployments"]
    assert spec_cfg["concurrency_limit"] == 1 and spec_cfg["schedules"][0]["timezone"]

    _run(env, str(BIN / "prefect"), "work-pool", "create", "dprelease-process", "--type", "process")
    _run(env, str(BIN / "prefect"), "--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml")
    listed = _run(env, sys.executable, "deploy/automations.py", "--webhook-url", hook_url)
    assert listed.count("dprelease: ") == 3
    dep = _api(env, "GET", "/deployments/name/" + DEPLOYMENT)
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
    keys = {
        a["key"]
        for a in _api(
            env, "POST", "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [first["id"]]}}}
        )
    }
    assert {f"{bundle.name}-budget", f"{bundle.name}-summary", f"{bundle.name}-bundle"} <= keys
    completed = _events(env, "dprelease.release.completed")
    assert [e["resource"]["prefect.resource.id"] for e in completed] == [f"dprelease.release.{bundle.name}"]
    payload = completed[0]["payload"]
    assert 0 < payload["epsilon_spent"] <= 1.0 and payload["lifetime"]["epsilon"] == 1.2
    assert payload["lifetime"]["epsilon_left"] == pytest.approx(1.2 - payload["lifetime"]["epsilon_spent"])

    second = _trigger_and_work(env, spec, out)
    assert second["state"]["type"] == "FAILED"
    refused = _events(env, "dprelease.release.refused")
    assert len(refused) == 1 and "lifetime budget" in refused[0]["payload"]["message"]
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        statuses = sorted(r["status"] for r in led.releases())
    assert statuses == ["refused", "released"]
    deadline = time.monotonic() + 60  # the automations notify the webhook
    while time.monotonic() < deadline and len({r["subject"] for r in received}) < 2:
        time.sleep(1)
    subjects = {r["subject"] for r in received}
    assert "dprelease: a release was refused or gated" in subjects
    assert "dprelease: a release run failed or crashed" in subjects
