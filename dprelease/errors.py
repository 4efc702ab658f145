"""Every error dprelease raises on purpose, in one tree (defined in the leaf module
``dprelease.mechanisms.errors``, which every layer imports): catch :class:`DPReleaseError` for
all of them, :class:`CallerError` (a ``ValueError``) for a mistake in what you passed (spec,
data, query), :class:`EnvironmentFailure` (not a ``ValueError``) for Prefect, the ledger's
database or a bug. Messages name the field, column or rule broken and what to do next, never a
data value or a count from the data.

Each class's ``exit_code`` is the command line's exit status for it; the table in
``docs/reference/errors.md`` is generated from them.

Example:
    >>> import dprelease
    >>> try:
    ...     dprelease.Spec.load({"dataset": {"name": "x", "path": "x.csv"}})
    ... except dprelease.errors.SpecError as e:
    ...     print(str(e).splitlines()[0])
    invalid release spec '(a Python mapping)':
"""

from __future__ import annotations

from dprelease.mechanisms import errors as _tree
from dprelease.mechanisms.errors import *  # noqa: F403  the tree, whole: every class it defines

__all__ = list(_tree.__all__)
