"""When a number equals a declared ``values`` number (``Continuous.values``): the rule the
validation, the reading and the decoding share. Pure numpy."""

from __future__ import annotations

import numpy as np

__all__ = ["VALUES_RTOL", "nearest_index", "on_support", "scientific", "support_tolerance"]

VALUES_RTOL = 1e-9
"""The relative tolerance at which a value equals a declared ``values`` number (``math.isclose``'s
default): |x − v| ≤ 1e-9·|v|, widened to ±½·10^−d by a declared ``decimals: d``."""


def nearest_index(x: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Index of the nearest point of the sorted ``support`` to each x (ties go low)."""
    hi = np.clip(np.searchsorted(support, x), 1, len(support) - 1)
    return np.where(np.abs(x - support[hi - 1]) <= np.abs(support[hi] - x), hi - 1, hi)


def scientific(x: float) -> str:
    """x as 1e-9, 5e-7: the shortest scientific notation."""
    return np.format_float_scientific(x, trim="-", exp_digits=1)


def support_tolerance(support: np.ndarray, decimals: int | None) -> np.ndarray:
    """Per declared value v: the largest |x − v| at which x equals v, max(``VALUES_RTOL``·|v|,
    ½·10^−decimals) (only the relative part without ``decimals``)."""
    tol = VALUES_RTOL * np.abs(support)
    return tol if decimals is None else np.maximum(tol, 0.5 * 10.0**-decimals)


def on_support(x: np.ndarray, support: np.ndarray, decimals: int | None) -> np.ndarray:
    """Per x: within ``support_tolerance`` of its nearest point of the sorted ``support``
    (``nearest_index``, as ``Continuous.to_bins`` counts it); False for NaN."""
    nearest = nearest_index(np.nan_to_num(x), support)
    gap = np.abs(x - support[nearest])
    return np.where(np.isnan(x), False, gap <= support_tolerance(support, decimals)[nearest])
