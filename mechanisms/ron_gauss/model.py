"""``ron_gauss``'s released model and its post-processing: the PSD repair of the noisy
second moment, Gaussian sampling in R^p and the map back to design coordinates."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.ron_gauss.centring import Centred, _bounded, _recentred

__all__ = ["RonGaussModel", "build_model", "project", "psd_repair", "reconstruct", "sample_projected"]


def psd_repair(s: np.ndarray) -> tuple[np.ndarray, float]:
    """Post-processing: (S + Sᵀ)/2 = VΛVᵀ, Λ ← max(Λ, 0). Returns VΛ₊Vᵀ (symmetric PSD)
    and the clipped mass Σ max(−λ, 0)."""
    eigval, eigvec = np.linalg.eigh((s + s.T) / 2)
    clipped = np.maximum(eigval, 0.0)
    return (eigvec * clipped) @ eigvec.T, float(np.sum(clipped - eigval))


@dataclass(frozen=True)
class RonGaussModel:
    """The released model: W (m, p); μ (m,) or μ_c (L, m); Σ (d, d) or Σ_c (L, d, d),
    symmetric PSD (d = p + 1 for regression, last coordinate y); class proportions;
    the clipped eigenvalue mass; the row map (normalise, public bound B); measurements."""

    task: str
    w: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)
    cov: np.ndarray = field(repr=False)
    proportions: np.ndarray | None
    clipped_mass: float
    normalise: str
    row_bound: float
    measurements: tuple[Measurement, ...]


def _symmetric(upper: np.ndarray, d: int) -> np.ndarray:
    """Upper triangles (..., d(d+1)/2) → symmetric matrices (..., d, d)."""
    iu = np.triu_indices(d)
    s = np.zeros((*upper.shape[:-1], d, d))
    s[..., iu[0], iu[1]] = upper
    return s + np.swapaxes(np.triu(s, 1), -1, -2)


def build_model(
    centred: Centred,
    w: np.ndarray,
    second_moment: Measurement,
    *,
    task: str,
    variant: str,
    normalise: str,
    row_bound: float,
) -> RonGaussModel:
    """Post-processing: the noisy second moment → symmetric matrix (mirrored upper
    triangle, or (S + Sᵀ)/2 of the paper's full matrix) → per-class division by the
    class divisors → ``psd_repair``."""
    d = w.shape[1] + (task == "regression")
    value = second_moment.value
    s = value if variant == "paper" else _symmetric(value, d)
    if task == "classification":
        if centred.sizes is None:
            raise ValueError("task 'classification' needs the class divisors (Centred.sizes)")
        s = s / centred.sizes[:, None, None]
    repaired = [psd_repair(m) for m in s.reshape(-1, d, d)]
    cov = np.stack([r[0] for r in repaired]).reshape(s.shape)
    return RonGaussModel(
        task,
        w,
        centred.mean,
        cov,
        centred.proportions,
        math.fsum(r[1] for r in repaired),
        normalise,
        row_bound,
        (*centred.measurements, second_moment),
    )


def _gaussian(cov: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """m rows ~ N(0, cov) for a symmetric PSD cov (factor V√Λ; no Cholesky, which fails
    on the singular matrices eigenvalue clipping produces)."""
    eigval, eigvec = np.linalg.eigh(cov)
    return rng.standard_normal((m, len(cov))) @ (eigvec * np.sqrt(np.maximum(eigval, 0.0))).T


def _class_sizes(proportions: np.ndarray, m: int) -> np.ndarray:
    """Largest-remainder rounding of m·proportions (sums to m)."""
    quota = m * proportions / proportions.sum()
    sizes = np.floor(quota).astype(int)
    sizes[np.argsort(sizes - quota, kind="stable")[: m - sizes.sum()]] += 1
    return sizes


def sample_projected(
    model: RonGaussModel, m: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray | None]:
    """m rows in R^p, as the paper releases them, and their labels. Alg 3: z ~ N(0, Σ),
    labels None. Alg 4: [z; y] ~ N(0, Σ_a), y returned as the labels (not clipped).
    Alg 5: m_c by largest remainder of the class proportions, z ~ N(Wᵀμ_c, Σ_c), label c."""
    if model.task != "classification":
        draws = _gaussian(model.cov, m, rng)
        return (draws[:, :-1], draws[:, -1]) if model.task == "regression" else (draws, None)
    if model.proportions is None:
        raise ValueError("task 'classification' needs the class proportions (RonGaussModel.proportions)")
    sizes = _class_sizes(model.proportions, m)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    z = np.concatenate(
        [model.mean[c] @ model.w + _gaussian(model.cov[c], k, rng) for c, k in enumerate(sizes)]
    )
    return z, labels


def reconstruct(model: RonGaussModel, z: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
    """Post-processing back to design coordinates: x̂ = B·(μ + Wx̃). Alg 5 rows are
    z = Wᵀμ_c + x̃, so x̂ = B·(μ_c + W(z − Wᵀμ_c)). With ``public`` normalisation this
    inverts Alg 1 up to the clipping; with ``record`` it is crude — Alg 1 discarded
    each record's norm twice, so B only restores the public scale."""
    if model.task != "classification":
        return model.row_bound * (model.mean + z @ model.w.T)
    mu = model.mean[labels]
    return model.row_bound * (mu + (z - mu @ model.w) @ model.w.T)


def project(model: RonGaussModel, x: np.ndarray) -> np.ndarray:
    """The test-time map into the model's R^p (digest point 5; unspecified in the
    paper): Alg 3/4, x → bounded → −μ → bounded → Wᵀ; Alg 5, x → bounded → Wᵀx, to be
    compared with the uncentred class means Wᵀμ_c."""
    xb = _bounded(x, model.normalise, model.row_bound)
    if model.task == "classification":
        return xb @ model.w
    return _recentred(xb, model.mean, model.normalise) @ model.w
