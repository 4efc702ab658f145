"""One row of the ledger as a typed value (``LedgerRow``): the columns of
``ledger.database.ENTRIES``, with ``kind`` and ``status`` of the values the ledger writes
(``ledger.store``'s module docstring lists them, in the order a release writes them).

``LedgerRow.from_mapping`` reads a row as the database returns it (``detail`` as its JSON
text) or as ``Ledger.entries`` gives it (``detail`` decoded); ``as_mapping`` is the latter,
keys in the table's column order, so what ``ledger show --json`` and the Python API print
is unchanged. The hash chain is checked on the stored rows (``ledger.chain``), never on
these.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from dprelease.ledger.errors import LedgerError

__all__ = [
    "ACCOUNTANTS",
    "KINDS",
    "STATES",
    "STATUSES",
    "Accountant",
    "Kind",
    "LedgerRow",
    "Status",
    "as_rows",
]

Kind = Literal["budget", "release", "stage", "measurement", "ledger"]
"""What a row records: a dataset's budget policy, a release's state, a stage spent, one
noisy statistic, a step of the ledger itself (``migrate``)."""

Status = Literal["set", "reserved", "spent", "released", "gated", "failed", "refused", "migrated"]
"""``budget``/``set``; ``release``/``reserved``, ``released``, ``gated``, ``failed`` or
``refused``; ``stage``/``spent`` and ``measurement``/``spent``; ``ledger``/``migrated``."""

Accountant = Literal["zcdp", "pure", "void"]
"""How a row's charge is counted: ρ-zCDP, pure ε-DP, or unbounded (a non-DP release)."""

STATES = ("reserved", "released", "gated", "failed")
"""The statuses that set a release's state (a ``refused`` row never changes one)."""

KINDS: tuple[str, ...] = get_args(Kind)
STATUSES: tuple[str, ...] = get_args(Status)
ACCOUNTANTS: tuple[str, ...] = get_args(Accountant)


@dataclass(frozen=True, kw_only=True)
class LedgerRow:
    """A ledger row. ``detail`` is as stored (decoded): a mapping, or None in rows an
    older version wrote without one; ``detail_of`` reads a key of it either way. A row the
    ledger is about to write (``ledger.policy`` prices it before it exists) has no
    ``seq`` or hashes yet: 0 and empty."""

    seq: int = 0
    time: str = ""
    dataset: str = ""
    release_id: str | None = None
    kind: Kind
    status: Status
    stage: str | None = None
    mechanism: str | None = None
    statistic: str | None = None
    accountant: Accountant | None = None
    sensitivity: float | None = None
    sensitivity_norm: str | None = None
    noise_scale: float | None = None
    rho: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    detail: Mapping[str, Any] | None = None
    prev_hash: str = ""
    hash: str = ""

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> LedgerRow:
        """The row from the database (``detail`` as JSON text) or a dict of ``entries``;
        ``LedgerError`` for a kind, status or accountant this version does not know."""
        values = {k: row[k] for k in _NAMES if k in row}
        for key, known in (("kind", KINDS), ("status", STATUSES), ("accountant", ACCOUNTANTS)):
            if values.get(key) not in known and (key != "accountant" or values.get(key) is not None):
                raise LedgerError(
                    f"ledger row {values.get('seq')} has {key} {values.get(key)!r}, which this version of "
                    f"dprelease does not know ({', '.join(known)}); read it with the version that wrote it"
                )
        if isinstance(values.get("detail"), str):
            values["detail"] = json.loads(values["detail"])
        return cls(**values)

    def as_mapping(self) -> dict[str, Any]:
        """The row as ``Ledger.entries`` gives it: every column in the table's order, ``detail`` decoded."""
        return {k: getattr(self, k) for k in _NAMES}

    def detail_of(self, key: str) -> Any:
        """``detail[key]``; None when the row has no detail or no such key."""
        return None if self.detail is None else self.detail.get(key)

    @property
    def is_state(self) -> bool:
        """A release row that sets its state: ``reserved`` or a closing one (not ``refused``)."""
        return self.kind == "release" and self.status in STATES

    @property
    def spent_stage(self) -> str | None:
        """The stage a ``stage``/``spent`` row records as spent; None for any other row."""
        return self.stage if self.kind == "stage" and self.status == "spent" else None


_NAMES = tuple(f.name for f in fields(LedgerRow))
"""The columns, in the table's order."""


def as_rows(rows: Iterable[LedgerRow | Mapping[str, Any]]) -> list[LedgerRow]:
    """``rows`` as ``LedgerRow``: the dicts of ``Ledger.entries`` (the flows' and the API's) read."""
    return [r if isinstance(r, LedgerRow) else LedgerRow.from_mapping(r) for r in rows]
