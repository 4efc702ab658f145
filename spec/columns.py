"""The public schema as a steward declares it: one pydantic model per column kind, with
the policies for values the schema does not allow (``out_of_bounds``, ``unknown``)."""

from __future__ import annotations

import math
import re
import string
from datetime import date, datetime, time
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    ValidationInfo,
    field_validator,
)

from dprelease.mechanisms.calendar import DATE_UNITS, DATETIME_UNITS, Unit, to_units
from dprelease.mechanisms.formula import Formula
from dprelease.mechanisms.schema import MAX_INTERVALS, Continuous
from dprelease.spec.text import CONTROLS, Label, Prose, visible

MAX_VALUES = 256
MAX_CATEGORIES = 10_000
"""Categories (levels) of one column: more than any public code list a DP histogram can
resolve (counties: about 3,000). The validation's value-set rule and the mechanisms' tables
grow with them; at the cap GX checks 30,000 rows in about 1 s and factor_gauss fits in
0.2 s (at 100,000 categories, 8 s for GX alone)."""
MAX_ID_WIDTH = 20
"""The widest field of an id format: 20 digits hold any 64-bit row number."""
DATE_RANGE = (datetime(1678, 1, 1), datetime(2261, 12, 31, 23, 59, 59))
"""The dates a column may span: the whole years inside pandas' datetime64[ns] range
(1677-09-21 to 2262-04-11), in which the readers parse dates, so a bound floored to any
resolution stays representable."""

__all__ = [
    "CONTROLS",
    "ColumnSpec",
    "ContinuousSpec",
    "DateSpec",
    "DerivedSpec",
    "DropSpec",
    "IdSpec",
    "Label",
    "NominalSpec",
    "OneHotSpec",
    "OrdinalSpec",
    "Strict",
    "visible",
]


