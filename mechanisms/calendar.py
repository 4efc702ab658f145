"""Dates and timestamps as whole numbers of a public resolution (no I/O, numpy only).

A ``type: date`` or ``datetime`` column is modelled as an integer continuous column whose
value is the number of ``unit``s since 1970-01-01T00:00 (numpy's ``datetime64[unit]``,
which floors: 1969-12-31T23:00 is day −1). Its public bounds are two dates converted the
same way; a synthetic value is converted back to an ISO 8601 string at that resolution.
Seasonality and weekdays are not modelled beyond what the resolution keeps.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["DATETIME_UNITS", "DATE_UNITS", "UNIT_CODES", "Unit", "to_iso", "to_units"]

Unit = Literal["year", "month", "day", "hour", "minute", "second"]
DATE_UNITS: tuple[Unit, ...] = ("day", "month", "year")
DATETIME_UNITS: tuple[Unit, ...] = ("hour", "minute", "second")
UNIT_CODES = {"year": "Y", "month": "M", "day": "D", "hour": "h", "minute": "m", "second": "s"}
_PRINTED: dict[Unit, Literal["Y", "M", "D", "m", "s"]] = {
    "year": "Y",
    "month": "M",
    "day": "D",
    "hour": "m",
    "minute": "m",
    "second": "s",
}


def to_units(moments: np.ndarray, unit: Unit) -> np.ndarray:
    """``datetime64`` values (NaT allowed) → float units since the epoch, floored; NaN for NaT."""
    t = np.asarray(moments, dtype="datetime64[ns]")
    out = t.astype(f"datetime64[{UNIT_CODES[unit]}]").astype(np.int64).astype(float)
    out[np.isnat(t)] = np.nan
    return out


def to_iso(values: np.ndarray, unit: Unit) -> np.ndarray:
    """Whole units since the epoch (NaN: missing) → ISO 8601 text at the resolution
    (``2024-03-05``, ``2024-03``, ``2024``; an hour or minute as ``2024-03-05T10:00``, a
    second as ``2024-03-05T10:00:07``); None where missing."""
    x = np.asarray(values, dtype=float)
    present = ~np.isnan(x)
    out = np.full(len(x), None, dtype=object)
    t = x[present].astype(np.int64).astype(f"datetime64[{UNIT_CODES[unit]}]")
    out[present] = np.datetime_as_string(t, unit=_PRINTED[unit])
    return out
