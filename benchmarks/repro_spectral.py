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

``.venv/bin/python benchmarks/repro_spectral.py [--quick]`` prints the markdown section;
``run(quick)`` returns the JSON-serialisable figures and ``render(figures)`` the lines.
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
from bench_common import machine, standalone
from scipy.spatial import KDTree
from threadpoolctl import threadpool_limits

COMMAND = ".venv/bin/python benchmarks/run.py --only spectral"
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
PAPER_J_MATCH_P6 = 0.03
DIGEST_SANITY = {
    (2, 25): ((0.366, 0.343, 0.471), (0.039, 0.247, 0.0)),
    (2, 400): ((0.129, 0.103, 0.140), (0.0024, 0.250, 0.0)),
    (3, 100): ((0.639, 0.569, 0.676), (0.0001, 0.125, 0.0)),
    (6, 100): ((2.31, 2.21, 2.35), (0.0, 0.015, 0.0)),
}
"""The seed digest's independent numpy re-run on X1 (2000 reps): (p, n) -> (EUC, match) P/J/O."""


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


def rng_for(stream: str, *key: int) -> np.random.Generator:
    """A generator keyed by (BASE_SEED, stream, *key)."""
    return np.random.default_rng([BASE_SEED, STREAMS[stream], *key])


def _sa() -> Any:
    """The mechanism module, imported late (the helpers below work without it)."""
    from mechanisms import spectral

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
    for _ in range(warm):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


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
        "command": COMMAND + (" --quick" if quick else ""),
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


# ---------------------------------------------------------------- rendering


def _f(v: float, digits: int = 3) -> str:
    """Fixed decimals; tiny non-zero values in scientific notation."""
    if v == 0:
        return "0"
    if abs(v) < 10 ** -(digits - 1):
        return f"{v:.1e}"
    return f"{v:.{digits}f}"


def _cells(figures: dict[str, Any], data: str) -> list[dict[str, Any]]:
    return [c for c in figures["cells"] if c["data"] == data]


def _utility_table(figures: dict[str, Any], ds: str, poisson: bool) -> list[str]:
    extra = " vec S: orig vs G0+κ₄ |" if poisson else ""
    lines = [
        "| p | n | M | x̄: orig | x̄: P | x̄: J | x̄: O | vec S: orig | vec S: P | vec S: J | vec S: O |"
        f"{extra} floor x̄ / vec S |",
        "|---:|---:|---:|" + "---:|" * (8 + poisson) + "---:|",
    ]
    for c in _cells(figures, ds):
        mean = " | ".join(_f(c["re_mean"][a]) for a in ALL)
        cov = " | ".join(_f(c["re_cov"][a]) for a in ALL)
        ex = f" {_f(c['re_cov_orig_exact'])} |" if poisson else ""
        lines.append(
            f"| {c['p']} | {c['n']:,} | {c['reps']:,} | {mean} | {cov} |{ex} "
            f"{_f(c['floor_mean'])} / {_f(c['floor_cov_gsa'])} |"
        )
    return [*lines, ""]


def _efficiency_table(figures: dict[str, Any]) -> list[str]:
    n = max(c["n"] for c in figures["cells"])
    lines = [
        "| data | p | x̄ var. ratio P / J / O (theory 1 / 2 / 2) | Var S_jj ratio P / J / O (theory 1) | "
        "Var S_jk ratio P / J / O (theory 2) |",
        "|---|---:|---|---|---|",
    ]
    for c in figures["cells"]:
        if c["n"] != n:
            continue
        e = c["efficiency"]
        cols = [" / ".join(f"{e[a][k]:.2f}" for a in METHODS) for k in ("mean", "variances", "covariances")]
        lines.append(f"| {c['data']} | {c['p']} | " + " | ".join(cols) + " |")
    return [*lines, ""]


