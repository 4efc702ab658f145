"""Issue 20: losing Prefect does not change a release's outcome.

Once the ledger has sealed a bundle and it is in place, the release is published: the
artifacts and the event are sent best effort (bounded, no retries) and queued in
``<out>/.undelivered/`` when the API is gone, a later release into the same folder or
``dprelease notify`` sends them (and marks the run Completed), and a retry of the run
reports the existing bundle. A failed run persists only its scrubbed error, as JSON.

``test_a_server_killed_mid_release`` kills a real ``prefect server`` (SIGKILL) while real
CLI releases run: during the checks, and between the ledger's seal and the notices (the
CLI is paused there by a small hook), then restarts it. Marked ``deploy`` (about 1.5 min).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dprelease.flows.delivery import UNDELIVERED, deliver, send_undelivered
from dprelease.flows.events import notice, release_event
from dprelease.ledger import Ledger
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.records.artifacts import bundle_location, check_public_url, release_artifacts
from tests.helpers import adult_rows, real_run_only, write_spec

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Run the real CLI, pausing where the test kills the server: at a flow step (the progress
# hook every step passes) or just after the seal ("sealed": before the notices are built).
HOOK = """
import os, sys, time
from pathlib import Path
import dprelease.flows.release as rel  # dprelease first: its Prefect defaults, then Prefect
d, pause = Path(os.environ["HOOK_DIR"]), os.environ.get("HOOK_PAUSE")

def wait(step):
    (d / f"reached-{step}").touch()
    while step == pause and not (d / "go").exists():
        time.sleep(0.05)

