"""Latent normal scores from private CDFs (post-processing of private marginals).

A value in bin k (position k in the column's order) becomes z = Φ⁻¹(U) with U uniform
on the private-CDF interval [F_k, F_{k+1}); decoding maps z back through Φ and the same
CDF. Nominal categories have no order, so they are placed by *private* frequency
(most frequent first). Everything here depends on the data only through the private
distributions (already paid for) and on the row's own bin (the input of the next
mechanism), so it costs no budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import norm

__all__ = ["LatentCode", "from_latent", "latent_code", "score_attenuation", "to_latent"]

_U_FLOOR = 1e-12


@dataclass(frozen=True)
class LatentCode:
    """Per column: the private CDF over positions, and the bin index at each position."""

    cdfs: tuple[np.ndarray, ...]
    orders: tuple[np.ndarray, ...]


def latent_code(distributions: list[np.ndarray], nominal: list[bool]) -> LatentCode:
    """Build CDFs; nominal columns are reordered by descending private probability."""
    cdfs, orders = [], []
    for probs, is_nominal in zip(distributions, nominal, strict=True):
        order = np.argsort(-probs, kind="stable") if is_nominal else np.arange(len(probs))
        cdf = np.concatenate([[0.0], np.cumsum(probs[order])])
        cdf /= cdf[-1]
        cdfs.append(cdf)
        orders.append(order)
    return LatentCode(tuple(cdfs), tuple(orders))


def to_latent(bins: np.ndarray, code: LatentCode, *, rng: np.random.Generator) -> np.ndarray:
    """(n, p) bin indices → (n, p) latent normal scores."""
    z = np.empty(bins.shape, dtype=float)
    for j, (cdf, order) in enumerate(zip(code.cdfs, code.orders, strict=True)):
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        pos = position[bins[:, j]]
        u = cdf[pos] + rng.random(len(pos)) * (cdf[pos + 1] - cdf[pos])
        z[:, j] = ndtri(np.clip(u, _U_FLOOR, 1 - _U_FLOOR))
    return z


def from_latent(z: np.ndarray, code: LatentCode) -> np.ndarray:
    """(m, p) latent scores → (m, p) bin indices through the private CDFs."""
    bins = np.empty(z.shape, dtype=np.int32)
    for j, (cdf, order) in enumerate(zip(code.cdfs, code.orders, strict=True)):
        pos = np.searchsorted(cdf, ndtr(z[:, j]), side="right") - 1
        bins[:, j] = order[np.clip(pos, 0, len(order) - 1)]
    return bins


def score_attenuation(code: LatentCode) -> np.ndarray:
    """Per column, a = √Var(E[Z | bin]) under the private CDF: the factor by which
    within-bin jitter shrinks latent correlations.

    Bin k spans z ∈ [αₖ, βₖ] with αₖ = Φ⁻¹(Fₖ), βₖ = Φ⁻¹(Fₖ₊₁), so
    E[Z | bin k] = (φ(αₖ) − φ(βₖ))/pₖ and a² = Σₖ (φ(αₖ) − φ(βₖ))²/pₖ. If Zᵢ, Zⱼ are
    jointly normal with correlation r, E[Zᵢ | binᵢ] has covariance r·aⱼ² with
    E[Zⱼ | binⱼ] (exactly) and ≈ r·aᵢ·aⱼ with the other column's bin score (first
    Hermite term); the jittered scores share those covariances. a → 1 for many fine bins;
    a = 0.80 for a balanced binary column. Post-processing of private CDFs: no budget.
    """
    out = np.empty(len(code.cdfs))
    for j, cdf in enumerate(code.cdfs):
        probs = np.diff(cdf)
        dens = norm.pdf(norm.ppf(cdf))
        keep = probs > 0
        out[j] = np.sqrt(np.sum((dens[:-1] - dens[1:])[keep] ** 2 / probs[keep]))
    return np.clip(out, 1e-3, 1.0)