def _linkage_table(figures: dict[str, Any], ds: str, poisson: bool) -> list[str]:
    ties = " i among nearest P / J / O |" if poisson else ""
    lines = [
        "| p | n | datasets | EUC P | EUC J | EUC O | match P (n^{1−p}) | match J (2^{−p}) | match O | "
        f"datasets with a match P / J | correct link P / J / O |{ties}",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|" + ("---|" if poisson else ""),
    ]
    for c in _cells(figures, ds):
        lk, th = c["linkage"], c["theory_match"]
        euc = " | ".join(_f(lk[a]["euc"]) for a in METHODS)
        tie = (" " + " / ".join(_f(lk[a]["correct_ties"], 4) for a in METHODS) + " |") if poisson else ""
        lines.append(
            f"| {c['p']} | {c['n']:,} | {lk['P']['reps']:,} | {euc} | "
            f"{_f(lk['P']['match'], 4)} ({_f(th['P'], 4)}) | {_f(lk['J']['match'], 4)} ({_f(th['J'], 4)}) | "
            f"{_f(lk['O']['match'], 4)} | "
            f"{lk['P']['match_share_any']:.0%} / {lk['J']['match_share_any']:.0%} | "
            + " / ".join(_f(lk[a]["correct"], 4) for a in METHODS)
            + f" |{tie}"
        )
    return [*lines, ""]


def _sanity_table(figures: dict[str, Any]) -> list[str]:
    by = {(c["p"], c["n"]): c for c in _cells(figures, "X1")}
    lines = [
        "| p | n | EUC P / J / O: ours | digest | match P / J / O: ours | digest |",
        "|---:|---:|---|---|---|---|",
    ]
    for (p, n), (euc, match) in DIGEST_SANITY.items():
        c = by.get((p, n))
        if c is None:
            continue
        lk = c["linkage"]
        lines.append(
            f"| {p} | {n:,} | {' / '.join(_f(lk[a]['euc']) for a in METHODS)} | "
            f"{' / '.join(_f(v) for v in euc)} | {' / '.join(_f(lk[a]['match'], 4) for a in METHODS)} | "
            f"{' / '.join(_f(v, 4) for v in match)} |"
        )
    return [*lines, ""]


