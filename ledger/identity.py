"""A dataset is its schema, not its name: the ledger binds each dataset name to the
fingerprint of its public schema (``mechanisms.schema.Schema.fingerprint``: the columns'
names and kinds of value), so that a new name for the same data does not open a fresh
budget account unnoticed.

Every admitted ``reserved`` row records the release's fingerprint (``detail.schema``); a
dataset name *holds* each fingerprint one of its reservations recorded. A release is
refused (``schema_refusal``) when its fingerprint is held by another dataset name in the
ledger and not by its own, unless the steward declares it a new dataset with a reason
(``--new-dataset REASON``, ``new_dataset=`` of ``dprelease.release``, the flow's
``new_dataset`` parameter), which the reserved row records (``detail.new_dataset``); from
then on both names hold the fingerprint. A name whose fingerprint changes (a column added,
dropped or renamed, or its kind changed) is admitted, and its reserved row records the
fingerprint it had (``detail.schema_before``). Rows written before fingerprints hold none:
their datasets bind nothing. The fingerprint sees one ledger only: a new ``--out`` (a new
default ledger) or ``--ledger`` still starts an empty one.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from dprelease.ledger.database import ENTRIES
from dprelease.ledger.row import LedgerRow
from dprelease.mechanisms.errors import DPReleaseError

__all__ = ["NEW_DATASET", "checked_reason", "holders", "schema_detail", "schema_refusal"]

NEW_DATASET = (
    '--new-dataset "REASON" (dprelease.release(..., new_dataset="REASON"); the flow\'s new_dataset parameter)'
)
"""How a steward declares a new dataset, as messages name it."""


def checked_reason(new_dataset: str | None) -> str | None:
    """The steward's reason for a new dataset, stripped; refuses an empty or overlong one."""
    if new_dataset is None:
        return None
    reason = " ".join(new_dataset.split())
    if not 0 < len(reason) <= 500:
        raise DPReleaseError(
            f"--new-dataset ({new_dataset[:80]!r}) must say in 1 to 500 characters why this is not the data "
            'of another dataset in the ledger, e.g. --new-dataset "the 2026 survey wave: a new sample"'
        )
    return reason


def holders(conn: Connection, fingerprint: str) -> list[LedgerRow]:
    """The ``reserved`` rows (any dataset) that recorded ``fingerprint``, chain order,
    ``detail`` decoded (found by text, then checked field by field)."""
    q = (
        select(ENTRIES)
        .where(ENTRIES.c.kind == "release", ENTRIES.c.status == "reserved")
        .where(ENTRIES.c.detail.contains(f'"schema": "{fingerprint}"', autoescape=True))
        .order_by(ENTRIES.c.seq)
    )
    rows = [LedgerRow.from_mapping(r._asdict()) for r in conn.execute(q)]
    return [r for r in rows if r.detail_of("schema") == fingerprint]


def schema_refusal(
    dataset: str, fingerprint: str, held: list[LedgerRow], new_dataset: str | None
) -> str | None:
    """Why a release of ``dataset`` with ``fingerprint`` is refused (None: it is not):
    ``held`` (``holders``) shows other dataset names with it and none of ``dataset``'s,
    and the steward did not declare ``new_dataset``."""
    names = list(dict.fromkeys(r.dataset for r in held))
    if new_dataset or not names or dataset in names:
        return None
    others = ", ".join(f"'{n}'" for n in names)
    first = names[0]
    return (
        f"dataset '{dataset}' has the same public schema (the same column names and kinds, "
        f"fingerprint {fingerprint[:12]}) as dataset {others} in this ledger: a new name for the same "
        f"data would start a fresh budget account beside what {others} spent. Nothing was read or "
        f"spent. If these are the data of '{first}', set dataset.name: {first} in the spec, so the "
        "release is charged to its account (for the same data in a new period, one name with a "
        f"privacy.period budget); if they are another table with the same columns, run again with "
        f"{NEW_DATASET}: the reason is recorded in the ledger"
    )


def schema_detail(fingerprint: str, own: list[LedgerRow], new_dataset: str | None) -> dict:
    """The ``reserved`` row's record of the schema: the fingerprint; the one the dataset's
    last fingerprinted reservation recorded, when it differs; the steward's declaration."""
    before = [r.detail_of("schema") for r in own if r.status == "reserved" and r.detail_of("schema")]
    return {
        "schema": fingerprint,
        **({"schema_before": before[-1]} if before and before[-1] != fingerprint else {}),
        **({"new_dataset": new_dataset} if new_dataset else {}),
    }
