"""The Prefect API of one CLI run: a temporary server that dies with the CLI (issue 17).

With no ``PREFECT_API_URL``, Prefect starts a temporary server (uvicorn, in a subprocess)
on first use and stops it in an ``atexit`` hook, which ``kill -9`` skips: the server then
outlives the CLI, reparented to PID 1. :func:`prefect_api` starts that server itself,
with Prefect's own command line and environment, but on Linux the uvicorn process asks
the kernel to SIGKILL it when the CLI dies (``prctl(PR_SET_PDEATHSIG)``) and runs in a
session of its own, so a terminal's Ctrl-C reaches only the CLI, which records the
interrupted run and then stops the server (sharing the CLI's process group, the server
quit first and the CLI then spent a minute retrying it). On other platforms it is
Prefect's server unchanged, and ``kill -9`` still orphans it.

Both blocks run under the project's Prefect defaults (``flows/defaults.py``) as Prefect's own
defaults: ``import dprelease`` put them in the environment, but Prefect reads its settings
once, when first imported, which may have been before dprelease (a notebook). The server's
start waits the time-out read in that block (the user's, or the project's 90 s), given to it
explicitly; a server that does not answer in time is stopped, and ``PrefectNotStarted`` says
which setting to raise.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import httpx
from prefect.logging import get_logger
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_ENABLED,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    temporary_settings,
)

from dprelease.flows.defaults import PREFECT_DEFAULTS
from dprelease.flows.run import PrefectNotStarted

__all__ = ["prefect_api", "prefect_drained", "process_api"]

_ENDED: list[bool] = []  # a prefect_api block ended
_DRAINED: list[bool] = []  # ... and its logs and events were sent (a temporary server's end does it)
_SHARED: list[TemporaryServer] = []  # the process's server (process_api), started on first use


def prefect_drained() -> bool:
    """Whether a :func:`prefect_api` block ended; if so, its queued logs and events are sent
    to the API now, unless its temporary server's end sent them already. Then nothing of
    Prefect's is left to send and the CLI may exit at once instead of waiting for Prefect's
    own teardown (1.3 s of a demo release on a running server, 1.5 s on a temporary one)."""
    if _ENDED and not _DRAINED:
        _drain()
        _DRAINED.append(True)
    return bool(_ENDED)


def _drain() -> None:
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all()
    EventsWorker.drain_all()


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent(parent: int) -> None:
    """Run in the child between fork and exec: arm SIGKILL for the death of the forking
    thread, then exit if ``parent`` already died (the signal would never come)."""
    assert _prctl is not None
    if _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def _free_port() -> int:
    """A loopback port free now (the kernel's choice; a race lost to another process is
    retried by ``ready``, as Prefect's server exits with code 3 then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _uvicorn_command(port: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of Prefect's temporary server
    (``SubprocessASGIServer._run_uvicorn_command``; a test keeps them equal), built without
    importing Prefect's server module, which takes 1.7 s: the server starts first, and the
    CLI imports meanwhile."""
    import prefect
    from prefect.settings import get_current_settings

    args = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(prefect.__module_path__.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]
    env = {
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        **get_current_settings().to_environment_variables(exclude_unset=True),
    }
    return args, env


def _start_uvicorn(port: int) -> subprocess.Popen[Any]:
    """Prefect's temporary server on ``port``; on Linux in a new session, with the
    parent-death signal armed (from the main thread only: the kernel kills the server when
    the thread that started it ends)."""
    args, env = _uvicorn_command(port)
    if _prctl is None:
        return subprocess.Popen(args, env=env)
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "start the temporary server from the main thread: the kernel "
            "kills it when the thread that started it ends"
        )
    arm = partial(_die_with_parent, os.getpid())
    return subprocess.Popen(args, env=env, start_new_session=True, preexec_fn=arm)


class TemporaryServer:
    """Prefect's temporary server (uvicorn), started by :func:`prefect_api`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server_process: subprocess.Popen[Any] = _start_uvicorn(port)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def ready(self, timeout: float) -> None:
        """Wait up to ``timeout`` s until the server answers ``/health`` (Prefect's start
        loop: a port taken meanwhile, exit code 3, is retried on another port). A server
        that does not is stopped, and ``PrefectNotStarted`` says what to do."""
        deadline = time.monotonic() + timeout
        with httpx.Client() as client:
            while time.monotonic() < deadline:
                code = self.server_process.poll()
                if code == 3:
                    self.port = _free_port()
                    self.server_process = _start_uvicorn(self.port)
                elif code is not None:
                    raise PrefectNotStarted(
                        f"Prefect's temporary server exited with code {code} while starting (its output is "
                        "above); set PREFECT_API_URL to a running Prefect server instead. The release did "
                        "not start: nothing was read or spent."
                    )
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise PrefectNotStarted(
            f"Prefect's temporary server did not answer within {timeout:g} s "
            "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); the machine may be busy: raise it, or set "
            "PREFECT_API_URL to a running Prefect server. The release did not start: nothing was read "
            "or spent."
        )

    def stop(self) -> None:
        """Prefect's stop waits up to 5 s for uvicorn's graceful exit (about 2 s of a demo
        release); by then the run's logs and events were drained and its states committed,
        so wait 0.5 s, then SIGKILL (SQLite commits are atomic)."""
        process = self.server_process
        if process.poll() is None:
            get_logger().info(f"Stopping temporary server on http://127.0.0.1:{self.port}")
            process.terminate()
            try:
                process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def prefect_api(meanwhile: Callable[[], object] | None = None) -> Iterator[TemporaryServer | None]:
    """Run the block against a temporary Prefect server that dies with this process.

    Yields None and changes nothing when ``PREFECT_API_URL`` is set (a running server) or
    temporary servers are disabled (``PREFECT_SERVER_EPHEMERAL_ENABLED=false``; Prefect
    then refuses as usual). Otherwise starts the server (from the main thread only), sets
    ``PREFECT_API_URL`` to it for the block, in this context and in the process-global
    settings (threads that do not see the block's context would otherwise start a server
    of their own), and on exit sends the queued logs and events, then stops it.
    ``meanwhile`` runs while the server starts (the CLI imports the flow then); it runs in
    every case, before the block. Prefect's server module is never imported here: it takes
    1.7 s, and the server runs in its own process.
    """
    with _project_defaults():
        if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
            if meanwhile is not None:
                meanwhile()
            try:
                yield None
            finally:
                _ENDED.append(True)
            return
        from prefect.logging.configuration import ensure_logging_setup

        ensure_logging_setup()  # before the first log line (`import prefect` sets it up only later)
        port = _free_port()
        get_logger().info(f"Starting temporary server on http://127.0.0.1:{port}")
        server = TemporaryServer(port)  # first: ``meanwhile`` overlaps its start
        atexit.register(server.stop)
        try:
            if meanwhile is not None:
                meanwhile()
            server.ready(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
            try:
                with _against(server):
                    yield server
            finally:
                _DRAINED.append(True)
        finally:
            server.stop()
            _ENDED.append(True)


@contextmanager
def _project_defaults() -> Iterator[None]:
    """The block runs with the project's Prefect defaults (``flows/defaults.py``) as Prefect's
    own: any source of Prefect's settings (environment, profile, ``prefect.toml``) overrides
    them. ``import dprelease`` put them in the environment; this also holds when Prefect read
    its settings before that."""
    import prefect.settings

    defaults = {
        getattr(prefect.settings, name): value
        for name, value in PREFECT_DEFAULTS.items()
        if name.startswith("PREFECT_")
    }
    with temporary_settings(set_defaults=defaults):
        yield


@contextmanager
def _against(server: TemporaryServer) -> Iterator[TemporaryServer]:
    """Run the block against ``server``, then send its queued logs and events. Every thread
    sees the server: those that copied this context, and (through the process-global
    settings, as Prefect's own test harness does) those that did not."""
    from prefect.context import _temporary_global_settings_context, get_settings_context

    with (
        temporary_settings(updates={PREFECT_API_URL: server.api_url}),
        _temporary_global_settings_context(get_settings_context()),
    ):
        try:
            yield server
        finally:
            _drain()


def _shared_server() -> TemporaryServer:
    """The process's temporary server: started on first use (or again if it died or did not
    start), stopped at interpreter exit (``atexit``)."""
    if _SHARED and _SHARED[0].server_process.poll() is None:
        return _SHARED[0]
    _SHARED.clear()
    server = TemporaryServer(_free_port())
    atexit.register(server.stop)
    try:
        server.ready(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    except BaseException:
        server.stop()  # never left running, nor kept: the next call starts a fresh one
        atexit.unregister(server.stop)
        raise
    _SHARED.append(server)
    return server


@contextmanager
def process_api(meanwhile: Callable[[], object] | None = None) -> Iterator[TemporaryServer | None]:
    """Run the block against one temporary Prefect server kept for the life of this process
    (the Python API: a notebook's releases share it, ~15 s of start paid once).

    As :func:`prefect_api`, the block runs against ``PREFECT_API_URL`` when it is set (or
    Prefect refuses as usual when temporary servers are disabled), and sends its queued logs
    and events when it ends; unlike it, the server outlives the block and stops at exit.
    ``meanwhile`` runs before the block (while the server starts, the first time)."""
    with _project_defaults():
        if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
            if meanwhile is not None:
                meanwhile()
            yield None
            return
        from prefect.logging.configuration import ensure_logging_setup

        ensure_logging_setup()
        if meanwhile is not None:
            meanwhile()
        server = _shared_server()
        with _against(server):
            yield server