import dprelease.flows.pipeline as pipe
step_reached, artifacts = rel.step_reached, rel.release_artifacts
rel.step_reached = pipe.step_reached = lambda record, step: (wait(step), step_reached(record, step))[1]
rel.release_artifacts = lambda *a, **k: (wait("sealed"), artifacts(*a, **k))[1]
from dprelease.cli.main import main
sys.argv = ["dprelease", *sys.argv[1:]]
main()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``prefect server start`` on one loopback port and PREFECT_HOME, killed and started
    again at will."""

    def __init__(self, home: Path) -> None:
        self.home, self.port = home, _free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": self.url,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            # no back-off while the server is down (the CLI's default, 2, adds about 20 s a run)
            "PREFECT_CLIENT_MAX_RETRIES": "0",
            "GX_ANALYTICS_ENABLED": "false",
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = (self.home / "server.log").open("a")
        self.proc = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, (self.home / "server.log").read_text()[-3000:]
            time.sleep(0.3)
        pytest.fail("prefect server did not become healthy in 120 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def api(self, method: str, path: str, **kw):
        r = httpx.request(method, self.url + path, timeout=30, **kw)
        r.raise_for_status()
        return r.json()


def _release_killing_the_server(server: Server, spec: Path, out: Path, rid: str, pause: str, tmp: Path):
    """Run ``dprelease release`` paused at ``pause``, kill the server there, let the run go
    on; returns (exit code, stdout, stderr, seconds from the kill to the CLI's exit)."""
    hook_dir = tmp / f"hook-{rid}"
    hook_dir.mkdir()
    (hook_dir / "hook.py").write_text(HOOK)
    args = ["release", str(spec), "--out", str(out), "--release-id", rid, "--insecure-seed", "1"]
    proc = subprocess.Popen(
        [sys.executable, str(hook_dir / "hook.py"), *args],
        env={**server.env, "HOOK_DIR": str(hook_dir), "HOOK_PAUSE": pause},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    while not (hook_dir / f"reached-{pause}").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the release never reached {pause}"
        time.sleep(0.05)
    server.kill()
    killed = time.monotonic()
    (hook_dir / "go").touch()
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout, stderr, time.monotonic() - killed


def _seal(out: Path, rid: str) -> dict:
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        attempt = led.attempt(rid)
    assert attempt is not None and attempt["status"] == "released"
    return attempt["detail"]


def _published_alone(out: Path, rid: str) -> None:
    """A published bundle, sealed, and nothing that says otherwise: no failure record, no
    staging folder, no lock."""
    assert sorted(p.name for p in (out / rid).iterdir()) == ["internal", "public"]
    assert (out / rid / "public" / "synthetic.csv").is_file()
    assert not (out / "failures").exists(), list((out / "failures").rglob("failure.json"))
    assert not list(out.glob(".staging-*"))
    _seal(out, rid)


@pytest.mark.deploy
@pytest.mark.skipif(sys.platform != "linux", reason="kills process groups")
def test_a_server_killed_mid_release_changes_nothing_but_its_notices(tmp_path):
    spec = write_spec(tmp_path, adult_rows(400))
    out = tmp_path / "out"
    server = Server(tmp_path / "prefect")
    server.home.mkdir()
    server.start()
    try:
        # 1. killed during the checks: the release still publishes, exit 0, its notice queued
        code, stdout, stderr, after = _release_killing_the_server(
            server, spec, out, "during-checks", "check_utility", tmp_path
        )
        assert code == 0, stderr[-3000:]
        assert f"bundle: {out / 'during-checks'}" in stdout
        text = " ".join(stderr.split())
        assert "Prefect could not record the end of this run" in text and "queued in" in text
        _published_alone(out, "during-checks")
        (queued,) = (out / UNDELIVERED).glob("during-checks-*-completed.json")
        item = json.loads(queued.read_text())
        assert [a["key"] for a in item["artifacts"]] == [
            "during-checks-bundle",
            "during-checks-budget",
            "during-checks-summary",
        ]
        (event,) = item["events"]
        assert event["event"] == "dprelease.release.completed"
        assert event["payload"]["bundle"] == str((out / "during-checks").resolve())
        assert "Female" not in queued.read_text() and "Private" not in queued.read_text()  # no data value
        assert after < 60, f"{after:.0f} s from the kill to the CLI's exit"

        # 2. a release into the same folder once the server is back sends the queued notice
        #    first; this one loses the server between the ledger's seal and its notices
        server.start()
        code, stdout, stderr, after = _release_killing_the_server(
            server, spec, out, "after-seal", "sealed", tmp_path
        )
        assert code == 0, stderr[-3000:]
        _published_alone(out, "after-seal")
        assert [p.name.split("-2026")[0] for p in (out / UNDELIVERED).glob("*.json")] == ["after-seal"]
        assert after < 60, f"{after:.0f} s from the kill to the CLI's exit"

        # 3. `dprelease notify` sends the rest once the server is back
        server.start()
        sent = subprocess.run(
            [str(BIN / "dprelease"), "notify", "--out", str(out)],
            env=server.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sent.returncode == 0, sent.stderr
        assert not (out / UNDELIVERED).exists()
        for rid in ("during-checks", "after-seal"):
            run_id = _seal(out, rid)["flow_run_id"]
            run = server.api("GET", f"/flow_runs/{run_id}")
            assert run["state"]["type"] == "COMPLETED", run["state"]  # its end, recorded late
            keys = {
                a["key"]
                for a in server.api(
                    "POST", "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [run_id]}}}
                )
            }
            assert keys == {f"{rid}-bundle", f"{rid}-budget", f"{rid}-summary"}
        body = {"filter": {"event": {"name": ["dprelease.release.completed"]}}, "limit": 50}
        deadline = time.monotonic() + 30
        while len(found := server.api("POST", "/events/filter", json=body)["events"]) < 2:
            assert time.monotonic() < deadline, found
            time.sleep(0.5)
        assert sorted(e["resource"]["prefect.resource.id"] for e in found) == [
            "dprelease.release.after-seal",
            "dprelease.release.during-checks",
        ]
        assert all(e["payload"]["bundle"].startswith("/") for e in found)

        # 4. a retry of a published run reports the existing bundle: nothing run, nothing spent
        run_id = _seal(out, "during-checks")["flow_run_id"]
        with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
            rows = len(led.entries())
        manifest = (out / "during-checks" / "public" / "manifest.json").read_bytes()
        retried = subprocess.run(
            [str(BIN / "prefect"), "flow-run", "retry", run_id, "--entrypoint", "flows/release.py:release"],
            env=server.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert retried.returncode == 0, retried.stdout[-2000:] + retried.stderr[-2000:]
        assert "already published by this flow run" in " ".join((retried.stdout + retried.stderr).split())
        assert server.api("GET", f"/flow_runs/{run_id}")["state"]["type"] == "COMPLETED"
        with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
            assert len(led.entries()) == rows
        assert (out / "during-checks" / "public" / "manifest.json").read_bytes() == manifest
        assert not (out / "failures").exists()

        # 5. a release on the running server: the CLI exits at once after sending its queued
        #    logs itself (prefect_drained), and every log line and task state is on the server
        env = {k: v for k, v in server.env.items() if k != "PREFECT_LOGGING_LEVEL"}  # --verbose: INFO
        args = ["release", str(spec), "--out", str(out), "--release-id", "plain", "--insecure-seed", "1"]
        done = subprocess.run(
            [str(BIN / "dprelease"), *args, "--verbose"], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        run_id = _seal(out, "plain")["flow_run_id"]
        assert server.api("GET", f"/flow_runs/{run_id}")["state"]["type"] == "COMPLETED"
        tasks = server.api("POST", "/task_runs/filter", json={"flow_runs": {"id": {"any_": [run_id]}}})
        assert tasks and {t["state"]["type"] for t in tasks} == {"COMPLETED"}
        logs = server.api(
            "POST", "/logs/filter", json={"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200}
        )
        assert any("published release bundle" in m["message"] for m in logs), [m["message"] for m in logs]
        assert any("Finished in state Completed" in m["message"] for m in logs if m["task_run_id"] is None)
    finally:
        server.kill()


@pytest.mark.e2e
def test_a_server_down_before_the_start_spends_nothing(tmp_path):
    """No server at PREFECT_API_URL: the CLI says so and exits 1; nothing was read or spent."""
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL=f"http://127.0.0.1:{_free_port()}/api")
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN / "dprelease"), "release", str(spec), "--out", str(out), "--release-id", "r1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Prefect's API could not be reached" in " ".join(result.stderr.split())
    assert not (out / "ledger.db").exists() and not (out / "r1").exists()
    assert time.monotonic() - started < 60


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_undelivered_notices_are_queued_quickly_and_sent_later(tmp_path):
    """A notice that cannot reach the API is queued (public facts only) within the bounded
    time, stays queued while the API is unreachable, and is sent once it answers."""
    from prefect.artifacts import Artifact
    from prefect.settings import PREFECT_API_URL, temporary_settings

    out = tmp_path / "out"
    where = bundle_location(out / "q1", "https://data.example.org/releases", published=True)
    event = release_event("completed", release_id="q1", dataset="adult", ledger=None, where=where)
    artifact = {"type": "markdown", "key": "q1-summary", "description": "test", "data": "# q1"}
    item = notice("q1", "completed", events=[event], artifacts=[artifact])
    with temporary_settings(updates={PREFECT_API_URL: f"http://127.0.0.1:{_free_port()}/api"}):
        started = time.monotonic()
        assert deliver(out, item, timeout=5) is False
        assert time.monotonic() - started < 10
        (queued,) = (out / UNDELIVERED).glob("q1-*-completed.json")
        saved = json.loads(queued.read_text())
        assert saved["late"] is True and len(saved["artifacts"]) == 1 and len(saved["events"]) == 1
        payload = saved["events"][0]["payload"]
        assert payload["bundle"] == str((out / "q1").resolve())
        assert payload["bundle_url"] == "https://data.example.org/releases/q1/public/"
        (resent,) = send_undelivered(out, timeout=5)
        assert not resent.sent and queued.exists()  # still unreachable: kept for later
    (resent,) = send_undelivered(out)  # the harness's server answers
    assert resent.sent and not (out / UNDELIVERED).exists()
    found = Artifact.get("q1-summary")
    assert found is not None and found.data == "# q1"


def test_the_artifacts_say_where_the_bundle_is_and_in_what_unit(tmp_path):
    document = {
        "mechanism": {"name": "factor_gauss"},
        "privacy": {
            "accountant": "zcdp",
            "synthetic_rows": 10,
            "ledger": {
                "measurements": [],
                "stages": [{"stage": "marginals", "weight": 1.0, "rho_allocated": 0.5, "rho_spent": 0.5}],
                "totals": {"epsilon": 1.0, "delta": 1e-6},
            },
        },
    }
    local = bundle_location(tmp_path / "r1", None, published=True)
    link, _budget, summary = release_artifacts("r1", document, local, [], published=True)
    assert link["data"].endswith(f"({(tmp_path / 'r1' / 'public').resolve().as_uri()})")
    assert f"on host {socket.gethostname()}" in link["data"]
    assert "| stage | weight | spent (ρ, zCDP) | allocated (ρ, zCDP) |" in summary["data"]
    assert f"`{(tmp_path / 'r1').resolve()}`" in summary["data"]
    shared = bundle_location(tmp_path / "r1", check_public_url("s3://bucket/releases/"), published=True)
    link = release_artifacts("r1", document, shared, [], published=True)[0]
    assert link["data"].endswith("(s3://bucket/releases/r1/public/)")
    for bad in ("https://user:secret@host/releases", "releases", "https://host/r?token=x"):
        with pytest.raises(DPReleaseError, match="public_url"):
            check_public_url(bad)


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_a_failed_run_persists_only_its_scrubbed_error(tmp_path, monkeypatch):
    """Prefect 3.8.8 persists a failed flow run's exception whatever persist_result says;
    the flow's result serializer is JSON, so what is stored is the scrubbed error's type and
    message, never a pickle that carries the original (which quoted a value)."""
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH

    import dprelease.mechanisms.factor_gauss as fg
    from dprelease.flows.release import release
    from dprelease.tasks.scrub import UnexpectedError

    def leak(*args, **kwargs):
        raise ValueError("cannot handle age=4242")

    monkeypatch.setattr(fg, "measure_moments", real_run_only(fg.measure_moments, leak))  # data-dependent
    store = Path(PREFECT_LOCAL_STORAGE_PATH.value())
    before = set(store.glob("*")) if store.exists() else set()
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    with pytest.raises(UnexpectedError):
        release(str(spec), str(tmp_path / "out"), release_id="leak")
    stored = [json.loads(p.read_bytes()) for p in set(store.glob("*")) - before]
    assert stored, "Prefect stored no result for the failed run"
    for s in stored:
        assert s["__exc_type__"] == "dprelease.tasks.scrub.UnexpectedError" and "4242" not in json.dumps(s)
