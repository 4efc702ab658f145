"""Issue 30, item 8: what only the steward may read stays unreadable to others, whatever
the umask. A staging folder, ``internal/`` and ``failures/`` (and everything under them)
are 0700 with 0600 files while the run writes and after; the published ``public/`` is
0755 with 0644 files, inside a 0755 ``<release_id>/``: it is the part that is served."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dprelease.bundle.files import write_json
from dprelease.bundle.staging import prepare_staging
from dprelease.bundle.write import write_bundle_files, write_failure_record
from dprelease.cli.main import app
from dprelease.mechanisms.errors import DPReleaseError
from tests.helpers import adult_rows, write_spec

UMASKS = [0o000, 0o022]


@pytest.fixture(params=UMASKS, ids=lambda u: f"umask{u:03o}")
def umask(request):
    """The process's umask for the test (restored after)."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _tree(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` (itself as '.') with its permission bits."""
    return {".": _mode(folder)} | {str(p.relative_to(folder)): _mode(p) for p in folder.rglob("*")}


def _assert_private(folder: Path) -> None:
    modes = _tree(folder)
    want = {k: 0o700 if (folder / k).is_dir() else 0o600 for k in modes}
    assert modes == want, {k: oct(v) for k, v in modes.items()}


def _assert_public(folder: Path) -> None:
    modes = _tree(folder)
    want = {k: 0o755 if (folder / k).is_dir() else 0o644 for k in modes}
    assert modes == want, {k: oct(v) for k, v in modes.items()}


def _running_release(out: Path):
    """A staging folder as a running release has it: reports in ``internal/`` (JSON, and
    text written by another library: pyarrow's CSV in ``public/``)."""
    held = prepare_staging(out, "r")
    write_json(held.path / "internal" / "validation_input.json", {"rows": 1})
    write_json(held.path / "public" / "budget_plan.json", {"epsilon": 1.0})
    return held


def test_a_staging_folder_is_private_while_it_runs(tmp_path, umask):
    held = _running_release(tmp_path / "out")
    assert _mode(held.path) == 0o700 and _mode(held.lock) == 0o600
    _assert_private(held.path / "internal")
    _assert_public(held.path / "public")


def test_the_published_bundle_serves_public_only(tmp_path, umask, monkeypatch):
    import dprelease.bundle.write

    monkeypatch.setattr(dprelease.bundle.write, "readme", lambda doc: "the README\n")  # a minimal document
    held = _running_release(tmp_path / "out")
    document = {"outputs": {"synthetic.csv": {"format": "csv"}}, "release_id": "r"}
    dest = write_bundle_files(held.path, held.dest, pd.DataFrame({"a": [1, 2]}), document)
    assert _mode(dest) == 0o755
    _assert_public(dest / "public")  # synthetic.csv is pyarrow's: 0666 under umask 0 until set
    _assert_private(dest / "internal")


def test_a_gated_bundle_keeps_its_reports_private(tmp_path, umask):
    held = _running_release(tmp_path / "out")
    dest = write_bundle_files(held.path, held.dest, None, {"release_id": "r"}, publish=False)
    assert sorted(p.name for p in dest.iterdir()) == ["internal"]
    _assert_private(dest / "internal")


@pytest.mark.parametrize("error", [DPReleaseError("column 'x': rule"), RuntimeError("unexpected")])
def test_a_failure_record_is_private(tmp_path, umask, error):
    out = tmp_path / "out"
    held = _running_release(out)
    (held.path / "internal" / "other.txt").write_text("written by another library")  # umask's mode
    record = write_failure_record(out, "r", "validate_input", error, held.path)
    assert {"failure.json", "internal"} <= {p.name for p in record.iterdir()}
    assert (record / "internal" / "traceback.txt").is_file() == isinstance(error, RuntimeError)
    assert _mode(out / "failures") == 0o700
    _assert_private(record)


def test_a_failure_record_without_a_staging_folder_is_private(tmp_path, umask):
    record = write_failure_record(tmp_path / "out", "r", "prepare", RuntimeError("x"), None)
    _assert_private(tmp_path / "out" / "failures")
    assert (record / "internal" / "traceback.txt").is_file()


@pytest.mark.parametrize("umask", [0o000, 0o077], indirect=True, ids=["umask000", "umask077"])
def test_a_discovery_bundle_is_world_readable_whatever_the_umask(tmp_path, umask):
    pd.DataFrame({"age": range(18, 90)}).to_csv(tmp_path / "people.csv", index=False)
    out = tmp_path / "releases"
    args = ["discover", str(tmp_path / "people.csv"), "--epsilon", "1", "--kind", "age=integer"]
    result = CliRunner().invoke(app, [*args, "--bundle-out", str(out)])
    assert result.exit_code == 0, result.output
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    assert _mode(bundle) == 0o755
    _assert_public(bundle / "public")


# ---------------------------------------------------------------- end to end, through the CLI


def _release_cli(tmp_path: Path, monkeypatch, fail: bool = False) -> tuple[Path, dict[str, Path]]:
    """``dprelease release`` on small data; ``write_bundle`` is wrapped to look at the
    staging folder mid-run (every report written, nothing yet moved into place), and to
    fail there when ``fail`` (in the real run; the rehearsal before the reserve writes its
    own staging folder in a temporary folder)."""
    import dprelease.tasks.publish

    out = tmp_path / "out"
    seen: dict[str, Path] = {}
    real = dprelease.tasks.publish.write_bundle_files

    def looking(staging, dest, *args, **kwargs):
        if staging.parent == out:
            _assert_private(staging / "internal")
            assert _mode(staging) == 0o700 and _mode(staging / "public") == 0o755
            reports = {p.name for p in (staging / "internal").iterdir()}
            assert {"validation_input.json", "utility.json", "report.html"} <= reports
            seen["staging"] = staging
            if fail:
                raise RuntimeError("a step failed after the reports were written")
        return real(staging, dest, *args, **kwargs)

    monkeypatch.setattr(dprelease.tasks.publish, "write_bundle_files", looking)
    spec = write_spec(tmp_path, adult_rows(300), synthetic_rows=200)
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r"])
    assert (result.exit_code != 0) == fail, result.output
    return out, seen


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_a_release_through_the_cli_serves_public_only(tmp_path, monkeypatch, umask):
    out, seen = _release_cli(tmp_path, monkeypatch)
    assert "staging" in seen  # looked at mid-run
    bundle = out / "r"
    assert _mode(bundle) == 0o755
    _assert_public(bundle / "public")
    _assert_private(bundle / "internal")
    assert not list(out.glob(".staging-*"))


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("umask", [0o000], indirect=True, ids=["umask000"])  # the most open; both above
def test_a_failed_release_through_the_cli_keeps_its_reports_private(tmp_path, monkeypatch, umask):
    out, seen = _release_cli(tmp_path, monkeypatch, fail=True)
    assert "staging" in seen and not (out / "r").exists()
    (record,) = (out / "failures").iterdir()
    reports = {p.name for p in (record / "internal").iterdir()}
    assert {"report.html", "utility.json", "traceback.txt"} <= reports
    _assert_private(out / "failures")
