"""A release spec as a document: the tree of mappings, lists and scalars that a YAML file or
a Python mapping holds, bounded and made plain before it is validated, so that a spec given
either way meets the same limits and reads back from the file the API writes
(``spec_text``) as the same tree.

Limits (``Size``), counted alike by the YAML reader as it composes the file
(``spec.loading``) and by ``plain_document`` on a mapping: at most ``MAX_DEPTH`` levels, at
most ``MAX_NODES`` nodes (every key, value, list and mapping) and ``MAX_CHARS`` characters of
scalar text (a number counted as the digits the file writes). A list or mapping a Python
spec uses in several places counts in each (its expansion is the document: a chain of shared
lists is a "billion laughs": it is counted, not walked, again) and one that holds itself is
refused (a cycle); a YAML file can share nothing (anchors and aliases are refused). A file
is at most ``MAX_FILE_BYTES`` long: the most the API's own file of a document within the
limits can take.

Plain values: keys are text; numbers are ``int`` or ``float`` (numpy scalars, ``Decimal``,
``Fraction`` converted; ``bool`` and ``numpy.bool_`` stay booleans, not numbers; NaN and ±inf
stay what they are, for each field's rule to refuse); lists (tuples, numpy arrays) and
mappings are copied; dates and times stay (the schema reads them), paths become text. A set
(no order) or any other object is refused, naming the field.
"""

from __future__ import annotations

import json
import numbers
import os
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from dprelease.spec.release import SpecError
from dprelease.spec.text import visible

__all__ = ["MAX_CHARS", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "Size", "plain_document", "spec_text"]

MAX_DEPTH = 16
"""Levels of nesting: a release spec needs 5 (``schema.age.bounds`` and its numbers)."""
MAX_NODES = 200_000
"""Keys, values, lists and mappings: 20 columns of 10,000 categories (``MAX_CATEGORIES``)."""
MAX_CHARS = 2_000_000
"""Characters of scalar text (keys, strings, numbers as written)."""
MAX_FILE_BYTES = 6 * MAX_CHARS + 8 * MAX_NODES
"""A spec file's bytes: the API's file (``spec_text``) writes a character in at most 6 bytes
(an escape, ``\\u0085``) and a node's punctuation (quotes, ``": "``, ``", "``, brackets) in
at most 8, so a document within the limits always fits."""


Place = tuple
"""A place in a document, linked to its parent's: ``()`` for the root, ``(parent, key)``
below it (a key, or a list's index); ``_path`` spells it ``schema.age.bounds.0``."""


class Size:
    """The nodes and characters of a document counted so far, refused past the limits;
    ``where`` names the place (a field's dotted path, or a YAML line); ``deepest``: the
    deepest level met."""

    def __init__(self, name: str) -> None:
        self.name, self.nodes, self.chars, self.deepest = name, 0, 0, 0

    def add(self, depth: int, chars: int, where: Place | Callable[[], str], nodes: int = 1) -> None:
        """``nodes`` nodes down to ``depth`` (the root is at 1) holding ``chars`` characters of
        text; ``where`` names the place in a refusal (a field's ``Place``, or a function naming
        it)."""
        self.nodes += nodes
        self.chars += chars
        self.deepest = max(self.deepest, depth)
        if depth > MAX_DEPTH:
            raise SpecError(
                f"spec '{self.name}' is nested too deeply to be a release spec: {_named(where)} is more "
                f"than {MAX_DEPTH} levels deep (a release spec needs 5)"
            )
        if self.nodes > MAX_NODES or self.chars > MAX_CHARS:
            what = f"{MAX_NODES:,} values" if self.nodes > MAX_NODES else f"{MAX_CHARS:,} characters of text"
            raise SpecError(
                f"spec '{self.name}' is too large to be a release spec: it holds more than {what} (at "
                f"{_named(where)}; a list or mapping used in several places counts in each); declare "
                "fewer or coarser categories, or type: drop for a column of free text"
            )


def _path(where: Place) -> str:
    """A place as a field's dotted path, control characters made visible."""
    keys = []
    while where:
        where, key = where
        keys.append(visible(str(key)))
    return ".".join(reversed(keys)) or "(top level)"


def _named(where: Place | Callable[[], str]) -> str:
    return where() if callable(where) else _path(where)


def _refuse(name: str, parts: Place, rule: str) -> SpecError:
    return SpecError(f"invalid release spec '{name}':\n  spec field '{_path(parts)}': {rule}")


def scalar_chars(value: Any) -> int:
    """The characters of a plain scalar as ``spec_text`` writes it and YAML reads it back
    (a string's own characters, a number's digits, ``true``, ``null``, an ISO date)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, date):
        return len(value.isoformat())
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    return len(repr(value))  # JSON writes an int's digits and a finite float's repr


def _number(value: Any, name: str, parts: Place) -> bool | int | float:
    """A number as ``int`` or ``float``, a boolean as ``bool``; any other value refused."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        value = int(value)
        if value.bit_length() > 4096:  # more digits than Python writes (its 4,300-digit limit)
            raise _refuse(name, parts, "a number of more than 1,200 digits is not a spec value")
        return value
    if isinstance(value, numbers.Real | Decimal):
        try:
            return float(value)
        except (OverflowError, ValueError):  # a huge Fraction, a signalling NaN
            raise _refuse(name, parts, f"{type(value).__name__} {str(value)[:40]} is not a float") from None
    raise _refuse(
        name,
        parts,
        f"a {type(value).__name__} is not a spec value; give text, a number, true or false, null, a date, "
        "a list or a mapping",
    )


