"""The error tree (issue 41): one leaf module defines every class, callers' mistakes are
``ValueError``s and the environment's failures are not, every class is exported, and the
CLI's exit table and the docs' table are both generated from the classes."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import dprelease
import dprelease.errors as public
from dprelease.mechanisms import errors as tree

PACKAGE = Path(dprelease.__file__).resolve().parent
DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference" / "errors.md"


def _sources() -> list[Path]:
    return sorted(
        Path(d, f) for d, _, files in os.walk(PACKAGE, followlinks=True) for f in files if f.endswith(".py")
    )


def test_callers_mistakes_are_value_errors_and_the_environments_are_not() -> None:
    for cls in tree.error_classes():
        if issubclass(cls, tree.CallerError):
            assert issubclass(cls, ValueError), cls
        if issubclass(cls, tree.EnvironmentFailure | tree.GateError):
            assert not issubclass(cls, ValueError), cls
    assert not issubclass(tree.LedgerLocked, ValueError)
    assert not issubclass(tree.PrefectUnreachable, ValueError)
    assert issubclass(tree.SpecError, ValueError) and issubclass(tree.DataError, ValueError)


def test_every_class_of_the_tree_is_exported() -> None:
    names = {cls.__name__ for cls in tree.error_classes()}
    assert names == set(public.__all__)
    assert all(getattr(public, n) is getattr(tree, n) for n in names)


def test_no_module_but_the_leaf_extends_the_tree() -> None:
    """A class deriving from one of the tree's classes anywhere else would be an error a
    caller cannot find in ``dprelease.errors`` (read from the source, so an unimported module
    counts too)."""
    names = {cls.__name__ for cls in tree.error_classes()}
    found = []
    for path in _sources():
        if path.name == "errors.py" and path.parent.name == "mechanisms":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & names:
                    found.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not found, found


def test_the_cli_exit_table_is_the_trees() -> None:
    from dprelease.cli.console import exit_code

    for cls in tree.error_classes():
        error = cls.__new__(cls)
        assert exit_code(error) == cls.exit_code, cls
    assert exit_code(RuntimeError("x")) == 1


def test_the_docs_table_is_generated_from_the_classes() -> None:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("<!-- generated: error_table -->\n") + len("<!-- generated: error_table -->\n")
    end = text.index("<!-- end generated -->")
    assert text[start:end] == tree.error_table(), "regenerate the table: tree.error_table()"
