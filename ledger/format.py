"""The ledger's format: what its tables and rows mean, stored in the ledger itself, and the
one explicit step from an older format to this one (``dprelease ledger migrate``).

* **Format 1**, written by dprelease 0.1.0 and 0.2.0: the tables ``ledger_head``,
  ``ledger_checkpoint`` and ``ledger_entries``, and no stored format. A ledger without the
  ``ledger_format`` table, or with the table empty (``deploy/postgres/setup.sql`` creates it
  empty in a ledger that holds rows already), is format 1.
* **Format 2** (this version): the same tables and rows, plus ``ledger_format`` (one row: the
  format, and the dprelease that created or migrated the ledger), and every row's ``detail``
  names the dprelease version and commit that wrote it (``software``).

Every format this code knows is read as it is (an audit, ``ledger show``). Only this
version's format is written: a writer refuses an older ledger until ``migrate`` has stamped
it, which appends a ``ledger``/``migrated`` row to the hash chain (what changed, from which
format, by which version), so the step is in the audit trail and a rollback can be planned
from it. A ledger of a *newer* format than this code knows is refused for reading and
writing alike, naming the version that wrote it: this code cannot know what its rows mean.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Column, Integer, MetaData, String, Table, inspect, select
from sqlalchemy.engine import Connection

from dprelease._version import __version__, commit
from dprelease.mechanisms.errors import LedgerFormatError

__all__ = [
    "FORMAT",
    "FORMATS",
    "FORMAT_TABLE",
    "MIGRATED_DATASET",
    "LedgerFormatError",
    "StoredFormat",
    "check_readable",
    "check_writable",
    "software",
    "stamp",
    "stored_format",
]

FORMAT = 2
"""The format this code writes."""

FORMATS = {
    1: "dprelease 0.1.0 and 0.2.0: ledger_head, ledger_checkpoint, ledger_entries; no stored format",
    2: "dprelease 0.3.0: format 1 plus ledger_format, and the writing software in every row's detail",
}
"""Every format this code reads, oldest first, with what it holds."""

MIGRATED_DATASET = "(ledger)"
"""The ``dataset`` of a ``ledger``/``migrated`` row: a step of the whole ledger, no dataset's
(no spec can name a dataset so: its names are lowercase letters, digits and hyphens)."""

_META = MetaData()

FORMAT_TABLE = Table(
    "ledger_format",
    _META,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("format", Integer, nullable=False),
    Column("written_by", String(40), nullable=False),
)


@dataclass(frozen=True)
class StoredFormat:
    """A ledger's format and the dprelease that stamped it (``unknown`` for format 1)."""

    format: int
    written_by: str


def software() -> dict[str, str]:
    """The ``software`` of every row's ``detail``: this dprelease's version and commit."""
    return {"dprelease": __version__, "commit": _commit()}


@functools.cache
def _commit() -> str:
    """``commit()`` asked once per process (it runs git)."""
    return commit()


def stored_format(conn: Connection) -> StoredFormat:
    """The format stored in the ledger on ``conn``: 1 when it has no ``ledger_format`` table
    (a ledger of dprelease 0.1.0 or 0.2.0)."""
    if not inspect(conn).has_table(FORMAT_TABLE.name):
        return StoredFormat(1, "dprelease 0.1.0 or 0.2.0")
    row = conn.execute(select(FORMAT_TABLE.c.format, FORMAT_TABLE.c.written_by)).first()
    return StoredFormat(1, "unknown") if row is None else StoredFormat(int(row[0]), str(row[1]))


def check_readable(found: StoredFormat, shown: str) -> None:
    """Refuse a ledger whose format is newer than this code knows (``LedgerFormatError``)."""
    if found.format > FORMAT:
        raise LedgerFormatError(
            f"the ledger at {shown} is in format {found.format} (written by {found.written_by}); this "
            f"dprelease {__version__} knows formats 1 to {FORMAT} and cannot tell what its rows mean. "
            f"Nothing was read or written. Use {found.written_by} or later (dprelease --version says "
            "which version runs)"
        )


def check_writable(found: StoredFormat, shown: str) -> None:
    """Refuse to write to a ledger of another format than ``FORMAT``: a newer one
    (``check_readable``) or an older one, which ``dprelease ledger migrate`` brings to this
    format first."""
    check_readable(found, shown)
    if found.format < FORMAT:
        raise LedgerFormatError(
            f"the ledger at {shown} is in format {found.format} ({FORMATS[found.format]}); this dprelease "
            f"{__version__} writes format {FORMAT} only. Nothing was read or spent. Back the ledger up, then "
            f"run `dprelease ledger migrate --ledger {shown}` once: it changes no row, stamps format "
            f"{FORMAT} and records the step in the hash chain (docs/operator/upgrade.md)"
        )


def stamp(conn: Connection) -> None:
    """Create ``ledger_format`` on ``conn`` holding ``FORMAT`` and this version (a new
    ledger, or the migration's step)."""
    _META.create_all(conn)
    conn.execute(FORMAT_TABLE.delete())
    conn.execute(FORMAT_TABLE.insert().values(id=1, format=FORMAT, written_by=f"dprelease {__version__}"))
