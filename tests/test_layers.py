"""The floors import only downwards (README, Layout): every ``import`` in every module of
a package, lazy ones inside functions included, names a package on its own floor or
below. A newcomer can then read the project from the spec down to the noise draw."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the project packages it may import (itself included)
ALLOWED = {
    "mechanisms": {"mechanisms"},
    "spec": {"spec", "mechanisms"},
    "expectations": {"expectations", "mechanisms"},
    "ledger": {"ledger", "mechanisms"},
    "checks": {"checks", "mechanisms"},
    "engines": {"engines", "spec", "mechanisms", "expectations"},
    "bundle": {"bundle", "engines", "spec", "mechanisms"},
    # a release's records checked, settled and shown (audit, recovery, Prefect artifacts)
    "records": {"records", "bundle", "ledger", "spec", "mechanisms"},
    # the schema discovered under DP: a release of its own, without the flow
    "discovery": {"discovery", "bundle", "engines", "ledger", "spec", "mechanisms"},
    "tasks": {
        "tasks",
        "records",
        "discovery",
        "bundle",
        "checks",
        "engines",
        "ledger",
        "expectations",
        "spec",
        "mechanisms",
    },
}
# each floor above tasks adds itself to the one below
ALLOWED["flows"] = {"flows", *ALLOWED["tasks"]}
# the command line: a thin typer layer over everything
ALLOWED["cli"] = {"cli", *ALLOWED["flows"]}
PROJECT = set(ALLOWED)


def _imported(path: Path) -> set[str]:
    """Every module name the file imports, anywhere in it (relative imports left out)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def _imports(path: Path) -> set[str]:
    """The project packages (``dprelease.<package>``) the module imports, anywhere in it."""
    parts = (name.split(".") for name in _imported(path))
    return {p[1] for p in parts if len(p) > 1 and p[0] == "dprelease"} & PROJECT


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_its_floor_and_below(package):
    wrong = {
        str(p.relative_to(ROOT)): sorted(_imports(p) - ALLOWED[package])
        for p in sorted((ROOT / package).rglob("*.py"))
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_tasks_hold_prefect_tasks():
    """Every module of tasks/ defines a Prefect task, except the error scrubber they share."""
    for p in sorted((ROOT / "tasks").glob("*.py")):
        if p.name in ("__init__.py", "scrub.py"):
            continue
        assert "@task(" in p.read_text(encoding="utf-8"), p.name


def test_no_module_is_imported_by_its_bare_name():
    """The folders are installed as ``dprelease.<package>`` only: ``import flows.cli`` would load a
    second copy of the module (and in a user's notebook, their own ``flows/`` folder)."""
    files = [
        p for d in ("tests", "benchmarks", "deploy", "dprelease", *PROJECT) for p in (ROOT / d).rglob("*.py")
    ]
    bare = {
        str(p.relative_to(ROOT)): sorted(n for n in _imported(p) if n.split(".")[0] in PROJECT) for p in files
    }
    assert {k: v for k, v in bare.items() if v} == {}


FACADE = {p.stem for p in (ROOT / "dprelease").glob("*.py") if p.stem not in ("__init__", "_version")}
"""``dprelease/_version.py`` is the one leaf below every floor: the version and the commit."""


def test_the_version_is_a_leaf():
    """Every floor may read the version (``release.json``, ``--version``): it imports nothing
    of the project."""
    assert not {n for n in _imported(ROOT / "dprelease" / "_version.py") if n.startswith("dprelease")}


def test_nothing_below_imports_the_facade():
    """The files directly in ``dprelease/`` (``api``, ``errors``, ``audit``) are the public
    facade, above ``flows``: they may import any layer, and no layer imports them."""
    assert FACADE >= {"api", "errors", "audit"}
    files = [p for d in PROJECT for p in (ROOT / d).rglob("*.py")]
    wrong = {}
    for p in files:
        names = _imported(p)
        hits = {n for n in names if n.split(".")[:2] in (["dprelease", f] for f in FACADE)}
        hits |= {n for n in names if n == "dprelease"}  # ``from dprelease import api``
        if hits:
            wrong[str(p.relative_to(ROOT))] = sorted(hits)
    assert wrong == {}


MAX_LINES = 500
"""The most lines a product module may have (the CHANGELOG's promise since 0.2.0: modules over
500 lines were split)."""


def test_no_product_module_is_over_the_line_limit():
    """Every module of every floor and of the facade is at most ``MAX_LINES`` lines: a module
    that grows past it is split, as ``ledger/store.py`` and ``cli/main.py`` had to be."""
    files = [p for d in [*PROJECT, "dprelease"] for p in (ROOT / d).rglob("*.py")]
    long = {
        str(p.relative_to(ROOT)): n
        for p in files
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (at most {MAX_LINES} lines each): {long}"
