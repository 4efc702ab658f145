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
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from unittest import mock

import httpx
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_ENABLED,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    temporary_settings,
)

if TYPE_CHECKING:
    from prefect.server.api.server import SubprocessASGIServer

__all__ = ["prefect_api", "temporary_server_done"]

_DONE: list[bool] = []  # set once a temporary server's logs and events were sent and it stopped


def temporary_server_done() -> bool:
    """Whether this process ran a temporary server, sent it the queued logs and events, and
    stopped it: nothing of Prefect's is left to send, so the CLI may exit at once."""
    return bool(_DONE)


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


@cache
def _server_class() -> type[SubprocessASGIServer]:
    """Prefect's ``SubprocessASGIServer`` whose uvicorn process dies with the thread that
    started it and has its own session (Linux). Built on first use: Prefect's server module
    takes seconds to import."""
    from prefect.server.api import server as module

    class DyingServer(module.SubprocessASGIServer):
        # its own registry, so Prefect's SubprocessASGIServer() never returns one by itself;
        # declared as Prefect declares it (not ClassVar)
        _instances: dict[int | None, module.SubprocessASGIServer] = {}  # noqa: RUF012

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            """Prefect's Popen (command, environment), in a new session, with the parent-death
            signal armed."""
            if _prctl is None:
                return super()._run_uvicorn_command()
            if threading.current_thread() is not threading.main_thread():
                raise RuntimeError(
                    "start the temporary server from the main thread: the kernel "
                    "kills it when the thread that started it ends"
                )
            arm = partial(_die_with_parent, os.getpid())
            popen = partial(subprocess.Popen, start_new_session=True, preexec_fn=arm)
            with mock.patch.object(
                module, "subprocess", SimpleNamespace(**{**vars(subprocess), "Popen": popen})
            ):
                return super()._run_uvicorn_command()

        def launch(self) -> None:
            """Start the server's process and return at once (``ready`` waits for it): the
            caller's own imports then overlap the server's start."""
            self.port = self.port or self.find_available_port()
            module.subprocess_server_logger.info(f"Starting temporary server on {self.address}")
            self.running = True
            self.server_process = self._run_uvicorn_command()
            atexit.register(self.stop)

        def ready(self) -> None:
            """Wait until the launched server answers ``/health`` (Prefect's start loop: a
            port taken meanwhile, exit code 3, is retried on another port)."""
            deadline = time.monotonic() + PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
            with httpx.Client() as client:
                while time.monotonic() < deadline:
                    assert self.server_process is not None
                    code = self.server_process.poll()
                    if code == 3:
                        self.port = self.find_available_port()
                        self.server_process = self._run_uvicorn_command()
                    elif code is not None:
                        self.running = False
                        raise RuntimeError(
                            f"Prefect's temporary server exited with code {code} while starting"
                        )
                    try:
                        if client.get(f"{self.api_url}/health").status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
            self.stop()
            raise RuntimeError("Timed out while attempting to connect to Prefect's temporary server")

        def stop(self) -> None:
            """Prefect's stop waits up to 5 s for uvicorn's graceful exit (about 2 s of a
            demo release); by then the run's logs and events were drained and its states
            committed, so wait 0.5 s, then SIGKILL (SQLite commits are atomic)."""
            process = self.server_process
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    process.kill()
            super().stop()

    return DyingServer


@contextmanager
def prefect_api(meanwhile: Callable[[], object] | None = None) -> Iterator[SubprocessASGIServer | None]:
    """Run the block against a temporary Prefect server that dies with this process.

    Yields None and changes nothing when ``PREFECT_API_URL`` is set (a running server) or
    temporary servers are disabled (``PREFECT_SERVER_EPHEMERAL_ENABLED=false``; Prefect
    then refuses as usual). Otherwise starts the server (from the main thread only), sets
    ``PREFECT_API_URL`` to it for the block, makes Prefect's own ``SubprocessASGIServer()``
    return it (threads that do not see the block's settings reuse it instead of starting
    another), and on exit sends the queued logs and events, then stops it. ``meanwhile``
    runs while the server starts (the CLI imports the flow then: about 3 s of a demo
    release's 4 s server start); it runs in every case, before the block.
    """
    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        if meanwhile is not None:
            meanwhile()
        yield None
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer

    ensure_logging_setup()  # before the first log line (`import prefect` sets it up only later)
    server: Any = _server_class()()  # a DyingServer
    server.launch()
    try:
        if meanwhile is not None:
            meanwhile()
        server.ready()
    except BaseException:
        server.stop()
        raise
    prior = SubprocessASGIServer._instances.get(None)
    SubprocessASGIServer._instances[None] = server
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield server
            finally:
                APILogWorker.drain_all()
                EventsWorker.drain_all()
    finally:
        if prior is None:
            del SubprocessASGIServer._instances[None]
        else:
            SubprocessASGIServer._instances[None] = prior
        server.stop()
        _DONE.append(True)
