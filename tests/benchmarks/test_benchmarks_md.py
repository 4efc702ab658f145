"""BENCHMARKS.md is a document, not a notebook (issue 41): at most 40 KB, the summary and one
short entry per experiment, each linking to the experiment's page under ``docs/benchmarks/``;
the file and the pages are what ``benchmarks/run.py --render-only`` writes from
``benchmarks/results.json``, and figures from an uncommitted tree are marked as such."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.docs.guides import LINK, broken_links

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
RESULTS = ROOT / "benchmarks" / "results.json"
MARK = "(unreproducible: uncommitted tree)"


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_benchmarks_md_is_at_most_40_kb():
    assert len(BENCHMARKS_MD.read_bytes()) <= 40_000


def test_every_link_of_benchmarks_md_resolves_and_each_item_links_its_page(render: ModuleType):
    assert broken_links(BENCHMARKS_MD) == []
    linked = {t.partition("#")[0] for t in LINK.findall(BENCHMARKS_MD.read_text(encoding="utf-8"))}
    assert [i for i in render.ITEMS if render.page_path(i) not in linked] == []
    assert all(not Path(t).is_absolute() for t in linked)  # relative: they work on GitHub too


def test_the_generated_pages_links_resolve(render: ModuleType):
    pages = [ROOT / render.page_path(i) for i in render.ITEMS] + [ROOT / render.PAGES_DIR / "summary.md"]
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in pages if broken_links(p)} == {}


def test_benchmarks_md_and_the_pages_are_what_the_renderer_writes(render: ModuleType, results):
    """Nothing edited by hand, nothing stale: ``run.py --render-only`` would write the same
    bytes (rerun it after changing the renderer or results.json)."""
    stale = [
        path
        for path, text in render.documents(results).items()
        if not (ROOT / path).is_file() or (ROOT / path).read_text(encoding="utf-8") != text
    ]
    assert stale == []


def test_every_page_is_in_the_sites_benchmarks_nav(render: ModuleType):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python", "#"))
    section = next(e["Benchmarks"] for e in config["nav"] if isinstance(e, dict) and "Benchmarks" in e)
    listed = {v if isinstance(v, str) else next(iter(v.values())) for v in section}
    wanted = {f"benchmarks/{i}.md" for i in render.ITEMS} | {"benchmarks/index.md", "benchmarks/summary.md"}
    assert wanted - listed == set()


def test_the_benchmarks_index_keeps_dates_not_minutes():
    text = (ROOT / "docs" / "benchmarks" / "index.md").read_text(encoding="utf-8")
    assert re.findall(r"\d{1,2}:\d{2}(?: UTC)?", text) == []


def test_figures_from_a_dirty_tree_are_marked_in_the_entry_the_summary_and_the_page(
    render: ModuleType, results
):
    clean = copy.deepcopy(results)
    clean["mechanism"]["dirty"] = False
    dirty = copy.deepcopy(results)
    dirty["mechanism"]["dirty"] = True

    def entry(md: str) -> str:
        return md.split("## 1. ", 1)[1].split("\n## ", 1)[0]

    def summary_row(md: str) -> str:
        return next(
            line for line in md.splitlines() if line.startswith("| [1](docs/benchmarks/mechanism.md)")
        )

    assert MARK not in entry(render.markdown(clean)) and MARK not in summary_row(render.markdown(clean))
    assert MARK in entry(render.markdown(dirty)) and MARK in summary_row(render.markdown(dirty))
    assert MARK in render.page("mechanism", dirty["mechanism"])
    assert MARK not in render.page("mechanism", clean["mechanism"])
    # a run stored before the "dirty" field: its commit's suffix says so
    old = copy.deepcopy(results["mechanism"])
    old.pop("dirty", None)
    old["machine"]["commit"] = "abc1234+uncommitted changes"
    assert MARK in render.page("mechanism", old)


def test_each_quality_row_from_an_uncommitted_tree_is_marked(render: ModuleType, results):
    """Item 15 is re-measured method by method: each table row carries the mark of the run
    that measured it, and the page counts them."""
    from render.fmt import dirty
    from render.quality import row_runs

    runs = row_runs(results["quality"])
    page = (ROOT / render.page_path("quality")).read_text(encoding="utf-8")
    marked = [line for line in page.splitlines() if line.startswith("| ") and f"*{MARK}*" in line]
    n_dirty = sum(bool(dirty(r)) for r in runs.values())
    assert n_dirty > 0 and len(marked) == n_dirty
    assert f"{n_dirty} of the {len(runs)} rows" in page
    assert f"{n_dirty} of {len(runs)} rows {MARK}" in BENCHMARKS_MD.read_text(encoding="utf-8")
