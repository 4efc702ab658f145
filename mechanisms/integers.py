"""Integer columns on interval cells: a decoded value stays in the cell it was drawn for.

An interval cell [eᵢ, eᵢ₊₁) of the working scale holds the integers lᵢ…hᵢ that the encoder
puts in it (atoms have cells of their own and are left out). Decoding draws a point inside
the interval and rounds it; rounding can cross an edge (a draw at 9.7 in [5, 10) becomes 10,
a value of the next cell) or land on an atom. Clipping the rounded value into lᵢ…hᵢ, and
moving it off an atom inside the range, keeps every decoded value in its drawn cell, so the
published table's cell counts are the model's. An interval holding no integer (narrower
than 1 on the raw scale, where no real row can fall) keeps the rounded draw.
Post-processing: public edges and bounds only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["integer_ranges", "keep_in_interval"]


def integer_ranges(
    interval_of: Callable[[np.ndarray], np.ndarray],
    lower: float,
    upper: float,
    k: int,
    atoms: Sequence[float],
) -> tuple[np.ndarray, np.ndarray]:
    """Per interval i < k, the first and last integer x within [lower, upper] with
    ``interval_of(x) == i`` that is not an atom (first > last when there is none).
    ``interval_of`` is the encoder's interval index, non-decreasing in x, so the first
    integer at or past each interval is found by bisection over the integers."""
    lo_int, hi_int = math.ceil(lower), math.floor(upper)
    target = np.arange(k + 1)
    a = np.full(k + 1, float(lo_int))
    b = np.full(k + 1, float(hi_int + 1))  # one past the last: "no integer at or past i"
    while np.any(a < b):
        active = a < b
        mid = np.floor((a + b) / 2)
        past = interval_of(np.minimum(mid, hi_int)) >= target
        a = np.where(active & ~past, mid + 1, a)
        b = np.where(active & past, mid, b)
    first, last = a[:-1].copy(), a[1:] - 1
    taken = set(atoms)
    for i in range(k):
        while first[i] <= last[i] and first[i] in taken:
            first[i] += 1
        while first[i] <= last[i] and last[i] in taken:
            last[i] -= 1
    return first, last


def keep_in_interval(
    rounded: np.ndarray, interval: np.ndarray, first: np.ndarray, last: np.ndarray, atoms: Sequence[float]
) -> np.ndarray:
    """``rounded`` draws of intervals ``interval``, clipped into their interval's integers
    and moved up off an atom inside the range (the range's last integer is no atom, so
    moving up ends inside it)."""
    lo, hi = first[interval], last[interval]
    held = lo <= hi
    out = np.where(held, np.clip(rounded, lo, hi), rounded)
    for _ in atoms:
        on_atom = held & np.isin(out, atoms)
        if not on_atom.any():
            break
        out = np.where(on_atom, out + 1, out)
    return out
