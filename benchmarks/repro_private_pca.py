"""Reproduction benchmark of ``private_pca`` (He, Strohmer, Vershynin, Zhu): W1 against n.

The paper has no experiments; its §4-style protocol is proposed in
``../shared/notes/seeds/002-private-pca-lowdim.md`` and this script follows it (ours).
Data: n points on an affine d'-dimensional subspace inside [0, 1]^d (x = c + U z, z
uniform in a box, U a fixed random orthonormal d×d' basis). Metric: W1 with the ℓ∞
(Chebyshev) ground metric, the metric of Theorem 1.2, computed exactly between two
equal-size subsamples (k = min(n, m, 2000) points each) by ``linear_sum_assignment``.
Methods: Alg 1 (``PrivatePCA.fit`` in one call on a schema of d continuous [0, 1] columns,
the plan from ``plan_budget``, n output rows) ``corrected`` (d' given), ``adaptive`` (§6
rule picks d'), ``paper`` (literal PMM noise, not DP) and ``oracle`` (non-private PCA and
mean, then the same PMM at ε₃ = ε/3: isolates the cost of private subspace estimation).
The log–log slope of W1 against n is compared with Theorem 1.2's rate.

``run(quick)`` returns the JSON-serialisable figures; ``render/private_pca.py`` writes the
section. ``.venv/bin/python benchmarks/repro_private_pca.py [--quick]`` runs it and prints the section.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import scipy
from common import git, load_avg, run_command, stream_rng, summary
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import MixedRows

D = 10
N_FULL = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000)
N_QUICK = (1_000, 10_000, 100_000)
SEEDS_FULL = 10
SEEDS_QUICK = 2
FLOOR_SEEDS = 3
"""Seeds of the subsampling floors (they vary little; each costs two assignments)."""
K = 2_000
"""Points per side of the exact W1 (the assignment is O(k³))."""
BASE_SEED = 20_240_002
"""First entry of every ``SeedSequence`` key: (BASE_SEED, stream, d', n, seed, ...)."""
BOOTSTRAP = 2_000
BUDGET_S = {True: 100.0, False: 840.0}
"""Wall-time budgets (quick, full): an extra configuration is skipped when the time
measured so far says it would overrun (the main one always runs)."""
ALL_METHODS = ("corrected", "adaptive", "paper", "oracle")
STREAMS = {"basis": 0, "data": 1, "fresh": 2, "sub": 3, "floor": 4, "mechanism": 5, "bootstrap": 6}
STATS = ("mean", "sd", "min", "max", "values")
"""What is kept of each per-seed figure (``common.summary``)."""


@dataclass(frozen=True)
class Config:
    """One W1-against-n sweep: subspace dimension d', ε, methods, seeds."""

    dims: int
    epsilon: float
    methods: tuple[str, ...]
    seeds: int
    main: bool = False

    @property
    def label(self) -> str:
        return f"d' = {self.dims}, ε = {self.epsilon:g}"


def configs(quick: bool) -> list[Config]:
    """The main sweep (d' = 2, ε = 1, all methods), then the extras if time allows."""
    if quick:
        return [Config(2, 1.0, ALL_METHODS, SEEDS_QUICK, main=True)]
    return [
        Config(2, 1.0, ALL_METHODS, SEEDS_FULL, main=True),
        Config(3, 1.0, ("corrected", "oracle"), 3),
        Config(2, 5.0, ("corrected", "oracle"), 3),
    ]


# ---------------------------------------------------------------- seeds and data


rng_for = partial(stream_rng, BASE_SEED, STREAMS)
"""``rng_for(stream, *key)``: the generator keyed by (BASE_SEED, stream, *key)."""


def eps_key(epsilon: float) -> int:
    """ε as an integer seed key (ε × 1000)."""
    return round(epsilon * 1000)


@dataclass(frozen=True)
class Subspace:
    """x = centre + basis @ z with z uniform in [−half_width, half_width]^{d'}."""

    basis: np.ndarray
    centre: np.ndarray
    half_width: float

    @property
    def dims(self) -> int:
        return int(self.basis.shape[1])


def subspace(d: int, dims: int) -> Subspace:
    """A fixed random orthonormal d×d' basis U (QR of a Gaussian matrix), centre ½·1 and
    the widest box with every point in [0, 1]^d: |(Uz)_k| ≤ h‖U_k‖₁ ≤ ½ for
    h = ½ / max_k ‖U_k‖₁ (row ℓ1 norms)."""
    q, _ = np.linalg.qr(rng_for("basis", d, dims).standard_normal((d, dims)))
    half = 0.5 / float(np.abs(q).sum(axis=1).max())
    return Subspace(q, np.full(d, 0.5), half)


def sample(space: Subspace, n: int, rng: np.random.Generator) -> np.ndarray:
    """n points of the subspace distribution, checked to lie in [0, 1]^d."""
    z = rng.uniform(-space.half_width, space.half_width, size=(n, space.dims))
    x = space.centre + z @ space.basis.T
    if not (x.min() >= 0.0 and x.max() <= 1.0):
        raise AssertionError("subspace data left [0, 1]^d")
    return x


def describe(space: Subspace) -> dict[str, Any]:
    """Public facts of the data: box, covariance eigenvalues (h²/3 for each of the d')."""
    x = sample(space, 100_000, rng_for("data", 0, space.dims, 0))
    eig = np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False)))[::-1]
    return {
        "dims": space.dims,
        "half_width": space.half_width,
        "signal_variance": space.half_width**2 / 3,
        "row_l1_max": float(np.abs(space.basis).sum(axis=1).max()),
        "eigenvalues_100k": [float(v) for v in eig[: space.dims + 1]],
        "min_coordinate_100k": float(x.min()),
        "max_coordinate_100k": float(x.max()),
    }


