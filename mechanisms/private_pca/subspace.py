"""``private_pca`` stages 1–2 (Alg 2–3): the private covariance and mean, the private
subspace V̂ with its dimension d' (§6 rule), the projection a = V̂ᵀ(x − X̄_priv) and the
lift x'' = V̂a' + X̄_priv. Proofs: ``docs/proofs/private_pca.md``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.primitives import Measurement, laplace_mechanism

__all__ = [
    "Projection",
    "adaptive_dims",
    "covariance",
    "covariance_sensitivity",
    "lift",
    "noisy_covariance",
    "private_covariance",
    "private_mean",
    "private_projection",
    "project",
    "top_eigenvectors",
]


# ---------------------------------------------------------------- Alg 2: covariance


def covariance(x: np.ndarray) -> np.ndarray:
    """M = (1/(n−1)) Σ_i (x_i − X̄)(x_i − X̄)ᵀ, a d×d matrix (n ≥ 2)."""
    return np.atleast_2d(np.cov(x, rowvar=False, ddof=1))


def covariance_sensitivity(n: int, d: int) -> float:
    """L1 sensitivity 3d²/n of the vector u = (M_ij for i < j, M_ii/2), rows in [0, 1]^d.

    Alg 2 adds Lap(σ) to M_ij (i < j, mirrored) and Lap(2σ) to M_ii, i.e. Lap(σ) to every
    entry of u, with σ = 3d²/(ε₁n); its proof bounds |ΔM_ij| ≤ 6/n, so
    ‖Δu‖₁ = ½Σ_{i,j}|ΔM_ij| ≤ 3d²/n and b = ‖Δu‖₁/ε₁ = σ: sound, but loose:
    writing M = (1/(2n(n−1))) Σ_{k,l} (x_k − x_l)(x_k − x_l)ᵀ, replacing x_k changes the
    2(n−1) ordered pairs that involve k, each entry of a term lies in [−1, 1] (diagonal
    [0, 1]), so |ΔM_ij| ≤ 2/n off the diagonal and ≤ 1/n on it, ‖Δu‖₁ ≤ (d² − d/2)/n.
    On {0, ½, 1}², n ≤ 4 the exact worst case is ‖Δu‖₁ = 2/n, 6× below 3d²/n (see
    tests/mechanisms/test_private_pca.py). We keep the paper's constant, as specified.
    """
    return 3.0 * d * d / n


def _triangle(d: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Upper-triangle indices (with diagonal) and weights 1 (off) / ½ (diagonal)."""
    iu = np.triu_indices(d)
    return iu, np.where(iu[0] == iu[1], 0.5, 1.0)


def private_covariance(
    x: np.ndarray, epsilon: float, rng: np.random.Generator, *, stage: str = "covariance"
) -> Measurement:
    """Alg 2 as one Laplace measurement of u = (M_ij, i < j; M_ii/2); ``noisy_covariance``
    rebuilds M̂ (Lap(b) off the diagonal, mirrored; Lap(2b) on it).

    Sensitivity: Δ₁ = 3d²/n, the paper's constant (``covariance_sensitivity``: valid but
    loose; rows in [0, 1]^d, checked by ``_check_rows``).
    Noise: Laplace b = 3d²/(εn) per entry of u.
    Privacy: ε-DP (ε = ε₁, stage ``covariance``).
    Reference: He, Strohmer, Vershynin, Zhu, Alg 2 and its proof.
    """
    n, d = _check_rows(x)
    iu, w = _triangle(d)
    return laplace_mechanism(
        covariance(x)[iu] * w,
        l1_sensitivity=covariance_sensitivity(n, d),
        epsilon=epsilon,
        rng=rng,
        name="covariance",
        stage=stage,
    )


def noisy_covariance(measurement: Measurement, d: int) -> np.ndarray:
    """M̂ = M + A: off-diagonal entries u_ij mirrored, diagonal 2·u_ii (noise Lap(2σ))."""
    iu, w = _triangle(d)
    m = np.zeros((d, d))
    m[iu] = measurement.value / w
    return m + np.triu(m, 1).T


# ---------------------------------------------------------------- Alg 3: mean, projection


