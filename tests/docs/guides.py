"""What the docs show a user to type: the ``console`` blocks' ``$ `` commands, and the files
a guide shows in full (a ``yaml`` block with ``title="FILE"``), in the order a reader meets them."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
EXITS = re.compile(r"\s+#\s*exits (\d+)\b.*$")
LINK = re.compile(r"\]\(([^)\s]+)\)")

GUIDES = [  # the order the commands run in: the steward's release first, the others read it
    "docs/steward/index.md",
    "docs/getting-started.md",
    "docs/analyst/index.md",
    "docs/auditor/index.md",
    "README.md",
]


@dataclass(frozen=True)
class Command:
    """A shell line as a user types it, and the exit code the guide says it ends with
    (``# exits N`` at the end of the line; 0 when the guide says nothing)."""

    line: str
    exit_code: int


@dataclass(frozen=True)
class FileShown:
    """A file a guide shows in full, to be written before the commands after it run."""

    name: str
    text: str


Step = Command | FileShown


def steps(markdown: str) -> list[Step]:
    """The commands and files of one page, in page order."""
    found: list[Step] = []
    for lang, info, body in FENCE.findall(markdown):
        title = TITLE.search(info)
        if lang == "console":
            for line in body.splitlines():
                if line.startswith("$ "):
                    expected = EXITS.search(line)
                    command = EXITS.sub("", line[2:]).strip()
                    found.append(Command(command, int(expected[1]) if expected else 0))
        elif title:
            found.append(FileShown(title[1], body))
    return found


def sequence(pages: list[str] = GUIDES) -> list[Step]:
    """Every page's steps in order, each command once (a command shown on several pages, with
    the same expected exit code, runs where it is first met)."""
    seen: set[Step] = set()
    out: list[Step] = []
    for page in pages:
        for step in steps((ROOT / page).read_text(encoding="utf-8")):
            if step not in seen:
                seen.add(step)
                out.append(step)
    return out


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default ``slugify``)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(markdown: str) -> set[str]:
    """The anchors of a Markdown file's headings."""
    return {slug(h.replace("`", "")) for h in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown file whose target file, or anchor in it, is missing."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(target)
    return broken
