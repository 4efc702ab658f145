"""``private_pca``: DP synthetic data near a private low-dimensional affine subspace.

He, Strohmer, Vershynin, Zhu, *Differentially private low-dimensional synthetic data
from high-dimensional datasets* (Algorithms 1–5, §6). Rows x ∈ [0, 1]^d (the public-box
design matrix, ``mechanisms.design``); replace-one neighbours, n public. Pure ε-DP.

Stages (ledger names, default weights ⅓ each, Alg 1's ε/3 split):

1. ``covariance`` (Alg 2, ε₁) — the centred covariance M plus a symmetric Laplace matrix.
2. ``mean`` (Alg 3 step 2, ε₂) — the mean plus Laplace noise. Then, as post-processing:
   V̂ = top-d' eigenvectors of M̂, R = √d + ‖X̄_priv‖₂, d' given or by the §6 rule.
3. ``measure`` (Alg 4, PMM, ε₃) — noisy counts of a_i = V̂ᵀ(x_i − X̄_priv) in every cell
   of a binary hierarchical partition of [−R, R]^{d'}, one discrete-Laplace measurement
   per level. Then, as post-processing: consistent counts, points uniform in the leaf
   cells, x'' = V̂a' + X̄_priv (the *same* private mean), clipped to [0, 1]^d.
   Or (``subroutine`` "psmm", or "auto" with d' ≥ 3) Alg 5, PSMM: one discrete-Laplace
   measurement ``psmm_counts`` of the counts in every cell [kδ, (k+1)δ)^{d'} that meets
   the ball ‖a‖₂ ≤ R, δ = √(d/d')·(ε₃n)^{−1/d'}; then, as post-processing, the closest
   probability vector ν̂ to ν = counts/n in bounded-Lipschitz distance (an LP,
   ``closest_probability``), m points by largest remainder of m·ν̂, uniform in their
   cells, and the same lift and clip.

Privacy: the three stages compose, ε = ε₁ + ε₂ + ε₃ (adaptively: V̂ and X̄_priv are fixed
outputs of stages 1–2 when stage 3 runs, and a_i depends on record i only).

Paper defects (variant ``"corrected"`` fixes them; variant ``"paper"`` keeps them and
marks its measurements with a ``defect``):

* Alg 4, σ_j = ε⁻¹·2^{(1/2)(1−1/d')(r−j)}: not normalised. Level j costs Δ/σ_j, so the
  tree costs ε·Δ·S with S = Σ_{k=0}^{r} 2^{−k(1−1/d')/2} > 1 (S ≈ 5.95 for d' = 2,
  r = 16; S = r + 1 for d' = 1). We keep the shape of σ_j and scale it so Σ_j Δ/σ_j = ε₃.
* Alg 4 / [31] count with histogram sensitivity 1 (add/remove). Under replace-one a point
  leaves one cell and enters another at every level: L1 sensitivity 2 per level (Δ = 2).
  The root count is n, public under replace-one, so the corrected variant uses it
  without noise (the paper's noisy root costs nothing here; it only makes m random).
* Alg 5 adds Lap_Z(1/ε₃) to the grid counts (sensitivity 1, add/remove). Under replace-one
  the count vector changes by 2 in L1 (brute-forced in ``tests``): the corrected variant
  uses Lap_Z(2/ε₃); the paper variant keeps Lap_Z(1/ε₃) and its measurement's defect
  states the true cost 2ε₃.
* Prop 3.3's proof adds Lap(1/(εn)) to the mean: a typo for Alg 3's Lap(d/(ε₂n)) (L1
  sensitivity d/n), which both variants use.
* §6 writes singular values σ_i(M̂): for an indefinite M̂ those are |λ_i|, so negative
  noise eigenvalues would count as signal; we use algebraic eigenvalues (``eigh``), sort
  them descending and clamp the tail sum at 0 (post-processing either way). Likewise V̂
  takes the largest *algebraic* eigenvalues, not an SVD of M̂.

Underspecified choices (documented here): level j (1-based) splits coordinate
(j − 1) mod d' at its midpoint; consistency is proportional to the clamped noisy children
with largest-remainder rounding (random tie-break, even split when both are 0); leaf
points are uniform in their cell; m output rows are spread over leaves in proportion to
the consistent leaf counts (largest remainder); ε₃ enters the §6 rule and the depth.
PSMM (Alg 5) details, ours: L is every cell whose closure meets the ball (cells anchored
in the ball would miss points near −R); a point is counted in cell ⌊a/δ⌋; the BL metric is
ℓ2 between cell centres (the paper's domain is an ℓ2 ball); the output has m points
(default n), not "copies of L", placed uniformly in their cells like PMM's leaves. PSMM
is costly: the LP has up to |L|² transport variables, so a public cap ``PSMM_MAX_CELLS``
(400) applies: "psmm" raises ValueError above it and "auto" falls back to PMM (PMM serves
every d'; the paper allows it, at a √d' accuracy cost) and says so in the facts. With
the paper's δ, |L| ≈ 75–105·ε₃n for d = 10, d' = 3 (R ≈ 1.5√d), so PSMM fits only very small
ε₃n, where the ⅓ split also makes the private mean, hence R and |L|, large. The optional
public ``psmm_cells`` coarsens δ to at most that many cells (a deviation from the
paper's δ, labelled in the facts by ``grid_delta``). Noise comes from the primitives
(OpenDP's vetted samplers unless the release uses ``--insecure-seed``; ``sampler_note``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from mechanisms.accounting import BudgetPlan, split_budget
from mechanisms.design import design
from mechanisms.primitives import (
    Measurement,
    discrete_laplace_mechanism,
    discrete_laplace_noise,
    laplace_mechanism,
)
from mechanisms.schema import Schema
from mechanisms.synthesizer import MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "MAX_DEPTH",
    "PSMM_MAX_CELLS",
    "STAGE_WEIGHTS",
    "SYNTHESIZER",
    "LevelPlan",
    "NoisyGrid",
    "NoisyTree",
    "PrivatePCAParams",
    "Projection",
    "SubroutineChoice",
    "adaptive_dims",
    "allocate",
    "choose_subroutine",
    "closest_probability",
    "consistent_counts",
    "covariance",
    "covariance_sensitivity",
    "default_depth",
    "discrete_laplace",
    "grid_counts",
    "leaf_points",
    "level_counts",
    "level_plan",
    "lift",
    "measure_grid",
    "measure_tree",
    "noisy_covariance",
    "paper_defects",
    "pmm",
    "pmm_points",
    "private_covariance",
    "private_mean",
    "private_projection",
    "project",
    "psmm",
    "psmm_delta",
    "psmm_delta_for_cells",
    "psmm_grid",
    "psmm_grid_size",
    "psmm_points",
    "psmm_sample",
    "psmm_scale",
    "round_measure",
    "synthesize",
    "top_eigenvectors",
]

Variant = Literal["corrected", "paper"]
Subroutine = Literal["pmm", "psmm", "auto"]
STAGE_WEIGHTS = {"covariance": 1 / 3, "mean": 1 / 3, "measure": 1 / 3}
MAX_DEPTH = 24
"""Public cap on the PMM depth r (2^r leaves, ≈ 2^{r+1} counts in memory)."""
PSMM_MAX_CELLS = 400
"""Public cap on the PSMM grid size |L| (the BL LP has up to |L|² transport variables).
With the paper's δ, |L| ≈ 75–105·ε₃n for d = 10, d' = 3, so PSMM fits only very small ε₃n."""


@dataclass(frozen=True)
class PrivatePCAParams:
    """Public hyperparameters. ``dims`` (d') None: the §6 rule on the noisy covariance;
    ``depth`` (r) None: ⌈log₂(ε₃n)⌉ clamped to [1, ``MAX_DEPTH``] (PMM only);
    ``subroutine``: "pmm" (Alg 4), "psmm" (Alg 5; error if its grid exceeds
    ``PSMM_MAX_CELLS``) or "auto" (PSMM when d' ≥ 3 and the grid fits, else PMM);
    ``psmm_cells`` None: the paper's δ; else a public target |L| ≤ ``PSMM_MAX_CELLS``
    that coarsens δ (``psmm_delta_for_cells``; never finer than the paper's δ)."""

    variant: Variant = "corrected"
    dims: int | None = None
    depth: int | None = None
    subroutine: Subroutine = "pmm"
    psmm_cells: int | None = None

    def __post_init__(self) -> None:
        if self.variant not in ("corrected", "paper"):
            raise ValueError(f"params.variant ({self.variant!r}) must be 'corrected' or 'paper'")
        if self.dims is not None and not (_is_int(self.dims) and self.dims >= 1):
            raise ValueError(f"params.dims ({self.dims!r}) must be an integer >= 1")
        if self.depth is not None and not (_is_int(self.depth) and 1 <= self.depth <= MAX_DEPTH):
            raise ValueError(f"params.depth ({self.depth!r}) must be an integer in [1, {MAX_DEPTH}]")
        if self.subroutine not in ("pmm", "psmm", "auto"):
            raise ValueError(f"params.subroutine ({self.subroutine!r}) must be 'pmm', 'psmm' or 'auto'")
        if self.psmm_cells is not None and not (
            _is_int(self.psmm_cells) and 2 <= self.psmm_cells <= PSMM_MAX_CELLS
        ):
            raise ValueError(
                f"params.psmm_cells ({self.psmm_cells!r}) must be an integer in [2, {PSMM_MAX_CELLS}]"
            )


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


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
    """Alg 2 as one Laplace measurement of u = (M_ij, i < j; M_ii/2) with Δ₁ = 3d²/n
    (``covariance_sensitivity``) and scale b = 3d²/(εn); ``noisy_covariance`` rebuilds M̂."""
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
    """X̄_priv = X̄ + Lap(d/(εn))^d. Replace-one changes X̄ by (x − x')/n, and
    ‖x − x'‖₁ ≤ d on [0, 1]^d, so Δ₁ = d/n (attained by 0 vs 1). Alg 3 step 2; the
    Prop 3.3 proof's Lap(1/(εn)) is a typo (it would be ε·d-DP)."""
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
    algebraic eigenvalues of M̂ in descending order (see the module docstring on σ_i);
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


# ---------------------------------------------------------------- Alg 4: PMM


def default_depth(epsilon: float, n: int) -> int:
    """r = ⌈log₂(ε₃n)⌉ (Alg 4), clamped to [1, ``MAX_DEPTH``]."""
    return int(min(MAX_DEPTH, max(1, math.ceil(math.log2(epsilon * n)))))


def _shape(dims: int, depth: int, levels: np.ndarray) -> np.ndarray:
    """The paper's relative scales 2^{(1/2)(1−1/d')(r−j)}."""
    return 2.0 ** (0.5 * (1.0 - 1.0 / dims) * (depth - levels))


@dataclass(frozen=True)
class LevelPlan:
    """Per-level discrete-Laplace scales σ_j, the ε_j each measurement records and the
    L1 sensitivity it records, for ``levels`` (1..r corrected, 0..r paper)."""

    levels: tuple[int, ...]
    scales: tuple[float, ...]
    epsilons: tuple[float, ...]
    sensitivity: float


def level_plan(epsilon: float, depth: int, dims: int, variant: Variant) -> LevelPlan:
    """Noise scales of the PMM tree.

    corrected: levels j = 1..r; each level's count vector has L1 sensitivity 2 under
    replace-one (one cell −1, another +1; ``tests`` enumerate it), so Lap_Z(σ_j) costs
    ε_j = 2/σ_j. σ_j = c·2^{(1/2)(1−1/d')(r−j)} with c = (2/ε₃)·Σ_j 2^{−(1/2)(1−1/d')(r−j)},
    so Σ_j 2/σ_j = ε₃; σ_j and ε_j are rounded up, then σ's are nudged up until the
    recorded ε_j sum (``math.fsum`` and ``sum``) is ≤ ε₃. The root (n) is public.

    paper: levels j = 0..r with the literal σ_j = ε₃⁻¹·2^{(1/2)(1−1/d')(r−j)} and the
    paper's sensitivity 1; the recorded ε_j split ε₃ in proportion to 1/σ_j (the claim).
    True cost under replace-one: 2/σ_j for j ≥ 1, 0 for the root (``paper_defects``).
    """
    if variant == "paper":
        levels = np.arange(0, depth + 1)
        scales = [float(s) / epsilon for s in _shape(dims, depth, levels)]
        claims = split_budget(epsilon, [1.0 / s for s in scales])
        return LevelPlan(tuple(int(j) for j in levels), tuple(scales), tuple(claims), 1.0)
    levels = np.arange(1, depth + 1)
    shape = _shape(dims, depth, levels)
    c = 2.0 * math.fsum(1.0 / shape) / epsilon
    scales = [math.nextafter(c * float(s), math.inf) for s in shape]
    eps = [math.nextafter(2.0 / s, math.inf) for s in scales]
    while math.fsum(eps) > epsilon or sum(eps) > epsilon:
        i = int(np.argmax(eps))
        scales[i] = math.nextafter(scales[i], math.inf)
        eps[i] = math.nextafter(2.0 / scales[i], math.inf)
    return LevelPlan(tuple(int(j) for j in levels), tuple(scales), tuple(eps), 2.0)


def paper_defects(epsilon: float, depth: int, dims: int) -> tuple[float, list[str]]:
    """True replace-one cost Σ_{j=1..r} 2/σ_j of the paper's literal PMM, and why it is
    not the claimed ε₃: it equals 2ε₃(S − 2^{−(1/2)(1−1/d')r}), S = Σ_{k=0}^{r}
    2^{−k(1−1/d')/2} (the root term drops out because n is public)."""
    plan = level_plan(epsilon, depth, dims, "paper")
    true = math.fsum(2.0 / s for j, s in zip(plan.levels, plan.scales, strict=True) if j > 0)
    s_sum = math.fsum(1.0 / s for s in plan.scales) * epsilon
    return true, [
        f"Alg 4's sigma_j = eps^-1 * 2^((1-1/d')(r-j)/2) are not normalised: sum_j 1/sigma_j = "
        f"S*eps with S = {s_sum:.4g} (d' = {dims}, r = {depth})",
        "Alg 4 counts with histogram sensitivity 1; under replace-one each level's counts "
        f"change by 2 in L1, so the tree costs {true:.4g}, not the claimed {epsilon:.4g}",
    ]


def discrete_laplace(scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Lap_Z(σ): P(z) ∝ e^{−|z|/σ}. Adding it to an integer query of L1 sensitivity Δ is
    (Δ/σ)-DP. Drawn by ``primitives.discrete_laplace_noise``: OpenDP's exact sampler for a
    ``VettedRNG``, G₁ − G₂ with G ~ Geometric(1 − e^{−1/σ}) for a seeded numpy generator."""
    return discrete_laplace_noise(scale, size, rng)


def _splits(dims: int, depth: int) -> list[int]:
    """How often each coordinate is halved in ``depth`` levels (level j splits
    coordinate (j − 1) mod d')."""
    return [len(range(c, depth, dims)) for c in range(dims)]


def _level_nodes(a: np.ndarray, radius: float, depth: int) -> list[np.ndarray]:
    """Node index (0..2^j − 1, first split = most significant bit) of every point at each
    level j = 1..r of the partition of [−R, R]^{d'}."""
    n, dims = a.shape
    b = _splits(dims, depth)
    q = [
        np.clip(np.floor((a[:, c] + radius) / (2 * radius) * 2.0 ** b[c]), 0, 2 ** b[c] - 1).astype(np.int64)
        for c in range(dims)
    ]
    node, out = np.zeros(n, dtype=np.int64), []
    for j in range(1, depth + 1):
        c, s = (j - 1) % dims, (j - 1) // dims
        node = 2 * node + ((q[c] >> (b[c] - 1 - s)) & 1)
        out.append(node)
    return out


def level_counts(a: np.ndarray, radius: float, depth: int) -> list[np.ndarray]:
    """True counts n_θ for every cell θ (empty ones included) at levels j = 1..r."""
    return [
        np.bincount(nodes, minlength=2**j) for j, nodes in enumerate(_level_nodes(a, radius, depth), start=1)
    ]


@dataclass(frozen=True)
class NoisyTree:
    """The measured tree: ``root`` (n for corrected, public; the clamped noisy root for
    paper), ``levels`` the noisy counts of levels 1..r, and the measurements."""

    root: int
    levels: tuple[np.ndarray, ...] = field(repr=False)
    measurements: tuple[Measurement, ...] = field(repr=False)
    depth: int
    dims: int


def measure_tree(
    a: np.ndarray,
    radius: float,
    epsilon: float,
    depth: int,
    rng: np.random.Generator,
    variant: Variant = "corrected",
    *,
    stage: str = "measure",
) -> NoisyTree:
    """Alg 4 steps 1–2: one discrete-Laplace measurement per level (``level_plan``)."""
    n, dims = a.shape
    plan = level_plan(epsilon, depth, dims, variant)
    true = level_counts(a, radius, depth)
    if variant == "paper":
        true = [np.array([n]), *true]
        _, reasons = paper_defects(epsilon, depth, dims)
    measurements = []
    for j, t, s, e in zip(plan.levels, true, plan.scales, plan.epsilons, strict=True):
        defect = None
        if variant == "paper":
            level_cost = 2.0 / s if j > 0 else 0.0
            defect = f"level {j} truly costs {level_cost:.4g} (claimed {e:.4g}); " + "; ".join(reasons)
        measurements.append(
            discrete_laplace_mechanism(
                t,
                l1_sensitivity=plan.sensitivity,
                scale=s,
                epsilon=e,
                rng=rng,
                name=f"pmm_level_{j}",
                stage=stage,
                defect=defect,
            )
        )
    if variant == "paper":
        root = max(0, int(measurements[0].value[0]))
        levels = tuple(m.value for m in measurements[1:])
    else:
        root, levels = n, tuple(m.value for m in measurements)
    return NoisyTree(root, levels, tuple(measurements), depth, dims)


def consistent_counts(root: int, noisy: Sequence[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """Alg 4 step 3 (rule left to [31]; ours): top-down, each parent's count P is split
    over its two children in proportion to their clamped noisy counts (c₀, c₁)₊ — evenly
    if both are 0 — with largest-remainder rounding (ties to a random child). Children
    are then non-negative integers summing to the parent. Post-processing."""
    parent, out = np.array([root], dtype=np.int64), []
    for level in noisy:
        c = np.maximum(np.asarray(level, dtype=np.int64), 0).reshape(-1, 2)
        tot = c.sum(axis=1)
        num = np.where(tot[:, None] > 0, parent[:, None] * c, parent[:, None])
        den = np.where(tot > 0, tot, 2)[:, None]
        q, rem = num // den, num % den
        left = parent - q.sum(axis=1)
        coin = rng.random(parent.size) < 0.5
        first = (rem[:, 0] > rem[:, 1]) | ((rem[:, 0] == rem[:, 1]) & coin)
        q[:, 0] += left * first
        q[:, 1] += left * ~first
        parent = q.reshape(-1)
        out.append(parent)
    return out


def allocate(counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """m points over cells in proportion to ``counts`` (uniformly if all are 0), by
    largest remainder (ties at random): non-negative integers summing to m."""
    w = np.asarray(counts, dtype=np.int64)
    if w.sum() == 0:
        w = np.ones_like(w)
    total = int(w.sum())
    q, rem = np.divmod(m * w, total)
    order = np.lexsort((rng.random(w.size), -rem))
    q[order[: m - int(q.sum())]] += 1
    return q


def leaf_points(
    leaf_counts: np.ndarray, radius: float, dims: int, depth: int, rng: np.random.Generator
) -> np.ndarray:
    """Alg 4 output: ``leaf_counts[θ]`` points uniform in each leaf cell Ω_θ of [−R, R]^{d'}
    (data-independent placement)."""
    leaves = np.repeat(np.arange(leaf_counts.size, dtype=np.int64), leaf_counts)
    q = np.zeros((leaves.size, dims), dtype=np.int64)
    for j in range(1, depth + 1):
        c = (j - 1) % dims
        q[:, c] = 2 * q[:, c] + ((leaves >> (depth - j)) & 1)
    width = 2 * radius / 2.0 ** np.array(_splits(dims, depth))
    return -radius + (q + rng.random(q.shape)) * width


def pmm_points(tree: NoisyTree, radius: float, rng: np.random.Generator, m: int | None = None) -> np.ndarray:
    """Consistency, then points: the consistent leaf counts (total = root) when m is None,
    else m points spread by ``allocate``. Post-processing of the tree."""
    leaves = consistent_counts(tree.root, tree.levels, rng)[-1]
    counts = leaves if m is None else allocate(leaves, m, rng)
    return leaf_points(counts, radius, tree.dims, tree.depth, rng)


def pmm(
    a: np.ndarray,
    radius: float,
    epsilon: float,
    depth: int,
    rng: np.random.Generator,
    variant: Variant = "corrected",
    m: int | None = None,
) -> tuple[np.ndarray, tuple[Measurement, ...]]:
    """Alg 4 end to end on points a in [−R, R]^{d'}: (synthetic points, measurements)."""
    tree = measure_tree(a, radius, epsilon, depth, rng, variant)
    return pmm_points(tree, radius, rng, m), tree.measurements


# ---------------------------------------------------------------- Alg 5: PSMM


def psmm_delta(d: int, dims: int, epsilon: float, n: int) -> float:
    """Alg 5 step 1: the lattice spacing δ = √(d/d')·(ε₃n)^{−1/d'} (public)."""
    return math.sqrt(d / dims) * (epsilon * n) ** (-1.0 / dims)


def _grid_threshold(radius: float, delta: float) -> float:
    """t = (R/δ)² with a 1e-9 relative slack against rounding: cell k (with j_c = k_c for
    k_c ≥ 0, −k_c − 1 otherwise) is in L iff Σ_c j_c² ≤ t."""
    return (radius / delta) ** 2 * (1.0 + 1e-9)


def _orthant_points(dims: int, t: float, cap: int) -> np.ndarray | None:
    """All j ∈ ℕ^{d'} with Σ j_c² ≤ t, or None as soon as there are more than ``cap``.
    Built one coordinate at a time; every partial vector extends by zeros, so each
    intermediate set is no larger than the final one (the cap is exact, memory O(cap))."""
    pts, sums = np.zeros((1, 0), dtype=np.int64), np.zeros(1, dtype=np.int64)
    for _ in range(dims):
        rem = t - sums
        top = np.floor(np.sqrt(np.maximum(rem, 0.0))).astype(np.int64)
        top += (top + 1) ** 2 <= rem
        top -= top**2 > rem
        counts = top + 1
        total = int(counts.sum())
        if total > cap:
            return None
        rows = np.repeat(np.arange(sums.size), counts)
        js = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        pts, sums = np.column_stack([pts[rows], js]), sums[rows] + js**2
    return pts


def psmm_grid_size(radius: float, dims: int, delta: float) -> tuple[int, bool]:
    """(|L|, exact). |L| = 2^{d'}·#{j ∈ ℕ^{d'}: Σ j_c² ≤ (R/δ)²} (see ``psmm_grid``),
    counted exactly up to 10⁶ cells. Above that, (max(2^{d'}, ⌈vol(B_R)/δ^{d'}⌉), False): a
    lower bound, since the cells meeting the ball cover it and each has volume δ^{d'}."""
    cap = 1_000_000
    pts = _orthant_points(dims, _grid_threshold(radius, delta), cap >> dims)
    if pts is not None:
        return int(pts.shape[0]) << dims, True
    log_vol = dims / 2 * math.log(math.pi) - math.lgamma(dims / 2 + 1) + dims * math.log(radius / delta)
    return max(1 << dims, math.ceil(math.exp(min(log_vol, 700.0)))), False


def psmm_delta_for_cells(radius: float, dims: int, cells: int) -> float:
    """A δ whose grid (``psmm_grid``) has at most ``cells`` cells, nearly the finest
    (public). |L| depends on δ only through t = (R/δ)² and is non-decreasing in t, with
    steps at integers s = Σ j_c²: find the largest s with |L(s)| ≤ cells (doubling, then
    bisection) and take δ = R/√s (δ = 2R when s = 0: the 2^{d'} cells around 0); every
    δ ≤ R/√(s + 1) has more cells. ValueError if 2^{d'} > ``cells``."""

    def fits(s: int) -> bool:
        return _orthant_points(dims, s * (1.0 + 1e-9), cells >> dims) is not None

    if (1 << dims) > cells:
        raise ValueError(
            f"a PSMM grid in d' = {dims} has at least 2^{dims} = {1 << dims} cells, above {cells}"
        )
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return 2.0 * radius if lo == 0 else radius / math.sqrt(lo)


def psmm_grid(radius: float, dims: int, delta: float, max_cells: int | None = None) -> np.ndarray:
    """Alg 5 step 2: the cells [kδ, (k+1)δ)^{d'}, k ∈ ℤ^{d'}, whose closure meets the ball
    ‖a‖₂ ≤ R, as an int64 (|L|, d') array of k sorted lexicographically.

    The distance from 0 to the closed cell is δ·‖j‖₂ with j_c = k_c (k_c ≥ 0) or
    −k_c − 1 (k_c < 0), so L = {k: Σ j_c² ≤ (R/δ)²}: every cell *meeting* the ball, not
    only those anchored in it (a cell anchored at a ≤ −R·e_c lies outside the ball yet
    holds the points near −R). A point a with ‖a‖ ≤ R lies in cell ⌊a/δ⌋ and
    δ‖j‖ ≤ ‖a‖ ≤ R, so that cell is in L. Public (R, d', δ). ``max_cells``: raise
    ValueError if |L| would exceed it (checked before building the list)."""
    cap = (1 << 62) if max_cells is None else max_cells
    pts = _orthant_points(dims, _grid_threshold(radius, delta), cap >> dims)
    if pts is None or (pts.shape[0] << dims) > cap:
        size, exact = psmm_grid_size(radius, dims, delta)
        raise ValueError(f"the PSMM grid has {'' if exact else 'at least '}{size} cells, above {cap}")
    signs = np.array(list(np.ndindex(*([2] * dims))), dtype=bool)
    cells = np.where(signs[None, :, :], -pts[:, None, :] - 1, pts[:, None, :]).reshape(-1, dims)
    return cells[np.lexsort(cells.T[::-1])]


def _cell_keys(k: np.ndarray, lo: np.ndarray, shape: np.ndarray) -> np.ndarray:
    return np.ravel_multi_index(tuple((k - lo).T), tuple(int(s) for s in shape))


def grid_counts(a: np.ndarray, cells: np.ndarray, delta: float) -> np.ndarray:
    """n_v for every cell of ``cells`` (``psmm_grid``; empty ones included): a point a is
    counted in cell ⌊a/δ⌋. That cell is always in L for ‖a‖ ≤ R; should rounding ever
    put a point outside every listed cell, it goes to the cell with the nearest centre.
    Each point is counted in exactly one cell, so the count vector has L1 sensitivity 2
    under replace-one (one cell −1, another +1)."""
    k = np.floor(a / delta).astype(np.int64)
    lo, hi = cells.min(axis=0), cells.max(axis=0)
    shape = hi - lo + 1
    keys = _cell_keys(cells, lo, shape)
    inside = np.all((k >= lo) & (k <= hi), axis=1)
    idx = np.full(k.shape[0], -1, dtype=np.int64)
    if inside.any():
        pk = _cell_keys(k[inside], lo, shape)
        pos = np.minimum(np.searchsorted(keys, pk), keys.size - 1)
        idx[inside] = np.where(keys[pos] == pk, pos, -1)
    missing = idx < 0
    if missing.any():
        centres = (cells + 0.5) * delta
        d2 = ((a[missing, None, :] - centres[None, :, :]) ** 2).sum(axis=-1)
        idx[missing] = np.argmin(d2, axis=1)
    return np.bincount(idx, minlength=cells.shape[0])


def psmm_scale(epsilon: float, variant: Variant = "corrected") -> tuple[float, float]:
    """(σ, recorded sensitivity) of the grid counts' Lap_Z(σ). corrected: σ = 2/ε₃ (rounded
    up) for the replace-one L1 sensitivity 2, so the one measurement costs 2/σ ≤ ε₃.
    paper: Alg 5's Lap_Z(1/ε₃) with the paper's sensitivity 1 (truly 2ε₃)."""
    if variant == "paper":
        return 1.0 / epsilon, 1.0
    return math.nextafter(2.0 / epsilon, math.inf), 2.0


@dataclass(frozen=True)
class NoisyGrid:
    """The measured PSMM grid: ``cells`` (k, see ``psmm_grid``), spacing ``delta``, the
    public n (ν = noisy counts / n) and the one measurement (its value: noisy counts)."""

    cells: np.ndarray = field(repr=False)
    delta: float
    n: int
    measurement: Measurement = field(repr=False)

    @property
    def dims(self) -> int:
        return int(self.cells.shape[1])


def measure_grid(
    a: np.ndarray,
    radius: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    variant: Variant = "corrected",
    *,
    stage: str = "measure",
    max_cells: int | None = None,
) -> NoisyGrid:
    """Alg 5 steps 1–3: the grid (public), its counts, one discrete-Laplace measurement
    ``psmm_counts`` of all of them (``psmm_scale``; the paper variant carries a defect)."""
    n, dims = a.shape
    cells = psmm_grid(radius, dims, delta, max_cells)
    true = grid_counts(a, cells, delta)
    scale, sensitivity = psmm_scale(epsilon, variant)
    defect = None
    if variant == "paper":
        defect = (
            "Alg 5 adds Lap_Z(1/eps) to the grid counts with histogram sensitivity 1 (add/remove); "
            f"under replace-one they change by 2 in L1, so this truly costs {2.0 / scale:.4g} "
            f"(claimed {epsilon:.4g})"
        )
    m = discrete_laplace_mechanism(
        true,
        l1_sensitivity=sensitivity,
        scale=scale,
        epsilon=epsilon,
        rng=rng,
        name="psmm_counts",
        stage=stage,
        defect=defect,
    )
    return NoisyGrid(cells, float(delta), int(n), m)


def closest_probability(nu: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, float]:
    """Alg 5 step 4: the probability vector ν̂ on the cell centres closest to the signed
    ν in bounded-Lipschitz distance, and that distance, by one LP (HiGHS, sparse).

    Metric: ℓ2 between centres (the paper's domain is an ℓ2 ball; V̂ is orthonormal, so
    this is also the ℓ2 distance in ℝ^d). d_BL(μ, ν) = sup{Σ_i f_i(μ_i − ν_i): |f_i| ≤ 1,
    f_i − f_j ≤ d_ij}. Primal LP, variables π_ij ≥ 0 (mass moved from i to j),
    s⁺_i, s⁻_i ≥ 0 (mass destroyed / created), ν̂_i ≥ 0::

        min Σ_ij d_ij π_ij + Σ_i (s⁺_i + s⁻_i)
        s.t. Σ_j π_ij − Σ_j π_ji + s⁺_i − s⁻_i + ν̂_i = ν_i  (each i),   Σ_i ν̂_i = 1.

    For fixed ν̂, the LP dual has a free f_i per balance row and constraints from the
    columns: π_ij gives f_i − f_j ≤ d_ij, s⁺_i gives f_i ≤ 1, s⁻_i gives −f_i ≤ 1, with
    objective Σ_i f_i(ν_i − ν̂_i): exactly the sup over the BL unit ball, so by strong
    duality the flow part equals d_BL(ν, ν̂), and minimising jointly over ν̂ gives the
    closest probability vector. Pairs with d_ij ≥ 2 are left out: their dual constraint
    is implied by |f| ≤ 1 (moving mass that far never beats destroying and creating it).
    ``tests`` check the value against the dual LP. Post-processing of ν."""
    nu = np.asarray(nu, dtype=float)
    size = nu.size
    dist = np.sqrt(((centres[:, None, :] - centres[None, :, :]) ** 2).sum(axis=-1))
    i, j = np.nonzero((dist < 2.0) & ~np.eye(size, dtype=bool))
    p = i.size
    rows = np.concatenate([i, j, np.arange(size), np.arange(size), np.arange(size), np.full(size, size)])
    cols = np.concatenate(
        [np.arange(p), np.arange(p), p + np.arange(size), p + size + np.arange(size)]
        + [p + 2 * size + np.arange(size)] * 2
    )
    vals = np.concatenate([np.ones(p), -np.ones(p), np.ones(size), -np.ones(size), np.ones(2 * size)])
    a_eq = sparse.csc_array((vals, (rows, cols)), shape=(size + 1, p + 3 * size))
    cost = np.concatenate([dist[i, j], np.ones(2 * size), np.zeros(size)])
    res = linprog(cost, A_eq=a_eq, b_eq=np.append(nu, 1.0), bounds=(0, None), method="highs")
    if not res.success:
        raise RuntimeError(f"the PSMM bounded-Lipschitz LP failed: {res.message}")
    nuhat = np.maximum(res.x[p + 2 * size :], 0.0)
    return nuhat / nuhat.sum(), float(res.fun)


def round_measure(weights: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """m points over cells for a probability vector: ⌊m·w⌋ plus one for the largest
    remainders (ties at random); non-negative integers summing to m."""
    w = np.maximum(np.asarray(weights, dtype=float), 0.0)
    w = w / w.sum() if w.sum() > 0 else np.full(w.size, 1.0 / w.size)
    q = np.floor(m * w).astype(np.int64)
    q = np.minimum(q, m)  # guards float overshoot
    while q.sum() > m:
        q[np.argmax(q)] -= 1
    order = np.lexsort((rng.random(w.size), -(m * w - q)))
    q[order[: m - int(q.sum())]] += 1
    return q


def psmm_sample(grid: NoisyGrid, rng: np.random.Generator, m: int | None = None) -> tuple[np.ndarray, float]:
    """Alg 5 steps 4–5: ν = noisy counts / n, ν̂ = ``closest_probability``, m (default n)
    points by ``round_measure``, uniform inside their cells (as PMM's leaves). Returns
    the points and d_BL(ν, ν̂). Post-processing of the measurement."""
    nu = np.asarray(grid.measurement.value, dtype=float) / grid.n
    nuhat, dist = closest_probability(nu, (grid.cells + 0.5) * grid.delta)
    counts = round_measure(nuhat, grid.n if m is None else m, rng)
    k = np.repeat(grid.cells, counts, axis=0)
    return (k + rng.random(k.shape)) * grid.delta, dist


def psmm_points(grid: NoisyGrid, rng: np.random.Generator, m: int | None = None) -> np.ndarray:
    """The points of ``psmm_sample``."""
    return psmm_sample(grid, rng, m)[0]


def psmm(
    a: np.ndarray,
    radius: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    variant: Variant = "corrected",
    m: int | None = None,
) -> tuple[np.ndarray, tuple[Measurement, ...]]:
    """Alg 5 end to end on points a in the ball ‖a‖ ≤ R: (synthetic points, measurements)."""
    grid = measure_grid(a, radius, epsilon, delta, rng, variant)
    return psmm_points(grid, rng, m), (grid.measurement,)


@dataclass(frozen=True)
class SubroutineChoice:
    """Which Alg 1 subroutine runs and why (public: d, d', ε₃, n, R). ``cells`` is |L|
    when it was computed (``cells_exact`` False: a lower bound), ``delta`` the spacing."""

    name: Literal["pmm", "psmm"]
    note: str
    delta: float | None = None
    cells: int | None = None
    cells_exact: bool = True


def choose_subroutine(
    subroutine: Subroutine,
    d: int,
    dims: int,
    epsilon: float,
    n: int,
    radius: float,
    psmm_cells: int | None = None,
) -> SubroutineChoice:
    """Stage 3's subroutine. "pmm": PMM. "psmm": PSMM, or ValueError if |L| >
    ``PSMM_MAX_CELLS``. "auto": PSMM when d' ≥ 3 (the paper's choice) and the grid fits,
    else PMM. δ is the paper's or, with ``psmm_cells``, the larger of it and
    ``psmm_delta_for_cells`` (at most that many cells, never finer than the paper's)."""
    if subroutine not in ("pmm", "psmm", "auto"):
        raise ValueError(f"params.subroutine ({subroutine!r}) must be 'pmm', 'psmm' or 'auto'")
    if subroutine == "pmm":
        return SubroutineChoice("pmm", "given in the spec")
    if subroutine == "auto" and dims < 3:
        return SubroutineChoice("pmm", f"auto: d' = {dims} < 3, so PMM (the paper's choice)")
    delta = psmm_delta(d, dims, epsilon, n)
    coarsened = ""
    if psmm_cells is not None and (1 << dims) <= psmm_cells:
        target = psmm_delta_for_cells(radius, dims, psmm_cells)
        if target > delta:
            delta, coarsened = target, f" (delta coarsened from the paper's by psmm_cells = {psmm_cells})"
    cells, exact = psmm_grid_size(radius, dims, delta)
    size = f"{cells}" if exact else f"at least {cells}"
    if exact and cells <= PSMM_MAX_CELLS:
        note = "given in the spec" if subroutine == "psmm" else f"auto: d' = {dims} >= 3 and the grid fits"
        return SubroutineChoice("psmm", note + coarsened, delta, cells, exact)
    why = (
        f"the PSMM grid (delta = {delta:.4g}, d' = {dims}, R = {radius:.4g}, eps_measure * n = "
        f"{epsilon * n:.4g}) has {size} cells, more than PSMM_MAX_CELLS = {PSMM_MAX_CELLS}"
    )
    if subroutine == "psmm":
        raise ValueError(f"params.subroutine ('psmm'): {why}; use 'auto' or 'pmm'")
    return SubroutineChoice("pmm", f"auto: {why}, so PMM", delta, cells, exact)


# ---------------------------------------------------------------- Alg 1


def _check_rows(x: np.ndarray) -> tuple[int, int]:
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x (shape {x.shape}) must be an (n, d) matrix with n >= 2")
    if not (np.all(x >= 0.0) and np.all(x <= 1.0)):
        raise ValueError("x must have every entry in [0, 1] (the sensitivities assume it)")
    return x.shape


def _measure(
    x: np.ndarray,
    projection: Projection,
    epsilon: float,
    rng: np.random.Generator,
    variant: Variant,
    subroutine: Subroutine,
    depth: int | None,
    psmm_cells: int | None = None,
) -> tuple[SubroutineChoice, NoisyTree | NoisyGrid, int | None]:
    """Stage 3's measurement: the subroutine choice, the measured tree or grid, and r
    (None for PSMM)."""
    n, d = x.shape
    choice = choose_subroutine(subroutine, d, projection.dims, epsilon, n, projection.radius, psmm_cells)
    a = project(x, projection)
    if choice.name == "psmm":
        grid = measure_grid(
            a, projection.radius, epsilon, choice.delta, rng, variant, max_cells=PSMM_MAX_CELLS
        )
        return choice, grid, None
    r = depth if depth is not None else default_depth(epsilon, n)
    return choice, measure_tree(a, projection.radius, epsilon, r, rng, variant), r


def _measured_points(
    measured: NoisyTree | NoisyGrid, radius: float, rng: np.random.Generator, m: int | None
) -> tuple[np.ndarray, float | None]:
    """Post-processing of stage 3: points (and d_BL(ν, ν̂) for PSMM)."""
    if isinstance(measured, NoisyGrid):
        return psmm_sample(measured, rng, m)
    return pmm_points(measured, radius, rng, m), None


def synthesize(
    x: np.ndarray,
    *,
    epsilon: float,
    dims: int | None,
    rng: np.random.Generator,
    variant: Variant = "corrected",
    m: int | None = None,
    depth: int | None = None,
    subroutine: Subroutine = "pmm",
    psmm_cells: int | None = None,
) -> tuple[np.ndarray, dict]:
    """Alg 1 on a numeric matrix in [0, 1]^d with ε split ⅓ each (rounded down).
    Returns Y ((m or the PMM root count or, for PSMM, n) × d, in [0, 1]^d) and ``info``:
    the public facts (d', whether adaptive, R, r (None for PSMM), the subroutine, |L|
    and δ (None for PMM unless "auto" computed them)) and every measurement."""
    n, _ = _check_rows(x)
    e1, e2, e3 = split_budget(epsilon, [1.0, 1.0, 1.0])
    cov = private_covariance(x, e1, rng)
    mean = private_mean(x, e2, rng)
    projection = private_projection(cov, mean, dims, e3, n)
    choice, measured, r = _measure(x, projection, e3, rng, variant, subroutine, depth, psmm_cells)
    points, bl = _measured_points(measured, projection.radius, rng, m)
    y = lift(points, projection)
    stage3 = (measured.measurement,) if isinstance(measured, NoisyGrid) else measured.measurements
    info = {
        "dims": projection.dims,
        "adaptive": projection.adaptive,
        "radius": projection.radius,
        "depth": r,
        "subroutine": choice.name,
        "subroutine_note": choice.note,
        "grid_cells": choice.cells,
        "grid_delta": choice.delta,
        "bl_distance": bl,
        "projection": projection,
        "measurements": (cov, mean, *stage3),
    }
    return y, info


# ---------------------------------------------------------------- the four stages


def _encode_stage(rows: MixedRows, schema: Schema, plan: BudgetPlan, params: PrivatePCAParams, rng) -> Stage:
    x = design(schema).encode(rows)
    cov = private_covariance(x, plan.stage("covariance").epsilon, rng, stage="covariance")
    return Stage((x, cov), (cov,), {"design_width": x.shape[1]})


def _estimate_stage(
    state: tuple[np.ndarray, Measurement], plan: BudgetPlan, params: PrivatePCAParams, rng
) -> Stage:
    x, cov = state
    n = x.shape[0]
    mean = private_mean(x, plan.stage("mean").epsilon, rng, stage="mean")
    e3 = plan.stage("measure").epsilon
    projection = private_projection(cov, mean, params.dims, e3, n)
    choice, measured, r = _measure(
        x, projection, e3, rng, params.variant, params.subroutine, params.depth, params.psmm_cells
    )
    psmm_used = isinstance(measured, NoisyGrid)
    measurements = (measured.measurement,) if psmm_used else measured.measurements
    facts = {
        "dims": projection.dims,
        "dims_note": (
            "chosen by the paper's section 6 rule from the noisy covariance (post-processing)"
            if projection.adaptive
            else "given in the spec"
        ),
        "radius": projection.radius,
        "subroutine": choice.name,
        "subroutine_note": choice.note,
        "grid_cells": choice.cells,
        "grid_cells_exact": choice.cells_exact,
        "grid_delta": choice.delta,
        "depth": r,
        "depth_note": (
            "not used (PSMM)"
            if psmm_used
            else "given in the spec"
            if params.depth is not None
            else "ceil(log2(eps_measure * n))"
        ),
        "level_scales": [] if psmm_used else [m.scale for m in measurements],
        "cell_scale": measurements[0].scale if psmm_used else None,
        "root_count_note": (
            "n, public under replace-one: PSMM divides the noisy counts by it"
            if psmm_used
            else "n, public under replace-one, released without noise"
            if params.variant == "corrected"
            else "noisy (paper variant)"
        ),
    }
    return Stage((projection, measured), (mean, *measurements), facts)


def _sample_stage(
    state: tuple[Projection, NoisyTree | NoisyGrid], params: PrivatePCAParams, m: int, rng
) -> Stage:
    projection, measured = state
    points, bl = _measured_points(measured, projection.radius, rng, m)
    facts = {"rows": m} if bl is None else {"rows": m, "bl_distance": bl}
    return Stage(lift(points, projection), facts=facts)


def _decode_stage(y: np.ndarray, schema: Schema, params: PrivatePCAParams, rng) -> MixedRows:
    return design(schema).decode(y)


def sensitivities(schema: Schema, params: PrivatePCAParams, n: int, facts) -> dict[str, Sensitivity]:
    """Every statistic private_pca measures (corrected; pure ε, L1 only), from public
    facts: d = the design width, n, and the subroutine and depth the estimate stage
    reported (chosen from public values and the noisy covariance). The covariance
    (``covariance_sensitivity``, the paper's 3d²/n, valid but loose), the mean (d/n,
    attained by 0 vs 1 in every coordinate, so only when no nominal has 3+ categories (a
    record moves 2 of its one-hot coordinates) and every integer column's bounds are
    integers) and either one count vector per PMM level or PSMM's grid counts (a
    histogram under replace-one: Δ₁ = 2, attained)."""
    d = design(schema).width
    mean_attained = all(
        c.n_bins == 2
        if c.kind == "nominal"
        else not getattr(c, "integer", False) or (float(c.lower).is_integer() and float(c.upper).is_integer())
        for c in schema.columns
    )
    out = {
        "covariance": Sensitivity("covariance", covariance_sensitivity(n, d), None),
        "mean": Sensitivity("mean", d / n, None, tight=mean_attained),
    }
    if facts["subroutine"] == "psmm":
        out["psmm_counts"] = Sensitivity("measure", psmm_scale(1.0)[1], None, tight=True)
    else:
        sens = level_plan(1.0, facts["depth"], facts["dims"], "corrected").sensitivity
        for j in range(1, facts["depth"] + 1):
            out[f"pmm_level_{j}"] = Sensitivity("measure", sens, None, tight=True)
    return out


def _check(schema: Schema, params: PrivatePCAParams) -> None:
    width = design(schema).width
    if params.dims is not None and params.dims > width:
        raise ValueError(f"params.dims ({params.dims}) must be at most the design width ({width})")


def _defects(params: PrivatePCAParams) -> list[str]:
    if params.variant == "corrected":
        return []
    pmm_defects = [
        "PMM (Alg 4) noise scales sigma_j = eps^-1 * 2^((1-1/d')(r-j)/2) are not normalised: "
        "the tree costs eps * S with S = sum_k 2^(-k(1-1/d')/2) > 1 (about 5.95 for d' = 2, r = 16)",
        "PMM counts use histogram sensitivity 1 (add/remove); under replace-one it is 2 per level, "
        "doubling the true cost again",
    ]
    psmm_defect = (
        "PSMM (Alg 5) adds Lap_Z(1/eps) to the grid counts, i.e. histogram sensitivity 1 (add/remove); "
        "under replace-one the counts change by 2 in L1, so they truly cost 2 * eps"
    )
    if params.subroutine == "pmm":
        return pmm_defects
    if params.subroutine == "psmm":
        return [psmm_defect]
    return [*pmm_defects, psmm_defect + " (when 'auto' selects PSMM)"]


SYNTHESIZER = Synthesizer(
    name="private_pca",
    summary=(
        "private centred covariance -> private top-d' subspace and mean -> private hierarchical "
        "counts (PMM) or grid counts with a bounded-Lipschitz LP (PSMM) of the projected rows -> "
        "points in the cells, lifted back and clipped"
    ),
    notions=("pure",),
    params_type=PrivatePCAParams,
    stage_weights=lambda schema, params: dict(STAGE_WEIGHTS),
    defects=_defects,
    keeps_row_order=False,
    spends={"encode": ("covariance",), "estimate": ("mean", "measure")},
    encode=_encode_stage,
    estimate=_estimate_stage,
    sample=_sample_stage,
    decode=_decode_stage,
    sensitivities=sensitivities,
    check=_check,
    min_rows=lambda schema, params: 2,  # _check_rows: the centred covariance needs n >= 2
)
