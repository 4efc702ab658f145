"""Whether a reservation is admitted: the one decision ``Ledger.refusal`` (the CLI's and the
API's read-only pre-check, before Prefect starts) and ``Ledger.reserve`` (under the write
lock) share, so that they decide alike. In order: the rerun rule on the release_id's rows
(``charges.rerun_refusal``), the schema's binding to the dataset name
(``ledger.identity``), then the budget policy on the dataset's rows (``ledger.policy``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from dprelease.ledger.charges import Policy, rerun_refusal
from dprelease.ledger.database import ENTRIES
from dprelease.ledger.identity import checked_reason, holders, schema_detail, schema_refusal
from dprelease.ledger.policy import budget_refusal, declared_policy
from dprelease.ledger.row import LedgerRow
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.periods import PeriodBudget

__all__ = ["Asked", "Decision", "decide", "read_rows"]


def read_rows(conn: Connection, kinds: tuple[str, ...] | None = None, **where) -> list[LedgerRow]:
    """Rows in chain order: of ``kinds`` (all when None), with the columns ``where`` names
    equal to its values."""
    q = select(ENTRIES).order_by(ENTRIES.c.seq)
    if kinds is not None:
        q = q.where(ENTRIES.c.kind.in_(kinds))
    for k, v in where.items():
        q = q.where(ENTRIES.c[k] == v)
    return [LedgerRow.from_mapping(r._asdict()) for r in conn.execute(q)]


@dataclass(frozen=True)
class Asked:
    """A reservation as the ledger decides on it (``decide``)."""

    dataset: str
    release_id: str
    plan: BudgetPlan
    declared: Policy | None
    not_dp: bool
    schema: str | None
    new_dataset: str | None

    @classmethod
    def of(
        cls,
        dataset: str,
        release_id: str,
        plan: BudgetPlan,
        lifetime: tuple[float, float] | None,
        period: PeriodBudget | None,
        not_dp: list[str] | None,
        schema: str | None,
        new_dataset: str | None,
    ) -> Asked:
        """From ``Ledger.reserve``'s arguments; refuses an empty or overlong ``new_dataset``."""
        declared = declared_policy(lifetime, period)
        return cls(dataset, release_id, plan, declared, bool(not_dp), schema, checked_reason(new_dataset))


@dataclass(frozen=True)
class Decision:
    """``decide``'s answer: why to refuse (None: admit), the policy to record, the
    release_id's rows, every row the decision read (checked against the hash chain), and
    the record of the schema for the ``reserved`` row (``ledger.identity``)."""

    reason: str | None
    policy: Policy | None
    mine: list[LedgerRow]
    read: list[LedgerRow]
    schema: dict


def decide(conn: Connection, asked: Asked, at: datetime) -> Decision:
    """The decision on ``asked``, reserved at ``at``, on the rows ``conn`` reads."""
    mine = read_rows(conn, release_id=asked.release_id) if asked.release_id else []
    reason = rerun_refusal(asked.release_id, mine) if mine else None
    if reason is not None:
        return Decision(reason, None, mine, mine, {})
    rows = read_rows(conn, ("release", "budget"), dataset=asked.dataset)
    held: list[LedgerRow] = []
    record: dict = {}
    if asked.schema is not None:
        held = holders(conn, asked.schema)
        reason = schema_refusal(asked.dataset, asked.schema, held, asked.new_dataset)
        if reason is not None:
            return Decision(reason, None, mine, [*mine, *held], {})
        record = schema_detail(asked.schema, rows, asked.new_dataset)
    reason, policy, read = budget_refusal(
        rows, asked.dataset, asked.release_id, asked.plan, asked.declared, at, asked.not_dp
    )
    return Decision(reason, policy, mine, [*mine, *held, *read], record)
