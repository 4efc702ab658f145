"""Every error dprelease raises on purpose, in one tree, in this one leaf module that every
layer imports (it imports nothing of the project).

- ``DPReleaseError``: catch it for all of them. Its message names the field, column or rule
  broken and what to do next, never a data value or a count from the data.
- ``CallerError`` (also a ``ValueError``): the caller's mistake, fixed by changing the
  call: a spec (``SpecError``), a schema, a budget, data (``DataError``, ``InputRefused``), a
  query, a release id or bundle.
- ``EnvironmentFailure`` (not a ``ValueError``): the call was right, the world was not:
  Prefect unreachable, the ledger locked or absent, a bug (``UnexpectedFailure``). Retrying,
  or fixing the machine, is what helps.
- ``GateError``: a noisy check stopped a release (neither).

Each class states its command-line ``exit_code``: the CLI's exit table and the table in
``docs/reference/exit-codes.md`` are both generated from these (``exit_codes``).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BudgetError",
    "BudgetRefused",
    "BundleFormatError",
    "BundleNotFound",
    "CallerError",
    "DPReleaseError",
    "DataError",
    "EnvironmentFailure",
    "GateError",
    "InputRefused",
    "InputValidationError",
    "LedgerError",
    "LedgerFormatError",
    "LedgerLocked",
    "NoLedger",
    "PrefectNotStarted",
    "PrefectUnreachable",
    "ProcessDied",
    "QueryError",
    "RehearsalError",
    "ReleaseIdTaken",
    "ResourceRefused",
    "SchemaError",
    "SettleRefused",
    "SpecError",
    "UnexpectedFailure",
    "WorkerError",
]


class DPReleaseError(Exception):
    """Base class: messages read ``<name> (<value>) must be <rule>`` and say what to do."""

    exit_code: ClassVar[int] = 2
    """The command line's exit status for this error."""


class CallerError(DPReleaseError, ValueError):
    """A mistake in what the caller passed (spec, data, options, query): change the call."""


class EnvironmentFailure(DPReleaseError):
    """The call was right; a service, the ledger's database or the code failed."""

    exit_code = 1


class SchemaError(CallerError):
    """The declared public schema is inconsistent (bounds, levels, categories)."""


class SpecError(CallerError):
    """The release spec is invalid; the message names the field."""


class BudgetError(CallerError):
    """A privacy budget or its split is invalid."""


class BudgetRefused(BudgetError):
    """The ledger refused a release (lifetime budget, or a rerun that would spend twice);
    nothing was read and nothing was spent."""

    exit_code = 4


class ReleaseIdTaken(CallerError):
    """The release's final folder already exists: the release id was used in this output folder."""

    exit_code = 4


class DataError(CallerError):
    """The confidential input does not match the public schema."""


class InputValidationError(DataError):
    """The input table breaks the public schema."""


class InputRefused(DataError):
    """The confidential input was refused: it breaks the public schema, or the release's
    rules on its rows. Whether a release is refused is a function of the data without noise
    (one record can flip it), so its message says only that and where: Prefect stores and
    logs it and webhooks receive it. The detail (which column, which rule) travels in
    ``detail`` to the steward's terminal, the failure record (``failures/<id>/``, named by
    ``record`` once written) and, through ``told``, the Python API's caller who passed the
    data."""

    def __init__(self, stage: str, detail: str, record: str | None = None) -> None:
        where = f"'{record}'" if record else "<out>/failures/"
        super().__init__(
            f"the input was refused at stage '{stage}': it breaks the public schema or the release's "
            f"rules on its rows. Which column and which rule is not shown here (it is a fact about the "
            f"confidential data); it is in the failure record {where} and on the steward's terminal"
        )
        self.stage, self.detail, self.record = stage, detail, record

    @classmethod
    def of(cls, error: DataError, stage: str) -> InputRefused:
        """``error`` (a refusal whose message names a column and a rule) as a refusal that
        does not; an ``InputRefused`` stays as it is."""
        return error if isinstance(error, InputRefused) else cls(stage, str(error))

    def told(self) -> InputRefused:
        """The same refusal with its detail in the message, for the steward's own process
        (the Python API's caller, who passed the data), never for Prefect or a log."""
        shown = InputRefused(self.stage, self.detail, self.record)
        shown.args = (self.detail + (f" (failure record: {self.record})" if self.record else ""),)
        return shown

    def recorded(self, record: str) -> InputRefused:
        """The same refusal, naming its failure record."""
        return InputRefused(self.stage, self.detail, record)


