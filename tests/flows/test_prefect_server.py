"""The CLI's temporary Prefect server dies with the CLI, even on ``kill -9`` (issue 17):
``flows.prefect_server.prefect_api`` in a small script, then the real ``dprelease demo``."""

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_ENABLED,
    temporary_settings,
)

from dprelease.flows.prefect_server import _uvicorn_command, prefect_api
from tests.helpers import ROOT

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux-only")

# enters prefect_api, asks for a client from a thread that does not see the block's settings,
# prints "<uvicorn pid> <api url> <that client's url>", then waits to be killed
SCRIPT = """
import threading, time
from prefect.client.orchestration import get_client
from dprelease.flows.prefect_server import prefect_api

with prefect_api() as server:
    seen = []
    thread = threading.Thread(target=lambda: seen.append(get_client(sync_client=True).api_url))
    thread.start()
    thread.join()
    print(server.server_process.pid, server.api_url, seen[0], flush=True)
    time.sleep(600)
"""


def _env(home) -> dict[str, str]:
    """This environment without an API URL, with a fresh Prefect home."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _dead(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_dead(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """The processes still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (alive := [p for p in procs if not _dead(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _servers(proc: subprocess.Popen) -> list[psutil.Process]:
    """The uvicorn children of ``proc``."""
    found = []
    for child in psutil.Process(proc.pid).children():
        with contextlib.suppress(psutil.Error):  # a short-lived child may be gone already
            if "uvicorn" in child.cmdline():
                found.append(child)
    return found


def _kill_and_check(parent: subprocess.Popen) -> None:
    """``kill -9`` the parent: every process it started is gone within 10 s."""
    tree = psutil.Process(parent.pid).children(recursive=True)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_dead(tree, 10) == []
    finally:
        for p in _wait_dead(tree, 0):  # a failed test leaves no server behind
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


@pytest.mark.e2e
@linux_only
def test_the_server_dies_with_its_process(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, text=True
    )
    try:
        assert select.select([proc.stdout], [], [], 90)[0], "the server did not start within 90 s"
        pid, api_url, thread_url = proc.stdout.readline().split()
        server = psutil.Process(int(pid))
        assert server.ppid() == proc.pid
        assert os.getsid(server.pid) == server.pid  # its own session: Ctrl-C reaches only the CLI
        assert _servers(proc) == [server]  # one server: the thread started none
        assert thread_url == api_url + "/"  # the settings-less thread reused it
        assert httpx.get(f"{api_url}/health", timeout=10).json() is True
        _kill_and_check(proc)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


@pytest.mark.e2e
@linux_only
def test_kill_9_of_the_cli_leaves_no_server(tmp_path):
    """The real ``dprelease demo``, killed once its server process has started."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dprelease.cli",
            "demo",
            "--out",
            str(tmp_path / "out"),
            "--insecure-seed",
            "1",
        ],
        cwd=ROOT,
        env=_env(tmp_path / "home"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _servers(proc):
            assert proc.poll() is None and time.monotonic() < deadline, "no server within 60 s"
            time.sleep(0.1)
        _kill_and_check(proc)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    "settings",
    [
        {PREFECT_API_URL: "http://127.0.0.1:9/api"},  # a running server
        {PREFECT_API_URL: "", PREFECT_SERVER_EPHEMERAL_ENABLED: False},  # Prefect will refuse
    ],
    ids=["api-url-set", "ephemeral-disabled"],
)
def test_starts_nothing_when_prefect_would_not(settings):
    before = psutil.Process().children()
    with temporary_settings(updates=settings), prefect_api() as server:
        assert server is None
        assert PREFECT_API_URL.value() == settings[PREFECT_API_URL]
        assert psutil.Process().children() == before


def test_the_server_is_started_with_prefect_s_own_command_and_environment(monkeypatch):
    """``prefect_api`` starts the server before importing Prefect's server module, so it
    builds the command itself: the same arguments and environment as Prefect's
    ``SubprocessASGIServer`` (a Prefect upgrade that changes them fails here)."""
    from prefect.server.api.server import SubprocessASGIServer

    started: list[dict] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: started.append(kwargs))
    SubprocessASGIServer(port=8765)._run_uvicorn_command()
    SubprocessASGIServer._instances.pop(8765)
    args, env = _uvicorn_command(8765)
    assert started == [{"args": args, "env": env}]
