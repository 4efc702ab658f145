"""Every error dprelease raises on purpose, in one hierarchy: catch :class:`DPReleaseError`
(a ``ValueError``) for all of them. Messages name the field, column or rule broken and
what to do next, never a data value or a count from the data.

The command line maps them to exit codes through one table (``dprelease.cli.console.exit_codes``):
3 for ``GateError``; 4 for ``BudgetRefused`` and ``ReleaseIdTaken``; 1 for
``PrefectUnreachable`` (and its ``PrefectNotStarted``) and ``UnexpectedFailure``; 2 for every
other ``DPReleaseError``.

Example:
    >>> import dprelease
    >>> try:
    ...     dprelease.Spec.load({"dataset": {"name": "x", "path": "x.csv"}})
    ... except dprelease.errors.SpecError as e:
    ...     print(str(e).splitlines()[0])
    invalid release spec '(a Python mapping)':
"""

from __future__ import annotations

from dprelease.bundle.format import BundleFormatError
from dprelease.bundle.staging import ReleaseIdTaken
from dprelease.checks.gates import GateError
from dprelease.engines.header import DataError
from dprelease.engines.inputs import InputRefused, InputValidationError
from dprelease.flows.run import PrefectNotStarted, PrefectUnreachable, UnexpectedFailure
from dprelease.ledger import BudgetRefused, LedgerError, LedgerFormatError, LedgerLocked, NoLedger
from dprelease.mechanisms.errors import BudgetError, DPReleaseError, SchemaError
from dprelease.mechanisms.queries import QueryError
from dprelease.spec import SpecError

__all__ = [
    "BudgetError",
    "BudgetRefused",
    "BundleFormatError",
    "BundleNotFound",
    "DPReleaseError",
    "DataError",
    "GateError",
    "InputRefused",
    "InputValidationError",
    "LedgerError",
    "LedgerFormatError",
    "LedgerLocked",
    "NoLedger",
    "PrefectNotStarted",
    "PrefectUnreachable",
    "QueryError",
    "ReleaseIdTaken",
    "SchemaError",
    "SpecError",
    "UnexpectedFailure",
]


class BundleNotFound(DPReleaseError):
    """The folder given is not a release bundle (no ``public/`` or ``internal/release.json``)."""
