"""``dpfm``'s factor model (Alg. 1): stage ``loadings`` (noisy top-r eigenvectors Ṽ of
X*ᵀX*) and stage ``scores`` (noisy factor scores X*Ṽ), and the reconstruction
X̃* = W̃Ṽᵀ. Proofs: ``docs/proofs/dpfm.md``."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.dpfm.budget import _release
from dprelease.mechanisms.dpfm.links import Code
from dprelease.mechanisms.dpfm.params import FACTOR_THRESHOLD, DPFMParams, Variant
from dprelease.mechanisms.primitives import Measurement, unprotected

__all__ = [
    "choose_factors",
    "loadings_sensitivity",
    "private_loadings",
    "private_scores",
    "reconstruct",
    "scores_sensitivity",
    "top_eigenvectors",
]


# ---------------------------------------------------------------- loadings (Alg. 1 step 2)


def top_eigenvectors(x: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """V (p*, r): eigenvectors of the uncentred X*ᵀX* for the r largest eigenvalues, and
    all eigenvalues ν in decreasing order."""
    nu, vec = np.linalg.eigh(x.T @ x)
    return vec[:, ::-1][:, :r], nu[::-1]


def choose_factors(
    nu: np.ndarray, n: int, params: DPFMParams, stage: str
) -> tuple[int, str, tuple[Measurement, ...]]:
    """r: the public ``params.factors``, or (paper, factors None) eq. (3):
    r = min{k : Σ_{j≤k}ν_j / Σ_{j≤q}ν_j > c}, q = min(n, p*), c = 0.8, restricted to
    1 ≤ k < q as printed (so r ≤ max(1, q − 1)); recorded as ``unprotected``."""
    if params.factors is not None:
        return params.factors, "given in the spec (public)", ()
    q = min(n, nu.size)
    ratio = np.cumsum(nu[:q]) / np.sum(nu[:q])
    r = min(int(np.argmax(ratio > FACTOR_THRESHOLD)) + 1, max(1, q - 1))
    record = unprotected(
        np.array([r]), name="factors_eq3", stage=stage, defect="r chosen from raw eigenvalues (eq. 3)"
    )
    return r, f"eq. (3) with c = {FACTOR_THRESHOLD} on the raw eigenvalues (not private)", (record,)


def loadings_sensitivity(p_star: int, r: int, norm: Literal["l1", "l2"]) -> float:
    """Sensitivity of V (p*, r) with unit columns, all r columns jointly.

    Eigenvectors of neighbouring data sets can be *any* two unit vectors (sign flips,
    near-ties), so the bound is the diameter of the sphere: ‖μ − μ'‖₂ ≤ 2 and
    ‖μ − μ'‖₁ ≤ √p*‖μ − μ'‖₂ ≤ 2√p* (Lemma 5; attained by μ' = −μ with all |μ_k| = 1/√p*).
    Jointly: Δ₁ = 2√p*·r, Δ₂ = 2√r. Laplace b = 2√p*·r/ε₁ is the paper's
    Lap(2√p*/ε₁ᵢ) with ω_i = 1/r (ε₁ᵢ = ε₁/r); the paper's ω ∝ ν is not private.
    """
    return 2 * math.sqrt(p_star) * r if norm == "l1" else 2 * math.sqrt(r)


def private_loadings(
    v: np.ndarray, part: StageBudget | None, *, rng: np.random.Generator
) -> tuple[np.ndarray, Measurement | None]:
    """Ṽ = the r left singular vectors (thin SVD) of V + B (Alg. 1 step 2). Ṽ is
    post-processing of V + B.

    Sensitivity: ``loadings_sensitivity``, data-free: Δ₁ = 2√p*·r, Δ₂ = 2√r (any two
    unit vectors per column).
    Noise: B i.i.d. Laplace b = Δ₁/ε₁ or Gaussian σ = Δ₂/√(2ρ₁) per entry.
    Privacy: ε₁-DP or ρ₁-zCDP (stage ``loadings``).
    Reference: Zhang, Xu, Tang, Qu, Alg. 1 step 2 and Lemma 5.
    Corrected: ω_i = 1/r (the paper's Lap(2√p*/ε₁ᵢ) with ε₁ᵢ = ε₁/r); the paper's
    ω ∝ eigenvalues is not private.
    """
    p_star, r = v.shape
    noisy, m = _release(
        v,
        part,
        l1=loadings_sensitivity(p_star, r, "l1"),
        l2=loadings_sensitivity(p_star, r, "l2"),
        name="top_eigenvectors",
        rng=rng,
    )
    return np.linalg.svd(noisy, full_matrices=False)[0], m


# ---------------------------------------------------------------- scores (Alg. 1 step 3)


def scores_sensitivity(r: int, norm: Literal["l1", "l2"], variant: Variant = "corrected") -> float:
    """Sensitivity of W = X*Ṽ (n, r) for fixed orthonormal Ṽ and rows ‖x*ᵢ‖₂ ≤ 1.

    Replace-one changes one row by (x − x')Ṽ; ‖(x − x')Ṽ‖₂ ≤ ‖x − x'‖₂ ≤ 2 (Ṽ has
    orthonormal columns), so Δ₂ = 2 and Δ₁ ≤ √r·Δ₂ = 2√r, attained by x = −x' = Ṽs/√r
    with s ∈ {±1}^r. The paper (Lemma 6) uses 2r: valid but loose; variant ``paper``
    uses it.
    """
    if norm == "l2":
        return 2.0
    return 2.0 * r if variant == "paper" else 2.0 * math.sqrt(r)


def private_scores(
    x: np.ndarray,
    v_tilde: np.ndarray,
    part: StageBudget | None,
    params: DPFMParams,
    *,
    rng: np.random.Generator,
) -> tuple[np.ndarray, Measurement | None]:
    """W̃ = X*Ṽ + C (Alg. 1 step 3).

    Sensitivity: ``scores_sensitivity`` for the released (fixed) Ṽ and rows
    ‖x*ᵢ‖₂ ≤ 1: Δ₂ = 2, Δ₁ = 2√r (attained); the paper variant's 2r.
    Noise: C i.i.d. Laplace b = Δ₁/ε₂ or Gaussian σ = Δ₂/√(2ρ₂) per entry.
    Privacy: ε₂-DP or ρ₂-zCDP (stage ``scores``). The paper variant's rows are
    unbounded, so its record carries a defect (stating no data-derived number: the
    defect text is published in the ledger).
    Reference: Zhang, Xu, Tang, Qu, Alg. 1 step 3 and Lemma 6.
    Corrected: rows bounded (``encode_rows``), as Lemma 6 assumes; Δ₁ = 2√r, not 2r.
    """
    r = v_tilde.shape[1]
    defect = None
    if params.variant == "paper":
        defect = "Lemma 6's Δ = 2r assumes ‖x*ᵢ‖₂ ≤ 1, which the paper never enforces (rows are unbounded)"
    return _release(
        x @ v_tilde,
        part,
        l1=scores_sensitivity(r, "l1", params.variant),
        l2=scores_sensitivity(r, "l2", params.variant),
        name="factor_scores",
        rng=rng,
        defect=defect,
    )


def reconstruct(w_tilde: np.ndarray, v_tilde: np.ndarray, code: Code) -> np.ndarray:
    """X̃* = W̃Ṽᵀ·κ√p* (Alg. 1 step 4, back on the latent scale; post-processing)."""
    return (w_tilde @ v_tilde.T) * code.row_scale
