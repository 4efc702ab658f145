"""The release spec's reference, generated from its pydantic models (``dprelease.spec``).

Every model reachable from ``ReleaseSpec`` gets a table of its fields: the YAML name, the
type, the default, the constraints pydantic enforces, and a description. The description is
the field's own (``Field(description=...)``) when it has one, else the line for it in
``spec_fields.yaml``; a field with neither, or a line naming a field or model that does not
exist, stops the build. Each model's example (``spec_fields.yaml``, ``_example``) is validated
by the model itself, so an example that the spec would refuse stops the build too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from mkdocs.exceptions import PluginError
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec.columns import ColumnSpec
from dprelease.spec.release import ReleaseSpec

FIELDS = Path(__file__).with_name("spec_fields.yaml")
HIDDEN = {"base_dir"}  # set by the loader (the spec file's folder), not written in a spec
BOUNDS = ((Gt, "gt", ">"), (Ge, "ge", "≥"), (Lt, "lt", "<"), (Le, "le", "≤"))


def type_name(annotation: Any) -> str:
    """A readable type: ``float | None``, ``"zcdp" | "pure"``, ``list[str]``, a model's name."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation)).replace("Strict", "").lower()


def constraints(field: FieldInfo) -> str:
    """The rules pydantic enforces on the field, from its metadata."""
    rules = []
    for item in field.metadata:
        for kind, attr, sign in BOUNDS:
            if isinstance(item, kind):
                rules.append(f"{sign} {getattr(item, attr)}")
        if isinstance(item, MinLen):
            rules.append(f"at least {item.min_length} item(s)")
        if isinstance(item, MaxLen):
            rules.append(f"at most {item.max_length:,} item(s)")
        if getattr(item, "pattern", None):
            rules.append(f"matches `{item.pattern}`")
        if getattr(item, "strict", None):
            rules.append("strict type (no conversion)")
        if getattr(item, "allow_inf_nan", None) is False:
            rules.append("finite")
    return "; ".join(rules) or "—"


def default(field: FieldInfo) -> str:
    """The default written as YAML, or *required*."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "*required*"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_defaults=True) or {}
    return f"`{yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}`"


def models() -> list[type[BaseModel]]:
    """Every spec model reachable from ReleaseSpec, in the order a spec meets them."""
    found: list[type[BaseModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in found:
                found.append(annotation)
                for field in annotation.model_fields.values():
                    visit(field.annotation)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(ReleaseSpec)
    return found


def described(model: type[BaseModel], notes: dict[str, Any]) -> list[tuple[str, FieldInfo, str]]:
    """(YAML name, field, description) of each field a spec can write."""
    rows = []
    for name, field in model.model_fields.items():
        if name in HIDDEN:
            continue
        text = field.description or notes.get(field.alias or name)
        if not text:
            raise PluginError(f"spec field {model.__name__}.{name} has no description ({FIELDS.name})")
        rows.append((field.alias or name, field, " ".join(str(text).split())))
    names = {field.alias or name for name, field in model.model_fields.items()}
    unknown = set(notes) - names - {"_example", "_intro"}
    if unknown:
        raise PluginError(f"{FIELDS.name} describes {sorted(unknown)}, not fields of {model.__name__}")
    return rows


def example(model: type[BaseModel], notes: dict[str, Any]) -> str:
    """The model's example, validated by the model (a column by the ColumnSpec union)."""
    text = notes.get("_example")
    if not text:
        raise PluginError(f"{FIELDS.name} has no _example for {model.__name__}")
    value = yaml.safe_load(text)
    try:
        if model is ReleaseSpec:
            ReleaseSpec.model_validate(value)
        elif "type" in model.model_fields:
            TypeAdapter(ColumnSpec).validate_python(next(iter(value.values())))
        else:
            model.model_validate(next(iter(value.values())) if len(value) == 1 else value)
    except Exception as e:
        raise PluginError(f"the example of {model.__name__} in {FIELDS.name} is refused: {e}") from e
    return f"```yaml\n{text.rstrip()}\n```"


def section(model: type[BaseModel], notes: dict[str, Any]) -> str:
    rows = described(model, notes)
    table = ["| field | type | default | constraints | description |", "|---|---|---|---|---|"]
    table += [
        f"| `{name}` | {type_name(f.annotation)} | {default(f)} | {constraints(f)} | {text} |"
        for name, f, text in rows
    ]
    intro = " ".join(str(notes.get("_intro", "")).split())
    return "\n\n".join(
        part for part in (f"## {model.__name__}", intro, "\n".join(table), example(model, notes)) if part
    )


def spec_reference() -> str:
    """Every spec model's section; a model or a field left undescribed stops the build."""
    notes = yaml.safe_load(FIELDS.read_text(encoding="utf-8"))
    found = models()
    stale = set(notes) - {m.__name__ for m in found}
    if stale:
        raise PluginError(f"{FIELDS.name} describes {sorted(stale)}, which are not spec models")
    return "\n\n".join(section(m, notes.get(m.__name__, {})) for m in found)


def mechanism_params() -> str:
    """One table per mechanism: its parameters (``mechanism.params``) and their defaults."""
    parts = []
    for name in sorted(MECHANISMS):
        params = dataclasses.fields(MECHANISMS[name].params_type)
        rows = ["| parameter | type | default |", "|---|---|---|"]
        for p in params:
            value = p.default if p.default is not dataclasses.MISSING else "*required*"
            if p.default_factory is not dataclasses.MISSING:
                value = p.default_factory()
            kind = str(p.type).replace("|", "\\|")
            rows.append(f"| `{p.name}` | {kind} | `{value!r}` |")
        parts.append(f"### `{name}`\n\n" + ("\n".join(rows) if params else "No parameters."))
    return "\n\n".join(parts)