def _haar_table(figures: dict[str, Any]) -> list[str]:
    lines = [
        "| p | n | M | sampler | RE x̄ | RE vec S | EUC | match | correct link | floor x̄ / vec S |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for h in figures["haar_check"]:
        for k in ("sphere", "haar"):
            r = h[k]
            lines.append(
                f"| {h['p']} | {h['n']:,} | {h['reps']:,} | {k} | {_f(r['re_mean'])} | {_f(r['re_cov'])} | "
                f"{_f(r['euc'])} ± {_f(r['euc_sd'] / math.sqrt(r['reps']))} | {_f(r['match'], 4)} | "
                f"{_f(r['correct'], 4)} | {_f(h['floor_mean'])} / {_f(h['floor_cov'])} |"
            )
    return [*lines, ""]


def _sec(v: float) -> str:
    """Seconds with two significant digits below 10 ms, three above."""
    return f"{v:.2g}" if v < 0.01 else f"{v:.3g}"


def _timing_table(figures: dict[str, Any]) -> list[str]:
    t = figures["timing"]
    lines = [
        f"| method (n = {t['n']:,}, p = {t['p']}) | runs | median s | min s | paper s ({t['paper_cpu']}) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, r in t["cases"].items():
        paper = "—" if r["paper_s"] is None else f"{r['paper_s']:g}"
        lines.append(f"| {label} | {r['runs']} | {_sec(r['median_s'])} | {_sec(r['min_s'])} | {paper} |")
    return [*lines, ""]


def _last(figures: dict[str, Any], ds: str, p: int, key: str, a: str) -> list[float]:
    return [c[key][a] for c in _cells(figures, ds) if c["p"] == p]


def _utility_reading(figures: dict[str, Any]) -> list[str]:
    ns = figures["n_grid"]
    top = f"n = {ns[-1]:,}"
    lines = []
    for ds in ("X1", "X2", "X3", "X4"):
        parts = []
        for p in figures["p_grid"]:
            c = next(c for c in _cells(figures, ds) if c["p"] == p and c["n"] == ns[-1])
            mean = "/".join(_f(c["re_mean"][a]) for a in ALL)
            cov = "/".join(_f(c["re_cov"][a]) for a in ALL)
            ex = f", orig vs G0+κ₄ {_f(c['re_cov_orig_exact'])}" if ds in ("X3", "X4") else ""
            parts.append(
                f"p = {p}: x̄ {mean}, vec S {cov}{ex} (floor {_f(c['floor_mean'])} / {_f(c['floor_cov_gsa'])})"
            )
        lines.append(f"- {ds} at {top}, RE orig/P/J/O — " + "; ".join(parts) + ".")
    for p in figures["p_grid"]:
        seq = ", ".join(f"{c['n']}: {_f(c['re_cov']['J'])}" for c in _cells(figures, "X2") if c["p"] == p)
        lines.append(f"- X2, p = {p}, vec S RE of J-SA by n (levels off if Assumption 1 matters): {seq}.")
    return [*lines, *_efficiency_reading(figures)]


def _efficiency_reading(figures: dict[str, Any]) -> list[str]:
    """Ranges of the variance ratios at the largest n, distinct vs equal eigenvalues."""
    top = max(figures["n_grid"])
    lines = []
    for label, names in (("distinct eigenvalues (X1, X3)", ("X1", "X3")), ("equal (X2, X4)", ("X2", "X4"))):
        cells = [c for c in figures["cells"] if c["n"] == top and c["data"] in names]
        parts = []
        for key, theory in (("mean", "J/O 2"), ("variances", "1"), ("covariances", "2")):
            methods = ("J", "O") if key == "mean" else METHODS
            vals = [c["efficiency"][a][key] for c in cells for a in methods]
            parts.append(f"{key} {min(vals):.2f}–{max(vals):.2f} (theory {theory})")
        lines.append(f"- Variance ratios at n = {top:,}, {label}: " + ", ".join(parts) + ".")
    return lines


def _linkage_reading(figures: dict[str, Any]) -> list[str]:
    cells = figures["cells"]
    o_nonzero = sum(c["linkage"]["O"]["match"] > 0 for c in cells)
    o_top = sum(c["linkage"]["O"]["euc"] > max(c["linkage"][a]["euc"] for a in "PJ") for c in cells)
    p_less = sum(c["linkage"]["P"]["match"] < c["linkage"]["J"]["match"] for c in cells)
    q = 2.0 ** -np.array([c["p"] for c in cells])
    rows = np.array([c["n"] * c["linkage"]["J"]["reps"] for c in cells])
    jm = np.array([c["linkage"]["J"]["match"] for c in cells])
    normal = np.array([c["data"] in ("X1", "X2") for c in cells])
    z = ((jm - q) / np.sqrt(q * (1 - q) / rows))[normal]
    p6 = [c for c in cells if c["p"] == 6]
    pair = [c["linkage"]["P"]["match_share_any"] for c in cells if c["p"] == 2 and c["data"] in ("X1", "X2")]
    lines = [
        f"- O-SA: matches in {o_nonzero} of {len(cells)} cells; highest EUC in {o_top} of {len(cells)}.",
        "- P-SA at p = 2 on normal data copies n · n^{1−p} = 1 row per data set on average whatever n: "
        f"{min(pair):.0%}–{max(pair):.0%} of data sets have one (a Poisson(1) number of copies would give "
        "1 − e^−1 = 63%).",
        f"- P-SA has fewer matches than J-SA in {p_less} of {len(cells)} cells.",
        f"- J-SA match rate against 2^−p on the normal data (X1, X2; rows are independent Bernoulli(2^−p)): "
        f"z-scores in [{min(z):+.1f}, {max(z):+.1f}] over {len(z)} cells.",
        "- p = 6, mean match rate over n: "
        + "; ".join(
            f"{ds} P {_f(np.mean([c['linkage']['P']['match'] for c in p6 if c['data'] == ds]), 4)}, "
            f"J {_f(np.mean([c['linkage']['J']['match'] for c in p6 if c['data'] == ds]), 4)}"
            for ds in ("X1", "X2", "X3", "X4")
        )
        + f" (paper: P 0, J ≈ {PAPER_J_MATCH_P6}; 2^−6 = {2**-6:.4f}).",
    ]
    for ds in ("X3", "X4"):
        seq = [c for c in cells if c["data"] == ds and c["p"] == 2]
        lines.append(
            f"- {ds}, p = 2: P-SA match rate by n "
            + ", ".join(f"{c['n']}: {_f(c['linkage']['P']['match'], 4)}" for c in seq)
            + " against n^{1−p} "
            + ", ".join(_f(c["theory_match"]["P"], 4) for c in seq)
            + " for continuous data (tied discrete rows let a permuted row hit a duplicate)."
        )
    for a, b in (("X3", "X1"), ("X4", "X2")):
        ratio = []
        for m in ("P", "J"):
            x = np.mean([c["linkage"][m]["match"] for c in cells if c["data"] == a])
            y = np.mean([c["linkage"][m]["match"] for c in cells if c["data"] == b])
            ratio.append(f"{m} {_f(x, 4)} vs {_f(y, 4)}")
        lines.append(f"- Mean match rate over all (p, n), Poisson {a} vs normal {b}: {', '.join(ratio)}.")
    return lines


def _p6_j_match(figures: dict[str, Any]) -> tuple[float, float]:
    """J-SA match rate at p = 6: the lowest and highest mean over n among the data sets."""
    rates = [
        np.mean([c["linkage"]["J"]["match"] for c in figures["cells"] if (c["p"], c["data"]) == (6, ds.name)])
        for ds in DATA
    ]
    return float(min(rates)), float(max(rates))


def _differs(figures: dict[str, Any]) -> list[str]:
    reps = figures["reps"]
    mmin, mmax = min(reps.values()), max(reps.values())
    m_text = f"{mmin:,}" if mmin == mmax else f"{mmin:,}–{mmax:,}"
    n_top = max(figures["n_grid"])
    beyond = f", including n > 400 (up to {n_top:,}), which the paper skipped" if n_top > 400 else ""
    lo, hi = _p6_j_match(figures)
    discrete = [c for c in figures["cells"] if c["data"] in ("X3", "X4") and c["p"] == 2]
    p_lo = min(c["linkage"]["P"]["match"] for c in discrete)
    p_hi = max(c["linkage"]["P"]["match"] for c in discrete)
    return [
        "What differs from the paper:",
        "",
        f"- M = {m_text} replicates per cell (by n, above) instead of 10,000, to fit the time; the "
        "Monte Carlo floor of the RE (last column) is about p/√M for vec S (paper: ≈ 0.02 / 0.03 / 0.06 "
        "at p = 2 / 3 / 6), so REs at or below the floor mean 'converged within noise'.",
        "- O-SA uses the module's O(np) sphere sampler (u_k ← g/‖g‖, exact in distribution) on the whole "
        f"grid{beyond}; the paper's full Haar version is O(n³) per column. The Haar version is checked "
        "against the sphere sampler on X1 cells and timed.",
        "- The paper shows figures only (RE curves, EUC curves, match histograms for n ≤ 400); its only "
        f"numbers are the timings and 'J-SA ≈ {PAPER_J_MATCH_P6}' at p = 6, so the comparison is "
        "qualitative. Linkage is run on the first replicates of every cell (column 'datasets') and on "
        "all four data sets (the paper shows X1 and says the others are alike); histograms are summarised "
        "by the share of datasets with at least one match.",
        f"- J-SA match rate at p = 6: {_f(lo, 4)}–{_f(hi, 4)} over the four data sets, i.e. 2^−6 = "
        f"{2**-6:.4f} (a row is copied exactly when all six signs are +1), not the paper's "
        f"≈ {PAPER_J_MATCH_P6}; the paper gives no table for it and its GitLab code was not available "
        "to us, so the factor 2 is unexplained.",
        f"- Poisson data: the paper reports 'slightly higher' match rates. For P-SA at p = 2 we find "
        f"{_f(p_lo, 3)}–{_f(p_hi, 3)}, roughly constant in n instead of n^{{1−p}}: with tied discrete rows a "
        "permuted row only needs each coordinate to come from some copy of an existing row; at p = 6 "
        "P-SA has no matches on any data set, as in the paper.",
        "- Ours: the correct-link rate (nearest original row is row i, the classic linkage; the paper's "
        "'matches' count a duplicate of any row), the variance-ratio check of Theorems 1–2, the "
        "kurtosis-corrected target G0 + κ₄ for the original Poisson data, and the target check.",
        "- Timings are single-threaded on a different, shared CPU; the paper does not say how it timed.",
    ]


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    m = figures["machine"]
    tc = figures["target_check"]
    reps = ", ".join(f"{int(n):,}: {v:,}" for n, v in figures["reps"].items())
    link = ", ".join(f"{int(n):,}: {v:,}" for n, v in figures["link_reps"].items())
    lines = [
        f"- Reproduce: `{figures['command']}` (or `.venv/bin/python benchmarks/repro_spectral.py"
        f"{' --quick' if figures['quick'] else ''}`)",
        f"- Took {figures['wall_s']:.0f} s ({'quick' if figures['quick'] else 'full'} mode, one BLAS "
        f"thread); nproc {m['nproc']}, load average (1 min) at start {m['load_avg_1m']}, "
        f"commit {m['commit']}",
        f"- Seeds: every generator is `default_rng([{figures['base_seed']}, stream, data, p, n, …])` "
        "(streams: data 0, mechanism 1 (+ method index), haar 2, timing 3); P, J and O see the same "
        "original data sets",
        "- Data: " + "; ".join(figures["data"]) + f"; Σ = diag(λ), μ = {MU:g}·1 (normal) or λ (Poisson)",
        f"- Replicates M by n: {reps}; linkage on the first {link} of them; δ = {figures['delta']:g}",
        f"- Targets: the module's `g0`, `g_sa` match the paper's p = 2 matrices (2) to "
        f"{max(tc['g0_max_abs_diff'], tc['gsa_max_abs_diff']):.1e}; `commutation_matrix` maps vec(A) to "
        f"vec(Aᵀ) to {tc['commutation_max_abs_diff']:.1e}; our own k-d tree reproduces `linkage`'s EUC to "
        f"{max(c['linkage'][a]['euc_check_max_abs'] for c in figures['cells'] for a in METHODS):.1e}",
        "",
        "#### Utility: RE of the asymptotic covariances (Theorems 1–2)",
        "",
        "RE = ‖Cov_M(√n(θ̂ − θ)) − G‖_F / ‖G‖_F; targets Σ (x̄: orig, P), 2Σ (x̄: J, O), G0 (vec S: orig), "
        "G_SA (vec S: P, J, O). Floor: the RE a Gaussian sample of M draws from the target itself has "
        "(x̄ / vec S with G_SA).",
        "",
    ]
    for ds in DATA:
        extra = " The extra column uses the exact target G0 + κ₄ (Poisson: κ₄ = λ)." if ds.poisson else ""
        lines += [f"{ds.label}.{extra}", "", *_utility_table(figures, ds.name, ds.poisson)]
    lines += [
        f"Variance ratios against the original data at n = {figures['n_grid'][-1]:,} (Theorem 1's factor and "
        "Theorem 2's diagonal/off-diagonal factors in the eigenbasis of Σ, here the coordinate axes):",
        "",
        *_efficiency_table(figures),
        *_utility_reading(figures),
        "",
        "#### Privacy: distance-based record linkage",
        "",
        "EUC = mean distance from an anonymised row to the nearest original row (original units); match = "
        f"share of anonymised rows within δ = {figures['delta']:g} of some original row (the paper's "
        "'matches'), beside the analytic rates n^{1−p} (P: all p permutations send i to the same j) and "
        "2^{−p} (J: all p signs +1; both for continuous data); correct link = the nearest original row is "
        "row i (the module's k-d tree `argmin`; for Poisson data, whose rows tie, also 'i among nearest': "
        f"‖x_A,i − x_i‖ ≤ d_i + {TIE_TOL:g}).",
        "",
    ]
    for ds in DATA:
        lines += [f"{ds.label}:", "", *_linkage_table(figures, ds.name, ds.poisson)]
    lines += [
        "Against the seed digest's independent re-run (X1, 2,000 replicates):",
        "",
        *_sanity_table(figures),
        *_linkage_reading(figures),
        "",
        "#### O-SA: full Haar matrices against the sphere sampler (X1, same data sets)",
        "",
        *_haar_table(figures),
        "#### Cost of `anonymize`",
        "",
        *_timing_table(figures),
        *_differs(figures),
    ]
    return lines


if __name__ == "__main__":
    sys.exit(standalone(run, render, sys.argv))
