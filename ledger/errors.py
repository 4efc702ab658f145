"""The ledger's errors: each a ``DPReleaseError`` (exit 2 on the CLI), but a refused
budget, a ``BudgetError`` (exit 4)."""

from __future__ import annotations

from dprelease.mechanisms.errors import (
    BudgetRefused,
    LedgerError,
    LedgerLocked,
    NoLedger,
)

__all__ = ["BudgetRefused", "LedgerError", "LedgerLocked", "NoLedger"]
