"""The examples in docstrings, run where they document: every module of the package whose
source holds a ``>>>`` example (found by reading the files, so a new example is run without
a list to update), imported and checked with ``doctest``. Collecting the whole package with
``--doctest-modules`` would import every module, Prefect and GX with them, for a dozen
examples; this imports only the modules that have one."""

from __future__ import annotations

import doctest
import importlib
import os
from pathlib import Path

import pytest

import dprelease

PACKAGE = Path(dprelease.__file__).resolve().parent


def _modules_with_examples() -> list[str]:
    found = []
    paths = [Path(d, f) for d, _, files in os.walk(PACKAGE, followlinks=True) for f in files]
    for path in sorted(p for p in paths if p.suffix == ".py"):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(PACKAGE).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found.append(".".join(("dprelease", *parts)))
    return found


MODULES = _modules_with_examples()


def test_the_examples_are_found() -> None:
    assert "dprelease.mechanisms.accounting" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    try:
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, raise_on_error=True
        )
    except doctest.UnexpectedException as e:
        if isinstance(e.exc_info[1], pytest.skip.Exception):  # the unit tier: an example imports Prefect
            raise e.exc_info[1] from None
        raise
    except doctest.DocTestFailure as e:
        pytest.fail(f"{e.test.name}: {e.example.source.strip()} gave {e.got!r}, not {e.example.want!r}")
    assert result.attempted > 0
