"""dprelease: differentially private synthetic microdata releases.

The Python API (``dprelease.api``): :class:`Spec`, :func:`release`, :func:`synthesize`,
the :class:`Release` a release returns, :func:`query` (a count with its interval from a
release's published files); ``dprelease.audit.verify`` and
``dprelease.ledger.show`` return what ``dprelease audit verify`` and ``dprelease ledger
show`` print; ``dprelease.errors`` holds every error, under ``DPReleaseError``.

The project's folders (``mechanisms/``, ``spec/``, ``engines/``, ``ledger/``, ``checks/``,
``bundle/``, ``expectations/``, ``records/``, ``discovery/``, ``tasks/``, ``flows/``, ``cli/``) are
installed as the subpackages ``dprelease.mechanisms`` ... ``dprelease.flows``; nothing else
is installed at the top level. The API's names are imported on first use, so that the
command line starts without them.

Importing dprelease puts the project's Prefect defaults in the process environment, each only
where neither the environment nor the active Prefect profile sets it
(``dprelease.flows.defaults``): Prefect reads its settings when it is first imported, and
every entry (the command line, the Python API, a worker loading the flow) imports dprelease
before it imports Prefect.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dprelease._version import __version__ as __version__
from dprelease.flows.defaults import apply_defaults

apply_defaults()  # before anything imports Prefect

if TYPE_CHECKING:
    from dprelease import audit, errors, ledger
    from dprelease.api import NotForPublication, Release, Spec, query, release, synthesize
    from dprelease.errors import DPReleaseError

__all__ = [
    "DPReleaseError",
    "NotForPublication",
    "Release",
    "Spec",
    "audit",
    "errors",
    "ledger",
    "query",
    "release",
    "synthesize",
]

_FROM = {
    "NotForPublication": "dprelease.api",
    "Release": "dprelease.api",
    "Spec": "dprelease.api",
    "query": "dprelease.api",
    "release": "dprelease.api",
    "synthesize": "dprelease.api",
    "DPReleaseError": "dprelease.errors",
}


def __getattr__(name: str) -> Any:
    """The API's names and modules, imported on first use."""
    if name in _FROM:
        return getattr(importlib.import_module(_FROM[name]), name)
    if name in ("audit", "errors", "ledger"):
        return importlib.import_module(f"dprelease.{name}")
    raise AttributeError(f"module 'dprelease' has no attribute {name!r}")
