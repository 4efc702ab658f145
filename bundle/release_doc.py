"""The release document (``release.json``) as a typed value: ``ReleaseDocument``, whose
fields are the document's top-level keys, each nested part a small dataclass
(``bundle.parts``: unknown keys kept, key order kept).

``ReleaseDocument.from_json(x).to_json()`` is the text ``x`` was, byte for byte, for every
document ``bundle.files.write_json`` wrote (every bundle format, and a schema discovery's:
``kind`` ``schema_discovery``, with ``discovered`` and ``rows``), so a bundle is written
through it with the bytes its manifest and the ledger's seal hold. ``bundle.document``
builds the document as a mapping; the readers (``records.audit``, ``audit show``, the
summary, the public report, ``query``) read it through this type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from dprelease.bundle.files import json_text, write_text
from dprelease.bundle.parts import STRINGS, Part, PartError, part, part_map, parts
from dprelease.bundle.privacy_doc import Privacy

__all__ = [
    "DISCOVERY_KIND",
    "Advice",
    "AutoChoice",
    "Checks",
    "Columns",
    "Discovered",
    "FoundAtoms",
    "Gate",
    "MechanismUsed",
    "Output",
    "Randomness",
    "ReleaseDocument",
    "Replicates",
    "Software",
    "Tables",
    "Times",
]

DISCOVERY_KIND = "schema_discovery"
"""The ``kind`` of a schema discovery's document (``discovery.schema``); a release's has none."""


@dataclass(frozen=True, kw_only=True)
class AutoChoice(Part):
    """What ``mechanism: auto`` chose and why (``mechanisms.auto.AutoChoice.as_dict``)."""

    rule: str = ""
    mechanism: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    n_fitted: int = 0
    columns: int = 0
    continuous: int = 0
    accountant: str = ""
    reason: str = ""
    rows: int | None = None


@dataclass(frozen=True, kw_only=True)
class MechanismUsed(Part):
    """The document's ``mechanism``: its name, parameters and the stages' public facts."""

    name: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    rows_correspond_to_input_rows: bool = False
    rows_note: str = ""
    chosen_by: AutoChoice | None = field(default=None, metadata=part(AutoChoice))


@dataclass(frozen=True, kw_only=True)
class Gate(Part):
    """A DP gate's public result (``mechanisms.gates.GateResult.as_dict``)."""

    gate: str = ""
    min: float | None = None
    max: float | None = None
    noisy_value: float = 0.0
    noise_sd: float = 0.0
    passed: bool = False


@dataclass(frozen=True, kw_only=True)
class Checks(Part):
    """The document's ``checks``: the gates, decided on ``compared_rows`` real rows."""

    gates: tuple[Gate, ...] = field(default=(), metadata=parts(Gate))
    compared_rows: int | None = None
    statement: str = ""


@dataclass(frozen=True, kw_only=True)
class Columns(Part):
    """The document's ``columns``: what was modelled, and what was not (and why)."""

    modelled: tuple[str, ...] = field(default=(), metadata=STRINGS)
    identifiers: Mapping[str, Any] = field(default_factory=dict)
    dropped: tuple[str, ...] = field(default=(), metadata=STRINGS)
    one_hot: Mapping[str, list[str]] = field(default_factory=dict)
    derived: Mapping[str, str] = field(default_factory=dict)
    statement: str = ""


@dataclass(frozen=True, kw_only=True)
class Output(Part):
    """One published synthetic file (``outputs``, by file name)."""

    rows: int = 0
    format: str = ""
    columns: tuple[str, ...] = field(default=(), metadata=STRINGS)


@dataclass(frozen=True, kw_only=True)
class Randomness(Part):
    """Where the noise came from: OS entropy, or a fixed seed (not fit for publication)."""

    source: str = ""
    seed: int | None = None
    fit_for_publication: bool = False
    warning: str | None = None


@dataclass(frozen=True, kw_only=True)
class Software(Part):
    """The versions that made the release, and the commit."""

    versions: Mapping[str, str] = field(default_factory=dict)
    git_commit: str | None = None


@dataclass(frozen=True, kw_only=True)
class Times(Part):
    started: str = ""
    finished: str = ""


@dataclass(frozen=True, kw_only=True)
class Tables(Part):
    """``public/tables/``: its index, how many tables, the intervals' level."""

    index: str = ""
    count: int = 0
    level: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Advice(Part):
    """One piece of the noisy tables' advice (``mechanisms.advice.Advice.as_dict``)."""

    column: str = ""
    kind: str = ""
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class Replicates(Part):
    """``public/replicates/``: its index, the model's replicates and checks."""

    index: str = ""
    replicates: int = 0
    checks: int = 0


