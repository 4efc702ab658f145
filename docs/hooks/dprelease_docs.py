"""mkdocs hook: the pages generated at build time, so that they cannot go stale.

- ``benchmarks/*.md``: one page per ``## `` section of BENCHMARKS.md (kept as the renderer
  writes it), its figures copied beside them, listed under the nav's "Benchmarks" section;
- ``reference/spec.md``: the release spec's reference, generated from the pydantic models
  (``spec_reference.py``) where the page holds ``<!-- generated: spec-reference -->``;
- ``mechanisms/index.md``: each mechanism's parameters from its params dataclass, where the
  page holds ``<!-- generated: mechanism-params -->``;
- ``changelog.md``: CHANGELOG.md as the packaging writes it.

Any missing source is an error, so ``mkdocs build --strict`` fails rather than publish a stale
or empty page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spec_reference import mechanism_params, spec_reference  # noqa: E402

BENCHMARKS = ROOT / "BENCHMARKS.md"
CHANGELOG = ROOT / "CHANGELOG.md"
SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
IMAGE = re.compile(r"\]\(benchmarks/(figures/[^)]+)\)")
MARKERS = {
    "<!-- generated: spec-reference -->": spec_reference,
    "<!-- generated: mechanism-params -->": mechanism_params,
}


def slug(title: str) -> str:
    """A page name that survives a retitled section: ``15. Quality against ε`` → ``section-15``,
    an unnumbered section by its words (``Summary`` → ``summary``)."""
    number = re.match(r"(\d+)\.", title)
    if number:
        return f"section-{number[1]}"
    return "-".join(re.findall(r"[a-z0-9]+", title.lower())) or "section"


def benchmark_sections() -> tuple[str, list[tuple[str, str, str]]]:
    """BENCHMARKS.md's preamble and its ``## `` sections as (file name, title, body)."""
    if not BENCHMARKS.is_file():
        raise PluginError(f"{BENCHMARKS} is missing: the benchmark pages are generated from it")
    text = BENCHMARKS.read_text(encoding="utf-8")
    heads = list(SECTION.finditer(text))
    if not heads:
        raise PluginError("BENCHMARKS.md has no '## ' section to make a page of")
    preamble = text[: heads[0].start()].split("\n", 1)[1]  # without its '# Benchmarks' title
    sections = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : after.start() if after else len(text)]
        sections.append((f"benchmarks/{slug(head[1])}.md", head[1].strip(), body))
    return preamble, sections


def section_page(title: str, body: str) -> str:
    """A section as a page: its title the page's, its subsections one level up, its figures
    linked beside it."""
    body = re.sub(r"^###", "##", body, flags=re.MULTILINE)
    body = IMAGE.sub(r"](\1)", body)
    source = "Generated from `BENCHMARKS.md` (written by `make bench`, `benchmarks/run.py`)."
    return f"# {title}\n\n*{source}*\n{body}"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The generated benchmark pages, in BENCHMARKS.md's order, under the nav's "Benchmarks"."""
    _, sections = benchmark_sections()
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Benchmarks" in entry:
            entry["Benchmarks"] = [*entry["Benchmarks"], *({title: uri} for uri, title, _ in sections)]
            return config
    raise PluginError("mkdocs.yml's nav has no 'Benchmarks' section for the generated pages")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages and the benchmark figures."""
    _, sections = benchmark_sections()
    for uri, title, body in sections:
        files.append(File.generated(config, uri, content=section_page(title, body)))
    for figure in sorted((ROOT / "benchmarks" / "figures").glob("*")):
        files.append(File.generated(config, f"benchmarks/figures/{figure.name}", abs_src_path=str(figure)))
    if not CHANGELOG.is_file():
        raise PluginError(f"{CHANGELOG} is missing: the changelog page is generated from it")
    files.append(File.generated(config, "changelog.md", content=CHANGELOG.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files, **_: Any) -> str:
    """Fill the generated parts of hand-written pages; the benchmark index gets the preamble."""
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    if page.file.src_uri == "benchmarks/index.md":
        preamble, _ = benchmark_sections()
        markdown = markdown.replace("<!-- generated: benchmarks-preamble -->", preamble.strip())
    return markdown
