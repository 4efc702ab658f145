"""The benchmark driver and renderer are scripts run from ``benchmarks/`` (they import their
siblings by bare name: ``common``, ``render``): the tests import them the same way."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def bench_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` (or the ``render`` package) as ``run.py`` imports it."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def render() -> ModuleType:
    return bench_module("render")


@pytest.fixture(scope="session")
def run() -> ModuleType:
    return bench_module("run")
