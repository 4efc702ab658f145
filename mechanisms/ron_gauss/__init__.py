"""``ron_gauss``: RON-Gauss (Chanyaswad, Liu, Mittal, PoPETs 2019): a random orthonormal
(RON) projection of bounded, privately centred rows and a private Gaussian model of the
projection (Alg 3), of the projection and a real label (Alg 4) or one Gaussian per class
(Alg 5), sampled and mapped back to the schema's columns.

Stages (ledger names; default weights 0.3 / 0.7, the paper's ε_μ = 0.3ε, ε_Σ = 0.7ε; for
classification 0.1 / 0.27 / 0.63):

1. ``class_counts`` (classification only) — noisy class counts ñ_c (histogram, Δ₁ = 2, Δ₂ = √2).
2. ``mean`` — Alg 1: rows x of the public-box design (``mechanisms.design``; the label
   column held out) scaled into the unit ball, the private mean μ (per-class sums for
   Alg 5), rows centred by it and bounded again: ‖x̄‖₂ ≤ 1.
3. ``covariance`` — Alg 2: a data-independent W ∈ R^{m×p}, WᵀW = I, x̃ = Wᵀx̄ (‖x̃‖ ≤ 1,
   Lemma 3), and the second moment Σ = (1/n)Σx̃x̃ᵀ (Eq. 2), of v = [x̃; y] (Eq. 3), or the
   per-class sums of x̃x̃ᵀ, with noise.
4. sampling and decoding (post-processing) — Σ symmetrised and eigenvalues clipped at 0,
   x̃ ~ N(0, Σ), x̂ = μ + Wx̃, ``Design.decode``, the label back in its column.

Privacy: replace-one neighbours, n public. The stages compose: Σ ε_i (pure, Laplace) or
Σ ρ_i (zCDP, Gaussian). Stage 3's rows depend on the data through the released μ (and ñ_c)
and on each record's own values only, so for fixed earlier releases replacing one
record changes one x̃ — what the sensitivities below bound (adaptive composition).

Where the paper is wrong (variant ``"corrected"``; variant ``"paper"`` reproduces the
paper, is pure-DP only, and its measurements carry a ``defect`` so the ledger says it is
not DP):

* Lemma 4 bounds the entrywise L1 change of x̃x̃ᵀ by 2√p‖·‖_F (it needs the factor p for
  p² entries): the true Δ₁ of the full matrix is ≥ p/n (√2·p/n for even p), above 2√p/n
  from p = 3. Lemma 5 reuses that term. We noise the upper triangle (mirrored) with a
  proven Δ (``covariance_sensitivity``).
* iid noise on all p² entries gives an asymmetric, possibly indefinite Σ^DP and the paper
  samples N(0, Σ^DP) regardless. We symmetrise and clip eigenvalues at 0 (both variants;
  post-processing) and report the clipped mass.
* Alg 5 / Thm 5 treat the class sizes n_c as public; they come from the data, and a
  noise scale ∝ 1/n_c makes the privacy loss unbounded when a record changes class. We
  measure ñ_c and divide noisy per-class sums (joint Δ over classes) by max(ñ_c, 1).
* Alg 2 draws A with U(0, 1) entries: QR of that is not Haar (q₁ ∝ a₁ leans towards
  1/√m). Not a privacy defect (W is data-independent); we default to Gaussian entries
  with the sign fix (Stiefel-uniform, as Meckes' theorem assumes).
* Alg 5 step 1(c) reads as a fresh W per class; one shared W is drawn.
* Alg 1 puts every record on the unit sphere (x/‖x‖, and again after centring), which
  discards its norm: nothing maps back to the columns. Default ``normalise="public"``
  divides by the public bound B = √(columns) and clips to the unit ball instead (same
  ‖x̄‖ ≤ 1, same analysis). The paper releases p-dimensional samples; we map back,
  x̂ = B·(μ + Wx̃) (post-processing; crude after ``"record"``).
* The paper tuned p on the real data (footnote 3, non-private); the default p is public,
  Meckes' rule (``default_dims``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from mechanisms.accounting import BudgetPlan, StageBudget, split_budget
from mechanisms.design import Design, design
from mechanisms.marginals import histogram, histogram_sensitivity, private_distribution
from mechanisms.primitives import Measurement, laplace_mechanism, measure_stage, unprotected
from mechanisms.schema import Continuous, Schema
from mechanisms.synthesizer import MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "CLASS_COUNT_SHARE",
    "SYNTHESIZER",
    "Centred",
    "RonGaussModel",
    "RonGaussParams",
    "build_model",
    "centre",
    "check",
    "class_sums",
    "covariance_sensitivity",
    "default_dims",
    "defects",
    "fit",
    "haar_projection",
    "mean_sensitivity",
    "measure_covariance",
    "moment_statistic",
    "project",
    "psd_repair",
    "reconstruct",
    "sample_projected",
    "sensitivities",
    "stage_weights",
    "uniform_qr_projection",
]

LEMMA4_DEFECT = (
    "Lemma 4: Δ₁ = 2√p/n is below the true entrywise L1 sensitivity of the p×p second moment, "
    "≥ p/n (vvᵀ vs 0, v = 1/√p) and √2·p/n for even p; exceeded for every p ≥ 3: not ε-DP"
)
LEMMA5_DEFECT = (
    "Lemma 5: Δ₁ = (2√p + 4a√p + a²)/n reuses Lemma 4's term 2√p/n for the x̃x̃ᵀ block (true ≥ p/n, "
    "√2·p/n for even p); pairs changing the (p+1)² matrix by more exist from p = 7 (a = 1): not ε-DP"
)
CLASS_SIZE_DEFECT = (
    "Alg 5 / Thm 5: the class sizes n_c are computed from the data but used without noise (divisors "
    "of μ_c, Σ_c and their noise scales, and the synthetic class sizes)"
)
CLASS_COUNT_SHARE = 0.1
_ZERO = 1e-300
_LABEL_BOUND = 1.0  # the pipeline's regression label y = 2·unit − 1 lies in [−1, 1]


@dataclass(frozen=True)
class RonGaussParams:
    """Public hyperparameters. ``label`` names the schema column held out as y (regression:
    continuous; classification: nominal or ordinal; checked by ``check``). ``dims`` None
    means ``default_dims``. ``projection`` None means haar (corrected) / uniform_qr
    (paper); ``normalise`` None means public (corrected) / record (paper)."""

    variant: str = "corrected"
    task: str = "unsupervised"
    label: str | None = None
    dims: int | None = None
    projection: str | None = None
    normalise: str | None = None

    def __post_init__(self) -> None:
        for name, allowed in (
            ("variant", ("corrected", "paper")),
            ("task", ("unsupervised", "regression", "classification")),
            ("projection", ("haar", "uniform_qr", None)),
            ("normalise", ("public", "record", None)),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"params.{name} ({getattr(self, name)!r}) must be one of {allowed}")
        if self.dims is not None and (isinstance(self.dims, bool) or not isinstance(self.dims, int)):
            raise ValueError(f"params.dims ({self.dims!r}) must be an integer >= 1 or None")
        if self.dims is not None and self.dims < 1:
            raise ValueError(f"params.dims ({self.dims}) must be an integer >= 1 or None")

    @property
    def projection_kind(self) -> str:
        return self.projection or ("haar" if self.variant == "corrected" else "uniform_qr")

    @property
    def normalise_mode(self) -> str:
        return self.normalise or ("public" if self.variant == "corrected" else "record")


def stage_weights(task: str, variant: str, weights: tuple[float, float] = (0.3, 0.7)) -> dict[str, float]:
    """Budget split: ``weights`` = (ε_μ : ε_Σ), the paper's 0.3 : 0.7 by default. Corrected
    classification first gives ``CLASS_COUNT_SHARE`` to the class counts (0.1 / 0.27 / 0.63
    by default); the paper variant measures no counts (it uses the true n_c)."""
    mean, cov = (w / math.fsum(weights) for w in weights)
    if task == "classification" and variant == "corrected":
        rest = 1.0 - CLASS_COUNT_SHARE
        return {"class_counts": CLASS_COUNT_SHARE, "mean": rest * mean, "covariance": rest * cov}
    return {"mean": mean, "covariance": cov}


def defects(params: RonGaussParams) -> list[str]:
    """Why the parameters do not give a DP release (empty for the corrected variant)."""
    if params.variant == "corrected":
        return []
    found = [LEMMA5_DEFECT if params.task == "regression" else LEMMA4_DEFECT]
    return [*found, CLASS_SIZE_DEFECT] if params.task == "classification" else found


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


def mean_sensitivity(m: int, n: int, norm: str) -> float:
    """Lemma 2, rows ‖x‖₂ ≤ 1 in R^m: the mean changes by (x − x')/n, so
    Δ₂ = ‖x − x'‖₂/n ≤ 2/n and Δ₁ ≤ √m·‖x − x'‖₂/n ≤ 2√m/n (the paper's value, correct).
    With n = 1 it bounds the stacked per-class sums jointly: a record that changes class
    moves x out of one sum and x' into another, ‖x‖₁ + ‖x'‖₁ ≤ 2√m, √(‖x‖² + ‖x'‖²) ≤ 2."""
    return 2.0 / n if norm == "l2" else 2.0 * math.sqrt(m) / n


def covariance_sensitivity(
    p: int, n: int, *, variant: str, norm: str, label_bound: float | None = None
) -> float:
    """Δ of the second moment (1/n)Σvvᵀ, v = x̃ (‖x̃‖₂ ≤ 1) or v = [x̃; y], |y| ≤ a.

    ``paper``: what it noises, all entries, L1 only — Lemma 4, 2√p/n; Lemma 5,
    (2√p + 4a√p + a²)/n. Both are too small (module docstring; tests).
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


def _require_pure(variant: str, budget: StageBudget) -> None:
    if variant == "paper" and budget.rho is not None:
        raise ValueError(
            "params.variant ('paper') is pure ε-DP only (its sensitivities are L1): "
            "set privacy.accountant: pure"
        )


def _measure(value, budget: StageBudget, *, l1: float, l2: float, name: str, rng) -> Measurement:
    return measure_stage(value, budget, l2_sensitivity=l2, l1_sensitivity=l1, rng=rng, name=name)


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
    budgets: Mapping[str, StageBudget],
    rng: np.random.Generator,
) -> Centred:
    """Alg 1 (and its per-class use in Alg 5): bounded rows, private mean(s), centring.

    Sensitivity: ``mean_sensitivity`` (Lemma 2); class counts Δ₁ = 2, Δ₂ = √2.
    Noise: b = Δ₁/ε_μ (Laplace) or σ = Δ₂/√(2ρ_μ) (Gaussian) per coordinate.
    Classification, corrected: μ_c = (Σ_{y=c} x + noise)/max(ñ_c, 1), with ñ_c from the
    ``class_counts`` stage. Paper: the same noisy sums divided by the true n_c — its
    Lap(2√m/(n_c ε_μ)) on the class mean is exactly Lap(2√m/ε_μ) on the sum — with n_c
    recorded ``unprotected``.
    """
    _require_pure(variant, budgets["mean"])
    xb = _bounded(x, normalise, row_bound)
    n, m = xb.shape
    if task != "classification":
        l1, l2 = mean_sensitivity(m, n, "l1"), mean_sensitivity(m, n, "l2")
        mean = _measure(xb.mean(axis=0), budgets["mean"], l1=l1, l2=l2, name="mean", rng=rng)
        return Centred(_recentred(xb, mean.value, normalise), target, mean.value, None, None, (mean,))
    if variant == "paper":
        true_sizes = np.bincount(target, minlength=n_classes).astype(float)
        counts = unprotected(
            true_sizes, name="class_sizes", stage=budgets["mean"].stage, defect=CLASS_SIZE_DEFECT
        )
        sizes, proportions = np.maximum(true_sizes, 1.0), true_sizes / n
    else:
        counts = _measure(
            histogram(target, n_classes),
            budgets["class_counts"],
            l1=histogram_sensitivity("l1"),
            l2=histogram_sensitivity("l2"),
            name="class_counts",
            rng=rng,
        )
        sizes, proportions = np.maximum(counts.value, 1.0), private_distribution(counts, n)
    noisy = _measure(
        class_sums(xb, target, n_classes),
        budgets["mean"],
        l1=mean_sensitivity(m, 1, "l1"),
        l2=mean_sensitivity(m, 1, "l2"),
        name="class_sums",
        rng=rng,
    )
    mu = noisy.value / sizes[:, None]
    return Centred(_recentred(xb, mu[target], normalise), target, mu, sizes, proportions, (counts, noisy))


def _projection(kind: str, m: int, p: int, rng: np.random.Generator) -> np.ndarray:
    if p > m:
        raise ValueError(f"params.dims ({p}) must be at most the design width ({m})")
    return haar_projection(m, p, rng) if kind == "haar" else uniform_qr_projection(m, p, rng)


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


def class_sums(x: np.ndarray, target: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class sums Σ_{y=c} x, stacked (L, m)."""
    return np.eye(n_classes)[target].T @ x


def measure_covariance(
    centred: Centred,
    w: np.ndarray,
    budget: StageBudget,
    *,
    task: str,
    variant: str,
    label_bound: float,
    rng: np.random.Generator,
) -> Measurement:
    """Eq. 2 / Eq. 3 / Alg 5 step 1(d): the second moment of v = x̃ = Wᵀx̄ (or [x̃; y]),
    about 0 and not re-centred (as the paper: re-centring costs Δ ∝ 1, App. B).

    Corrected: the upper triangle with diagonal of (1/n)Σvvᵀ, or per class the sums
    Σ_{y=c} vvᵀ (value shape (L, d(d+1)/2)); Δ from ``covariance_sensitivity`` (n = 1 for
    the sums). Paper: all d² entries (per class: sums with the Lemma 4 scale, i.e.
    Lap(2√p/(n_c ε_Σ)) on Σ_c once divided by n_c), Laplace with the lemma's Δ₁, and the
    defect recorded. Noise: b = Δ₁/ε_Σ or σ = Δ₂/√(2ρ_Σ) per entry.
    """
    _require_pure(variant, budget)
    regression = task == "regression"
    xt = centred.rows @ w
    v = np.column_stack([xt, centred.target]) if regression else xt
    classes = len(centred.mean) if task == "classification" else None
    stat = moment_statistic(v, centred.target, n_classes=classes, full=variant == "paper")
    p, a = w.shape[1], (label_bound if regression else None)
    n_eff = 1 if classes else len(v)
    if variant == "paper":
        raw = laplace_mechanism(
            stat,
            l1_sensitivity=covariance_sensitivity(p, n_eff, variant="paper", norm="l1", label_bound=a),
            epsilon=budget.epsilon,
            rng=rng,
            name="second_moment",
            stage=budget.stage,
        )
        return dataclasses.replace(raw, defect=LEMMA5_DEFECT if regression else LEMMA4_DEFECT)
    return _measure(
        stat,
        budget,
        l1=covariance_sensitivity(p, n_eff, variant="corrected", norm="l1", label_bound=a),
        l2=covariance_sensitivity(p, n_eff, variant="corrected", norm="l2", label_bound=a),
        name="second_moment",
        rng=rng,
    )


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


def _stage_budgets(
    task: str, variant: str, total: float, zcdp: bool, weights: tuple[float, float]
) -> dict[str, StageBudget]:
    split = stage_weights(task, variant, weights)
    shares = split_budget(total, list(split.values()))
    return {
        s: StageBudget(s, wt, share if zcdp else None, None if zcdp else share)
        for (s, wt), share in zip(split.items(), shares, strict=True)
    }


def fit(
    x: np.ndarray,
    y: np.ndarray | None = None,
    *,
    task: str = "unsupervised",
    epsilon: float | None = None,
    rho: float | None = None,
    notion: str = "pure",
    dims: int | None = None,
    variant: str = "corrected",
    normalise: str | None = None,
    projection: str | None = None,
    rng: np.random.Generator,
    label_bound: float = 1.0,
    row_bound: float = 1.0,
    n_classes: int | None = None,
    weights: tuple[float, float] = (0.3, 0.7),
) -> RonGaussModel:
    """RON-Gauss on a numeric matrix x (n, m), without a schema (for benchmarks).

    ``y``: regression labels (clipped to [−a, a], a = ``label_bound``) or class indices
    0..``n_classes``−1 (the label set is public). ``row_bound``: public bound B on ‖x‖₂
    used by ``normalise="public"``. Budget: ε (notion ``pure``) or ρ (``zcdp``) split by
    ``stage_weights(task, variant, weights)``.
    """
    params = RonGaussParams(variant=variant, task=task, dims=dims, projection=projection, normalise=normalise)
    total = rho if notion == "zcdp" else epsilon
    if notion not in ("pure", "zcdp") or total is None:
        raise ValueError(f"notion ({notion!r}) must be 'pure' (with epsilon) or 'zcdp' (with rho)")
    if task == "classification" and (n_classes is None or np.any((y < 0) | (y >= n_classes))):
        raise ValueError(f"n_classes ({n_classes}) must be given and y must hold class indices below it")
    if task == "regression":
        y = np.clip(y, -label_bound, label_bound)
    budgets = _stage_budgets(task, variant, total, notion == "zcdp", weights)
    mode = params.normalise_mode
    centred = centre(
        x,
        None if task == "unsupervised" else y,
        task=task,
        variant=variant,
        normalise=mode,
        row_bound=row_bound,
        n_classes=n_classes,
        budgets=budgets,
        rng=rng,
    )
    m = x.shape[1]
    w = _projection(params.projection_kind, m, dims or default_dims(m), rng)
    cov = measure_covariance(
        centred, w, budgets["covariance"], task=task, variant=variant, label_bound=label_bound, rng=rng
    )
    return build_model(centred, w, cov, task=task, variant=variant, normalise=mode, row_bound=row_bound)


# --- the four pipeline stages -------------------------------------------------------


def _layout(schema: Schema, params: RonGaussParams) -> tuple[Design, int | None]:
    """The design of the feature columns and the label's position (None: unsupervised)."""
    if params.label is None:
        return design(schema), None
    j = schema.names.index(params.label)
    return design(Schema(schema.columns[:j] + schema.columns[j + 1 :])), j


def check(schema: Schema, params: RonGaussParams) -> None:
    """The label fits the task and the schema; ``dims`` fits the design width."""
    if params.task == "unsupervised" and params.label is not None:
        raise ValueError(f"params.label ({params.label!r}) must be None for task 'unsupervised'")
    if params.task != "unsupervised":
        wanted = ("continuous",) if params.task == "regression" else ("nominal", "ordinal")
        if params.label not in schema.names:
            raise ValueError(f"params.label ({params.label!r}) must name a schema column: {schema.names}")
        if schema[params.label].kind not in wanted:
            raise ValueError(
                f"params.label ({params.label!r}) must be a {' or '.join(wanted)} column for task "
                f"{params.task!r}, not {schema[params.label].kind}"
            )
        if len(schema) < 2:
            raise ValueError(f"params.label ({params.label!r}) must leave at least one feature column")
    width = _layout(schema, params)[0].width
    if params.dims is not None and params.dims > width:
        raise ValueError(f"params.dims ({params.dims}) must be at most the design width ({width})")


def sensitivities(schema: Schema, params: RonGaussParams, n: int, facts=None) -> dict[str, Sensitivity]:
    """Every statistic ron_gauss measures (corrected), from public facts: the design
    width m of the features, the projected dimension p (``params.dims`` or Meckes' rule)
    and n. Unsupervised / regression: ``mean`` (``mean_sensitivity``), then the second
    moment (``covariance_sensitivity``, with the label bound for regression).
    Classification: ``class_counts`` (histogram, 2 / √2), ``class_sums`` and the per-class
    second-moment sums (n = 1 in both, the sums are not divided). Tight: the counts, and
    the per-class second moment (a record moving class, released class means μ_c that
    centre it at x̃ = ±e₁ in both classes give Δ₂ = √2; at x̃ = s/√p, s ∈ {±1}^p, Δ₁ = p + 1)."""
    m = _layout(schema, params)[0].width
    p = params.dims or default_dims(m)
    label = _LABEL_BOUND if params.task == "regression" else None
    n_eff = 1 if params.task == "classification" else n

    def second(norm: str) -> float:
        return covariance_sensitivity(p, n_eff, variant="corrected", norm=norm, label_bound=label)

    tight = params.task == "classification"
    out = {"second_moment": Sensitivity("covariance", second("l1"), second("l2"), tight=tight)}
    if params.task == "classification":
        out["class_counts"] = Sensitivity(
            "class_counts", histogram_sensitivity("l1"), histogram_sensitivity("l2"), tight=True
        )
        out["class_sums"] = Sensitivity("mean", mean_sensitivity(m, 1, "l1"), mean_sensitivity(m, 1, "l2"))
    else:
        out["mean"] = Sensitivity("mean", mean_sensitivity(m, n, "l1"), mean_sensitivity(m, n, "l2"))
    return out


def _encode_stage(rows: MixedRows, schema: Schema, plan: BudgetPlan, params: RonGaussParams, rng) -> Stage:
    features, j = _layout(schema, params)
    keep = [k for k in range(len(schema)) if k != j]
    x = features.encode(MixedRows(rows.bins[:, keep], None if rows.unit is None else rows.unit[:, keep]))
    target = None
    if params.task == "regression":
        target = _LABEL_BOUND * (2.0 * rows.unit[:, j] - 1.0)
    elif params.task == "classification":
        target = rows.bins[:, j].astype(int)
    centred = centre(
        x,
        target,
        task=params.task,
        variant=params.variant,
        normalise=params.normalise_mode,
        row_bound=features.max_norm,
        n_classes=None if j is None else schema.columns[j].n_bins,
        budgets={s.stage: s for s in plan.stages},
        rng=rng,
    )
    facts = {
        "dims": params.dims or default_dims(features.width),
        "dims_note": "given in the spec"
        if params.dims
        else "Meckes' rule floor(2 ln m / ln ln m), m = design width",
        "projection": params.projection_kind,
        "normalise": params.normalise_mode,
    }
    return Stage((centred, features.max_norm), centred.measurements, facts)


def _estimate_stage(state: tuple[Centred, float], plan: BudgetPlan, params: RonGaussParams, rng) -> Stage:
    centred, bound = state
    m = centred.rows.shape[1]
    w = _projection(params.projection_kind, m, params.dims or default_dims(m), rng)
    cov = measure_covariance(
        centred,
        w,
        plan.stage("covariance"),
        task=params.task,
        variant=params.variant,
        label_bound=_LABEL_BOUND,
        rng=rng,
    )
    model = build_model(
        centred,
        w,
        cov,
        task=params.task,
        variant=params.variant,
        normalise=params.normalise_mode,
        row_bound=bound,
    )
    facts = {"clipped_eigenvalue_mass": model.clipped_mass}
    if model.proportions is not None:
        facts["class_proportions"] = [float(q) for q in model.proportions]
    return Stage(model, (cov,), facts)


def _sample_stage(model: RonGaussModel, params: RonGaussParams, m: int, rng) -> Stage:
    z, labels = sample_projected(model, m, rng)
    return Stage((reconstruct(model, z, labels), labels))


def _decode_stage(
    state: tuple[np.ndarray, np.ndarray | None], schema: Schema, params: RonGaussParams, rng
) -> MixedRows:
    x, labels = state
    features, j = _layout(schema, params)
    rows = features.decode(x)
    if j is None:
        return rows
    column = schema.columns[j]
    if isinstance(column, Continuous):
        unit = np.clip((labels / _LABEL_BOUND + 1.0) / 2.0, 0.0, 1.0)
        bins = column.to_bins(column.from_unit(unit))
    else:
        unit, bins = np.full(len(labels), np.nan), labels
    return MixedRows(np.insert(rows.bins, j, bins, axis=1), np.insert(rows.unit, j, unit, axis=1))


SYNTHESIZER = Synthesizer(
    name="ron_gauss",
    summary=(
        "RON-Gauss: private mean, random orthonormal projection, private second moment "
        "(Gaussian, label-augmented, or one Gaussian per class) -> fresh rows mapped back"
    ),
    notions=("pure", "zcdp"),
    params_type=RonGaussParams,
    stage_weights=lambda schema, params: stage_weights(params.task, params.variant),
    defects=defects,
    keeps_row_order=False,
    spends={"encode": ("class_counts", "mean"), "estimate": ("covariance",)},
    encode=_encode_stage,
    estimate=_estimate_stage,
    sample=_sample_stage,
    decode=_decode_stage,
    sensitivities=sensitivities,
    check=check,
)
