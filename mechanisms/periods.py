"""Budget periods: an ISO-8601 duration of one unit (``PnD``, ``PnW``, ``PnM``, ``PnY``) cut
UTC time into consecutive, calendar-aligned windows [start, end), and a ``PeriodBudget``
is the (ε, δ) all releases of a dataset reserved within one window may spend together.

Windows are counted from 1970-01-01T00:00Z (weeks from Monday 1969-12-29, so ``P1W`` is
the ISO week): ``P1M`` is the calendar month, ``P3M`` the calendar quarter, ``P1Y`` the
calendar year, ``P1D`` the UTC day. Not rolling: a window's account starts at zero at its
start, whatever was spent just before it. Pure arithmetic, no clock: callers pass the time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = ["PERIOD_FORMS", "Period", "PeriodBudget"]

Unit = Literal["D", "W", "M", "Y"]

PERIOD_FORMS = "PnD (days), PnW (weeks), PnM (months) or PnY (years), n a whole number from 1"
"""The durations a period may have, as messages name them."""

_PATTERN = re.compile(r"P([1-9][0-9]{0,3})([DWMY])")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WEEKS_FROM = datetime(1969, 12, 29, tzinfo=UTC)  # a Monday: week windows are ISO weeks


@dataclass(frozen=True)
class Period:
    """``count`` units (days, weeks, months, years) of UTC calendar time."""

    count: int
    unit: Unit

    @classmethod
    def parse(cls, text: str) -> Period:
        """``P1M`` → Period(1, "M"); anything else than one of ``PERIOD_FORMS`` is refused."""
        m = _PATTERN.fullmatch(text)
        if m is None:
            raise ValueError(f"length ({text!r}) must be an ISO-8601 duration of one unit: {PERIOD_FORMS}")
        return cls(int(m[1]), m[2])  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"P{self.count}{self.unit}"

    def window(self, at: datetime) -> tuple[datetime, datetime]:
        """The window [start, end) that holds ``at`` (an aware time; converted to UTC)."""
        at = at.astimezone(UTC)
        if self.unit in ("D", "W"):
            step = timedelta(days=self.count * (7 if self.unit == "W" else 1))
            origin = _WEEKS_FROM if self.unit == "W" else _EPOCH
            start = origin + step * ((at - origin) // step)
            return start, start + step
        months = self.count * (12 if self.unit == "Y" else 1)
        index = ((at.year - 1970) * 12 + at.month - 1) // months * months
        return _month(index), _month(index + months)

    def label(self, at: datetime) -> str:
        """The window of ``at`` as people name it: ``2026-11`` (P1M), ``2026`` (P1Y),
        ``2026-11-30`` (P1D), ``2026-W48`` (P1W); else ISO-8601 ``<start date>/<length>``."""
        start, _ = self.window(at)
        if self.count == 1:
            if self.unit == "W":
                year, week, _ = start.isocalendar()
                return f"{year}-W{week:02d}"
            return start.strftime({"D": "%Y-%m-%d", "M": "%Y-%m", "Y": "%Y"}[self.unit])
        return f"{start.date().isoformat()}/{self}"


def _month(index: int) -> datetime:
    """The start of the ``index``-th month after January 1970 (UTC)."""
    return datetime(1970 + index // 12, index % 12 + 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class PeriodBudget:
    """(``epsilon``, ``delta``) per ``length`` window: the releases of one dataset reserved in
    the same window compose (``mechanisms.lifetime.compose_lifetime``) within it.
    ``disjoint``: the steward declares that no person's row is in two windows' tables, so the
    windows compose in parallel (McSherry 2009): a person's all-time loss is one window's."""

    length: Period
    epsilon: float
    delta: float
    disjoint: bool = False
