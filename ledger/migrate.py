"""``dprelease ledger migrate``: an older ledger brought to this code's format
(``ledger.format``), explicitly, once, with the step in the hash chain.

The migration runs in one locked write transaction: it verifies the whole chain (a broken
chain is refused: migrating would seal an edited ledger), stamps ``ledger_format`` and appends
a ``ledger``/``migrated`` row naming the format it found, the one it wrote and this version
(``software``, as every row). No earlier row is changed, so every bundle made before still
verifies against the ledger, and an older dprelease that does not know ``ledger_format``
reads the rows as before.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from dprelease.ledger import format as ledger_format
from dprelease.ledger.chain import chain_problems
from dprelease.ledger.database import transaction
from dprelease.ledger.errors import LedgerError
from dprelease.ledger.row import LedgerRow

__all__ = ["migrate"]


def migrate(engine: Engine, shown: str) -> dict | None:
    """Migrate the ledger on ``engine`` (``shown``: its URL as messages show it); the
    ``ledger``/``migrated`` row, or None when it is in this format already. Refuses a
    newer format (``check_readable``) and a broken chain (``LedgerError``)."""
    with transaction(engine, shown, migrating=True) as t:
        found = ledger_format.stored_format(t.conn)
        ledger_format.check_readable(found, shown)
        if found.format == ledger_format.FORMAT:
            return None
        problems = chain_problems(t.conn)
        if problems:
            raise LedgerError(
                f"the ledger at {shown} was not migrated: its hash chain is broken "
                f"({'; '.join(problems[:3])}); restore it from a backup whose chain head matches the one "
                "you anchored, then migrate"
            )
        ledger_format.stamp(t.conn)
        row = t.append(
            dataset=ledger_format.MIGRATED_DATASET,
            kind="ledger",
            status="migrated",
            detail={
                "from_format": found.format,
                "to_format": ledger_format.FORMAT,
                "formats": {str(k): v for k, v in ledger_format.FORMATS.items()},
                "rows_changed": 0,
            },
        )
    return LedgerRow.from_mapping(row).as_mapping()  # as Ledger.entries gives it: detail decoded
