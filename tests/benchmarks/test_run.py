"""``benchmarks/run.py`` records no figures from a dirty tree (issue 41): ``git status
--porcelain`` listing anything besides the files it writes makes it refuse, unless
``--allow-dirty``, whose entries are stored ``"dirty": true``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def test_only_the_files_run_py_writes_leave_the_tree_clean(run: ModuleType):
    assert run.uncommitted("") == []
    written = (
        " M BENCHMARKS.md\n M benchmarks/results.json\n?? docs/benchmarks/quality.md\n"
        " M docs/benchmarks/summary.md\n M benchmarks/figures/quality_vs_epsilon.png\n"
    )
    assert run.uncommitted(written) == []
    assert run.uncommitted(" M mechanisms/mst.py\nM  pyproject.toml\n") == [
        "mechanisms/mst.py",
        "pyproject.toml",
    ]
    assert run.uncommitted("?? scratch.py\n") == ["scratch.py"]
    # look-alikes of the written files are not them
    assert run.uncommitted("?? BENCHMARKS.md.orig\n?? docs/benchmarks.md\n") == [
        "BENCHMARKS.md.orig",
        "docs/benchmarks.md",
    ]
    # a rename counts unless both ends are written by run.py
    assert run.uncommitted("R  docs/benchmarks/a.md -> docs/a.md\n") == ["docs/benchmarks/a.md -> docs/a.md"]
    assert run.uncommitted("R  docs/benchmarks/a.md -> docs/benchmarks/b.md\n") == []


def test_refusal_names_the_paths_unless_allow_dirty(run: ModuleType):
    assert run.refusal([], allow_dirty=False) is None
    assert run.refusal(["flows/pipeline.py"], allow_dirty=True) is None
    reason = run.refusal(["flows/pipeline.py"], allow_dirty=False)
    assert reason is not None and "flows/pipeline.py" in reason and "--allow-dirty" in reason


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_uncommitted_reads_real_git_porcelain(run: ModuleType, tmp_path: Path):
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True)
        return out.stdout

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "empty")
    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    (tmp_path / "docs" / "benchmarks" / "quality.md").write_text("x")
    (tmp_path / "BENCHMARKS.md").write_text("x")
    assert run.uncommitted(git("status", "--porcelain", "--untracked-files=all")) == []
    (tmp_path / "engine.py").write_text("x")
    assert run.uncommitted(git("status", "--porcelain", "--untracked-files=all")) == ["engine.py"]


@pytest.fixture
def sandbox(run: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """run.main with its experiment, git, machine and files replaced: what it would store."""
    results = tmp_path / "results.json"
    results.write_text("{}")
    state: dict[str, Any] = {"tree": ("abc1234", []), "ran": [], "documents": []}
    monkeypatch.setattr(run, "RESULTS", results)
    monkeypatch.setattr(run, "tree_state", lambda: state["tree"])
    monkeypatch.setattr(run, "machine", lambda: {"commit": "abc1234+uncommitted changes"})
    monkeypatch.setattr(run, "experiment", lambda item, args, partial=None: state["ran"].append(item) or {})
    monkeypatch.setattr(run, "section", lambda item, entry: [])
    monkeypatch.setattr(run, "write_documents", lambda r: state["documents"].append(r) or [])
    state["stored"] = lambda: json.loads(results.read_text())
    return state


def test_a_dirty_tree_is_refused_before_anything_runs(run: ModuleType, sandbox, capsys):
    sandbox["tree"] = ("abc1234", ["mechanisms/mst.py"])
    assert run.main(["--only", "mechanism"]) == run.REFUSED
    assert sandbox["ran"] == [] and sandbox["documents"] == [] and sandbox["stored"]() == {}
    assert "mechanisms/mst.py" in capsys.readouterr().err


def test_allow_dirty_stores_the_entry_as_dirty(run: ModuleType, sandbox):
    sandbox["tree"] = ("abc1234", ["mechanisms/mst.py"])
    assert run.main(["--only", "mechanism", "--allow-dirty"]) == 0
    entry = sandbox["stored"]()["mechanism"]
    assert entry["dirty"] is True and entry["machine"]["commit"] == "abc1234"


def test_a_clean_tree_stores_a_clean_entry(run: ModuleType, sandbox):
    assert run.main(["--only", "mechanism"]) == 0
    entry = sandbox["stored"]()["mechanism"]
    assert entry["dirty"] is False and entry["machine"]["commit"] == "abc1234"
    assert sandbox["documents"]  # BENCHMARKS.md and the pages rewritten


def test_no_write_runs_on_a_dirty_tree_and_records_nothing(run: ModuleType, sandbox):
    sandbox["tree"] = ("abc1234", ["mechanisms/mst.py"])
    assert run.main(["--only", "mechanism", "--no-write"]) == 0
    assert sandbox["ran"] == ["mechanism"] and sandbox["stored"]() == {} and sandbox["documents"] == []


def test_render_only_runs_nothing(run: ModuleType, sandbox):
    sandbox["tree"] = ("abc1234", ["mechanisms/mst.py"])
    assert run.main(["--render-only"]) == 0
    assert sandbox["ran"] == [] and len(sandbox["documents"]) == 1
