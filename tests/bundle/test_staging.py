"""The staging folder's lock (issue 17): held while a release runs, released by the kernel
when its process dies, so that a stale folder can be told from a running one; and the final
folder is checked before anything is reserved."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dprelease.bundle.staging import (
    ReleaseIdTaken,
    check_destination,
    check_out,
    prepare_staging,
    stale_stagings,
)
from dprelease.mechanisms.errors import DPReleaseError


def _die(staging) -> None:
    """What the kernel does for a process killed with -9: the lock goes, the files stay."""
    os.close(staging.fd)
    staging.fd = None


def test_a_running_release_is_not_stale_and_a_dead_one_is(tmp_path):
    held = prepare_staging(tmp_path, "r1")
    assert (held.path / "public").is_dir() and (held.path / "internal").is_dir() and held.lock.exists()
    with stale_stagings(tmp_path) as (stale, running):
        assert stale == [] and [r.path for r in running] == [held.path]
    _die(held)
    with stale_stagings(tmp_path) as (stale, running):
        assert [s.path for s in stale] == [held.path] and running == []
        with stale_stagings(tmp_path) as (again, running_again):  # a second recovery waits its turn
            assert again == [] and [r.path for r in running_again] == [held.path]
    assert not held.lock.exists()  # the recovery let go of it


def test_a_killed_process_releases_its_lock(tmp_path):
    """A real process holding the lock, killed with SIGKILL: the folder becomes stale."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from dprelease.bundle.staging import prepare_staging
        prepare_staging(Path({str(tmp_path)!r}), "r2")
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with stale_stagings(tmp_path) as (stale, running):
            assert stale == [] and len(running) == 1
    finally:
        proc.kill()
        proc.wait()
    with stale_stagings(tmp_path) as (stale, running):
        assert len(stale) == 1 and running == [] and stale[0].release_id == "r2"


def test_unlock_removes_the_lock_file(tmp_path):
    held = prepare_staging(tmp_path, "r3")
    held.path.rename(tmp_path / "r3")  # the bundle moved into place
    held.unlock()
    assert not held.lock.exists() and held.fd is None
    with stale_stagings(tmp_path) as (stale, running):
        assert stale == running == []


def test_a_dangling_symlink_takes_the_release_id(tmp_path):
    (tmp_path / "r4").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ReleaseIdTaken, match=r"release 'r4' already exists .*\(a symlink\)"):
        check_destination(tmp_path, "r4")
    with pytest.raises(ReleaseIdTaken):
        prepare_staging(tmp_path, "r4")
    assert not list(tmp_path.glob(".staging-*"))


@pytest.mark.parametrize("where", ["a file", "below a file", "/proc"])
def test_an_output_folder_that_cannot_be_written_is_refused(tmp_path, where):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    out = {"a file": blocker, "below a file": blocker / "out", "/proc": Path("/proc/dprelease-x")}[where]
    with pytest.raises(DPReleaseError, match=r"output folder '.*' is not writable \(.+\); pass --out"):
        check_out(out)
