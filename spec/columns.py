"""The public schema as a steward declares it: one pydantic model per column kind, with
the policies for values the schema does not allow (``out_of_bounds``, ``unknown``)."""

from __future__ import annotations

import math
from datetime import date, datetime, time
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, ValidationInfo, field_validator

from mechanisms.calendar import DATE_UNITS, DATETIME_UNITS, Unit, to_units
from mechanisms.formula import Formula
from mechanisms.schema import MAX_INTERVALS

MAX_VALUES = 256

__all__ = [
    "ColumnSpec",
    "ContinuousSpec",
    "DateSpec",
    "DerivedSpec",
    "DropSpec",
    "IdSpec",
    "NominalSpec",
    "OneHotSpec",
    "OrdinalSpec",
    "Strict",
]


class Strict(BaseModel):
    """Every spec model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ContinuousSpec(Strict):
    """``out_of_bounds``: ``reject`` (default) refuses a value outside the bounds (±inf
    included); ``clip`` moves it to the nearer declared bound before validation. A
    missing value (empty, NA, NaN) is an error under both, unless ``missing: allowed``:
    then it is a cell of its own, modelled jointly with the other columns, and the
    synthetic table has empty cells (``mechanisms.schema.Continuous.missing``).

    Public resolution (``mechanisms.schema.Continuous``): ``atoms`` are values with a cell
    of their own, decoded exactly (e.g. ``[0]`` for a zero-inflated amount); ``values``
    is a known finite support (every value its own cell; any other value is refused);
    ``bins`` the number of interval bins; ``decimals`` the output precision.
    """

    type: Literal["continuous"]
    bounds: tuple[StrictFloat, StrictFloat]  # a quoted number is text, refused
    integer: bool = False
    transform: Literal["none", "log"] = "none"
    out_of_bounds: Literal["reject", "clip"] = "reject"
    atoms: list[StrictFloat] = Field(default_factory=list, max_length=64)
    values: list[StrictFloat] | None = Field(default=None, min_length=2, max_length=MAX_VALUES)
    bins: int | None = Field(default=None, ge=1, le=MAX_INTERVALS, strict=True)
    decimals: int | None = Field(default=None, ge=0, le=15, strict=True)
    missing: Literal["reject", "allowed"] = "reject"

    @field_validator("bounds")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(math.isfinite(b) for b in v) or not v[0] < v[1]:
            raise ValueError(f"bounds ({list(v)}) must be two finite numbers, lower < upper")
        return v


def _other_declared(other: str | None, info: ValidationInfo, values: str) -> str | None:
    """``other`` is needed by, and only by, ``unknown: other``, and must be declared."""
    unknown, declared = info.data.get("unknown"), info.data.get(values)
    if unknown == "other" and other is None:
        raise ValueError(f"unknown: other needs other: <token>, one of the declared {values}")
    if other is not None and unknown == "reject":
        raise ValueError(f"other ({other!r}) is used only with unknown: other")
    if other is not None and declared is not None and other not in declared:
        raise ValueError(f"other ({other!r}) must be one of the declared {values}: {declared}")
    return other


class OrdinalSpec(Strict):
    """``unknown``: ``reject`` (default) refuses a value that is not a declared level;
    ``other`` maps it to the declared level ``other`` before validation. A missing cell is
    governed by ``missing`` alone, never mapped to ``other``."""

    type: Literal["ordinal"]
    levels: list[str] = Field(min_length=2)
    missing: str | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: str | None = Field(default=None, validate_default=True)

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "levels")


class NominalSpec(Strict):
    """``unknown``/``other`` as for ordinal columns, over the declared categories."""

    type: Literal["nominal"]
    categories: list[str] = Field(min_length=2)
    missing: str | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: str | None = Field(default=None, validate_default=True)

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "categories")


class IdSpec(Strict):
    """An identifier: never read into the model, never published. The synthetic table gets
    fresh identifiers ``format.format(i)`` for i = 1…m: a Python format with one integer
    field and literal text beside it (e.g. ``SYN-{:09d}``), which must be text real
    identifiers never carry, so a fresh one cannot equal a real one (nothing checks the
    real ones: that would read them)."""

    type: Literal["id"]
    format: str = "SYN-{:09d}"

    @field_validator("format")
    @classmethod
    def _one_integer_field(cls, v: str) -> str:
        try:
            a, b = v.format(1), v.format(2)
        except (IndexError, KeyError, ValueError) as e:
            raise ValueError(f"format ({v!r}) must hold one integer field such as {{:09d}} ({e})") from None
        literal = v.replace("{", "\0").split("\0")[0] + v.rsplit("}", 1)[-1]
        if a == b or not literal:
            raise ValueError(
                f"format ({v!r}) must hold one integer field and literal text beside it that real "
                "identifiers never carry, e.g. 'SYN-{:09d}'"
            )
        return v


class DateSpec(Strict):
    """A date (``type: date``, resolution ``day``, ``month`` or ``year``) or a timestamp
    (``type: datetime``, ``hour``, ``minute`` or ``second``), read as ISO 8601 text and
    modelled as whole units of the public ``resolution`` since 1970-01-01 between the
    public ``bounds`` (``mechanisms.calendar``); written back as ISO text at that
    resolution. ``bins`` and ``missing`` as for continuous columns."""

    type: Literal["date", "datetime"]
    bounds: tuple[datetime, datetime]
    resolution: Unit | None = None
    bins: int | None = Field(default=None, ge=1, le=MAX_INTERVALS, strict=True)
    missing: Literal["reject", "allowed"] = "reject"

    @field_validator("bounds", mode="before")
    @classmethod
    def _dates(cls, v: Any) -> Any:
        """A YAML date (2024-01-31, which the loader reads as a ``date``) is its midnight;
        a number is refused (pydantic would read it as seconds since the epoch)."""
        if isinstance(v, list | tuple):
            if any(isinstance(b, int | float) for b in v):
                raise ValueError(
                    f"bounds ({list(v)}) must be two ISO 8601 dates, e.g. [1920-01-01, 2010-12-31]"
                )
            return [
                datetime.combine(b, time()) if isinstance(b, date) and not isinstance(b, datetime) else b
                for b in v
            ]
        return v

    @field_validator("bounds")
    @classmethod
    def _ordered_dates(cls, v: tuple[datetime, datetime]) -> tuple[datetime, datetime]:
        if any(b.tzinfo is not None for b in v):
            raise ValueError("bounds must be local dates or times without a time zone")
        if not v[0] < v[1]:
            raise ValueError(
                f"bounds ({v[0].isoformat()}, {v[1].isoformat()}) must be ordered, lower < upper"
            )
        return v

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, v: Unit | None, info: ValidationInfo) -> Unit | None:
        allowed = DATE_UNITS if info.data.get("type") == "date" else DATETIME_UNITS
        if v is not None and v not in allowed:
            raise ValueError(
                f"resolution {v!r} must be one of {list(allowed)} for type {info.data.get('type')}"
            )
        return v

    @property
    def unit(self) -> Unit:
        return self.resolution or ("day" if self.type == "date" else "minute")

    def unit_bounds(self) -> tuple[float, float]:
        lo, hi = to_units(np.array(self.bounds, dtype="datetime64[s]"), self.unit)
        return float(lo), float(hi)


class OneHotSpec(Strict):
    """Indicator columns of one choice (``columns``, each 0 or 1 in the file, at most one
    1 per row), modelled as one nominal column named by this entry, whose categories are
    the indicator names and ``none`` (all 0; ``none: null`` when exactly one must be 1).
    The release writes the indicators back, so at most one is set in every row."""

    type: Literal["one_hot"]
    columns: list[str] = Field(min_length=2, max_length=MAX_VALUES)
    none: str | None = "none"

    @field_validator("columns")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"columns ({v}) must be distinct")
        return v

    @field_validator("none")
    @classmethod
    def _none_not_an_indicator(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and v in (info.data.get("columns") or []):
            raise ValueError(f"none ({v!r}) must not be one of the indicator columns")
        return v

    @property
    def categories(self) -> list[str]:
        return [*self.columns, *([self.none] if self.none is not None else [])]


class DerivedSpec(Strict):
    """A column computed after decoding from a public ``formula`` of modelled continuous
    columns (``mechanisms.formula``: arithmetic, numbers, names, log/exp/sqrt/...), e.g.
    ``age ** 2``; never modelled, read past in the file. ``integer`` rounds it, ``decimals``
    as for continuous columns."""

    type: Literal["derived"]
    formula: str
    integer: bool = False
    decimals: int | None = Field(default=None, ge=0, le=15, strict=True)

    @field_validator("formula")
    @classmethod
    def _parses(cls, v: str) -> str:
        Formula.parse(v)  # FormulaError is a ValueError: pydantic names the field
        return v

    def compiled(self) -> Formula:
        return Formula.parse(self.formula)


class DropSpec(Strict):
    """A column read past and left out of the model and the release (free text, a field not
    to publish); ``release.json`` lists it."""

    type: Literal["drop"]


ColumnSpec = Annotated[
    ContinuousSpec | DateSpec | OrdinalSpec | NominalSpec | OneHotSpec | DerivedSpec | IdSpec | DropSpec,
    Field(discriminator="type"),
]