# ---------------------------------------------------------------- W1


def subsample(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k rows without replacement (all rows, in order, when k ≥ len(x))."""
    return x if k >= len(x) else x[rng.choice(len(x), size=k, replace=False)]


def w1_chebyshev(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W1 between two uniform empirical measures of equal size, ℓ∞ ground metric:
    the optimal plan is a permutation (Birkhoff), found by ``linear_sum_assignment``.

    Speed only: the solver runs on the cost minus per-x then per-y minima, with y as rows
    (subtracting row/column constants leaves the optimal permutation unchanged; this is
    2–4× faster on far-apart samples); the reported cost is the original one."""
    if len(x) != len(y):
        raise ValueError(f"equal sizes needed, got {len(x)} and {len(y)}")
    cost = cdist(y, x, "chebyshev")
    reduced = cost - cost.min(axis=0, keepdims=True)
    reduced -= reduced.min(axis=1, keepdims=True)
    rows, cols = linear_sum_assignment(reduced)
    return float(cost[rows, cols].mean())


def w1_subsampled(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> tuple[float, int]:
    """W1 between k-point subsamples of x and y, k = min(K, len(x), len(y))."""
    k = min(K, len(x), len(y))
    return w1_chebyshev(subsample(x, k, rng), subsample(y, k, rng)), k


def floors(space: Subspace, x: np.ndarray, n: int, seed: int) -> dict[str, float]:
    """What a perfect mechanism scores with our estimator. ``copy``: Y = X (two independent
    k-subsamples of the same data; 0 when n ≤ K). ``fresh``: Y a fresh n-sample of the same
    distribution (the sampling error a perfect generative model still has)."""
    rng = rng_for("floor", space.dims, n, seed)
    copy, _ = w1_subsampled(x, x, rng)
    fresh, _ = w1_subsampled(x, sample(space, n, rng_for("fresh", space.dims, n, seed)), rng)
    return {"copy": copy, "fresh": fresh}


# ---------------------------------------------------------------- methods


def _pp() -> Any:
    """The mechanism module, imported late (the benchmark's helpers work without it)."""
    from dprelease.mechanisms import private_pca

    return private_pca


def subspace_error(basis_hat: np.ndarray, basis: np.ndarray) -> float:
    """sin of the largest principal angle: ‖V̂V̂ᵀ − UUᵀ‖₂ (equal dimensions), else
    ‖(I − V̂V̂ᵀ)U‖₂ (how much of the true subspace V̂ misses)."""
    if basis_hat.shape == basis.shape:
        return float(np.linalg.norm(basis_hat @ basis_hat.T - basis @ basis.T, 2))
    resid = basis - basis_hat @ (basis_hat.T @ basis)
    return float(np.linalg.norm(resid, 2))


def box(x: np.ndarray) -> tuple[Schema, MixedRows]:
    """The data as the mechanism takes it: a schema of d ``Continuous`` columns with the
    public bounds [0, 1] of the cube (so its design matrix is x itself, and the output's
    ``unit`` is Y) and the rows in its numeric view."""
    schema = Schema(tuple(Continuous(f"x{k}", 0.0, 1.0) for k in range(x.shape[1])))
    bins = np.column_stack([c.to_bins(x[:, k]) for k, c in enumerate(schema.columns)])
    return schema, MixedRows(bins, x)


def plan(schema: Schema, params: Any, epsilon: float) -> Any:
    """The pure ε-DP plan of the module's stage weights (ε/3 each), as a release builds it."""
    return plan_budget("pure", epsilon, 0.0, _pp().PrivatePCA().stage_weights(schema, params))


def oracle(x: np.ndarray, dims: int, epsilon: float, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
    """Non-private PCA and mean (exact subspace), then the corrected PMM at the plan's
    ε₃ = ε/3 and the same lift and clip: the error left once the subspace is free."""
    pp = _pp()
    n, d = x.shape
    schema, _ = box(x[:1])
    e3 = plan(schema, pp.PrivatePCAParams(), epsilon).stage("measure").epsilon
    mean = x.mean(axis=0)
    basis = pp.top_eigenvectors(pp.covariance(x), dims)
    projection = pp.Projection(basis, mean, math.sqrt(d) + float(np.linalg.norm(mean)), False)
    depth = pp.default_depth(e3, n)
    tree = pp.measure_tree(pp.project(x, projection), projection.radius, e3, depth, rng, "corrected")
    return pp.lift(pp.pmm_points(tree, projection.radius, rng), projection), projection


def run_method(
    method: str, x: np.ndarray, dims: int, epsilon: float, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    """One release; returns (Y, facts: seconds, d' used, output rows, V̂). Alg 1 is
    ``PrivatePCA.fit`` in one call (n output rows; timed from the rows in the schema's
    numeric view, decode included); the oracle is not a release."""
    pp = _pp()
    if method == "oracle":
        t0 = time.perf_counter()
        y, projection = oracle(x, dims, epsilon, rng)
    else:
        variant = "paper" if method == "paper" else "corrected"
        params = pp.PrivatePCAParams(variant=variant, dims=None if method == "adaptive" else dims)
        schema, rows = box(x)
        t0 = time.perf_counter()
        fit = pp.PrivatePCA().fit(rows, schema, plan(schema, params, epsilon), params, m=len(x), rng=rng)
        y, projection = fit.rows.unit, fit.stages[1].state.projection
    seconds = time.perf_counter() - t0
    return y, {"seconds": seconds, "dims": projection.dims, "rows": len(y), "basis": projection.basis}


# ---------------------------------------------------------------- the sweep


def sweep_point(cfg: Config, space: Subspace, n: int, floor_seeds: int) -> dict[str, Any]:
    """All seeds and methods at one n: W1, floors, wall time, d', subspace error."""
    per: dict[str, dict[str, list]] = {
        m: {"w1": [], "seconds": [], "dims": [], "rows": [], "k": [], "sin": []} for m in cfg.methods
    }
    fl: dict[str, list[float]] = {"copy": [], "fresh": []}
    for seed in range(cfg.seeds):
        x = sample(space, n, rng_for("data", n, space.dims, seed))
        if seed < floor_seeds:
            for key, val in floors(space, x, n, seed).items():
                fl[key].append(val)
        for i, method in enumerate(cfg.methods):
            key = (space.dims, n, seed, eps_key(cfg.epsilon), ALL_METHODS.index(method))
            y, facts = run_method(method, x, cfg.dims, cfg.epsilon, rng_for("mechanism", *key))
            w1, k = w1_subsampled(x, y, rng_for("sub", space.dims, n, seed, i))
            rec = per[method]
            rec["w1"].append(w1)
            rec["k"].append(k)
            rec["seconds"].append(facts["seconds"])
            rec["dims"].append(facts["dims"])
            rec["rows"].append(facts["rows"])
            rec["sin"].append(subspace_error(facts["basis"], space.basis))
    methods = {
        m: {
            "w1": summary(r["w1"], STATS),
            "seconds": summary(r["seconds"], STATS),
            "seconds_median": float(np.median(r["seconds"])),
            "dims": [int(v) for v in r["dims"]],
            "rows": [int(v) for v in r["rows"]],
            "k": [int(v) for v in r["k"]],
            "subspace_sin": summary(r["sin"], STATS),
        }
        for m, r in per.items()
    }
    floor = {key: summary(v, STATS) for key, v in fl.items()} if fl["copy"] else None
    return {"n": n, "floor": floor, "methods": methods}


def theory_terms(n: int, d: int, dims: int, epsilon: float) -> dict[str, float]:
    """Theorem 1.2's n-dependent terms with constant 1 (the tail term is 0 on the
    subspace): √(d'd^{2.5}/(εn)) (private PCA) and √(d/d')(εn)^{−1/d'} (synthesis)."""
    return {
        "pca": math.sqrt(dims * d**2.5 / (epsilon * n)),
        "synthesis": math.sqrt(d / dims) * (epsilon * n) ** (-1.0 / dims),
    }


def fit_slope(ns: Sequence[int], w1: Sequence[Sequence[float]], rng: np.random.Generator) -> dict[str, Any]:
    """Least-squares slope of log(mean W1 over seeds) against log n, and its standard
    error by a bootstrap over seeds (resampled independently at each n)."""
    x = np.log(np.asarray(ns, dtype=float))
    means = np.array([np.mean(v) for v in w1])
    slope = float(np.polyfit(x, np.log(means), 1)[0])
    if min(len(v) for v in w1) < 2:
        return {"slope": slope, "se": None, "n_from": int(ns[0]), "n_to": int(ns[-1])}
    boots = np.empty(BOOTSTRAP)
    arrays = [np.asarray(v, dtype=float) for v in w1]
    for b in range(BOOTSTRAP):
        m = [a[rng.integers(0, a.size, a.size)].mean() for a in arrays]
        boots[b] = np.polyfit(x, np.log(m), 1)[0]
    return {"slope": slope, "se": float(boots.std(ddof=1)), "n_from": int(ns[0]), "n_to": int(ns[-1])}


def slopes(cfg: Config, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per method: the slope over the whole n grid and over its upper half."""
    ns = [r["n"] for r in rows]
    half = len(ns) // 2
    out: dict[str, Any] = {}
    for m in cfg.methods:
        w1 = [r["methods"][m]["w1"]["values"] for r in rows]
        rng = rng_for("bootstrap", cfg.dims, eps_key(cfg.epsilon), ALL_METHODS.index(m))
        out[m] = {"all": fit_slope(ns, w1, rng), "upper": fit_slope(ns[half:], w1[half:], rng)}
    fl = [r["floor"]["fresh"]["values"] for r in rows if r["floor"]]
    if len(fl) == len(ns):
        rng = rng_for("bootstrap", cfg.dims, eps_key(cfg.epsilon), 99)
        out["floor_fresh"] = {"all": fit_slope(ns, fl, rng), "upper": fit_slope(ns[half:], fl[half:], rng)}
    return out


def run_config(cfg: Config, ns: Sequence[int], floor_cache: dict) -> dict[str, Any]:
    """One sweep over the n grid; floors depend on (d', n, seed) only and are shared."""
    space = subspace(D, cfg.dims)
    t0 = time.perf_counter()
    rows = []
    for n in ns:
        cached = floor_cache.get((cfg.dims, n))
        point = sweep_point(cfg, space, n, 0 if cached else min(FLOOR_SEEDS, cfg.seeds))
        point["floor"] = point["floor"] or cached
        floor_cache[(cfg.dims, n)] = point["floor"]
        point["theory"] = theory_terms(n, D, cfg.dims, cfg.epsilon)
        rows.append(point)
        elapsed = time.perf_counter() - t0
        print(f"  {cfg.label}: n = {n:,} done at {elapsed:.0f} s", file=sys.stderr, flush=True)
    return {
        "dims": cfg.dims,
        "epsilon": cfg.epsilon,
        "methods": list(cfg.methods),
        "seeds": list(range(cfg.seeds)),
        "main": cfg.main,
        "rows": rows,
        "slopes": slopes(cfg, rows),
        "elapsed_s": time.perf_counter() - t0,
    }


def _machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "load_avg_1m": load_avg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "commit": git("rev-parse", "--short", "HEAD"),
    }


def _assignments(methods: int, seeds: int, new_floors: bool) -> int:
    """Assignments (W1 computations) per n: one per method and seed, two per floor seed."""
    return methods * seeds + (2 * min(FLOOR_SEEDS, seeds) if new_floors else 0)


def _cost_estimate(done: list[dict[str, Any]], cfg: Config, floor_dims: set[int]) -> float:
    """Seconds a configuration should take, scaled from the main one's time per W1."""
    main = done[0]
    per_unit = main["elapsed_s"] / _assignments(len(main["methods"]), len(main["seeds"]), True)
    return per_unit * _assignments(len(cfg.methods), cfg.seeds, cfg.dims not in floor_dims)


def run(quick: bool = False) -> dict[str, Any]:
    """The whole benchmark; JSON-serialisable figures (every rendered number, raw per-seed
    values, seeds, wall times)."""
    t0 = time.perf_counter()
    ns = N_QUICK if quick else N_FULL
    machine = _machine()
    cfgs = configs(quick)
    data = {str(c.dims): describe(subspace(D, c.dims)) for c in cfgs}
    done: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    floor_cache: dict = {}
    for cfg in cfgs:
        if done:
            estimate = _cost_estimate(done, cfg, {c["dims"] for c in done})
            if time.perf_counter() - t0 + estimate > BUDGET_S[quick]:
                skipped.append({"label": cfg.label, "estimate_s": estimate})
                continue
        done.append(run_config(cfg, ns, floor_cache))
    return {
        "quick": quick,
        "command": run_command("private_pca", quick),
        "d": D,
        "n_grid": list(ns),
        "k": K,
        "base_seed": BASE_SEED,
        "floor_seeds": FLOOR_SEEDS,
        "bootstrap": BOOTSTRAP,
        "budget_s": BUDGET_S[quick],
        "data": data,
        "configs": done,
        "skipped": skipped,
        "machine": machine,
        "wall_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("private_pca", run))
