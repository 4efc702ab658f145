"""Audit a release bundle from Python: what ``dprelease audit verify`` checks, as data.

Example:
    >>> from dprelease import audit
    >>> result = audit.verify("releases/adult-20260101t000000z")  # doctest: +SKIP
    >>> result.passed, [c.name for c in result.failed]  # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from dprelease._terms import as_api_error, in_api_terms
from dprelease.errors import BundleNotFound, DPReleaseError
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

    def to_frame(self) -> pd.DataFrame:
        """The checks as a DataFrame, one row each: group, name, ok, checked, detail."""
        columns = ["group", "name", "ok", "checked", "detail"]
        return pd.DataFrame([[getattr(c, k) for k in columns] for c in self.checks], columns=columns)

    def __repr__(self) -> str:
        """A few lines: the verdict, the ledger, and each check that does not hold."""
        verdict = "passed" if self.passed else f"FAILED {len(self.failed)} check(s)"
        unchecked = sum(not c.checked for c in self.checks)
        head = f"{len(self.checks)} checks, {unchecked} not checked"
        ledger = f"ledger {self.ledger.shown}: {self.ledger.origin}"
        lines = [f"AuditResult({str(self.bundle)!r}: {verdict}; {head}; {ledger})"]
        lines += [f"  failed {c.group}/{c.name}: {c.detail}" for c in self.failed]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A notebook's view: the verdict's lines, then every check."""
        return f"<pre>{html.escape(repr(self))}</pre>{self.to_frame().to_html(index=False)}"


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
    try:
        given = None if ledger is None else ledger_url(ledger, folder)
        doc, _ = _audit.load_document(folder)
        checks = _audit.verify_bundle(folder, given, public=public)
    except FileNotFoundError as e:
        raise BundleNotFound(str(e)) from None
    except DPReleaseError as e:  # worded for the command line: named as this call's arguments
        as_api_error(e)
        raise
    if public and given is None:
        return AuditResult(
            folder, checks, LedgerChoice(None, "not looked for: only what was published (public)")
        )
    choice = choose_ledger(folder, doc, given)
    return AuditResult(folder, checks, replace(choice, origin=in_api_terms(choice.origin)))
