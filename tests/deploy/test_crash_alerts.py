"""Issue 38, "crashes reported as what they are", on a real ``prefect server`` with a real
process worker, the deployment of ``deploy/prefect.yaml`` and the automations of
``deploy/automations.py`` posting to a webhook. A release is held (``tests/deploy/hold``)
once it has spent its whole plan (at ``release_document``), then killed:

* **its flow-run process alone** (``kill -9``, what the out-of-memory killer does): the
  worker reports the crash and runs the flow's ``on_crashed`` hook, which names the release
  and what the ledger charged it; the "failed or crashed" alert says so. Before issue 38 it
  said "The release unknown-release of dataset unknown ... failed in stage load_spec".
* **its worker too** (a lost machine, or a worker stopped during the release): nothing runs
  a hook; with heartbeats every 30 s and a 60 s window, the heartbeat automation marks it
  Crashed and the "stopped responding" alert names the release, within minutes;
* and a run whose cancellation nothing carries out (``prefect flow-run cancel`` after its
  worker died: it stays Cancelling): the server's cancellation time-out (20 s here) marks it
  Cancelled, and the same alert says so.

Every process the tests start is stopped at the end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import HTTPServer
from pathlib import Path

import httpx
import pytest

from dprelease.ledger import Ledger
from tests.deploy.conftest import DEPLOYMENT, POOL, PREFECT, Webhook, api, cli, prefect_server, stop
from tests.helpers import adult_rows, write_spec

pytestmark = pytest.mark.deploy
HOLD = Path(__file__).parent / "hold"  # its sitecustomize.py holds a release at a step
HEARTBEAT, WINDOW = 30, 60  # s: Prefect's shortest heartbeat, and the automation's window here
CANCEL_TIMEOUT = 20  # s: the server marks a cancellation no worker carried out Cancelled
FAILED = "dprelease: a release run failed or crashed"
SILENT = "dprelease: a release run stopped responding"


def _until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(1)
    pytest.fail(f"waited {timeout:g} s for {what}")


@pytest.fixture(scope="module")
def alerts():
    Webhook.received.clear()
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", Webhook.received
    server.shutdown()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, alerts):
    """A server (no scheduler: runs are started by hand) with the work pool, the deployment and
    the automations; its env."""
    home = tmp_path_factory.mktemp("prefect-home")
    with prefect_server(
        home,
        PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="false",
        PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_CANCELLING_TIMEOUT_SECONDS=str(CANCEL_TIMEOUT),
    ) as env:
        cli(env, PREFECT, "work-pool", "create", POOL, "--type", "process")
        cli(env, PREFECT, "--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml")
        listed = cli(
            env,
            sys.executable,
            "deploy/automations.py",
            "--webhook-url",
            alerts[0],
            "--heartbeat-window-seconds",
            str(WINDOW),
        )
        assert listed.count("dprelease: ") == 7
        yield env


def _held_release(env, tmp: Path, dataset: str, *worker_args: str):
    """Start a deployment run of a spec with a lifetime budget and a worker that runs it with
    30 s heartbeats, held at ``release_document`` (its whole plan spent); returns the flow
    run's id and release id, the held process's pid, the worker and the out folder. Each test
    releases its own dataset: a killed release holds its dataset's slot (flows/concurrency.py)
    until its lease runs out."""
    spec = write_spec(
        tmp,
        adult_rows(400),
        dataset={"name": dataset, "path": "data.csv"},
        checks={"enabled": False},
        privacy={"epsilon": 1.0, "delta": 1e-6, "lifetime_epsilon": 3.0},
    )
    out, held = tmp / "out", tmp / "held"
    text = cli(
        env,
        PREFECT,
        "deployment",
        "run",
        DEPLOYMENT,
        "--param",
        f"spec_path={spec}",
        "--param",
        f"out_dir={out}",
    )
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", text).group(1)
    worker_env = {
        **env,
        "PYTHONPATH": str(HOLD),
        "DPRELEASE_TEST_HOLD_AT": "release_document",
        "DPRELEASE_TEST_HOLD_FILE": str(held),
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT),
    }
    with (tmp / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", POOL, *worker_args],
            env=worker_env,
            cwd=tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _until(lambda: held.exists() and held.read_text(), 600, "the release to spend its plan")
    rid = api(env, "GET", f"/flow_runs/{run_id}")["name"]  # the flow names its run by its release id
    return run_id, rid, int(held.read_text()), worker, out


def _ledger(out: Path, rid: str) -> tuple[dict, list[str]]:
    """The attempt's state row and its planned stages."""
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        attempt = led.attempt(rid)
        (reserved,) = [r for r in led.entries(release_id=rid) if r["status"] == "reserved"]
    return attempt, [s[0] for s in reserved["detail"]["plan"]]


