"""README.md: short, its links resolve, it points each role to its guide, and its Python
example runs (a release of the embedded demo through the Python API)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.guides import ROOT, broken_links

README = ROOT / "README.md"
ROLE_GUIDES = [
    "docs/steward/index.md",
    "docs/analyst/index.md",
    "docs/auditor/index.md",
    "docs/operator/index.md",
    "docs/api.md",
    "docs/layout.md",
    "CONTRIBUTING.md",
]


def test_readme_is_at_most_200_lines_and_15_kb():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert len(text.encode("utf-8")) <= 15_000


def test_readme_links_resolve_and_reach_every_role_guide():
    assert broken_links(README) == []
    linked = {target.partition("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", README.read_text())}
    assert [g for g in ROLE_GUIDES if g not in linked] == []


def test_contributing_links_resolve_and_names_files_that_exist():
    """The developer's page: its links resolve, and every repository path it names exists."""
    page = ROOT / "CONTRIBUTING.md"
    text = page.read_text(encoding="utf-8")
    assert broken_links(page) == []
    named = set(re.findall(r"`((?:tests|mechanisms|tasks|benchmarks|docs|\.ci)/[\w./-]+)`", text))
    named |= set(re.findall(r"((?:tests|benchmarks)/[\w/-]+\.py)", text))
    assert named and [p for p in sorted(named) if not (ROOT / p).exists()] == []


def _python_example() -> str:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "README.md shows one Python example, the one this test runs"
    return blocks[0]


@pytest.mark.e2e
@pytest.mark.deploy  # 84 s: the background tier, beside the guides
def test_the_readme_python_example_publishes_a_bundle(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        GX_ANALYTICS_ENABLED="false",
    )
    run = subprocess.run(
        [sys.executable, "-c", _python_example()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    bundles = [p for p in (tmp_path / "releases").iterdir() if (p / "public" / "synthetic.csv").is_file()]
    assert len(bundles) == 1
    assert str(bundles[0].relative_to(tmp_path)) in run.stdout
