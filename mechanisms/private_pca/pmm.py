"""``private_pca`` stage 3 by PMM (Alg 4): the binary hierarchical partition of
[−R, R]^{d'}, the per-level noise plan, the noisy tree, consistency and the synthetic
points. Proofs: ``docs/proofs/private_pca.md``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.accounting import split_budget
from dprelease.mechanisms.primitives import Measurement, discrete_laplace_mechanism, discrete_laplace_noise
from dprelease.mechanisms.private_pca.params import MAX_DEPTH, Variant

__all__ = [
    "LevelPlan",
    "NoisyTree",
    "allocate",
    "consistent_counts",
    "default_depth",
    "discrete_laplace",
    "leaf_points",
    "level_counts",
    "level_plan",
    "measure_tree",
    "paper_defects",
    "pmm",
    "pmm_points",
]


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
    """Lap_Z(σ): P(z) ∝ e^{−|z|/σ}, the noise alone (no statistic, no record).

    Sensitivity: the caller's; an integer query of L1 sensitivity Δ.
    Noise: discrete Laplace of scale σ, drawn by ``primitives.discrete_laplace_noise``:
    OpenDP's exact sampler for a ``VettedRNG``, G₁ − G₂ with G ~ Geometric(1 − e^{−1/σ})
    for a seeded numpy generator.
    Privacy: adding it to that query is (Δ/σ)-DP.
    Reference: He, Strohmer, Vershynin, Zhu, Alg 4 (Lap_Z); Canonne–Kamath–Steinke 2020.
    """
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
    """Alg 4 steps 1–2: one discrete-Laplace measurement ``pmm_level_j`` of the true
    counts of every cell of level j (``level_counts``), per level.

    Sensitivity: Δ₁ = 2 per level under replace-one (a point leaves one cell and enters
    another); the paper variant records its 1 (``level_plan``).
    Noise: Lap_Z(σ_j), σ_j from ``level_plan``: the paper's shape 2^{(1/2)(1−1/d')(r−j)},
    scaled so Σ_j 2/σ_j ≤ ε₃.
    Privacy: ε₃-DP for the whole tree (basic composition over levels 1..r; the root n
    is public).
    Reference: He, Strohmer, Vershynin, Zhu, Alg 4 (PMM), after [31].
    Corrected: the paper's σ_j are not normalised (the tree costs ε₃·S, S > 1) and use
    sensitivity 1 with a noisy root; the ``paper`` variant keeps all three and records
    each level's true cost in its ``defect`` (``paper_defects``).
    """
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
