"""The ledger's errors: each a ``DPReleaseError`` (exit 2 on the CLI), but a refused
budget, a ``BudgetError`` (exit 4)."""

from __future__ import annotations

from dprelease.mechanisms.errors import BudgetError, DPReleaseError

__all__ = ["BudgetRefused", "LedgerError", "LedgerLocked", "NoLedger"]


class LedgerError(DPReleaseError):
    """The ledger cannot be reached or used."""


class NoLedger(LedgerError):
    """The database holds no ledger yet (opened with ``create=False``)."""


class LedgerLocked(LedgerError):
    """Another process held the SQLite ledger's lock for longer than ``LOCK_WAIT``."""


class BudgetRefused(BudgetError):
    """The ledger refused a release (lifetime budget, or a rerun that would spend twice);
    nothing was read and nothing was spent."""
