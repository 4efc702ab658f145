"""Unexpected errors can quote confidential values (a library's message may print a cell,
a row or a statistic), and Prefect logs a failed task's or flow's exception message to its
API. ``scrub_errors`` replaces such an exception by ``UnexpectedError``, whose message
names only the task and the exception's type; the original travels on ``.original`` so
that the failure record keeps its traceback in ``internal/traceback.txt``. Our own
``DPReleaseError`` messages name rules, never values, and pass through unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from dprelease.mechanisms.errors import DPReleaseError

__all__ = ["UnexpectedError", "scrub", "scrub_errors"]

F = TypeVar("F", bound=Callable[..., Any])


class UnexpectedError(RuntimeError):
    """An unexpected failure, reported without its message; ``original`` is the cause."""

    def __init__(self, where: str, original: BaseException) -> None:
        super().__init__(
            f"{where} failed unexpectedly ({type(original).__name__}); its message may quote data, so it "
            "is kept only in the failure record's internal/traceback.txt"
        )
        self.original = original


def scrub(error: Exception, where: str) -> Exception:
    """``error`` itself if its message is safe to log, else an ``UnexpectedError``."""
    if isinstance(error, DPReleaseError | UnexpectedError):
        return error
    return UnexpectedError(where, error)


def scrub_errors(fn: F) -> F:
    """Decorate a task body (under ``@task``) so its unexpected errors are scrubbed."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            safe = scrub(e, f"task '{fn.__name__}'")
            if safe is e:
                raise
            raise safe from None

    return wrapper  # type: ignore[return-value]