class ResourceRefused(SpecError):
    """The release, or its rehearsal, is forecast to need more memory or time than the
    ceiling: refused before anything is reserved."""


class RehearsalError(SpecError):
    """The spec fails on a table drawn from its own public schema: it would fail after the
    noise is drawn, so nothing may be reserved."""


class SettleRefused(CallerError):
    """The attempt cannot be settled (not open, or its process may still be alive)."""


class QueryError(CallerError):
    """A query the tables cannot take: an unknown column, a value the schema does not
    declare, a range on a categorical column."""


class BundleNotFound(CallerError):
    """The folder given is not a release bundle (no ``public/`` or ``internal/release.json``)."""


class BundleFormatError(CallerError):
    """A bundle of a format newer than this code can check."""


class GateError(DPReleaseError):
    """A noisy check metric fell outside its gate: nothing was published. The decision is
    differentially private (``mechanisms.gates``), so the message may name the noisy
    values; the exact metrics stay in ``internal/``."""

    exit_code = 3
    internal_dir: str | None = None


class LedgerError(EnvironmentFailure):
    """The ledger cannot be reached or used."""

    exit_code = 2


class NoLedger(LedgerError):
    """The database holds no ledger yet (opened with ``create=False``)."""


class LedgerLocked(LedgerError):
    """Another process held the SQLite ledger's lock for longer than ``LOCK_WAIT``."""


class LedgerFormatError(LedgerError):
    """The ledger's format is not one this code may use as asked: older, for a write
    (``dprelease ledger migrate`` first), or newer than this code knows."""


class WorkerError(EnvironmentFailure):
    """An unexpected error on a Dask worker, reported by type only (Dask logs a failed
    task's exception on the worker; its message might quote a value)."""


class ProcessDied(EnvironmentFailure):
    """The release's process ended without finishing (killed, crashed, power lost)."""


class PrefectUnreachable(EnvironmentFailure):
    """Prefect's API could not be reached, so the release did not start (nothing read or spent)."""


class PrefectNotStarted(PrefectUnreachable):
    """Prefect's temporary server did not answer in time (or exited while starting), so the
    release did not start: nothing was read or spent. The message names the setting to raise."""


class UnexpectedFailure(EnvironmentFailure):
    """The release failed unexpectedly (a bug, or Prefect itself): nothing was published. The
    message names the stage and the exception's type only; the failure record in
    ``<out>/failures/`` holds the traceback."""


def error_classes() -> list[type[DPReleaseError]]:
    """Every class of the tree, base first, each after its parents."""
    out: list[type[DPReleaseError]] = []
    todo: list[type[DPReleaseError]] = [DPReleaseError]
    while todo:
        cls = todo.pop(0)
        if cls not in out:
            out.append(cls)
            todo.extend(sorted(cls.__subclasses__(), key=lambda c: c.__name__))
    return [c for c in out if c.__module__ == __name__]


def error_table() -> str:
    """The tree as the Markdown table of ``docs/reference/errors.md``: class, parent, kind
    (caller or environment), exit code, and the first line of its docstring."""
    rows = ["| error | parent | a ValueError | exit code | meaning |", "|---|---|---|---|---|"]
    for cls in error_classes():
        parent = next((b.__name__ for b in cls.__bases__ if issubclass(b, DPReleaseError)), "Exception")
        meaning = " ".join((cls.__doc__ or "").split("\n\n")[0].split()).replace("``", "`")
        value = "yes" if issubclass(cls, ValueError) else "no"
        rows.append(f"| `{cls.__name__}` | `{parent}` | {value} | {cls.exit_code} | {meaning} |")
    return "\n".join(rows) + "\n"
