"""What the deploy tests share: a real ``prefect server start`` on loopback with its own
PREFECT_HOME (SQLite by default, or the database a test names), the helpers that run the
Prefect CLI and call the API, and the stopping of every process a test starts (with the
processes it started in sessions of their own)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PREFECT = str(BIN / "prefect")
DEPLOYMENT = "dp-release/adult-monthly"
POOL = "dprelease-process"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, timeout: float = 30) -> None:
    """Stop a process started with ``start_new_session=True``: SIGTERM to its process
    group, SIGKILL after ``timeout`` s; then any of its descendants still alive, since
    Prefect's process worker starts each flow run in a session of its own."""
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    alive = [p for p in descendants if p.is_running()]  # is_running() checks the start time
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=10)


def server_errors(env: dict[str, str], limit: int = 4000) -> str:
    """The server log's ERROR lines and exception lines (the log is at WARNING level),
    for a failure message."""
    log = (Path(env["PREFECT_HOME"]) / "server.log").read_text(errors="replace")
    picked = [ln for ln in log.splitlines() if "ERROR" in ln or re.match(r"[\w.]+(Error|Exception): ", ln)]
    return "\n".join(picked)[-limit:] or "(no ERROR line in the server log)"


@contextlib.contextmanager
def prefect_server(home: Path, **extra_env: str) -> Iterator[dict[str, str]]:
    """``prefect server start`` on loopback with PREFECT_HOME=home (its log in
    home/server.log) and ``extra_env`` (e.g. PREFECT_SERVER_DATABASE_CONNECTION_URL);
    yields the env for the CLI and the worker once /api/health answers."""
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
        **extra_env,
    }
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
    with (home / "server.log").open("w") as log:
        proc = subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
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
            stop(proc)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``prefect server start`` on loopback with its own PREFECT_HOME and SQLite; yields the
    env for the CLI and the worker."""
    with prefect_server(tmp_path_factory.mktemp("prefect-home")) as env:
        yield env


def cli(env, *args, timeout=300) -> str:
    out = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{args}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def api(env, method, path, **kw):
    r = httpx.request(method, env["PREFECT_API_URL"] + path, timeout=30, **kw)
    r.raise_for_status()
    return r.json()


class Webhook(BaseHTTPRequestHandler):
    """A notification target: keeps every JSON body posted to it in ``received``."""

    received: ClassVar[list[dict]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass
