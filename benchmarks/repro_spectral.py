"""Reproduction of spectral anonymization SA_A, A ∈ {P, J, O} (Perkonoja & Virta, PSD 2024).

The paper's simulation study (§3) on its grid n ∈ {25, …, 1600}, p ∈ {2, 3, 6} and its four
data sets: X1 ~ N_p(3·1, diag(p, …, 1)), X2 ~ N_p(3·1, I) (Assumption 1 violated), X3 with
independent Poisson(p, …, 1) columns and X4 with independent Poisson(1, …, 1) columns.

* Utility (§3.1): RE = ‖Cov_M(√n(θ̂_A − θ)) − G_A‖_F / ‖G_A‖_F over M replicates, for the
  mean (G = Σ for the original data and P, 2Σ for J and O; Theorem 1) and for vec(S) with
  divisor n (G0 for the original data, G_SA for P, J and O; Theorem 2). θ are the true
  generating values (Σ = diag(λ) for Poisson). Cov_M is ``np.cov`` (centred at the replicate
  mean, divisor M − 1).
* Privacy (§3.2): distance-based record linkage in original units (Euclidean, nearest over
  all original rows): EUC, the match rate (distance < 1e-6) and the correct-link rate
  (the nearest original row is row i), compared with 2^{−p} (J) and n^{1−p} (P).
* Cost (§4): ``anonymize`` at n = 1000, p = 6 for P, J, O (sphere sampler) and O with the
  paper's full Haar matrices, beside the paper's Ryzen 5 5600X timings.

``run(quick)`` returns the JSON-serialisable figures; ``render/spectral.py`` writes the section.
``.venv/bin/python benchmarks/repro_spectral.py [--quick]`` runs it and prints the section.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from common import machine, run_command, stream_rng, timed
from scipy.spatial import KDTree
from threadpoolctl import threadpool_limits

P_GRID = (2, 3, 6)
REPS = {
    False: {25: 3_000, 50: 3_000, 100: 3_000, 200: 3_000, 400: 3_000, 800: 2_000, 1600: 1_500},
    True: {25: 500, 100: 500, 400: 500},
}
"""Replicates M per n (full, quick); the paper uses M = 10,000 everywhere."""
LINK_REPS = {
    False: {25: 1_000, 50: 1_000, 100: 500, 200: 300, 400: 200, 800: 100, 1600: 50},
    True: {25: 300, 100: 200, 400: 60},
}
"""Linkage runs on the first min(M, this) replicates of each cell (a k-d tree per data set)."""
TIE_TOL = 1e-9
"""Row i counts as 'among the nearest' when ‖x_A,i − x_i‖ ≤ d_i + TIE_TOL (Poisson rows tie)."""
HAAR_CHECK = {False: ((3, 50, 1_000), (3, 400, 150)), True: ((3, 50, 200),)}
"""(p, n, M) of the Haar-vs-sphere check of O-SA on X1."""
TIMING_N, TIMING_P = 1_000, 6
TIMING_RUNS = {"fast": 51, "haar": {False: 5, True: 3}}
PAPER_SECONDS = {"P": 0.002, "J": 0.001, "O (Haar)": 2.44}
PAPER_CPU = "AMD Ryzen 5 5600X"
DELTA = 1e-6
MU = 3.0
BASE_SEED = 20_240_004
"""First entry of every ``SeedSequence`` key: (BASE_SEED, stream, data, p, n, …)."""
STREAMS = {"data": 0, "mechanism": 1, "haar": 2, "timing": 3}
METHODS = ("P", "J", "O")
ALL = ("orig", *METHODS)


@dataclass(frozen=True)
class DataSet:
    """One of the paper's four generators; Σ = diag(λ) in every case."""

    name: str
    poisson: bool
    distinct: bool
    """λ = (p, …, 1) (Assumption 1 holds) or λ = 1 (it does not)."""

    def lam(self, p: int) -> np.ndarray:
        return np.arange(p, 0, -1, dtype=float) if self.distinct else np.ones(p)

    def mean(self, p: int) -> np.ndarray:
        return self.lam(p) if self.poisson else np.full(p, MU)

    def sample(self, n: int, p: int, rng: np.random.Generator) -> np.ndarray:
        lam = self.lam(p)
        if self.poisson:
            return rng.poisson(lam, size=(n, p)).astype(float)
        return MU + rng.standard_normal((n, p)) * np.sqrt(lam)

    @property
    def label(self) -> str:
        lam = "(p, …, 1)" if self.distinct else "(1, …, 1)"
        if self.poisson:
            return f"{self.name}: independent Poisson{lam} columns"
        cov = "diag(p, …, 1)" if self.distinct else "I_p"
        return f"{self.name}: N_p(3·1, {cov})"


DATA = (
    DataSet("X1", poisson=False, distinct=True),
    DataSet("X2", poisson=False, distinct=False),
    DataSet("X3", poisson=True, distinct=True),
    DataSet("X4", poisson=True, distinct=False),
)


rng_for = partial(stream_rng, BASE_SEED, STREAMS)
"""``rng_for(stream, *key)``: the generator keyed by (BASE_SEED, stream, *key)."""


def _sa() -> Any:
    """The mechanism module, imported late (the helpers below work without it)."""
    from dprelease.mechanisms import spectral

    return spectral


# ---------------------------------------------------------------- targets and errors


def targets(sa: Any, sigma: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Theorem 1 and 2's asymptotic covariances: mean Σ (orig, P) and 2Σ (J, O); vec(S) G0
    (orig) and G_SA (P, J, O)."""
    g0, gsa = np.asarray(sa.g0(sigma)), np.asarray(sa.g_sa(sigma))
    return {
        "mean": {a: np.asarray(sa.mean_target(sigma, "original" if a == "orig" else a)) for a in ALL},
        "cov": {"orig": g0, "P": gsa, "J": gsa, "O": gsa},
    }


def kurtosis_target(g0: np.ndarray, ds: DataSet, p: int) -> np.ndarray:
    """The exact asymptotic covariance of √n vec(S) on the original data: for independent
    columns, G0 plus the fourth cumulants κ₄ on the (jj, jj) entries (κ₄ = λ for Poisson,
    0 for normal data)."""
    g = g0.copy()
    if ds.poisson:
        idx = np.arange(p) * (p + 1)
        g[idx, idx] += ds.lam(p)
    return g


def relative_error(draws: np.ndarray, n: int, target: np.ndarray) -> float:
    """‖Cov_M(√n θ̂) − G‖_F / ‖G‖_F (the shift by θ does not change Cov_M)."""
    cov = n * np.atleast_2d(np.cov(draws, rowvar=False))
    return float(np.linalg.norm(cov - target) / np.linalg.norm(target))


def mc_floor(target: np.ndarray, m: int) -> float:
    """RMS relative error of a Gaussian sample covariance of M draws with covariance G:
    √((‖G‖_F² + tr(G)²)/(M − 1)) / ‖G‖_F (≈ p/√M for G ∝ I of size p²)."""
    fro2 = float(np.sum(target**2))
    return math.sqrt((fro2 + float(np.trace(target)) ** 2) / (m - 1) / fro2)


def moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x̄, vec S) with S = (X − 1x̄ᵀ)ᵀ(X − 1x̄ᵀ)/n (divisor n)."""
    xbar = x.mean(axis=0)
    xc = x - xbar
    return xbar, (xc.T @ xc / len(x)).reshape(-1, order="F")


def efficiency(means: dict[str, np.ndarray], covs: dict[str, np.ndarray], p: int) -> dict[str, Any]:
    """Variance ratios against the original data (Theorem 1–2's ARE, inverted): tr Cov(x̄)
    (theory 1 for P, 2 for J and O), Var(S_jj) and Var(S_jk), j < k, averaged over entries
    (theory 1 and 2 in the eigenbasis of Σ, which is the coordinate basis here)."""
    diag = np.arange(p) * (p + 1)
    off = np.array([j * p + k for j in range(p) for k in range(j + 1, p)])
    var = {a: covs[a].var(axis=0, ddof=1) for a in ALL}
    tr = {a: float(means[a].var(axis=0, ddof=1).sum()) for a in ALL}
    return {
        a: {
            "mean": tr[a] / tr["orig"],
            "variances": float(np.mean(var[a][diag] / var["orig"][diag])),
            "covariances": float(np.mean(var[a][off] / var["orig"][off])),
        }
        for a in METHODS
    }


# ---------------------------------------------------------------- one cell


def link_row(sa: Any, xa: np.ndarray, x: np.ndarray) -> tuple[float, float, float, float, float]:
    """The module's ``linkage`` (EUC, match rate, correct-link rate), then our own k-d tree
    query: the tie-aware correct-link rate (row i is among the nearest original rows; with
    Poisson duplicates ``argmin == i`` depends on which tied row the tree returns) and
    |our EUC − the module's| (an independent check of ``linkage``)."""
    euc, match, correct = sa.linkage(xa, x, DELTA)
    dist, _ = KDTree(x).query(xa, k=1)
    own = np.linalg.norm(xa - x, axis=1)
    return euc, match, correct, float(np.mean(own <= dist + TIE_TOL)), abs(float(dist.mean()) - euc)


def _link_summary(rows: np.ndarray, n: int) -> dict[str, Any]:
    """Per-dataset ``link_row`` rows -> means and the histogram facts."""
    euc, match, correct = rows[:, 0], rows[:, 1], rows[:, 2]
    return {
        "reps": len(rows),
        "euc": float(euc.mean()),
        "euc_sd": float(euc.std(ddof=1)) if len(rows) > 1 else 0.0,
        "match": float(match.mean()),
        "match_share_any": float(np.mean(match > 0)),
        "match_max": float(match.max()),
        "correct": float(correct.mean()),
        "correct_ties": float(rows[:, 3].mean()),
        "euc_check_max_abs": float(rows[:, 4].max()),
        "match_se": float(match.std(ddof=1) / math.sqrt(len(rows))) if len(rows) > 1 else 0.0,
    }


def run_cell(sa: Any, d: int, p: int, n: int, m: int, m_link: int) -> dict[str, Any]:
    """M replicates of data set d at (n, p): moments of the original and of P/J/O, linkage on
    the first m_link; returns the REs, floors, efficiency ratios and linkage summaries."""
    ds = DATA[d]
    t0 = time.perf_counter()
    rng_data = rng_for("data", d, p, n)
    rngs = {a: rng_for("mechanism", d, p, n, k) for k, a in enumerate(METHODS)}
    means = {a: np.empty((m, p)) for a in ALL}
    covs = {a: np.empty((m, p * p)) for a in ALL}
    link = {a: np.empty((m_link, 5)) for a in METHODS}
    link_s = 0.0
    for r in range(m):
        x = ds.sample(n, p, rng_data)
        means["orig"][r], covs["orig"][r] = moments(x)
        for a in METHODS:
            xa = np.asarray(sa.anonymize(x, a, rngs[a]))
            means[a][r], covs[a][r] = moments(xa)
            if r < m_link:
                t1 = time.perf_counter()
                link[a][r] = link_row(sa, xa, x)
                link_s += time.perf_counter() - t1
    sigma = np.diag(ds.lam(p))
    tg = targets(sa, sigma)
    exact = kurtosis_target(tg["cov"]["orig"], ds, p)
    return {
        "data": ds.name,
        "p": p,
        "n": n,
        "reps": m,
        "re_mean": {a: relative_error(means[a], n, tg["mean"][a]) for a in ALL},
        "re_cov": {a: relative_error(covs[a], n, tg["cov"][a]) for a in ALL},
        "re_cov_orig_exact": relative_error(covs["orig"], n, exact),
        "floor_mean": mc_floor(sigma, m),
        "floor_cov_g0": mc_floor(tg["cov"]["orig"], m),
        "floor_cov_gsa": mc_floor(tg["cov"]["P"], m),
        "efficiency": efficiency(means, covs, p),
        "linkage": {a: _link_summary(link[a], n) for a in METHODS},
        "theory_match": {"P": float(n ** (1 - p)), "J": 2.0**-p},
        "elapsed_s": time.perf_counter() - t0,
        "linkage_s": link_s,
    }


# ---------------------------------------------------------------- Haar check and timing


def haar_check(sa: Any, p: int, n: int, m: int) -> dict[str, Any]:
    """O-SA with full Haar matrices against the sphere sampler on the same M data sets of X1
    (the grid's first M data sets): REs, EUC, match and correct-link rates."""
    t0 = time.perf_counter()
    rng_data = rng_for("data", 0, p, n)
    rngs = {"sphere": rng_for("haar", p, n, 0), "haar": rng_for("haar", p, n, 1)}
    means = {k: np.empty((m, p)) for k in rngs}
    covs = {k: np.empty((m, p * p)) for k in rngs}
    link = {k: np.empty((m, 5)) for k in rngs}
    for r in range(m):
        x = DATA[0].sample(n, p, rng_data)
        for k, rng in rngs.items():
            xa = np.asarray(sa.anonymize(x, "O", rng, haar=(k == "haar")))
            means[k][r], covs[k][r] = moments(xa)
            link[k][r] = link_row(sa, xa, x)
    sigma = np.diag(DATA[0].lam(p))
    tg = targets(sa, sigma)
    out: dict[str, Any] = {"p": p, "n": n, "reps": m}
    for k in rngs:
        out[k] = {
            "re_mean": relative_error(means[k], n, tg["mean"]["O"]),
            "re_cov": relative_error(covs[k], n, tg["cov"]["O"]),
            **_link_summary(link[k], n),
        }
    out["floor_mean"] = mc_floor(sigma, m)
    out["floor_cov"] = mc_floor(tg["cov"]["O"], m)
    out["elapsed_s"] = time.perf_counter() - t0
    return out


def _time_calls(fn: Callable[[], Any], runs: int, warm: int) -> list[float]:
    """Seconds of each of ``runs`` calls, after ``warm`` untimed ones."""
    for _ in range(warm):
        fn()
    return [timed(fn)[1] for _ in range(runs)]


def timing(sa: Any, quick: bool) -> dict[str, Any]:
    """Wall time of one ``anonymize`` call on an X1 sample at n = 1000, p = 6 (one thread)."""
    x = DATA[0].sample(TIMING_N, TIMING_P, rng_for("timing", 0))
    rng = rng_for("timing", 1)
    cases = (
        ("P", "P", False, TIMING_RUNS["fast"], 3),
        ("J", "J", False, TIMING_RUNS["fast"], 3),
        ("O (sphere)", "O", False, TIMING_RUNS["fast"], 3),
        ("O (Haar)", "O", True, TIMING_RUNS["haar"][quick], 0),
    )
    out: dict[str, Any] = {"n": TIMING_N, "p": TIMING_P, "paper_cpu": PAPER_CPU, "cases": {}}
    for label, method, haar, runs, warm in cases:
        call = partial(sa.anonymize, x, method, rng, haar=haar)
        times = _time_calls(call, runs, warm)
        out["cases"][label] = {
            "runs": runs,
            "median_s": statistics.median(times),
            "min_s": min(times),
            "paper_s": PAPER_SECONDS.get(label),
        }
    return out


def target_check(sa: Any) -> dict[str, Any]:
    """The module's G0 and G_SA against the paper's displayed p = 2 matrices (2) with
    λ = (2, 1), and K_pp vec(A) = vec(Aᵀ) on a random 3×3 matrix."""
    l1, l2 = 2.0, 1.0
    c = l1 * l2
    g0 = np.array([[2 * l1**2, 0, 0, 0], [0, c, c, 0], [0, c, c, 0], [0, 0, 0, 2 * l2**2]])
    gsa = g0.copy()
    gsa[1:3, 1:3] *= 2
    sigma = np.diag([l1, l2])
    a = rng_for("timing", 2).standard_normal((3, 3))
    k = np.asarray(sa.commutation_matrix(3))
    vec_a, vec_at = a.reshape(-1, order="F"), a.T.reshape(-1, order="F")
    return {
        "g0_max_abs_diff": float(np.abs(np.asarray(sa.g0(sigma)) - g0).max()),
        "gsa_max_abs_diff": float(np.abs(np.asarray(sa.g_sa(sigma)) - gsa).max()),
        "commutation_max_abs_diff": float(np.abs(k @ vec_a - vec_at).max()),
    }


# ---------------------------------------------------------------- the run


def grid(quick: bool) -> list[tuple[int, int, int]]:
    """(data index, p, n) in run order."""
    return [(d, p, n) for d in range(len(DATA)) for p in P_GRID for n in REPS[quick]]


def run(quick: bool = False) -> dict[str, Any]:
    """The whole benchmark; JSON-serialisable figures (every rendered number, seeds, times)."""
    t0 = time.perf_counter()
    info = machine()
    sa = _sa()
    cells = []
    with threadpool_limits(1):
        checks = target_check(sa)
        for d, p, n in grid(quick):
            m = REPS[quick][n]
            cell = run_cell(sa, d, p, n, m, min(m, LINK_REPS[quick][n]))
            cells.append(cell)
            print(
                f"  {DATA[d].name} p = {p} n = {n}: {cell['elapsed_s']:.1f} s "
                f"(linkage {cell['linkage_s']:.1f} s), total {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        haar = [haar_check(sa, p, n, m) for p, n, m in HAAR_CHECK[quick]]
        times = timing(sa, quick)
    return {
        "quick": quick,
        "command": run_command("spectral", quick),
        "base_seed": BASE_SEED,
        "streams": STREAMS,
        "n_grid": list(REPS[quick]),
        "p_grid": list(P_GRID),
        "reps": {str(n): m for n, m in REPS[quick].items()},
        "link_reps": {str(n): min(m, LINK_REPS[quick][n]) for n, m in REPS[quick].items()},
        "delta": DELTA,
        "data": [ds.label for ds in DATA],
        "target_check": checks,
        "cells": cells,
        "haar_check": haar,
        "timing": times,
        "machine": info,
        "wall_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("spectral", run))
