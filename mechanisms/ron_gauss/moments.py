"""``ron_gauss`` stage ``covariance`` (Alg 2, Eq. 2–3, Alg 5 step 1(d)): the random
orthonormal projection W and the noisy second moment of the projected rows (with the
label for regression, per class for classification). Proofs: ``docs/proofs/ron_gauss.md``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.primitives import Measurement, laplace_mechanism, measure_stage
from dprelease.mechanisms.ron_gauss.centring import Centred
from dprelease.mechanisms.ron_gauss.params import LEMMA4_DEFECT, LEMMA5_DEFECT, _require_pure

__all__ = [
    "covariance_sensitivity",
    "default_dims",
    "haar_projection",
    "measure_covariance",
    "moment_statistic",
    "uniform_qr_projection",
]


def default_dims(m: int) -> int:
    """Public projected dimension from Meckes' rule p < 2 ln m / ln ln m (natural logs):
    p = floor(2 ln m / ln ln m), at least 1 and below m (the paper needs p < m; the
    expression diverges as m ↓ e, so small m is capped; m ≤ 2 gives p = 1). The paper
    reads the rule with log10 (its "m = 100 ⇒ p ≤ 13"; ln gives 6) and in the end picked
    the best p on the real data (footnote 3), which is not private."""
    if m < 3:
        return 1
    return max(1, min(m - 1, math.floor(2 * math.log(m) / math.log(math.log(m)))))


def haar_projection(m: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """W ∈ R^{m×p} uniform on the Stiefel manifold: thin QR of an m×p standard Gaussian
    matrix with the columns' signs fixed by sign(diag R) (so R has a positive diagonal
    and the factorisation is unique; then W is Haar-distributed)."""
    q, r = np.linalg.qr(rng.standard_normal((m, p)))
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    return q * signs


def uniform_qr_projection(m: int, p: int, rng: np.random.Generator) -> np.ndarray:
    """Alg 2 literally: Q of the QR of A with U(0, 1) entries, first p columns. Only the
    first p columns of A shape them (Householder reflectors k > p fix e_1..e_p), so an
    m×p draw gives the same W as the paper's m×m. Not Haar: q₁ = ±a₁/‖a₁‖ has cosine
    ≈ E[u]/√E[u²] = √3/2 ≈ 0.87 with 1/√m."""
    q, _ = np.linalg.qr(rng.uniform(size=(m, p)))
    return q


def _projection(kind: str, m: int, p: int, rng: np.random.Generator) -> np.ndarray:
    if p > m:
        raise ValueError(f"params.dims ({p}) must be at most the design width ({m})")
    return haar_projection(m, p, rng) if kind == "haar" else uniform_qr_projection(m, p, rng)


def covariance_sensitivity(
    p: int, n: int, *, variant: str, norm: str, label_bound: float | None = None
) -> float:
    """Δ of the second moment (1/n)Σvvᵀ, v = x̃ (‖x̃‖₂ ≤ 1) or v = [x̃; y], |y| ≤ a.

    ``paper``: what it noises, all entries, L1 only — Lemma 4, 2√p/n; Lemma 5,
    (2√p + 4a√p + a²)/n. Both are too small (``docs/proofs/ron_gauss.md``; tests).
    ``corrected``, the upper triangle u(·) with diagonal: for one v,
    ‖u(vvᵀ)‖₁ = (‖v‖₁² + ‖v‖₂²)/2 and ‖u(vvᵀ)‖₂ ≤ ‖vvᵀ‖_F = ‖v‖₂². A replacement changes
    u by u(vvᵀ) − u(v'v'ᵀ), so by the triangle inequality
    Δ₁ = (‖v‖₁² + ‖v‖₂²)_max/n: (p + 1)/n for ‖v‖₁ ≤ √p, ‖v‖₂ ≤ 1; ((√p + a)² + 1 + a²)/n
    with the label (‖v‖₁ ≤ √p + a, ‖v‖₂² ≤ 1 + a²). L2, as ``factor_gauss``:
    ‖u(A)‖₂ ≤ ‖A‖_F, ‖vvᵀ − v'v'ᵀ‖_F² = ‖v‖⁴ + ‖v'‖⁴ − 2(v·v')² ≤ 2 max‖v‖⁴, so
    Δ₂ = √2/n, or √2(1 + a²)/n. With n = 1 the same values bound the stacked per-class
    sums (Alg 5): a record that changes class gives u(vvᵀ) in one block and −u(v'v'ᵀ) in
    another, with the same L1 sum and L2 ≤ √2·max‖u(vvᵀ)‖₂.
    """
    a = label_bound
    if variant == "paper":
        if norm != "l1":
            raise ValueError(f"norm ({norm!r}) must be 'l1' for variant 'paper' (its lemmas are L1)")
        root = math.sqrt(p)
        return (2 * root if a is None else 2 * root + 4 * a * root + a * a) / n
    if norm == "l2":
        return math.sqrt(2.0) * (1.0 if a is None else 1.0 + a * a) / n
    return (p + 1.0 if a is None else (math.sqrt(p) + a) ** 2 + 1.0 + a * a) / n


def moment_statistic(
    v: np.ndarray, target: np.ndarray | None, *, n_classes: int | None, full: bool
) -> np.ndarray:
    """(1/n)Σ vvᵀ, or with ``n_classes`` the per-class sums Σ_{y=c} vvᵀ stacked (L, d, d);
    the upper triangle with diagonal (..., d(d+1)/2) unless ``full``."""
    if n_classes is None:
        stat = v.T @ v / len(v)
    else:
        stat = np.stack([v[target == c].T @ v[target == c] for c in range(n_classes)])
    if full:
        return stat
    iu = np.triu_indices(v.shape[1])
    return stat[..., iu[0], iu[1]]


def measure_covariance(
    centred: Centred,
    w: np.ndarray,
    part: StageBudget,
    *,
    task: str,
    variant: str,
    label_bound: float,
    rng: np.random.Generator,
) -> Measurement:
    """Eq. 2 / Eq. 3 / Alg 5 step 1(d): the second moment of v = x̃ = Wᵀx̄ (or [x̃; y]),
    about 0 and not re-centred (as the paper: re-centring costs Δ ∝ 1, App. B).

    Sensitivity: ``covariance_sensitivity``; corrected, of the upper triangle with
    diagonal of (1/n)Σvvᵀ, or per class of the sums Σ_{y=c} vvᵀ (value shape
    (L, d(d+1)/2); n = 1 for the sums). Paper: all d² entries (per class: sums with the
    Lemma 4 scale, i.e. Lap(2√p/(n_c ε_Σ)) on Σ_c once divided by n_c), the lemma's Δ₁.
    Noise: b = Δ₁/ε_Σ (Laplace) or σ = Δ₂/√(2ρ_Σ) (Gaussian) per entry.
    Privacy: corrected, ε_Σ-DP or ρ_Σ-zCDP (stage ``covariance``), for the released μ
    (adaptive composition). Paper: not DP, the defect recorded.
    Reference: Chanyaswad, Liu, Mittal, Alg 2, Eq. 2–3, Alg 5 step 1(d), Lemmas 4–5.
    Corrected: Lemma 4 / 5's Δ₁ is too small; a proven Δ on the upper triangle.
    """
    _require_pure(variant, part)
    regression = task == "regression"
    xt = centred.rows @ w
    v = xt
    if regression:
        if centred.target is None:
            raise ValueError("task 'regression' needs the labels (target)")
        v = np.column_stack([xt, centred.target])
    classes = len(centred.mean) if task == "classification" else None
    stat = moment_statistic(v, centred.target, n_classes=classes, full=variant == "paper")
    p, a = w.shape[1], (label_bound if regression else None)
    n_eff = 1 if classes else len(v)
    if variant == "paper":
        raw = laplace_mechanism(
            stat,
            l1_sensitivity=covariance_sensitivity(p, n_eff, variant="paper", norm="l1", label_bound=a),
            epsilon=part.pure_epsilon,
            rng=rng,
            name="second_moment",
            stage=part.stage,
        )
        return dataclasses.replace(raw, defect=LEMMA5_DEFECT if regression else LEMMA4_DEFECT)
    return measure_stage(
        stat,
        part,
        l1_sensitivity=covariance_sensitivity(p, n_eff, variant="corrected", norm="l1", label_bound=a),
        l2_sensitivity=covariance_sensitivity(p, n_eff, variant="corrected", norm="l2", label_bound=a),
        name="second_moment",
        rng=rng,
    )
