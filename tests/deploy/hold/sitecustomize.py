"""TEST ONLY: hold a release at a step in the processes of a real Prefect worker, so that a
test can kill it there.

Python imports ``sitecustomize`` at start-up from its path; a test puts this folder on the
worker's PYTHONPATH (which the flow runs it starts inherit) and sets ``DPRELEASE_TEST_HOLD_AT``
to a step of ``dprelease.flows.progress.STAGES`` and ``DPRELEASE_TEST_HOLD_FILE`` to a path.
When the release reaches that step, the process writes its pid to the file and waits for
ever. Without the variables this does nothing. Nothing in the product imports or knows of
this file.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import time
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

TARGET = "dprelease.flows.progress"


class _Hold(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``TARGET`` through the other finders, runs it, then wraps its ``step_reached``."""

    def __init__(self, step: str, file: Path) -> None:
        self.step, self.file = step, file
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
        reached = module.step_reached

        def step_reached(record, step):
            reached(record, step)
            if step == self.step:
                self.file.write_text(str(os.getpid()))
                while True:
                    time.sleep(60)

        module.step_reached = step_reached  # type: ignore[attr-defined]


if os.environ.get("DPRELEASE_TEST_HOLD_AT") and os.environ.get("DPRELEASE_TEST_HOLD_FILE"):
    sys.meta_path.insert(
        0, _Hold(os.environ["DPRELEASE_TEST_HOLD_AT"], Path(os.environ["DPRELEASE_TEST_HOLD_FILE"]))
    )
