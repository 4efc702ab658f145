"""Per-row randomness keyed by the row's position in the file, not by how it is chunked.

A streaming pass sees the rows in chunks (pyarrow batches on one machine, Dask
partitions on a cluster) whose boundaries differ between engines. Anything random that
depends on a row (the within-bin dither of ``latent.to_latent``, the holdout coin, the
priority that picks the check sample) is therefore a counter-based hash of
(key, global row index, column), so every engine computes the same statistic on the
same data, whatever its chunks.

None of this is DP noise: the dither, coin and priority are independent of the data,
and the privacy proofs hold for *any* fixed value of them (``factor_gauss`` bounds every
latent row whatever its dither; a held-out or sampled row is chosen by its position
only). The noise itself is drawn once, on the driver, by ``mechanisms.primitives``.

The hash is splitmix64 (Steele, Lea & Flood 2014), the finaliser of Java's
``SplittableRandom``; its top 53 bits give a double in [0, 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RowKeys", "held_out", "holdout_mask", "row_uniforms"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic; arrays never warn)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def row_uniforms(key: int, start: int, n: int, width: int) -> np.ndarray:
    """(n, width) doubles in [0, 1) for rows start … start+n−1: entry (i, j) depends
    only on (key, start+i, j)."""
    seed = _mix(np.array([key], dtype=np.uint64) * _GOLDEN)
    counter = np.arange(start, start + n, dtype=np.uint64)[:, None] * np.uint64(width)
    counter = counter + np.arange(width, dtype=np.uint64)[None, :] + np.uint64(1)
    bits = _mix(seed + counter * _GOLDEN)  # SplittableRandom's k-th output from state `seed`
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class RowKeys:
    """The three independent keys of one release: the latent dither, the holdout coin
    and the check-sample priority."""

    dither: int
    holdout: int
    sample: int

    @classmethod
    def draw(cls, rng: np.random.Generator) -> RowKeys:
        return cls(*(int(k) for k in rng.integers(0, 2**63, size=3)))


def holdout_mask(key: int, start: int, n: int, fraction: float) -> np.ndarray:
    """True where a row is held out: each row independently with probability
    ``fraction``, by its position alone (so the fitted count is a Binomial(n, fraction)
    complement that does not depend on any record's values)."""
    if fraction == 0:
        return np.zeros(n, dtype=bool)
    return row_uniforms(key, start, n, 1)[:, 0] < fraction


def held_out(key: int, n: int, fraction: float, block: int = 1 << 20) -> int:
    """How many of rows 0 … n−1 ``holdout_mask`` holds out: the streaming engines' fitted
    count is n minus it. It depends on the key and n only (no row is read), so it is known
    before the data is, and ``block`` rows at a time bound the memory."""
    if fraction == 0:
        return 0
    return sum(int(holdout_mask(key, s, min(block, n - s), fraction).sum()) for s in range(0, n, block))
