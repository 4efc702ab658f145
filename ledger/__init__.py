"""The budget ledger: an append-only, hash-chained record of every release's privacy
spend, in a real database (SQLite by default, PostgreSQL by URL).

``ledger.store.Ledger`` reads and writes it (each row a ``ledger.row.LedgerRow``);
``ledger.charges`` says what a release costs (pure functions of its rows);
``ledger.windows`` the one rule for the window an attempt is charged to;
``ledger.decision`` whether a reservation is admitted (the rerun rule,
``ledger.identity``'s schema binding, ``ledger.policy``'s budget policy); ``ledger.chain``
checks the hash chain; ``ledger.url`` reads the ledger's URL as its driver does and rebuilds
what may be shown; ``ledger.database`` holds the tables, the connection and the write lock;
``ledger.facts`` the figures a release publishes; ``ledger.summary`` (``show``) what
``dprelease ledger show`` reports, as data; ``ledger.format`` the format a ledger states and
``ledger.migrate`` (``migrate``) the explicit step from an older one. It sits below the
Prefect tasks and imports only ``mechanisms``.
"""

from dprelease.ledger.charges import UNPROTECTED, spent_charge, void_since
from dprelease.ledger.database import FIELDS, LOCK_WAIT, row_hash
from dprelease.ledger.errors import BudgetRefused, LedgerError, LedgerLocked, NoLedger
from dprelease.ledger.facts import budget_facts, ledger_facts
from dprelease.ledger.format import FORMAT, LedgerFormatError
from dprelease.ledger.row import LedgerRow
from dprelease.ledger.store import Ledger
from dprelease.ledger.summary import DatasetAccount, LedgerSummary, migrate, show
from dprelease.ledger.url import (
    PASSWORD_ENV,
    LedgerURL,
    default_url,
    ledger_url,
    parse_url,
    shown_url,
    split_password,
)

__all__ = [
    "FIELDS",
    "FORMAT",
    "LOCK_WAIT",
    "PASSWORD_ENV",
    "UNPROTECTED",
    "BudgetRefused",
    "DatasetAccount",
    "Ledger",
    "LedgerError",
    "LedgerFormatError",
    "LedgerLocked",
    "LedgerRow",
    "LedgerSummary",
    "LedgerURL",
    "NoLedger",
    "budget_facts",
    "default_url",
    "ledger_facts",
    "ledger_url",
    "migrate",
    "parse_url",
    "row_hash",
    "show",
    "shown_url",
    "spent_charge",
    "split_password",
    "void_since",
]
