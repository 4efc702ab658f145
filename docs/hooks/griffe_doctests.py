"""Griffe extension: doctest examples (``>>>`` lines and their output) in a docstring are shown
as Python code blocks on the API page, not read as Markdown (where ``[:3]`` followed by
``['age', ...]`` would be taken for a link)."""

from __future__ import annotations

from typing import Any

import griffe


def fence(text: str) -> str:
    """Each run of lines from a ``>>>`` line to the next blank line, fenced as ``pycon``."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if not inside and line.lstrip().startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