def private_mean(
    x: np.ndarray, epsilon: float, rng: np.random.Generator, *, stage: str = "mean"
) -> Measurement:
    """X̄_priv = X̄ + Lap(d/(εn))^d.

    Sensitivity: Δ₁ = d/n: replace-one changes X̄ by (x − x')/n, and ‖x − x'‖₁ ≤ d on
    [0, 1]^d (attained by 0 vs 1).
    Noise: Laplace b = d/(εn) per coordinate.
    Privacy: ε-DP (ε = ε₂, stage ``mean``).
    Reference: He, Strohmer, Vershynin, Zhu, Alg 3 step 2.
    Corrected: the Prop 3.3 proof's Lap(1/(εn)) is a typo (it would be ε·d-DP); both
    variants use Alg 3's Lap(d/(εn)).
    """
    n, d = _check_rows(x)
    return laplace_mechanism(
        x.mean(axis=0), l1_sensitivity=d / n, epsilon=epsilon, rng=rng, name="mean", stage=stage
    )


def top_eigenvectors(mhat: np.ndarray, dims: int) -> np.ndarray:
    """d×d' matrix of orthonormal eigenvectors of the symmetric M̂ for its d' largest
    *algebraic* eigenvalues (``eigh``). M̂ may be indefinite; an SVD would rank
    eigenvectors by |λ| and could pick a large negative noise direction."""
    _, vectors = np.linalg.eigh(mhat)
    return vectors[:, ::-1][:, :dims]


def adaptive_dims(mhat: np.ndarray, epsilon: float, n: int) -> int:
    """§6: d' = argmin_{2≤k≤d} √(max(0, Σ_{i>k} λ_i(M̂))) + √(d/k)·(εn)^{−1/k}, with λ the
    algebraic eigenvalues of M̂ in descending order (``docs/proofs/private_pca.md`` on σ_i);
    d = 1 gives 1. Post-processing of M̂ and public (ε, n)."""
    d = mhat.shape[0]
    if d == 1:
        return 1
    lam = np.linalg.eigvalsh(mhat)[::-1]
    ks = np.arange(2, d + 1)
    tails = np.array([max(0.0, float(lam[k:].sum())) for k in ks])
    objective = np.sqrt(tails) + np.sqrt(d / ks) * (epsilon * n) ** (-1.0 / ks)
    return int(ks[np.argmin(objective)])


@dataclass(frozen=True)
class Projection:
    """Private affine subspace: ``basis`` V̂ (d×d'), ``mean`` X̄_priv, ``radius``
    R = √d + ‖X̄_priv‖₂, and whether d' came from the §6 rule."""

    basis: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)
    radius: float
    adaptive: bool

    @property
    def dims(self) -> int:
        return int(self.basis.shape[1])


def private_projection(
    cov: Measurement, mean: Measurement, dims: int | None, epsilon_measure: float, n: int
) -> Projection:
    """Post-processing of stages 1–2: d' (given or ``adaptive_dims`` with ε₃), V̂, R."""
    d = int(np.size(mean.value))
    mhat = noisy_covariance(cov, d)
    if dims is not None and dims > d:
        raise ValueError(f"params.dims ({dims}) must be at most the data dimension ({d})")
    k = dims if dims is not None else adaptive_dims(mhat, epsilon_measure, n)
    radius = math.sqrt(d) + float(np.linalg.norm(mean.value))
    return Projection(top_eigenvectors(mhat, k), np.asarray(mean.value, dtype=float), radius, dims is None)


def project(x: np.ndarray, projection: Projection) -> np.ndarray:
    """a_i = V̂ᵀ(x_i − X̄_priv): ‖a_i‖₂ ≤ ‖x_i‖₂ + ‖X̄_priv‖₂ ≤ √d + ‖X̄_priv‖₂ = R, so
    every a_i lies in the cube [−R, R]^{d'} that PMM partitions."""
    return (x - projection.mean) @ projection.basis


def lift(points: np.ndarray, projection: Projection) -> np.ndarray:
    """Alg 1 end: x'' = V̂a' + X̄_priv (the same private mean), clipped to [0, 1]^d (the
    ℓ∞ metric projection). Post-processing."""
    return np.clip(points @ projection.basis.T + projection.mean, 0.0, 1.0)


def _check_rows(x: np.ndarray) -> tuple[int, int]:
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x (shape {x.shape}) must be an (n, d) matrix with n >= 2")
    if not (np.all(x >= 0.0) and np.all(x <= 1.0)):
        raise ValueError("x must have every entry in [0, 1] (the sensitivities assume it)")
    return x.shape
