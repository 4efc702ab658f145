"""A user-visible change does not land without a CHANGELOG line (issue 42): the CLI's
commands and options, the spec's fields and the ledger's columns (``tests/interface.py``)
are compared with the snapshot of the last version, and each line added or removed since
must be named, in backticks, in the CHANGELOG's ``[Unreleased]`` section. The version has
one source, and each version has its snapshot and its CHANGELOG section."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dprelease
from tests.interface import SNAPSHOTS, interface, snapshot_path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _latest() -> tuple[str, set[str]]:
    versions = [p.stem.removeprefix("interface-") for p in SNAPSHOTS.glob("interface-*.json")]
    v = max(versions, key=_version_key)
    return v, set(json.loads(snapshot_path(v).read_text())["interface"])


def unreleased(text: str) -> str:
    """The CHANGELOG's ``[Unreleased]`` section."""
    return text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


def unannounced(changed: set[str], notes: str) -> list[str]:
    """The changed lines whose name (the last word, or a column's name after its table) is
    not in backticks in ``notes``."""
    named = set(re.findall(r"`([^`]+)`", notes))
    words = {w for n in named for w in re.split(r"[\s.:=]+", n)} | named
    return sorted(line for line in changed if re.split(r"[ .]", line)[-1] not in words)


def test_every_change_since_the_last_version_is_in_the_changelog() -> None:
    version, recorded = _latest()
    now = interface()
    added, removed = now - recorded, recorded - now
    missing = unannounced(added | removed, unreleased(CHANGELOG.read_text(encoding="utf-8")))
    assert not missing, (
        f"since {version}, these changed without a CHANGELOG line under [Unreleased] naming them in "
        f"backticks: {missing} (added: {sorted(added)}, removed: {sorted(removed)}). Add one, with "
        "an 'Upgrading' note if it breaks something; at a release, record the new version's "
        "snapshot: python -m tests.interface VERSION"
    )


def test_the_version_has_one_source_a_snapshot_and_a_changelog_section() -> None:
    from importlib import metadata

    from dprelease._version import __version__

    assert dprelease.__version__ == __version__ == metadata.version("dprelease")
    version, _ = _latest()
    assert version == __version__, f"record the snapshot of {__version__}: python -m tests.interface"
    assert f"## [{__version__}] - " in CHANGELOG.read_text(encoding="utf-8")


def test_the_check_names_what_it_misses() -> None:
    """The comparison can fail: a new option absent from the notes is reported, a named one
    and a renamed column (named after its table) are not."""
    changed = {
        "cli: dprelease release --dry-run",
        "spec: MechanismSpec.value_grid",
        "ledger: ledger_entries.version",
    }
    notes = "- `mechanism.value_grid: true` adds ...\n- ledger rows carry `ledger_entries.version`"
    assert unannounced(changed, notes) == ["cli: dprelease release --dry-run"]


def test_the_cli_prints_the_version_and_the_commit() -> None:
    from typer.testing import CliRunner

    from dprelease.cli.main import app

    got = CliRunner().invoke(app, ["--version"])
    assert got.exit_code == 0
    assert re.fullmatch(
        rf"dprelease {re.escape(dprelease.__version__)} \(commit ([0-9a-f]{{40}}|unknown)\)\n", got.output
    )


def test_the_commit_is_this_checkouts_or_unknown(tmp_path) -> None:
    """A copy of the package inside some other repository (a virtual environment in a
    user's project) names no commit: that repository's commit is not this code's."""
    import subprocess

    from dprelease._version import commit

    assert re.fullmatch(r"[0-9a-f]{40}", commit())  # this checkout: dprelease/ at its top
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inner = tmp_path / ".venv" / "site-packages" / "dprelease"
    inner.mkdir(parents=True)
    assert commit(inner / "_version.py") == "unknown"
