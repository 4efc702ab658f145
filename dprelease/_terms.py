"""Messages in the Python API's terms (issue 41): the layers below word their errors for the
command line (``pass --ledger``, ``choose --out``); the API's caller passed arguments, so the
API names those instead (``ledger=``, ``out=``) before an error reaches them."""

from __future__ import annotations

import re

from dprelease.ledger.identity import NEW_DATASET

__all__ = ["as_api_error", "in_api_terms"]

_FLAG = re.compile(r"--(ledger|new-dataset|out|release-id|insecure-seed)(?![\w-])( (?=[\"'A-Z]))?")
"""A command-line option the Python API takes as an argument of the same name (``--out`` is
``out=``), with the space before a quoted or upper-case value that follows it."""


def in_api_terms(text: str) -> str:
    """``text`` as the Python API's caller reads it: each option of the command line named as
    the argument it is (``--ledger`` → ``ledger=``, ``--new-dataset "REASON"`` →
    ``new_dataset="REASON"``), except in a command quoted between backticks, which stays
    as it is run.

    >>> in_api_terms("pass --out with a folder you can write to; or `dprelease recover --out X`")
    'pass out= with a folder you can write to; or `dprelease recover --out X`'
    """
    parts = text.replace(NEW_DATASET, 'new_dataset="REASON"').split("`")
    for k in range(0, len(parts), 2):  # outside backticks
        parts[k] = _FLAG.sub(lambda m: m[1].replace("-", "_") + "=", parts[k])
    return "`".join(parts)


def as_api_error(error: BaseException) -> BaseException:
    """``error`` with its message in the API's terms (``in_api_terms``), changed in place (its
    type and traceback kept); an error whose arguments are not one message is left as it is."""
    if len(error.args) == 1 and isinstance(error.args[0], str) and str(error) == error.args[0]:
        error.args = (in_api_terms(error.args[0]),)
    return error
