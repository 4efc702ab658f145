"""Private one-way marginals over public bins, and their post-processing to CDFs.

Sensitivity (replace-one, n public): changing one record moves one unit of count from one
bin to another, so a k-bin histogram changes by (−1, +1) in two bins:
Δ₁ = 2, Δ₂ = √2 — independent of k. (Under add/remove it would be 1 and 1.)
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from mechanisms.accounting import StageBudget
from mechanisms.primitives import Measurement, measure_stage

__all__ = [
    "histogram",
    "histogram_sensitivity",
    "measure_counts",
    "measure_histograms",
    "private_distribution",
    "project_to_simplex",
]


def histogram_sensitivity(norm: Literal["l1", "l2"]) -> float:
    """Δ of a count histogram under replace-one: 2 in L1, √2 in L2."""
    return 2.0 if norm == "l1" else math.sqrt(2.0)


def histogram(bins: np.ndarray, n_bins: int) -> np.ndarray:
    """Counts of each bin index 0..n_bins-1."""
    return np.bincount(bins, minlength=n_bins).astype(float)


def measure_histograms(
    bins: np.ndarray,
    names: list[str],
    n_bins: list[int],
    budget: StageBudget,
    *,
    rng: np.random.Generator,
) -> list[Measurement]:
    """One noisy histogram per column of ``bins``: ``measure_counts`` on their counts.

    Sensitivity: per histogram Δ₁ = 2, Δ₂ = √2 (``histogram_sensitivity``).
    Noise: as ``measure_counts``: the stage split evenly over the columns.
    Privacy: the stage's ρ-zCDP or ε-DP (composition over the columns).
    Reference: the replace-one histogram (module docstring); ``factor_gauss`` stage 1.
    """
    counts = [histogram(bins[:, j], n_bins[j]) for j in range(len(names))]
    return measure_counts(counts, names, budget, rng=rng)


def measure_counts(
    counts: list[np.ndarray], names: list[str], budget: StageBudget, *, rng: np.random.Generator
) -> list[Measurement]:
    """One noisy histogram per column from its exact counts (summed over chunks by a
    streaming engine); the stage budget is split evenly over columns.

    Sensitivity: Δ₂ = √2 (Gaussian, zCDP) or Δ₁ = 2 (Laplace, pure ε) per histogram.
    Noise: σ_j = √2/√(2ρ_j) with ρ_j = ρ/p; or b_j = 2/ε_j with ε_j = ε/p.
    Privacy: Σ_j ρ_j ≤ ρ (zCDP composition) or Σ_j ε_j ≤ ε (basic composition).
    Reference: the replace-one histogram (module docstring); ``factor_gauss`` stage 1.
    """
    return [
        measure_stage(
            np.asarray(counts[j], dtype=float),
            share,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=f"histogram[{names[j]}]",
        )
        for j, share in enumerate(budget.split(len(names)))
    ]


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
