"""Audit a release bundle from Python: what ``dprelease audit verify`` checks, as data.

Example:
    >>> from dprelease import audit
    >>> result = audit.verify("releases/adult-20260101t000000z")  # doctest: +SKIP
    >>> result.passed, [c.name for c in result.failed]  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dprelease.errors import BundleNotFound
from dprelease.records import audit as _audit
from dprelease.records.audit import Check
from dprelease.records.ledger_choice import LedgerChoice, choose_ledger

__all__ = ["AuditResult", "Check", "LedgerChoice", "verify"]


@dataclass(frozen=True)
class AuditResult:
    """Every check of a bundle, and the ledger it was cross-checked against.

    Attributes:
        bundle: The bundle folder.
        checks: Each check: its group (files, identity, arithmetic, sensitivities, status,
            ledger), its name, whether it holds, and a detail.
        ledger: The ledger checked (``url`` None: none was found; ``shown``: its URL with no
            password) and where its URL came from.
    """

    bundle: Path
    checks: list[Check]
    ledger: LedgerChoice

    @property
    def passed(self) -> bool:
        """Whether every check holds (the CLI's exit 0)."""
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        """The checks that do not hold."""
        return [c for c in self.checks if not c.ok]


def verify(bundle: str | os.PathLike[str], *, ledger: str | None = None, public: bool = False) -> AuditResult:
    """Recompute every sha256, the budget arithmetic, the sensitivities and the hash chain of
    a bundle, and cross-check the ledger, without trusting the operator.

    Args:
        bundle: A release bundle folder, ``<out>/<release_id>``, or a copy of its ``public/``
            folder under any name.
        ledger: The ledger to cross-check: a database URL, a SQLite file or a folder holding
            ``ledger.db``; default the SQLite ledger the bundle's ``internal/ledger.json``
            names, if it is here, else ``ledger.db`` beside the bundle.
        public: Check only what was published, as an analyst can: no ledger is looked for
            and the cross-check is reported as not checked (``Check.checked`` False).

    Returns:
        The checks; ``.passed`` only if every one holds.

    Raises:
        BundleNotFound: The folder holds no ``release.json``.
        LedgerError: The ledger given cannot be named or opened.
    """
    from dprelease.ledger import ledger_url

    folder = Path(bundle)
    given = None if ledger is None else ledger_url(ledger, folder)
    try:
        doc, _ = _audit.load_document(folder)
        checks = _audit.verify_bundle(folder, given, public=public)
    except FileNotFoundError as e:
        raise BundleNotFound(str(e)) from None
    if public and given is None:
        return AuditResult(
            folder, checks, LedgerChoice(None, "not looked for: only what was published (public)")
        )
    return AuditResult(folder, checks, choose_ledger(folder, doc, given))
