"""Reading a release spec: the YAML file (a safe loader that reads numbers as YAML 1.2 and
refuses anchors, aliases, repeated keys and a document past the limits of
``spec.document``) or a Python mapping (made plain within the same limits), validated into
a :class:`~dprelease.spec.release.ReleaseSpec` whose every error names its field."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dprelease.spec.document import MAX_FILE_BYTES, Size, plain_document
from dprelease.spec.draft import YAML12_FLOAT, placeholders
from dprelease.spec.release import ReleaseSpec, SpecError
from dprelease.spec.text import visible

__all__ = ["load_spec", "read_spec_mapping", "spec_from_mapping"]


def _field(loc: tuple) -> str:
    """A field's dotted path; it quotes the spec's keys, control characters made visible."""
    return ".".join(visible(str(p)) for p in loc if not str(p).endswith("Spec"))


class _Refused(yaml.YAMLError):
    """A YAML construct a release spec never needs (``_SpecLoader``)."""


class _SpecLoader(yaml.SafeLoader):
    """YAML's safe loader, reading numbers as YAML 1.2 does: PyYAML (YAML 1.1) reads
    ``delta: 1e-6`` as the text '1e-6'. With it, a number is a number and a quoted number is
    text, which the spec's numeric fields refuse (``epsilon: "1.0"`` is an error, not 1.0).

    It refuses what a release spec never needs and an attacker can use: anchors and aliases
    (``&a``, ``*a``; nested aliases expand exponentially, "billion laughs"), refused as the
    parser meets the first, before anything is built; and a key stated twice in a mapping
    (YAML keeps the last silently: two ``privacy:`` blocks would load as the second).
    It counts the nodes, their depth and their text as it composes them (``Size``): a
    document past the limits is refused at the node that passes one, before it is built."""

    def __init__(self, stream: str, size: Size) -> None:
        super().__init__(stream)
        self._size, self._depth = size, 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused(
                f"line {event.start_mark.line + 1}: YAML anchors and aliases (&name, *name) are not "
                "allowed in a release spec; write each value out where it is used"
            )
        text = event.value if isinstance(event, yaml.ScalarEvent) else ""
        self._depth += 1
        try:
            self._size.add(self._depth, len(text), lambda: f"line {event.start_mark.line + 1}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor refuses it below
                continue
            if first is not None:
                raise _Refused(
                    f"line {line}: key {key!r} is stated twice in one mapping (first on line {first}); "
                    "state each field once"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+.0123456789"))


def load_spec(path: str | Path) -> ReleaseSpec:
    """Read and validate a YAML spec; relative dataset paths resolve against its folder."""
    path = Path(path)
    return spec_from_mapping(read_spec_mapping(path), path.resolve().parent, str(path))


def read_spec_mapping(path: Path) -> dict:
    """The mapping a spec file holds, read with ``_SpecLoader`` (not yet validated)."""
    if not path.is_file():
        raise SpecError(f"spec file '{path}' does not exist; pass the path of a release YAML")
    with path.open("rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(
            f"spec file '{path}' is too large to be a release spec (more than {MAX_FILE_BYTES:,} bytes)"
        )
    try:
        loader = _SpecLoader(data.decode("utf-8"), Size(str(path)))  # a SafeLoader
        try:
            raw = loader.get_single_data()
        finally:
            loader.dispose()
    except UnicodeDecodeError:
        raise SpecError(f"spec file '{path}' is not UTF-8 text; save the release YAML as UTF-8") from None
    except _Refused as e:
        raise SpecError(f"spec file '{path}': {e}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"spec file '{path}' is not valid YAML: {e}") from None
    except RecursionError:
        raise SpecError(f"spec file '{path}' is nested too deeply to be a release spec") from None
    if not isinstance(raw, dict):
        raise SpecError(f"spec file '{path}' must contain a YAML mapping")
    return plain_document(raw, str(path))


def spec_from_mapping(raw: Mapping[str, Any], base_dir: Path, name: str) -> ReleaseSpec:
    """Validate a spec already read as a mapping (``load_spec`` after YAML, or a Python
    dict), made plain within the limits first (``plain_document``); a relative dataset path
    resolves against ``base_dir``; ``name`` says in the messages which spec it is (a file's
    path)."""
    raw = plain_document(raw, name)
    gaps = placeholders(raw)
    if gaps:
        raise SpecError(
            f"spec '{name}' is a draft with {len(gaps)} value(s) still to fill from public knowledge "
            f"(a codebook, the law, the documentation; never the data): {', '.join(gaps)}"
        )
    if "base_dir" in raw:  # set by the loader, never by the file
        raise SpecError(
            f"invalid release spec '{name}':\n  spec field 'base_dir': not a spec field (a relative "
            "dataset.path resolves against the spec's folder); remove it"
        )
    try:  # model_validate, not **raw: YAML keys need not be strings, and pydantic names them
        return ReleaseSpec.model_validate({**raw, "base_dir": base_dir})
    except ValidationError as e:
        lines = [f"spec field '{_field(err['loc']) or '(top level)'}': {err['msg']}" for err in e.errors()]
        raise SpecError(f"invalid release spec '{name}':\n  " + "\n  ".join(lines)) from None
    except (TypeError, ValueError) as e:
        raise SpecError(f"invalid release spec '{name}': {e}") from None
