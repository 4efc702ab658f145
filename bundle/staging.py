"""The staging folder of a running release, the lock that says it is running, and the
stale staging folders a dead run leaves behind.

A release writes into ``<out>/.staging-<release_id>-<uuid>/`` and, for as long as it runs,
holds an exclusive ``flock`` on ``<out>/.staging-<release_id>-<uuid>.lock`` (which names its
host and pid). The kernel drops the lock when the process ends, however it ends (``kill -9``
included), so a staging folder whose lock can be taken belongs to no running release: it is
*stale*. Whoever takes the lock owns the folder until it lets go (two recoveries never
handle the same folder). ``flock`` is local to a machine, and works across machines on
NFSv4; on other shared file systems run recoveries on the machine that ran the release.

The final folder is checked before anything is reserved: it must not exist (a dangling
symlink counts) and ``out`` must be a folder this process can write to.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from dprelease.bundle.files import PRIVATE_DIR, PUBLIC_DIR, make_dir
from dprelease.mechanisms.errors import DPReleaseError, ReleaseIdTaken

__all__ = [
    "ReleaseIdTaken",
    "Staging",
    "check_destination",
    "check_out",
    "owner_of",
    "prepare_staging",
    "stale_stagings",
]

_NAME = re.compile(r"\.staging-(?P<release_id>[a-z0-9][a-z0-9-]*)-(?P<uuid>[0-9a-f]{8})")


@dataclass
class Staging:
    """A running release's staging folder and its held lock."""

    release_id: str
    dest: Path
    path: Path
    lock: Path
    fd: int | None

    def unlock(self) -> None:
        """Let go of the folder (after it was renamed into place or removed): the lock file
        goes first, then the lock itself."""
        if self.fd is None:
            return
        self.lock.unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


def check_destination(out: Path, release_id: str) -> Path:
    """The release's final folder ``out/release_id``, after checking that it does not exist
    (nor a dangling symlink of that name) and that ``out`` is, or can become, a folder this
    process writes to; raises ``ReleaseIdTaken`` or ``DPReleaseError`` saying what to do.
    Reads nothing of the data: the CLI runs it before Prefect starts."""
    check_out(out)
    dest = out / release_id
    if os.path.lexists(dest):
        raise ReleaseIdTaken(
            f"release '{release_id}' already exists at '{dest}'"
            + (" (a symlink)" if dest.is_symlink() else "")
            + "; choose another release_id (or omit it for a timestamped one)"
        )
    return dest


def check_out(out: Path) -> None:
    """``out`` is a folder this process can write to: created if absent, then probed with a
    temporary file (permission bits do not tell, e.g. for root or on ``/proc``); else a
    ``DPReleaseError`` naming the reason."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise DPReleaseError(
            f"output folder '{out}' is not writable ({e.strerror or type(e).__name__}); "
            "pass --out with a folder you can write to"
        ) from None


def prepare_staging(out: Path, release_id: str) -> Staging:
    """Check the final folder (``check_destination``), take the lock, then create the
    staging folder (0700: nobody else may enter it while the run writes confidential
    reports) with ``public/`` (0755) and ``internal/`` (0700), whatever the umask."""
    dest = check_destination(out, release_id)
    name = f".staging-{release_id}-{uuid4().hex[:8]}"
    lock = out / f"{name}.lock"
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        owner = {"release_id": release_id, "host": socket.gethostname(), "pid": os.getpid()}
        os.write(fd, json.dumps({**owner, "started": datetime.now(UTC).isoformat()}).encode())
        staging = Staging(release_id, dest, out / name, lock, fd)
        make_dir(staging.path, PRIVATE_DIR)
        make_dir(staging.path / "public", PUBLIC_DIR)
        make_dir(staging.path / "internal", PRIVATE_DIR)
    except OSError as e:
        raise DPReleaseError(
            f"output folder '{out}' is not writable ({e.strerror}); pass --out with a folder you can write to"
        ) from None
    return staging


@contextmanager
def stale_stagings(out: Path, release_id: str | None = None) -> Iterator[tuple[list[Staging], list[Staging]]]:
    """(stale, running) staging folders in ``out`` (of ``release_id`` only, if given).
    The stale ones are locked by this process for the duration of the block and their
    lock files removed at its end; the running ones (``fd`` None) are reported only.
    Lock files left without a folder (a run that died between the two) are removed."""
    stale: list[Staging] = []
    running: list[Staging] = []
    try:
        for lock in sorted(out.glob(".staging-*.lock")) if out.is_dir() else []:
            folder = lock.with_suffix("")
            m = _NAME.fullmatch(folder.name)
            if m is None or (release_id is not None and m["release_id"] != release_id):
                continue
            try:
                fd = os.open(lock, os.O_RDWR)
            except FileNotFoundError:
                continue  # its run just finished
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                running.append(Staging(m["release_id"], out / m["release_id"], folder, lock, None))
                continue
            if not lock.exists() or not folder.is_dir():  # finished meanwhile, or never got a folder
                if lock.exists():
                    lock.unlink()
                os.close(fd)
                continue
            stale.append(Staging(m["release_id"], out / m["release_id"], folder, lock, fd))
        for folder in sorted(out.glob(".staging-*")) if out.is_dir() else []:
            m = _NAME.fullmatch(folder.name)
            if m is None or not folder.is_dir() or Path(f"{folder}.lock").exists():
                continue
            if release_id is None or m["release_id"] == release_id:  # an older version's: no lock at all
                stale.append(
                    Staging(m["release_id"], out / m["release_id"], folder, Path(f"{folder}.lock"), None)
                )
        yield stale, running
    finally:
        for s in stale:
            s.unlock()


def owner_of(staging: Staging) -> dict:
    """What a staging folder's lock file says of its run (host, pid, started), if anything."""
    try:
        return json.loads(staging.lock.read_text())
    except (OSError, ValueError):
        return {}