def _message(received: list[dict], subject: str, rid: str) -> dict | None:
    return next((m for m in received if m["subject"] == subject and rid in m["body"]), None)


def test_a_run_killed_under_a_live_worker_is_reported_with_its_charge(deployed, alerts, tmp_path):
    env, (_, received) = deployed, alerts
    run_id, rid, pid, worker, out = _held_release(env, tmp_path, "adult", "--run-once")
    try:
        attempt, planned = _ledger(out, rid)
        assert attempt["status"] == "reserved" and attempt["spent"] == sorted(planned)  # all spent
        os.kill(pid, signal.SIGKILL)  # the out-of-memory killer
        worker.wait(timeout=300)  # --run-once: it reports the crash, runs the hook, exits
    finally:
        stop(worker)
    log = (tmp_path / "worker.log").read_text()
    run = api(env, "GET", f"/flow_runs/{run_id}")
    assert run["state"]["type"] == "CRASHED", (run["state"], log[-3000:])
    message = _until(lambda: _message(received, FAILED, rid), 120, f"the alert ({log[-2000:]})")
    body = message["body"]
    assert f"The release {rid} of dataset adult (flow run {rid}) crashed at" in body, body
    assert (
        f"It was charged ε = 1, δ = 1e-06 (all {len(planned)} stages spent; the attempt stays reserved, "
        f"charged its whole plan, until `dprelease ledger settle {rid}` closes it at what it spent)." in body
    ), body
    assert "unknown" not in body and "load_spec" not in body
    (record,) = (out / "failures").iterdir()
    assert f"is in {record.resolve()} on host" in body
    failure = json.loads((record / "failure.json").read_text())
    assert failure["release_id"] == rid and failure["error"] == "ProcessDied"
    assert (record / "internal").is_dir() and not list(out.glob(".staging-*"))  # recovered by the hook
    assert _ledger(out, rid)[0]["status"] == "reserved"  # the operator settles it (recovery.md)
    assert _message(received, SILENT, rid) is None  # the worker reported it: not a silent run
    print(f"the alert: {body}")


def test_a_run_whose_worker_died_is_marked_crashed_and_reported(deployed, alerts, tmp_path):
    env, (_, received) = deployed, alerts
    run_id, rid, pid, worker, out = _held_release(env, tmp_path, "adult-lost")
    try:  # the machine is lost: the worker and its flow run die at once, no hook runs
        os.kill(worker.pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        worker.wait(timeout=30)
    finally:
        stop(worker)
    assert api(env, "GET", f"/flow_runs/{run_id}")["state"]["name"] == "Running"  # as before issue 38
    message = _until(lambda: _message(received, SILENT, rid), 5 * 60, "the stopped-responding alert")
    took = time.monotonic() - killed
    body = message["body"]
    assert f"The release {rid} (deployment adult-monthly) sent Prefect no heartbeat for {WINDOW} s" in body
    assert f"`dprelease ledger settle {rid} --reason …`" in body and "unknown" not in body
    state = api(env, "GET", f"/flow_runs/{run_id}")["state"]
    assert state["type"] == "CRASHED" and state["message"].startswith("dprelease: no heartbeat")
    assert took < HEARTBEAT + WINDOW + 60, took  # the last beat, the window, the server's evaluation
    assert _message(received, FAILED, rid) is None  # no hook ran: one alert, this one
    assert not (out / "failures").exists()  # nothing ran to record it: `dprelease recover` does
    print(f"alerted {took:.0f} s after the worker and its run were killed: {body}")


def test_a_cancellation_nothing_carries_out_is_reported(deployed, alerts):
    """``prefect flow-run cancel`` of a run whose worker is gone: nothing kills its process nor
    reports it, and it stays Cancelling until the server's cancellation time-out."""
    env, (_, received) = deployed, alerts
    text = cli(env, PREFECT, "deployment", "run", DEPLOYMENT, "--param", "spec_path=absent.yaml")
    run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", text).group(1)
    rid = "adult-20261201t020000z"  # as the flow would have named it once running
    httpx.patch(f"{env['PREFECT_API_URL']}/flow_runs/{run_id}", json={"name": rid}).raise_for_status()
    running = {"state": {"type": "RUNNING", "name": "Running"}, "force": True}
    api(env, "POST", f"/flow_runs/{run_id}/set_state", json=running)  # its worker then died
    cli(env, PREFECT, "flow-run", "cancel", run_id)
    assert api(env, "GET", f"/flow_runs/{run_id}")["state"]["name"] == "Cancelling"
    message = _until(lambda: _message(received, SILENT, rid), CANCEL_TIMEOUT + 120, "the alert")
    assert f"The release {rid} (deployment adult-monthly) was being cancelled, and nothing" in message["body"]
    assert api(env, "GET", f"/flow_runs/{run_id}")["state"]["type"] == "CANCELLED"
