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
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri
from scipy.stats import norm

__all__ = [
    "HERMITE_ORDER",
    "LatentCode",
    "from_latent",
    "hermite_coefficients",
    "latent_code",
    "latent_correlation",
    "to_latent",
]

_U_FLOOR = 1e-12
_R_MAX = 0.99
HERMITE_ORDER = 40


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


def to_latent(bins: np.ndarray, code: LatentCode, dither: np.ndarray) -> np.ndarray:
    """(n, p) bin indices → (n, p) latent normal scores; ``dither`` (n, p) in [0, 1) places
    each value inside its bin's CDF interval (uniform draws, or ``rowkeys.row_uniforms``
    so a streaming engine gets the same scores whatever its chunks)."""
    z = np.empty(bins.shape, dtype=float)
    for j, (cdf, order) in enumerate(zip(code.cdfs, code.orders, strict=True)):
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        pos = position[bins[:, j]]
        u = cdf[pos] + dither[:, j] * (cdf[pos + 1] - cdf[pos])
        z[:, j] = ndtri(np.clip(u, _U_FLOOR, 1 - _U_FLOOR))
    return z


def from_latent(z: np.ndarray, code: LatentCode) -> np.ndarray:
    """(m, p) latent scores → (m, p) bin indices through the private CDFs."""
    bins = np.empty(z.shape, dtype=np.int32)
    for j, (cdf, order) in enumerate(zip(code.cdfs, code.orders, strict=True)):
        pos = np.searchsorted(cdf, ndtr(z[:, j]), side="right") - 1
        bins[:, j] = order[np.clip(pos, 0, len(order) - 1)]
    return bins


def hermite_coefficients(code: LatentCode, order: int = HERMITE_ORDER) -> np.ndarray:
    """(p, K) coefficients dₖ = E[s(Z)·hₖ(Z)] of each column's bin score
    s(Z) = E[Z | bin(Z)] in the normalised Hermite basis hₖ = Heₖ/√k!, k = 1..K.

    Bin b spans z ∈ [α_b, β_b] (α_b = Φ⁻¹(F_b), β_b = Φ⁻¹(F_{b+1})); s_b =
    (φ(α_b) − φ(β_b))/p_b, and ∫_α^β Heₖφ = Heₖ₋₁(α)φ(α) − Heₖ₋₁(β)φ(β), so
    dₖ = Σ_b s_b (hₖ₋₁(α_b)φ(α_b) − hₖ₋₁(β_b)φ(β_b)) / √k. d₁ = Var(s) = a².
    """
    out = np.zeros((len(code.cdfs), order))
    for j, cdf in enumerate(code.cdfs):
        probs = np.diff(cdf)
        edges = norm.ppf(cdf)  # ±inf at the ends, where hₖφ vanishes
        dens = norm.pdf(edges)
        keep = probs > 0
        score = np.where(keep, (dens[:-1] - dens[1:]) / np.where(keep, probs, 1.0), 0.0)
        x = np.where(np.isfinite(edges), edges, 0.0)
        h_prev, h = np.zeros_like(x), np.ones_like(x)  # h₋₁, h₀
        for k in range(1, order + 1):
            g = h * dens  # h_{k-1}(edge)·φ(edge)
            out[j, k - 1] = np.sum(score * (g[:-1] - g[1:])) / np.sqrt(k)
            h_prev, h = h, (x * h - np.sqrt(k - 1) * h_prev) / np.sqrt(k)
    return out


def latent_correlation(score_corr: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """Invert the shrinkage of within-bin jitter: the latent normal correlation r whose
    bin scores would have the observed correlation.

    Jittered scores z̃ = Φ⁻¹(U) have unit variance and Cov(z̃ᵢ, z̃ⱼ) = E[sᵢ(Zᵢ) sⱼ(Zⱼ)];
    for (Zᵢ, Zⱼ) standard bivariate normal with correlation r, Mehler's expansion gives
    E[sᵢ sⱼ] = Σₖ rᵏ dᵢₖ dⱼₖ, increasing in r because the scores are monotone in z. Each
    off-diagonal entry is solved for r on [−0.99, 0.99] (clipped at the ends); a
    polychoric-type estimate, and post-processing of private quantities (no budget).
    """
    p = score_corr.shape[0]
    out = np.eye(p)
    powers = np.arange(1, coefficients.shape[1] + 1)
    for i in range(p):
        for j in range(i + 1, p):
            w = coefficients[i] * coefficients[j]
            gap = lambda t, w=w, c=score_corr[i, j]: float(np.sum(w * t**powers)) - c  # noqa: E731
            if gap(-_R_MAX) >= 0:
                r = -_R_MAX
            elif gap(_R_MAX) <= 0:
                r = _R_MAX
            else:
                r = brentq(gap, -_R_MAX, _R_MAX)
            out[i, j] = out[j, i] = r
    return out