@dataclass(frozen=True, kw_only=True)
class FoundAtoms(Part):
    """A numeric column's atoms found by partition selection (a discovery's)."""

    atoms: tuple[float, ...] = field(default=(), metadata=STRINGS)
    min_share: float = 0.0
    threshold: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    rule: str = ""


@dataclass(frozen=True, kw_only=True)
class Discovered(Part):
    """One column a schema discovery published: ``kind`` ``bounds`` (with the quantile
    level, and ``atoms`` when they were on) or ``categories`` (with its threshold)."""

    kind: str = ""
    bounds: tuple[float, ...] | None = field(default=None, metadata=STRINGS)
    quantile_level: float | None = None
    categories: tuple[str, ...] | None = field(default=None, metadata=STRINGS)
    threshold: float | None = None
    epsilon: float = 0.0
    delta: float | None = None
    rule: str = ""
    atoms: FoundAtoms | None = field(default=None, metadata=part(FoundAtoms))
    withheld: int = 0
    withheld_rule: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseDocument(Part):
    """``release.json``: what was released and how (``bundle.document.release_document``),
    or what a schema discovery found (``kind``, ``created``, ``statement``, ``rows``,
    ``discovered``). ``bundle_format`` is None in a format-1 bundle (0.1.0, 0.2.0); a
    bundle made before the gates, the columns, the tables, the advice or the replicates
    were published lacks those (None)."""

    bundle_format: int | None = None
    kind: str | None = None
    release_id: str = ""
    dataset: str = ""
    created: str | None = None
    statement: str | None = None
    status: str = ""
    differentially_private: bool = False
    spec: Mapping[str, Any] = field(default_factory=dict)
    mechanism: MechanismUsed = field(default_factory=MechanismUsed, metadata=part(MechanismUsed))
    privacy: Privacy = field(default_factory=Privacy, metadata=part(Privacy))
    checks: Checks | None = field(default=None, metadata=part(Checks))
    columns: Columns | None = field(default=None, metadata=part(Columns))
    engine: Mapping[str, Any] | None = None
    outputs: Mapping[str, Output] = field(default_factory=dict, metadata=part_map(Output))
    randomness: Randomness = field(default_factory=Randomness, metadata=part(Randomness))
    rows: int | None = None
    discovered: Mapping[str, Discovered] | None = field(default=None, metadata=part_map(Discovered))
    software: Software | None = field(default=None, metadata=part(Software))
    times: Times | None = field(default=None, metadata=part(Times))
    tables: Tables | None = field(default=None, metadata=part(Tables))
    advice: tuple[Advice, ...] | None = field(default=None, metadata=parts(Advice))
    replicates: Replicates | None = field(default=None, metadata=part(Replicates))

    @classmethod
    def from_json(cls, source: str | bytes | Mapping[str, Any]) -> Self:
        """The document from its JSON text, or from the mapping ``release_document`` built
        (or ``json.loads`` read); ``PartError`` (a ``ValueError``) when it is not a JSON
        object, or a part of it that must be one is not."""
        value = json.loads(source) if isinstance(source, str | bytes) else source
        if not isinstance(value, Mapping):
            raise PartError(f"a release document is a JSON object, not {type(value).__name__}")
        return cls.from_mapping(value)

    @classmethod
    def from_file(cls, path: Path) -> Self:
        """``path`` (a ``release.json``) read as UTF-8."""
        return cls.from_json(path.read_text(encoding="utf-8"))

    def to_json(self) -> str:
        """The document's text as ``bundle.files.write_json`` writes it (indented, keys in
        their order, a final newline)."""
        return json_text(self.as_mapping())

    def write(self, path: Path) -> None:
        """``to_json`` into ``path`` with the audience of its folder (``bundle.files.write_text``)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, self.to_json())

    @property
    def is_discovery(self) -> bool:
        """A schema discovery's document (``discovery.schema``), not a release's."""
        return self.kind == DISCOVERY_KIND

    @property
    def gates(self) -> tuple[Gate, ...]:
        """The gates' public results (none in a bundle from before the gates)."""
        return () if self.checks is None else self.checks.gates

    @property
    def made_by(self) -> str | None:
        """The dprelease version that made the bundle, as it states it."""
        return None if self.software is None else self.software.versions.get("dprelease")
