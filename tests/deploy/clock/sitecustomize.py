"""TEST ONLY: move the ledger's clock in the processes of a real Prefect worker.

Python imports ``sitecustomize`` at start-up from its path; a test puts this folder on the
worker's PYTHONPATH (which the flow runs it starts inherit) and names a file in
``DPRELEASE_TEST_CLOCK_FILE``. Then, when ``dprelease.ledger.database`` is imported, its
``now()`` (the ledger's one clock) is replaced by one returning the ISO 8601 instant the file
holds when called, so the test can move the clock between runs. Without the variable this
does nothing. Nothing in the product imports or knows of this file.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from datetime import datetime
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

CLOCK_ENV = "DPRELEASE_TEST_CLOCK_FILE"
TARGET = "dprelease.ledger.database"


class _SetClock(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``TARGET`` through the other finders, runs it, then replaces its ``now``."""

    def __init__(self, clock: Path) -> None:
        self.clock = clock
        self.real: importlib.abc.Loader | None = None

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                self.real, spec.loader = spec.loader, self
                return spec
        return None

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec) if self.real is not None else None

    def exec_module(self, module: ModuleType) -> None:
        assert self.real is not None
        self.real.exec_module(module)
        module.now = lambda: datetime.fromisoformat(self.clock.read_text().strip())  # type: ignore[attr-defined]


if os.environ.get(CLOCK_ENV):
    sys.meta_path.insert(0, _SetClock(Path(os.environ[CLOCK_ENV])))