class _Plain:
    """One walk of a document: ``held``, the ids of the lists and mappings that hold the
    value being made plain (a cycle); ``made``, each list or mapping made plain so far, by
    id, with its nodes, characters and levels below it, so that one used in several places
    is counted in each without being walked again (a bomb of shared lists is refused at once)."""

    def __init__(self, name: str) -> None:
        self.name, self.size = name, Size(name)
        self.held: set[int] = set()
        self.made: dict[int, tuple[object, dict | list, int, int, int]] = {}

    def value(self, value: Any, parts: Place, depth: int) -> Any:
        """``value`` made plain, counted at ``depth``."""
        kind = type(value)
        if kind is str or kind is float or kind is bool or value is None:  # most of a spec
            self.size.add(depth, scalar_chars(value), parts)
            return value
        if isinstance(value, np.ndarray):
            if value.size > MAX_NODES:  # refused before the list is made
                self.size.add(depth, 0, parts, nodes=value.size)
            value = value.tolist()
        if isinstance(value, dict | list | tuple | Mapping):
            return self.shared(value, parts, depth)
        if isinstance(value, set | frozenset):
            raise _refuse(self.name, parts, "a set has no order: give a list")
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            value = str.__str__(value)
        elif isinstance(value, datetime):
            value = datetime.combine(value.date(), value.timetz())  # e.g. a pandas Timestamp
        elif isinstance(value, date):
            value = date(value.year, value.month, value.day)
        else:
            value = _number(value, self.name, parts)
        self.size.add(depth, scalar_chars(value), parts)
        return value

    def shared(self, value: Mapping | list | tuple, parts: Place, depth: int) -> dict | list:
        """A list or mapping made plain once, and counted again wherever it is used again."""
        key = id(value)
        if key in self.held:
            raise _refuse(
                self.name, parts, "it holds the list or mapping it is in (a cycle); a spec is a tree"
            )
        if key in self.made:
            _, plain, nodes, chars, below = self.made[key]
            self.size.add(depth + below, chars, parts, nodes=nodes)
            return plain
        size = self.size
        nodes, chars, deepest = size.nodes, size.chars, size.deepest
        size.deepest = depth  # the deepest level of this list or mapping alone
        size.add(depth, 0, parts)
        self.held.add(key)
        try:
            plain = self.container(value, parts, depth)
        finally:
            self.held.discard(key)
        # the value is kept with its copy: a list made from an array would otherwise be freed,
        # and its id given to the next one
        self.made[key] = (value, plain, size.nodes - nodes, size.chars - chars, size.deepest - depth)
        size.deepest = max(deepest, size.deepest)
        return plain

    def container(self, value: Mapping | list | tuple, parts: Place, depth: int) -> dict | list:
        """A mapping or list made plain: its keys text, its values ``value``."""
        if not isinstance(value, Mapping):
            return [self.value(v, (parts, i), depth + 1) for i, v in enumerate(value)]
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _refuse(
                    self.name,
                    parts,
                    f"key {str(k)[:40]!r} ({type(k).__name__}) must be text, as every key is",
                )
            key = str.__str__(k)
            here = (parts, key)
            self.size.add(depth + 1, len(key), here)
            out[key] = self.value(v, here, depth + 1)
        return out


def plain_document(raw: object, name: str) -> dict:
    """``raw`` (a mapping from YAML or Python) as a plain document within the limits, or a
    ``SpecError`` naming the field (or saying it is not a mapping)."""
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"spec '{name}' must be a mapping of the spec's fields (dataset, schema, privacy, ...), not "
            f"{type(raw).__name__}"
        )
    doc = _Plain(name).value(raw, (), 1)
    assert isinstance(doc, dict)
    return doc


_RAW_IN_YAML = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
"""Characters JSON leaves raw (``ensure_ascii=False``) that YAML reads otherwise: DEL and C1
(refused raw), NEL and the separators (line breaks), U+FFFE/U+FFFF (refused raw)."""


def _iso(value: Any) -> str:
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a plain spec value")


def spec_text(document: Mapping[str, Any]) -> str:
    """A plain document as the text of a spec file: JSON, which the spec's YAML reader reads
    back as the same document (dates and times as ISO text, which the schema reads alike).
    Non-ASCII text is written as itself (YAML reads an escaped character outside the Basic
    Multilingual Plane as two lone surrogates); the characters YAML reads otherwise raw are
    escaped. NaN or ±inf, which every numeric field refuses, cannot be written."""
    text = json.dumps(document, ensure_ascii=False, allow_nan=False, default=_iso)
    return _RAW_IN_YAML.sub(lambda m: f"\\u{ord(m[0]):04x}", text)
