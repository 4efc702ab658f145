"""Typed views of the JSON objects a bundle publishes (``bundle.release_doc``): each key
this version knows is a field named as the key; the keys it does not know (a newer
version's, or an older one's it dropped) are kept in ``extra``, and the keys' order as
read in ``order``, so that ``as_mapping`` gives back the very object that was read, key
order included, and a file written from it has the same bytes (``audit verify`` compares
their sha256).

Every key is optional when read (an old bundle lacks the newer ones; a test's document
holds the few keys it needs): an absent key reads as its field's default and is not
written back. A key present as ``null`` reads as None and is written back as ``null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, Self

__all__ = ["STRINGS", "Part", "PartError", "part", "part_map", "parts"]


class PartError(ValueError):
    """A value that should be a JSON object (or a list of them) is something else."""


def _object(cls: type[Part], value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PartError(f"{cls.__name__}: expected a JSON object, found {type(value).__name__}")
    return value


def _list(cls: type[Part], value: object) -> list[Any] | tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise PartError(f"{cls.__name__}: expected a JSON list of objects, found {type(value).__name__}")
    return value


def part(cls: type[Part]) -> Mapping[str, Any]:
    """A field's metadata: it holds one JSON object, as ``cls``."""
    return {"load": lambda v: cls.from_mapping(_object(cls, v)), "dump": lambda v: v.as_mapping()}


def parts(cls: type[Part]) -> Mapping[str, Any]:
    """A field's metadata: it holds a JSON list of objects, as a tuple of ``cls``."""
    return {
        "load": lambda v: tuple(cls.from_mapping(_object(cls, x)) for x in _list(cls, v)),
        "dump": lambda v: [x.as_mapping() for x in v],
    }


def part_map(cls: type[Part]) -> Mapping[str, Any]:
    """A field's metadata: it holds a JSON object whose values are objects, each as ``cls``."""
    return {
        "load": lambda v: {k: cls.from_mapping(_object(cls, x)) for k, x in _object(cls, v).items()},
        "dump": lambda v: {k: x.as_mapping() for k, x in v.items()},
    }


def _values(value: object) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise PartError(f"expected a JSON list, found {type(value).__name__}")
    return tuple(value)


STRINGS: Mapping[str, Any] = {"load": _values, "dump": list}
"""A field's metadata: it holds a JSON list of plain values (names, numbers), as a tuple."""


_KNOWN: dict[type, dict[str, Field[Any]]] = {}


def _known(cls: type[Part]) -> dict[str, Field[Any]]:
    """The keys ``cls`` knows: its fields but ``extra`` and ``order``."""
    known = _KNOWN.get(cls)
    if known is None:
        known = _KNOWN[cls] = {f.name: f for f in fields(cls) if f.name not in ("extra", "order")}
    return known


@dataclass(frozen=True, kw_only=True)
class Part:
    """A JSON object as typed fields plus ``extra`` (the keys this version does not know,
    as they were) and ``order`` (the keys as read; None for one made here: the fields in
    their order, those left None that default to None omitted, then ``extra``).
    ``dataclasses.replace`` keeps ``order``: a key the object did not hold stays unwritten."""

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    order: tuple[str, ...] | None = field(default=None, repr=False)

    @classmethod
    def _known(cls) -> dict[str, Field[Any]]:
        return _known(cls)

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> Self:
        """The object ``value`` (a parsed JSON object) as this type; ``PartError`` when a
        part of it that must be an object, or a list of them, is not."""
        known = cls._known()
        read = {}
        for k, v in _object(cls, value).items():
            f = known.get(k)
            if f is not None:
                read[k] = v if v is None or "load" not in f.metadata else f.metadata["load"](v)
        extra = {k: v for k, v in value.items() if k not in known}
        return cls(**read, extra=extra, order=tuple(value))

    def has(self, key: str) -> bool:
        """Whether the object holds ``key`` (read: it was there; made here: it is written)."""
        return key in self._keys()

    def _keys(self) -> tuple[str, ...]:
        if self.order is not None:
            return self.order
        known = self._known()
        made = (k for k, f in known.items() if not (f.default is None and getattr(self, k) is None))
        return (*made, *(k for k in self.extra if k not in known))

    def as_mapping(self) -> dict[str, Any]:
        """The JSON object: the keys as read (or made), each typed part written back."""
        known = self._known()
        out = {}
        for k in self._keys():
            f = known.get(k)
            if f is None:
                out[k] = self.extra[k]
                continue
            v = getattr(self, k)
            out[k] = v if v is None or "dump" not in f.metadata else f.metadata["dump"](v)
        return out
