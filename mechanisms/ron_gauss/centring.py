"""``ron_gauss`` stages ``class_counts`` and ``mean`` (Alg 1, and its per-class use in
Alg 5): rows bounded into the unit ball, the private mean(s), the rows centred by them.
Proofs: ``docs/proofs/ron_gauss.md``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.marginals import histogram, histogram_sensitivity, private_distribution
from dprelease.mechanisms.primitives import Measurement, measure_stage, unprotected
from dprelease.mechanisms.ron_gauss.params import _ZERO, CLASS_SIZE_DEFECT, _require_pure

__all__ = ["Centred", "centre", "class_sums", "mean_sensitivity"]


def mean_sensitivity(m: int, n: int, norm: str) -> float:
    """Lemma 2, rows ‖x‖₂ ≤ 1 in R^m: the mean changes by (x − x')/n, so
    Δ₂ = ‖x − x'‖₂/n ≤ 2/n and Δ₁ ≤ √m·‖x − x'‖₂/n ≤ 2√m/n (the paper's value, correct).
    With n = 1 it bounds the stacked per-class sums jointly: a record that changes class
    moves x out of one sum and x' into another, ‖x‖₁ + ‖x'‖₁ ≤ 2√m, √(‖x‖² + ‖x'‖²) ≤ 2."""
    return 2.0 / n if norm == "l2" else 2.0 * math.sqrt(m) / n


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """x/‖x‖₂ per row; a zero row stays 0."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.where(norms > _ZERO, x / np.maximum(norms, _ZERO), 0.0)


def _into_ball(x: np.ndarray) -> np.ndarray:
    """Rows with ‖x‖₂ > 1 scaled to norm 1; rows inside the unit ball unchanged."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1.0)


def _bounded(x: np.ndarray, normalise: str, row_bound: float) -> np.ndarray:
    """Alg 1 step 1. ``record``: x/‖x‖ (the paper). ``public``: x/B, B the public bound on
    ‖x‖ (√(columns) for the design), then into the unit ball: scale kept, so invertible."""
    return _unit_rows(x) if normalise == "record" else _into_ball(x / row_bound)


def _recentred(x: np.ndarray, mu: np.ndarray, normalise: str) -> np.ndarray:
    """Alg 1 steps 3-4: x − μ, then re-normalised (``record``) or clipped to the unit
    ball (``public``). Either way ‖x̄‖ ≤ 1, per record, for any released μ."""
    return _unit_rows(x - mu) if normalise == "record" else _into_ball(x - mu)


@dataclass(frozen=True)
class Centred:
    """Confidential centred rows x̄ (‖x̄‖ ≤ 1) and targets (y ∈ [−a, a] or class index),
    and what was released to centre them: μ (m,) or μ_c (L, m), the class divisors and
    proportions (classification), the measurements."""

    rows: np.ndarray = field(repr=False)
    target: np.ndarray | None = field(repr=False)
    mean: np.ndarray
    sizes: np.ndarray | None
    proportions: np.ndarray | None
    measurements: tuple[Measurement, ...]


def centre(
    x: np.ndarray,
    target: np.ndarray | None,
    *,
    task: str,
    variant: str,
    normalise: str,
    row_bound: float,
    n_classes: int | None,
    parts: Mapping[str, StageBudget],
    rng: np.random.Generator,
) -> Centred:
    """Alg 1 (and its per-class use in Alg 5): bounded rows, private mean(s), centring.

    Sensitivity: ``mean_sensitivity`` (Lemma 2): 2√m/n, 2/n; the stacked class sums
    with n = 1; class counts Δ₁ = 2, Δ₂ = √2 (``histogram_sensitivity``).
    Noise: b = Δ₁/ε_μ (Laplace) or σ = Δ₂/√(2ρ_μ) (Gaussian) per coordinate.
    Privacy: ε_μ-DP or ρ_μ-zCDP (stage ``mean``), plus the ``class_counts`` stage's
    share (corrected classification); they compose.
    Reference: Chanyaswad, Liu, Mittal, Alg 1, Lemma 2; Alg 5 / Thm 5.
    Corrected: classification, μ_c = (Σ_{y=c} x + noise)/max(ñ_c, 1), with ñ_c from the
    ``class_counts`` stage. Paper: the same noisy sums divided by the true n_c — its
    Lap(2√m/(n_c ε_μ)) on the class mean is exactly Lap(2√m/ε_μ) on the sum — with n_c
    recorded ``unprotected``. Rows bounded by the public B (``normalise="public"``)
    instead of the unit sphere (same ‖x̄‖ ≤ 1).
    """
    _require_pure(variant, parts["mean"])
    xb = _bounded(x, normalise, row_bound)
    n, m = xb.shape
    if task != "classification":
        l1, l2 = mean_sensitivity(m, n, "l1"), mean_sensitivity(m, n, "l2")
        mean = measure_stage(
            xb.mean(axis=0), parts["mean"], l1_sensitivity=l1, l2_sensitivity=l2, name="mean", rng=rng
        )
        return Centred(_recentred(xb, mean.value, normalise), target, mean.value, None, None, (mean,))
    if target is None or n_classes is None:
        raise ValueError("task 'classification' needs the class indices (target) and n_classes")
    if variant == "paper":
        true_sizes = np.bincount(target, minlength=n_classes).astype(float)
        counts = unprotected(
            true_sizes, name="class_sizes", stage=parts["mean"].stage, defect=CLASS_SIZE_DEFECT
        )
        sizes, proportions = np.maximum(true_sizes, 1.0), true_sizes / n
    else:
        counts = measure_stage(
            histogram(target, n_classes),
            parts["class_counts"],
            l1_sensitivity=histogram_sensitivity("l1"),
            l2_sensitivity=histogram_sensitivity("l2"),
            name="class_counts",
            rng=rng,
        )
        sizes, proportions = np.maximum(counts.value, 1.0), private_distribution(counts, n)
    noisy = measure_stage(
        class_sums(xb, target, n_classes),
        parts["mean"],
        l1_sensitivity=mean_sensitivity(m, 1, "l1"),
        l2_sensitivity=mean_sensitivity(m, 1, "l2"),
        name="class_sums",
        rng=rng,
    )
    mu = noisy.value / sizes[:, None]
    return Centred(_recentred(xb, mu[target], normalise), target, mu, sizes, proportions, (counts, noisy))


def class_sums(x: np.ndarray, target: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class sums Σ_{y=c} x, stacked (L, m)."""
    return np.eye(n_classes)[target].T @ x
