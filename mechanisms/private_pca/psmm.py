"""``private_pca`` stage 3 by PSMM (Alg 5): the grid of cells meeting the ball, its noisy
counts, the closest probability vector in bounded-Lipschitz distance (an LP), rounding
and the synthetic points; and the choice between PMM and PSMM. Proofs:
``docs/proofs/private_pca.md``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from dprelease.mechanisms.primitives import Measurement, discrete_laplace_mechanism
from dprelease.mechanisms.private_pca.params import PSMM_MAX_CELLS, Subroutine, Variant

__all__ = [
    "NoisyGrid",
    "SubroutineChoice",
    "choose_subroutine",
    "closest_probability",
    "grid_counts",
    "measure_grid",
    "psmm",
    "psmm_delta",
    "psmm_delta_for_cells",
    "psmm_grid",
    "psmm_grid_size",
    "psmm_points",
    "psmm_sample",
    "psmm_scale",
    "round_measure",
]


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
    """Alg 5 steps 1–3: the grid (public, ``psmm_grid``), its counts (``grid_counts``),
    one discrete-Laplace measurement ``psmm_counts`` of all of them.

    Sensitivity: Δ₁ = 2 under replace-one (each point is counted in exactly one cell:
    one cell −1, another +1; attained); the paper variant records its 1 (``psmm_scale``).
    Noise: Lap_Z(σ) per cell, σ = 2/ε₃ rounded up (paper: 1/ε₃).
    Privacy: ε₃-DP (2/σ ≤ ε₃); the paper variant truly costs 2ε₃, stated in its defect.
    Reference: He, Strohmer, Vershynin, Zhu, Alg 5 (PSMM) steps 1–3.
    Corrected: Alg 5's Lap_Z(1/ε₃) assumes add/remove sensitivity 1; we use Lap_Z(2/ε₃).
    """
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
