"""A corpus of hostile release specs (issue 30): each is the demo spec (``tests.helpers``
``write_spec``) with one attack on the spec language's limits, and the refusal it must
meet. ``load_spec`` refuses every one with a ``SpecError`` naming ``field`` and stating
``rule`` (``tests/spec/test_hostile_specs.py`` checks it does so within 10 s and 500 MB);
``dprelease validate`` and ``dprelease release`` exit 2 on it, before any budget is reserved
or any data read.

A case changes the demo spec either as a document (``mutate``: the spec's dict → the hostile
dict) or, for attacks on YAML itself that no dict can express, as text (``text``: the spec's
YAML → the hostile YAML). ``HostileSpec.write(folder, data)`` writes it as ``spec.yaml`` (and
``data``, if given, as ``data.csv`` beside it) and returns its path::

    for case in CORPUS:
        spec = case.write(tmp_path / case.name, adult_rows(200))
        # dprelease validate <spec>  /  dprelease release <spec> --out ...  -> exit 2
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd
import yaml

from tests.helpers import write_spec

__all__ = ["CORPUS", "HostileSpec"]

ESCAPE_COLUMN = "\x1b]0;pwned\x07"
"""A column name holding a terminal escape sequence (OSC: set the window title)."""
SGR_CATEGORY = "\x1b[31mred"
"""A category holding a colour code (SGR)."""


@dataclass(frozen=True)
class HostileSpec:
    """One hostile spec: the refusal names ``field`` and states ``rule`` (message fragments)."""

    name: str
    field: str
    rule: str
    mutate: Callable[[dict], dict] | None = None
    text: Callable[[str], str] | None = None

    def write(self, folder: Path, data: pd.DataFrame | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = write_spec(folder, data)
        if self.mutate is not None:
            path.write_text(yaml.safe_dump(self.mutate(yaml.safe_load(path.read_text())), sort_keys=False))
        if self.text is not None:
            path.write_text(self.text(path.read_text()))
        return path


def _column(name: str, body: dict) -> Callable[[dict], dict]:
    """Add the column ``name`` to the demo schema."""

    def mutate(spec: dict) -> dict:
        spec["schema"][name] = body
        return spec

    return mutate


def _id(fmt: str) -> Callable[[dict], dict]:
    return _column("row_id", {"type": "id", "format": fmt})


def _formula(formula: str) -> Callable[[dict], dict]:
    return _column("derived", {"type": "derived", "formula": formula})


def _dataset_name(spec: dict) -> dict:
    spec["dataset"]["name"] = "a" * 300
    return spec


def _many_categories(spec: dict) -> dict:
    spec["schema"]["workclass"]["categories"] = [f"c{i}" for i in range(100_000)]
    return spec


def _escape_in_category(spec: dict) -> dict:
    spec["schema"]["sex"]["categories"] = ["Female", SGR_CATEGORY]
    return spec


def _alias_bomb(text: str) -> str:
    """Nine levels of nine aliases ("billion laughs"): 9⁹ strings if expanded."""
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        prev, here = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{here}: &{here} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(levels) + "\n" + text


def _second_privacy(text: str) -> str:
    """A second ``privacy:`` block: YAML would keep the last (ε 50) silently."""
    return text + "privacy: {epsilon: 50.0, delta: 1.0e-6, accountant: zcdp}\n"


CORPUS: list[HostileSpec] = [
    HostileSpec(
        "id-format-huge-width",
        "schema.row_id.id.format",
        "format ('X{0:>999999999}') must format the number only as [0][width][d|x|X]",
        mutate=_id("X{0:>999999999}"),
    ),
    HostileSpec(
        "id-format-object-leak",
        "schema.row_id.id.format",
        "must hold exactly one integer field",
        mutate=_id("X{0}{0.__class__.__base__.__subclasses__}"),
    ),
    HostileSpec(
        "id-format-globals",
        "schema.row_id.id.format",
        "without attribute or index access",
        mutate=_id("X{0.__class__.__init__.__globals__}"),
    ),
    HostileSpec(
        "id-format-repr",
        "schema.row_id.id.format",
        "or a conversion (!r, !s, !a)",
        mutate=_id("X{0!r}"),
    ),
    HostileSpec(
        "id-format-char",
        "schema.row_id.id.format",
        "format ('X{:c}') must format the number only as [0][width][d|x|X]",
        mutate=_id("X{:c}"),
    ),
    HostileSpec(
        "formula-400-digit-literal",
        "schema.derived.derived.formula",
        "numbers must be finite floats",
        mutate=_formula("age * " + "9" * 400),
    ),
    HostileSpec(
        "formula-1000-unary-minus",
        "schema.derived.derived.formula",
        "must be at most 1000 characters",
        mutate=_formula("-" * 1000 + "age"),
    ),
    HostileSpec(
        "formula-deep",
        "schema.derived.derived.formula",
        "nested at most 64 deep",
        mutate=_formula("-" * 500 + "age"),
    ),
    HostileSpec(
        "yaml-alias-bomb",
        "line 1",
        "YAML anchors and aliases (&name, *name) are not allowed",
        text=_alias_bomb,
    ),
    HostileSpec(
        "yaml-duplicate-privacy",
        "key 'privacy'",
        "is stated twice in one mapping",
        text=_second_privacy,
    ),
    HostileSpec(
        "date-bounds-extreme",
        "schema.born.date.bounds",
        "must lie within 1678-01-01 and 2261-12-31",
        mutate=_column("born", {"type": "date", "bounds": [date(1, 1, 1), date(9999, 12, 31)]}),
    ),
    HostileSpec(
        "categories-100000",
        "schema.workclass.nominal.categories",
        "categories must number at most 10,000",
        mutate=_many_categories,
    ),
    HostileSpec(
        "dataset-name-300",
        "dataset.name",
        "name must be at most 56 characters",
        mutate=_dataset_name,
    ),
    HostileSpec(
        "escape-in-column-name",
        "schema.\\x1b]0;pwned\\x07",
        "must hold no control characters",
        mutate=_column(ESCAPE_COLUMN, {"type": "nominal", "categories": ["a", "b"]}),
    ),
    HostileSpec(
        "escape-in-category",
        "schema.sex.nominal.categories.1",
        "must hold no control characters",
        mutate=_escape_in_category,
    ),
]
