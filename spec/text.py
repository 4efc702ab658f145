"""The one rule for text in a release spec: every string field (column names, categories,
levels, tokens, names, formulas, formats, paths, the draft's notes) is validated by
``text_problem``, so that whatever the spec accepts can be written by every writer of a
release (the rehearsal's and the bundle's CSV, Parquet, JSON and HTML, Prefect's database, a
YAML draft) and shown on a terminal as itself.

The rule: at most ``MAX_LABEL`` characters (``MAX_TEXT`` for the draft's prose and paths), and
none of

- a control character (C0, DEL, C1): a terminal runs it as an escape sequence;
- a lone surrogate (U+D800–U+DFFF): not Unicode text; no UTF-8 file, Parquet string or JSON
  database can hold it;
- a line or paragraph separator (U+2028, U+2029): a line break to YAML and line-based readers;
- a bidirectional embedding, override or isolate (U+202A–U+202E, U+2066–U+2069): terminals and
  browsers then show other text than the value (the "Trojan Source" attack);
- a noncharacter (U+FDD0–U+FDEF and the last two code points of every plane): not for
  interchange; YAML refuses them.

Text is not normalised (NFC): a category must equal the data's spelling, code point for code
point, and an NFD file (e.g. from macOS) must stay declarable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

__all__ = [
    "CONTROLS",
    "MAX_LABEL",
    "MAX_TEXT",
    "UNWRITABLE",
    "Label",
    "PathText",
    "Prose",
    "text_problem",
    "visible",
]

MAX_LABEL = 1_000
"""The most characters of a name, category, level or token: more than any codebook's label,
and within YAML's limit on a key (1,024 characters: a column name is a key of ``schema``)."""
MAX_TEXT = 10_000
"""The most characters of a path or a sentence of the draft."""

CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (C0, DEL, C1): a terminal runs them as escape sequences."""
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17)
)
_KINDS = (
    (CONTROLS, "a control character (C0, DEL or C1, which a terminal runs as escape sequences)"),
    (
        re.compile("[\ud800-\udfff]"),
        "a lone surrogate (U+D800 to U+DFFF: not Unicode text, no file holds it)",
    ),
    (re.compile("[\u2028\u2029]"), "a line or paragraph separator (U+2028, U+2029: a line break to YAML)"),
    (
        re.compile("[\u202a-\u202e\u2066-\u2069]"),
        "a bidirectional control (U+202A to U+202E, U+2066 to U+2069: a terminal or browser would show other "
        "text than the value)",
    ),
    (re.compile(f"[{_NONCHARACTERS}]"), "a Unicode noncharacter (such as U+FFFE: not for interchange)"),
)
UNWRITABLE = re.compile("|".join(pattern.pattern for pattern, _ in _KINDS))
"""Every character the rule refuses."""


def visible(text: str) -> str:
    """``text`` with each character the rule refuses written as its Python escape (``\\x1b``,
    ``\\ud800``), so a message can quote any text a spec or a file holds."""
    return UNWRITABLE.sub(lambda m: repr(m[0])[1:-1], text)


def _quoted(text: str) -> str:
    """``text`` as a message quotes it: escaped (``repr``), cut after 40 characters."""
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "…"


def text_problem(text: str, limit: int = MAX_LABEL) -> str | None:
    """What breaks the rule in ``text`` (a sentence naming the text, the kind of character or
    the length, and what to do), or None."""
    for pattern, kind in _KINDS:
        if pattern.search(text):
            return (
                f"{_quoted(text)} must hold no control characters, nor other characters a release's files "
                f"cannot hold or a terminal cannot show as they are: it holds {kind}; change it in the file "
                "and the spec"
            )
    if len(text) > limit:
        return f"{_quoted(text)} must be at most {limit:,} characters long (it has {len(text):,})"
    return None


def _label(v: str) -> str:
    problem = text_problem(v)
    if problem:
        raise ValueError(problem)
    return v


def _prose(v: str) -> str:
    problem = text_problem(v, MAX_TEXT)
    if problem:
        raise ValueError(problem)
    return v


def _path(v: Any) -> Any:
    if isinstance(v, str | Path):
        _prose(str(v))
    return v


Label = Annotated[str, AfterValidator(_label)]
"""A column name, category, level, token, name, formula or format: text shown on terminals
and written to files, at most ``MAX_LABEL`` characters."""
Prose = Annotated[str, AfterValidator(_prose)]
"""A sentence of the draft: the rule, at most ``MAX_TEXT`` characters."""
PathText = Annotated[Path, BeforeValidator(_path)]
"""A path: the rule on its text, at most ``MAX_TEXT`` characters."""
