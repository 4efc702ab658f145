"""mkdocs hook: the pages generated at build time, so that they cannot go stale.

- ``benchmarks/figures/``: the benchmark pictures beside the benchmark pages (the pages
  themselves, ``docs/benchmarks/<item>.md``, are written by ``benchmarks/run.py`` and listed in
  the nav; they link the pictures where they are in the repository, ``../../benchmarks/figures/``,
  and are pointed at the copies here);
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

CHANGELOG = ROOT / "CHANGELOG.md"
IMAGE = re.compile(r"\]\(\.\./\.\./benchmarks/(figures/[^)]+)\)")
"""A benchmark page's link to a picture in the repository's ``benchmarks/figures/``."""
MARKERS = {
    "<!-- generated: spec-reference -->": spec_reference,
    "<!-- generated: mechanism-params -->": mechanism_params,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the benchmark figures and the changelog."""
    for figure in sorted((ROOT / "benchmarks" / "figures").glob("*")):
        files.append(File.generated(config, f"benchmarks/figures/{figure.name}", abs_src_path=str(figure)))
    if not CHANGELOG.is_file():
        raise PluginError(f"{CHANGELOG} is missing: the changelog page is generated from it")
    files.append(File.generated(config, "changelog.md", content=CHANGELOG.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files, **_: Any) -> str:
    """Fill the generated parts of hand-written pages; point the benchmark pages' pictures at
    the copies beside them."""
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    if page.file.src_uri.startswith("benchmarks/"):
        markdown = IMAGE.sub(r"](\1)", markdown)
    return markdown
