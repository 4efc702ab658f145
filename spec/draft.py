"""Draft specs (``dprelease init``): a release spec written from a data file's header
(and a Parquet file's declared column types), never from its values. Every value the
steward must supply from public knowledge is the placeholder ``FILL``; every guess the
steward must confirm is listed under ``draft.confirm``. ``load_spec`` refuses a spec that
still holds a ``FILL``, naming each; ``dprelease validate`` lists what is left to confirm,
and ``dprelease release`` refuses a spec with a ``draft`` section.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import yaml
from pydantic import Field

from dprelease.spec.columns import Strict
from dprelease.spec.text import CONTROLS, Label, Prose, visible

__all__ = ["FILL", "YAML12_FLOAT", "DraftSpec", "draft_text", "is_placeholder", "placeholders", "yaml_scalar"]

FILL = "FILL"
"""The placeholder of a value the steward supplies from public knowledge."""
YAML12_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)$")
"""A number with an exponent as YAML 1.2 writes it (``1e-6``), which YAML 1.1 reads as text:
the spec's reader reads it as a float (``spec.loading``), and the draft's writer quotes text
that looks like it (``yaml_scalar``)."""

KINDS = "continuous, date, datetime, ordinal, nominal, one_hot, derived, id or drop"


class DraftSpec(Strict):
    """What ``dprelease init`` guessed: ``source`` (what it read) and ``confirm`` (one
    line per guess, e.g. a column's kind from its Parquet type, the default budget)."""

    written_by: Label = "dprelease init"
    source: Prose
    confirm: list[Prose] = Field(default_factory=list)


def is_placeholder(value: str) -> bool:
    """Whether ``value`` is the placeholder ``FILL`` (spaces around it ignored): a spec
    holding it anywhere is a draft, so no category or level can be spelled so."""
    return value.strip() == FILL


def placeholders(raw: Any, path: str = "") -> list[str]:
    """The dotted paths of every ``FILL`` left in a raw (YAML-loaded) spec (control
    characters in its keys made visible)."""
    if isinstance(raw, str):
        return [path] if is_placeholder(raw) else []
    if isinstance(raw, Mapping):
        return [
            p
            for k, v in raw.items()
            for p in placeholders(v, f"{path}.{visible(str(k))}" if path else visible(str(k)))
        ]
    if isinstance(raw, list):
        return [p for i, v in enumerate(raw) for p in placeholders(v, f"{path}[{i}]")]
    return []


def _column(name: str, kind: str | None, note: str) -> tuple[str, str | None]:
    """One schema line (flow style) and what to confirm about it (None: nothing guessed)."""
    if kind is None:
        return f"  {yaml_scalar(name)}: {{type: {FILL}}}   # one of {KINDS}", None
    body = {
        "continuous": f"type: continuous, bounds: {FILL}",
        "integer": f"type: continuous, bounds: {FILL}, integer: true",
        "date": f"type: date, bounds: {FILL}",
        "datetime": f"type: datetime, bounds: {FILL}",
        "nominal": f"type: nominal, categories: {FILL}",
    }[kind]
    return f"  {yaml_scalar(name)}: {{{body}}}   # {note}", f"schema.{name}: kind guessed from {note}"


def _number(v: float) -> str:
    """A float as YAML 1.1 reads it back as a float (``1e-06`` would be text)."""
    return yaml.safe_dump(float(v)).split("\n")[0]


class _Dumper(yaml.SafeDumper):
    """YAML's safe dumper, which quotes what the spec's reader reads as a number: the text
    ``1e5`` written plain would come back as the float 100000.0."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+.0123456789"))


def yaml_scalar(name: str) -> str:
    """``name`` as one line of YAML that the spec's reader reads back as that text, in a block
    or inside a flow list or mapping (the draft writes ``categories: [a, b]``): plain or
    quoted by PyYAML as an item of a flow list (``:0`` is plain text alone, not in ``[...]``),
    or, when it holds a control character (a line break in a quoted CSV header), a
    double-quoted scalar with escapes, which the spec then refuses naming the column."""
    if CONTROLS.search(name):
        return json.dumps(name)  # a JSON string is a YAML double-quoted scalar
    text = yaml.dump([name], Dumper=_Dumper, default_flow_style=True, width=1 << 20).strip()
    return text.removeprefix("[").removesuffix("]")


def draft_text(
    dataset: str,
    data_path: str,
    columns: list[str],
    kinds: Mapping[str, tuple[str, str]] | None,
    discovered: Mapping[str, tuple[str, str, str]] | None = None,
    discovery: str | None = None,
    lifetime: tuple[float, float] | None = None,
) -> str:
    """The draft's YAML text. ``kinds``: column → (kind, why) from a Parquet file's
    declared types or ``--kind`` (None for CSV without ``--kind``: every kind is a
    ``FILL``). Bounds, categories and levels are ``FILL`` unless ``discovered`` (column →
    (schema body, comment, what to confirm)) holds them from the DP release ``discovery``;
    ``lifetime`` (ε, δ), the dataset's lifetime budget, goes into the privacy section."""
    source = f"the {'schema' if kinds is not None else 'header line'} of {data_path}"
    by = "dprelease discover" if discovery else "dprelease init"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    read = (
        [
            "# Values marked 'discovered under DP' came from the data through the differentially",
            f"# private release {discovery} (`dprelease ledger show`, `dprelease audit verify`);",
            "# nothing else was read.",
        ]
        if discovery
        else ["# No value of the data was read."]
    )
    lines = [
        f"# Draft release spec written by `{by}` on {stamp} from {source}.",
        *read,
        "# Replace every FILL from public knowledge (a codebook, the law, the survey's",
        "# documentation), never from the data; confirm each line of draft.confirm, then delete the",
        "# draft: section. `dprelease validate SPEC` lists what is left; `dprelease release` refuses",
        "# a draft.",
        "release_id: null",
        f"dataset: {{name: {yaml_scalar(dataset)}, path: {yaml_scalar(data_path)}}}",
        "schema:",
    ]
    confirm = []
    for name in columns:
        kind, note = (kinds or {}).get(name, (None, ""))
        guess: str | None
        if name in (discovered or {}):
            body, comment, check = (discovered or {})[name]
            line, guess = f"  {yaml_scalar(name)}: {{{body}}}   # {comment}", f"schema.{name}: {check}"
        else:
            line, guess = _column(name, kind, note)
        lines.append(line)
        if guess is not None:
            confirm.append(guess)
    confirm.append("privacy: epsilon 1.0, delta 1e-6 (zCDP) are defaults, not a decision of the data's owner")
    lines += [
        "privacy: {epsilon: 1.0, delta: 1.0e-6, accountant: zcdp"
        + (
            ""
            if lifetime is None
            else f", lifetime_epsilon: {_number(lifetime[0])}, lifetime_delta: {_number(lifetime[1])}"
        )
        + "}",
        "mechanism: {name: factor_gauss, params: {}}",
        "checks: {}",
        "draft:",
        f"  written_by: {by}",
        f"  source: {yaml_scalar(source)}",
        "  confirm:",
        *(f"    - {yaml_scalar(c)}" for c in confirm),
    ]
    return "\n".join(lines) + "\n"
