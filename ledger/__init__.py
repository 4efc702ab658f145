"""The budget ledger: an append-only, hash-chained record of every release's privacy
spend, in a real database (SQLite by default, PostgreSQL by URL).

``ledger.store.Ledger`` reads and writes it; ``ledger.charges`` says what a release costs
(pure functions of its rows); ``ledger.chain`` checks the hash chain; ``ledger.database``
holds the tables, the connection and the write lock; ``ledger.facts`` the figures a
release publishes; ``ledger.summary`` (``show``) what ``dprelease ledger show`` reports,
as data. It sits below the Prefect tasks and imports only ``mechanisms``.
"""

from dprelease.ledger.charges import UNPROTECTED, spent_charge, void_since
from dprelease.ledger.database import (
    FIELDS,
    LOCK_WAIT,
    PASSWORD_ENV,
    BudgetRefused,
    LedgerError,
    LedgerLocked,
    LedgerURL,
    NoLedger,
    default_url,
    ledger_url,
    parse_url,
    redact,
    row_hash,
    split_password,
)
from dprelease.ledger.facts import budget_facts, ledger_facts
from dprelease.ledger.store import Ledger
from dprelease.ledger.summary import DatasetAccount, LedgerSummary, show

__all__ = [
    "FIELDS",
    "LOCK_WAIT",
    "PASSWORD_ENV",
    "UNPROTECTED",
    "BudgetRefused",
    "DatasetAccount",
    "Ledger",
    "LedgerError",
    "LedgerLocked",
    "LedgerSummary",
    "LedgerURL",
    "NoLedger",
    "budget_facts",
    "default_url",
    "ledger_facts",
    "ledger_url",
    "parse_url",
    "redact",
    "row_hash",
    "show",
    "spent_charge",
    "split_password",
    "void_since",
]
