"""One-way histograms over public bins: their sensitivity, and the post-processing of a
noisy one into a distribution (``factor_gauss.measure_marginals`` measures them).

Sensitivity (replace-one, n public): changing one record moves one unit of count from one
bin to another, so a k-bin histogram changes by (−1, +1) in two bins:
Δ₁ = 2, Δ₂ = √2 — independent of k. (Under add/remove it would be 1 and 1.)
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dprelease.mechanisms.primitives import Measurement

__all__ = [
    "histogram",
    "histogram_sensitivity",
    "private_distribution",
    "project_to_simplex",
]


def histogram_sensitivity(norm: Literal["l1", "l2"]) -> float:
    """Δ of a count histogram under replace-one: 2 in L1, √2 in L2."""
    return 2.0 if norm == "l1" else math.sqrt(2.0)


def histogram(bins: np.ndarray, n_bins: int) -> np.ndarray:
    """Counts of each bin index 0..n_bins-1."""
    return np.bincount(bins, minlength=n_bins).astype(float)


def project_to_simplex(v: np.ndarray, total: float = 1.0) -> np.ndarray:
    """Euclidean projection of v onto {w ≥ 0, Σw = total} (Duchi et al. 2008).

    The least-squares form of "clip at 0 and normalise": subtracting one threshold
    before clipping removes the upward bias that plain clipping gives sparse histograms.
    """
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, len(v) + 1)
    rho = np.nonzero(u - css / k > 0)[0][-1]
    theta = css[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def private_distribution(measurement: Measurement, n: int) -> np.ndarray:
    """Post-processing: noisy counts → probabilities, projected onto the simplex at the
    public total n (replace-one: n is the same on neighbours)."""
    return project_to_simplex(measurement.value / n, 1.0)
