"""One audit check, as ``dprelease audit verify`` prints it and ``dprelease.audit`` returns it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Check", "not_checked"]


@dataclass(frozen=True)
class Check:
    """One check: ``ok`` False fails the audit; ``checked`` False says it could not be made
    here (e.g. no ledger for a public copy), which fails nothing."""

    group: str
    name: str
    ok: bool
    detail: str = ""
    checked: bool = True


def not_checked(group: str, name: str, why: str) -> Check:
    """A check that could not be made here, and why: reported, never failed."""
    return Check(group, name, True, f"not checked ({why})", checked=False)
