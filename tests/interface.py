"""What a user of dprelease sees and a change must announce: the CLI's commands, options and
arguments, the spec's fields (every nested model's), and the ledger's tables and columns,
each as one line. ``tests/test_interface.py`` compares them with the snapshot of the last
version; ``python -m tests.interface VERSION`` records the snapshot of a new version (with
its CHANGELOG section)."""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def cli_lines() -> set[str]:
    """``cli: dprelease <command path> <option or ARGUMENT>`` for every command."""
    from dprelease.cli.main import app

    out: set[str] = set()

    def walk(command: Any, path: str) -> None:  # typer's own click, or click
        out.add(f"cli: {path}")
        for param in command.params:
            names = (
                [*param.opts, *param.secondary_opts]
                if param.param_type_name == "option"
                else [(param.name or "").upper()]
            )
            out.update(f"cli: {path} {name}" for name in names)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "dprelease")
    return out


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside an annotation (unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        return [m for arg in typing.get_args(annotation) for m in _models(arg)]
    return []


def spec_lines() -> set[str]:
    """``spec: <Model>.<field>`` for every field of every model a spec can hold."""
    from dprelease.spec import ReleaseSpec

    out: set[str] = set()
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [ReleaseSpec]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            out.add(f"spec: {model.__name__}.{field.alias or name}")
            todo.extend(_models(field.annotation))
    return out


def ledger_lines() -> set[str]:
    """``ledger: <table>.<column>`` of the ledger's database, and ``ledger: format N``."""
    from dprelease.ledger.database import METADATA
    from dprelease.ledger.format import FORMAT, FORMAT_TABLE

    tables = [*METADATA.tables.values(), FORMAT_TABLE]
    return {f"ledger: {t.name}.{c.name}" for t in tables for c in t.columns} | {f"ledger: format {FORMAT}"}


def interface() -> set[str]:
    return cli_lines() | spec_lines() | ledger_lines()


def snapshot_path(version: str) -> Path:
    return SNAPSHOTS / f"interface-{version}.json"


def record(version: str) -> Path:
    path = snapshot_path(version)
    path.write_text(json.dumps({"version": version, "interface": sorted(interface())}, indent=1) + "\n")
    return path


if __name__ == "__main__":
    print(record(sys.argv[1]))
