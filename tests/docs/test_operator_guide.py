"""The operator guide is split into pages (issue 41): ``docs/operator/index.md`` is the
overview, its table of steps links each numbered step to the page that holds it, every page of
the guide is reachable from the overview, and every relative link and anchor in the guide
resolves."""

from __future__ import annotations

import re

from tests.docs.guides import LINK, ROOT, broken_links, slug

GUIDE = ROOT / "docs" / "operator"
STEPS = 12
OWN_NUMBERING = {"upgrade.md"}
"""Pages whose numbered sections are their own procedure, not steps of the guide."""


def _step_headings() -> dict[int, tuple[str, str]]:
    """Each numbered step: the page that holds its ``## N. …`` heading, and that heading's anchor."""
    found: dict[int, tuple[str, str]] = {}
    for page in sorted(GUIDE.glob("*.md")):
        if page.name in OWN_NUMBERING:
            continue
        for number, title in re.findall(r"^## (\d+)\. (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE):
            assert int(number) not in found, f"step {number} is in {found[int(number)][0]} and {page.name}"
            found[int(number)] = (page.name, slug(f"{number}. {title}".replace("`", "")))
    return found


def test_every_step_is_on_one_page_and_the_overview_links_it():
    steps = _step_headings()
    assert sorted(steps) == list(range(1, STEPS + 1))
    overview = (GUIDE / "index.md").read_text(encoding="utf-8")
    for number, (page, anchor) in steps.items():
        assert f"| [{number}]({page}#{anchor}) |" in overview, f"step {number}: {page}#{anchor}"


def test_every_page_of_the_guide_is_linked_from_the_overview():
    overview = (GUIDE / "index.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in LINK.findall(overview)}
    pages = {page.name for page in GUIDE.glob("*.md")} - {"index.md"}
    assert sorted(pages - linked) == []


def test_the_guides_links_resolve():
    broken = {page.name: broken_links(page) for page in sorted(GUIDE.glob("*.md"))}
    assert {name: links for name, links in broken.items() if links} == {}
