"""docs/api.md's Python examples, without running them (issue 41): each block compiles, and
every name they take from the package exists on it, so a renamed API fails here in a second.
``tests/install/test_wheel.py`` runs them, as one script, from an installed wheel.

The names checked: each ``dprelease.X.Y`` chain, and each attribute read from what an API call
returned (``release = dprelease.release(...)`` then ``release.synthetic``), by the type the
call returns."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import dprelease
from dprelease.records.query import QueryResult

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def api_examples() -> list[str]:
    """The ```` ```python ```` blocks of docs/api.md, in the page's order."""
    blocks = BLOCK.findall(API_MD.read_text(encoding="utf-8"))
    assert blocks, "docs/api.md shows no Python example"
    return blocks


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def _has(kind: type, name: str) -> bool:
    fields = {f.name for f in dataclasses.fields(kind)} if dataclasses.is_dataclass(kind) else set()
    return name in fields or hasattr(kind, name)


def _returned(f: typing.Any) -> type | None:
    """What a function or method of the API is annotated to return."""
    hint = typing.get_type_hints(f).get("return")
    return hint if isinstance(hint, type) else None


def test_the_examples_compile():
    for k, block in enumerate(api_examples()):
        compile(block, f"docs/api.md python block {k + 1}", "exec")
    compile("\n".join(api_examples()), "docs/api.md", "exec")  # as the install test runs them


def test_every_name_the_examples_use_exists_on_the_package():
    tree = ast.parse("\n".join(api_examples()))
    missing, typed = [], {}  # variable -> the type an API call returned to it
    for node in ast.walk(tree):
        chain = _dotted(node) if isinstance(node, ast.Attribute) else None
        if chain and chain.startswith("dprelease."):
            obj: typing.Any = dprelease
            for part in chain.split(".")[1:]:
                if not hasattr(obj, part):
                    missing.append(chain)
                    break
                obj = getattr(obj, part)
    for node in ast.walk(tree):  # the walk is breadth-first: assignments in page order suffice here
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            (target,) = node.targets
            func = node.value.func
            made = None
            if (name := _dotted(func)) and name.startswith("dprelease.") and name not in missing:
                obj = dprelease
                for part in name.split(".")[1:]:
                    obj = getattr(obj, part)
                made = _returned(obj)
            elif isinstance(func, ast.Attribute) and (owner := _dotted(func.value)) in typed:
                method = getattr(typed[owner], func.attr, None)
                made = None if method is None else _returned(method)
                if method is None:
                    missing.append(f"{typed[owner].__name__}.{func.attr}")
            if isinstance(target, ast.Name) and made is not None:
                typed[target.id] = made
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in typed:
            if not _has(typed[node.value.id], node.attr):
                missing.append(f"{typed[node.value.id].__name__}.{node.attr}")
    assert missing == [], f"docs/api.md uses names the package does not have: {sorted(set(missing))}"
    assert {"spec", "release", "result", "audit", "ledger", "small"} <= set(typed), typed
    assert typed["result"] is QueryResult


def test_the_examples_read_no_file_of_a_checkout():
    """Run from an installed package in an empty folder: the demo's spec and data, or a dict;
    never a spec file or a path a checkout alone has."""
    tree = ast.parse("\n".join(api_examples()))
    loads = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and _dotted(n.func) == "dprelease.Spec.load"
    ]
    assert loads and all(isinstance(n.args[0], ast.Dict) for n in loads)
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert [t for t in texts if t.endswith((".yaml", ".yml", ".csv", ".gz")) or "/" in t] == []
