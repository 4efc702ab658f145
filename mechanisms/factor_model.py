"""The latent factor model of ``factor_gauss``, apart from the data's path through its
stages: rows bounded into the ball of radius B (``bound_rows``), the sensitivity of their
second moment (``second_moment_sensitivity``), the factor correlation fitted to its noisy
release (``factor_correlation``, post-processing) and fresh latent rows (``sample_latent``).

The derivations: ``docs/proofs/factor_gauss.md``.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dprelease.mechanisms.latent import latent_correlation
from dprelease.mechanisms.primitives import Measurement

__all__ = ["bound_rows", "factor_correlation", "sample_latent", "second_moment_sensitivity"]


def second_moment_sensitivity(n: int, bound: float, p: int, norm: Literal["l1", "l2"]) -> float:
    """Sensitivity of the upper triangle (with diagonal) of S = ZᵀZ/n, rows ‖z‖₂ ≤ B.

    Replace-one changes S by A/n with A = zzᵀ − z'z'ᵀ.
    L2: ‖A‖_F² = ‖z‖⁴ + ‖z'‖⁴ − 2(z·z')² ≤ 2B⁴, and the upper triangle u(A) has
    ‖u‖₂² = (‖A‖_F² + Σᵢ aᵢᵢ²)/2 ≤ ‖A‖_F². So Δ₂ = √2·B²/n, attained by z = B·e₁,
    z' = B·e₂ (u = (B², −B²)). The triangle inequality gives the looser 2B²/n.
    L1: ‖u‖₁ ≤ √(p(p+1)/2)·‖u‖₂ (Cauchy–Schwarz over p(p+1)/2 entries), so
    Δ₁ = √(p(p+1))·B²/n, below the triangle-inequality bound (p+1)B²/n.
    """
    if norm == "l2":
        return math.sqrt(2.0) * bound**2 / n
    return math.sqrt(p * (p + 1)) * bound**2 / n


def bound_rows(z: np.ndarray, clip: float, bound: float) -> np.ndarray:
    """Clip entries to [−c, c], then scale any row with ‖z‖₂ > B down to norm B."""
    z = np.clip(z, -clip, clip)
    norms = np.linalg.norm(z, axis=1)
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return z * scale[:, None]


def _symmetric(upper: np.ndarray, p: int) -> np.ndarray:
    s = np.zeros((p, p))
    s[np.triu_indices(p)] = upper
    return s + np.triu(s, 1).T


def factor_correlation(
    moments: Measurement, p: int, factors: int | None, coefficients: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Post-processing: noisy S → a unit-diagonal correlation matrix of a factor model.

    With Hermite ``coefficients`` (``latent.hermite_coefficients``), S̃ is first turned
    into a correlation and each entry mapped to the latent normal correlation
    (``latent.latent_correlation``), undoing the shrinkage that within-bin jitter causes
    for coarse columns. Then S̃ = VΛVᵀ; keep
    r factors (given, or the eigenvalues above the noise level 2σ√p, the spectral norm
    of a symmetric p×p noise matrix with entry s.d. σ); loadings L = V_r Λ_r^{1/2};
    Ψ = max(diag(S̃) − diag(LLᵀ), floor); Σ = LLᵀ + Ψ, rescaled to
    unit diagonal.
    """
    s = _symmetric(moments.value, p)
    if coefficients is not None:
        d = np.sqrt(np.maximum(np.diag(s), 1e-3))
        s = latent_correlation(s / np.outer(d, d), coefficients)
    eigval, eigvec = np.linalg.eigh(s)
    eigval, eigvec = eigval[::-1], eigvec[:, ::-1]
    sd = moments.scale if moments.mechanism == "gaussian" else math.sqrt(2) * moments.scale
    noise_level = 2.0 * sd * math.sqrt(p)
    r = factors if factors is not None else int(np.sum(eigval > noise_level))
    r = max(0, min(r, p, int(np.sum(eigval > 0))))
    loadings = eigvec[:, :r] * np.sqrt(eigval[:r])
    common = np.sum(loadings**2, axis=1)
    psi = np.maximum(np.diag(s) - common, max(noise_level, 1e-6))
    sigma = loadings @ loadings.T + np.diag(psi)
    d = 1.0 / np.sqrt(np.diag(sigma))
    return sigma * d[:, None] * d[None, :], r


def sample_latent(corr: np.ndarray, m: int, *, rng: np.random.Generator) -> np.ndarray:
    """m fresh rows z ~ N(0, corr)."""
    chol = np.linalg.cholesky(corr)
    return rng.standard_normal((m, corr.shape[0])) @ chol.T