class Strict(BaseModel):
    """Every spec model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _few(v: list[str], what: str) -> list[str]:
    if len(v) > MAX_CATEGORIES:
        raise ValueError(
            f"{what} must number at most {MAX_CATEGORIES:,} (the validation's value sets and the "
            f"mechanism's tables grow with them); merge rare {what} into one, or declare the column "
            "type: drop"
        )
    return v


class ContinuousSpec(Strict):
    """``out_of_bounds``: ``reject`` (default) refuses a value outside the bounds (±inf
    included); ``clip`` moves it to the nearer declared bound before validation. A
    missing value (empty, NA, NaN) is an error under both, unless ``missing: allowed``:
    then it is a cell of its own, modelled jointly with the other columns, and the
    synthetic table has empty cells (``mechanisms.schema.Continuous.missing``).

    Public resolution (``mechanisms.schema.Continuous``): ``atoms`` are values with a cell
    of their own, decoded exactly (e.g. ``[0]`` for a zero-inflated amount); ``values``
    is a known finite support (every value its own cell; a number equal to none of them
    is refused, equality judged within ±½·10^−decimals, or within a relative 1e-9 without
    ``decimals``); ``bins`` the number of interval bins, or ``edges`` the bins' edges themselves
    (public cut points, from the lower bound to the upper one: e.g. tax brackets); ``decimals``
    the output precision.
    ``transform``: the scale the bins are equal-width on: ``none``, ``log`` (log1p, lower
    bound ≥ 0) or ``asinh`` (asinh(x/scale), any bounds, with a public ``scale`` > 0: bins
    about scale·Δ wide near 0, growing geometrically beyond ±scale, for signed heavy tails).
    """

    type: Literal["continuous"]
    bounds: tuple[StrictFloat, StrictFloat]  # a quoted number is text, refused
    integer: bool = False
    transform: Literal["none", "log", "asinh"] = "none"
    scale: StrictFloat | None = Field(default=None, validate_default=True)
    out_of_bounds: Literal["reject", "clip"] = "reject"
    atoms: list[StrictFloat] = Field(default_factory=list, max_length=64)
    values: list[StrictFloat] | None = Field(default=None, min_length=2, max_length=MAX_VALUES)
    bins: int | None = Field(default=None, ge=1, le=MAX_INTERVALS, strict=True)
    edges: list[StrictFloat] | None = Field(default=None, min_length=2, max_length=MAX_INTERVALS + 1)
    decimals: int | None = Field(default=None, ge=0, le=15, strict=True)
    missing: Literal["reject", "allowed"] = "reject"

    @field_validator("bounds")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(math.isfinite(b) for b in v) or not v[0] < v[1]:
            raise ValueError(f"bounds ({list(v)}) must be two finite numbers, lower < upper")
        return v

    @field_validator("scale")
    @classmethod
    def _scale(cls, v: float | None, info: ValidationInfo) -> float | None:
        """``scale``: needed by, and only by, ``transform: asinh``; finite and > 0."""
        if info.data.get("transform") != "asinh":
            if v is not None:
                raise ValueError(f"scale ({v}) is used only with transform: asinh")
            return v
        if v is None or not (math.isfinite(v) and v > 0):
            raise ValueError(
                f"transform: asinh needs scale ({v}) a finite number > 0: the public width of the "
                "linear part around 0 (e.g. scale: 1000 for amounts in dollars)"
            )
        return v

    def public_column(self, name: str) -> Continuous:
        """The column in the public schema: declared edges become its cuts; a declared
        ``missing: allowed`` one more cell."""
        return Continuous(
            name,
            self.bounds[0],
            self.bounds[1],
            self.integer,
            "identity" if self.transform == "none" else self.transform,
            scale=self.scale,
            atoms=tuple(self.atoms),
            values=None if self.values is None else tuple(self.values),
            intervals=self.bins,
            decimals=self.decimals,
            missing=self.missing == "allowed",
            cuts=None if self.edges is None else tuple(self.edges),
        )


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
    levels: list[Label] = Field(min_length=2)
    missing: Label | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: Label | None = Field(default=None, validate_default=True)

    @field_validator("levels")
    @classmethod
    def _few_levels(cls, v: list[str]) -> list[str]:
        return _few(v, "levels")

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "levels")


class NominalSpec(Strict):
    """``unknown``/``other`` as for ordinal columns, over the declared categories."""

    type: Literal["nominal"]
    categories: list[Label] = Field(min_length=2)
    missing: Label | None = None
    unknown: Literal["reject", "other"] = "reject"
    other: Label | None = Field(default=None, validate_default=True)

    @field_validator("categories")
    @classmethod
    def _few_categories(cls, v: list[str]) -> list[str]:
        return _few(v, "categories")

    @field_validator("other")
    @classmethod
    def _other(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _other_declared(v, info, "categories")


class IdSpec(Strict):
    """An identifier: never read into the model, never published. The synthetic table gets
    fresh identifiers ``format.format(i)`` for i = 1…m (``_id_format_problem`` states the
    rule), e.g. ``SYN-{:09d}``: its literal text must be text real identifiers never carry,
    so a fresh one cannot equal a real one (nothing checks the real ones: that would read
    them)."""

    type: Literal["id"]
    format: Prose = "SYN-{:09d}"  # its own rule on its text: _id_format_problem

    @field_validator("format")
    @classmethod
    def _one_integer_field(cls, v: str) -> str:
        problem = _id_format_problem(v)
        if problem:
            raise ValueError(f"format ({v!r}) must {problem}, e.g. 'SYN-{{:09d}}'")
        return v


_ID_FIELD = re.compile(r"0?([0-9]{0,2})[dxX]?")


def _id_format_problem(v: str) -> str | None:
    """What breaks the id format rule, or None: exactly one replacement field, ``{}`` or
    ``{:spec}`` (or ``{0}``, ``{0:spec}``), with ``spec`` only ``[0][width][d|x|X]``, the
    width at most ``MAX_ID_WIDTH`` (no attribute or index access, no conversion, no other
    fill, alignment or sign), and printable literal text beside it with no comma or quote
    (the identifiers are written to CSV files and shown on terminals)."""
    try:
        parts = list(string.Formatter().parse(v))
    except ValueError as e:
        return f"be a Python format with balanced braces ({e})"
    fields = [(name, spec, conversion) for _, name, spec, conversion in parts if name is not None]
    if len(fields) != 1:
        return (
            "hold exactly one integer field, {} or {:[0][width][d|x|X]}, and literal text beside it that "
            "real identifiers never carry"
        )
    name, spec, conversion = fields[0]
    if name not in ("", "0") or conversion is not None:
        return "use the field {} or {0}, without attribute or index access or a conversion (!r, !s, !a)"
    width = _ID_FIELD.fullmatch(spec or "")
    if width is None or int(width[1] or 0) > MAX_ID_WIDTH:
        return f"format the number only as [0][width][d|x|X], the width at most {MAX_ID_WIDTH}"
    literal = "".join(text for text, *_ in parts)
    if not literal:
        return "hold literal text beside it that real identifiers never carry"
    if not literal.isprintable() or set(literal) & set(",'\""):
        return "hold printable literal text without a comma or a quote (the identifiers are written to CSV)"
    return None


class DateSpec(Strict):
    """A date (``type: date``, resolution ``day``, ``month`` or ``year``) or a timestamp
    (``type: datetime``, ``hour``, ``minute`` or ``second``), read as ISO 8601 text and
    modelled as whole units of the public ``resolution`` since 1970-01-01 between the
    public ``bounds`` (``mechanisms.calendar``), which lie within ``DATE_RANGE``; written
    back as ISO text at that resolution. ``bins`` and ``missing`` as for continuous columns."""

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
        lo, hi = DATE_RANGE
        if v[0] < lo or v[1] > hi:
            raise ValueError(
                f"bounds ({v[0].isoformat()}, {v[1].isoformat()}) must lie within {lo.date()} and "
                f"{hi.date()}, the whole years of the dates the engine represents (pandas' datetime64[ns], "
                "1677-09-21 to 2262-04-11)"
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
    columns: list[Label] = Field(min_length=2, max_length=MAX_VALUES)
    none: Label | None = "none"

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
    formula: Prose  # its own length limit: mechanisms.formula
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
