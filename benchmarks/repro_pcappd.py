"""Reproduction of DP-PCA data publishing (Alg A of ``../shared/seeds/dp-pca-lda-data-publishing.txt``;
probably Jiang et al., TDP 2013), Fig. 2: the error ‖X̂ − X‖²_F of the released Adult matrix.

``.venv/bin/python benchmarks/run.py --only pcappd [--quick]`` (or this file directly, which
prints the section that ``render/pcappd.py`` writes). Data: ``publishing_data`` (the paper's
Adult columns, complete rows, public bounds; 35 coordinates in [0, 1] with the income
label's two). For every ε and trial:

* ``pcappd.PCAPPD().fit`` (one call, the plan from ``plan_budget``: ε/2 + ε/2) with k = 1..10
  components, variant ``corrected`` (ε-DP) and ``paper``
  (the paper's categorical sensitivity, not DP);
* LAP (Dwork et al. 2006, the identity query): Lap(Δ/ε) on every entry of the design matrix
  with Δ = p1 + 2·p2, the L1 change of the whole matrix when one row is replaced (each
  numeric coordinate moves by ≤ 1, each one-hot block by ≤ 2); and the paper's own scale
  Lap(p/ε) (Theorem 3's baseline);
* references without privacy: the exact rank-k PCA reconstruction (true mean and covariance,
  no noise: the model error alone) and a data-free release (uniform random rows).

Every release is decoded the same way (``mechanisms.design``: numerics clipped to [0, 1],
each one-hot block → its largest coordinate, as the paper's §3.1 strategy) and scored on the
[0, 1] design scale. The paper's EXP baseline (McSherry–Talwar with Blum–Ligett–Roth's
utility) is underspecified and not run.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from common import machine, now_utc, run_command, stream_rng, summary
from publishing_data import describe, paper_adult
from scipy import stats
from threadpoolctl import threadpool_limits

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import Design
from dprelease.mechanisms.schema import Continuous, Nominal
from dprelease.mechanisms.synthesizer import Fit, MixedRows

EPSILONS = {False: (0.1, 0.25, 0.5, 1.0, 1.25, 1.5), True: (0.1, 1.0)}
KS = {False: tuple(range(1, 11)), True: (1, 5, 10)}
TRIALS = {False: 10, True: 2}
VARIANTS = ("corrected", "paper")
BASE_SEED = 20_130_003
STREAM = {"corrected": 1, "paper": 2, "lap": 3, "lap_paper": 4, "uniform": 5}
ALPHA = 0.01  # the paper's t-test level
ENERGY_K = 10

# ---------------------------------------------------------------- helpers


def rng_for(stream: str, epsilon: float, k: int, seed: int) -> np.random.Generator:
    """``default_rng([BASE_SEED, stream, round(100 ε), k, seed])``."""
    return stream_rng(BASE_SEED, STREAM, stream, round(100 * epsilon), k, seed)


def release(lay: Design, x_hat: np.ndarray) -> np.ndarray:
    """The published rows on the design scale: numerics clipped to [0, 1], one-hot blocks by
    their largest coordinate (``Design.decode`` then ``encode``)."""
    return lay.encode(lay.decode(x_hat))


def nominal_blocks(lay: Design) -> list[slice]:
    return [b for c, b in zip(lay.schema.columns, lay.blocks, strict=True) if isinstance(c, Nominal)]


def numeric_columns(lay: Design) -> list[int]:
    return [
        b.start for c, b in zip(lay.schema.columns, lay.blocks, strict=True) if not isinstance(c, Nominal)
    ]


def errors(lay: Design, x: np.ndarray, x_hat: np.ndarray, *, decoded: bool = False) -> dict[str, float]:
    """Of the published matrix (``release`` of ``x_hat`` unless ``decoded``): per-entry MSE
    (‖X̂ − X‖²_F / (n·p)), the cumulative ‖X̂ − X‖²_F, the numeric coordinates' MSE and the
    share of categorical cells (one-hot blocks) decoded wrong; and ``raw_mse``, the per-entry
    MSE of ``x_hat`` before decoding (Theorem 3's noise)."""
    published = x_hat if decoded else release(lay, x_hat)
    d2 = (published - x) ** 2
    blocks = nominal_blocks(lay)
    wrong = np.mean([np.any(d2[:, b] > 0, axis=1).mean() for b in blocks]) if blocks else 0.0
    return {
        "mse": float(d2.mean()),
        "frob2": float(d2.sum()),
        "numeric_mse": float(d2[:, numeric_columns(lay)].mean()),
        "categorical_wrong": float(wrong),
        "raw_mse": float(((x_hat - x) ** 2).mean()),
    }


def replace_one_sensitivity(lay: Design) -> int:
    """L1 change of the whole design matrix when one row is replaced: ≤ 1 per numeric or
    ordinal coordinate, ≤ 2 per one-hot block (one 1 moves): p1 + 2·p2."""
    return sum(2 if isinstance(c, Nominal) else 1 for c in lay.schema.columns)


# ---------------------------------------------------------------- data-only references


def energy(x: np.ndarray) -> dict[str, Any]:
    """Eigenvalues of the (population) covariance of the design matrix, largest first, and
    the cumulative share of the trace carried by the top 1..ENERGY_K eigenvectors; the same
    share for the uncentred second moment XᵀX/n (the paper does not say which it used)."""
    vals = np.linalg.eigvalsh(np.cov(x, rowvar=False, bias=True))[::-1]
    share = np.cumsum(vals) / vals.sum()
    raw = np.linalg.eigvalsh(x.T @ x / len(x))[::-1]
    raw_share = np.cumsum(raw) / raw.sum()
    return {
        "eigenvalues": [float(v) for v in vals],
        "cumulative": [float(s) for s in share[:ENERGY_K]],
        "cumulative_uncentred": [float(s) for s in raw_share[:ENERGY_K]],
    }


def exact_reconstruction(x: np.ndarray, k: int) -> np.ndarray:
    """Rank-k PCA of X without noise: (X − 1mᵀ) U_kᵀ U_k + 1mᵀ with the true mean and covariance."""
    m = x.mean(axis=0)
    _, vecs = np.linalg.eigh(np.cov(x, rowvar=False, bias=True))
    u = vecs[:, ::-1][:, :k].T
    return (x - m) @ u.T @ u + m


def lap_release(x: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """The identity query with Lap(scale) on every entry (Dwork et al. 2006)."""
    return x + rng.laplace(0.0, scale, size=x.shape)


def uniform_rows(lay: Design, n: int, rng: np.random.Generator) -> np.ndarray:
    """A data-free release: numerics U[0, 1], each category uniform (already decoded)."""
    out = np.zeros((n, lay.width))
    for c, b in zip(lay.schema.columns, lay.blocks, strict=True):
        if isinstance(c, Nominal):
            out[np.arange(n), b.start + rng.integers(0, c.n_bins, n)] = 1.0
        elif isinstance(c, Continuous):
            out[:, b.start] = rng.random(n)
        else:
            out[:, b.start] = rng.integers(0, c.n_bins, n) / (c.n_bins - 1)
    return out


# ---------------------------------------------------------------- the mechanism


def publish(
    rows: MixedRows, lay: Design, *, epsilon: float, k: int, variant: str, rng: np.random.Generator
) -> Fit:
    """One pcappd release in one call (imported here: the module is another engineer's):
    ``PCAPPD.fit`` on ``lay``'s schema with the plan of ``plan_budget`` and the module's
    stage weights (ε/2 + ε/2), one output row per input row. ``Fit.stages[2].state`` is X̂
    before step 7, ``Fit.rows`` after it."""
    from dprelease.mechanisms import pcappd

    params = pcappd.PCAPPDParams(variant=variant, components=k)
    plan = plan_budget("pure", epsilon, 0.0, pcappd.PCAPPD().stage_weights(lay.schema, params))
    return pcappd.PCAPPD().fit(rows, lay.schema, plan, params, m=len(rows), rng=rng)


def mechanism_facts(rows: MixedRows, lay: Design, epsilons: Sequence[float]) -> dict[str, Any]:
    """The noise in play: LAP's Δ and scales; for each variant the sensitivity and Laplace
    scale of both measurements at ε = 1 (k = 1 and 10), and whether the module's own step 7
    (``Fit.rows``, on the design scale) equals our decoding of the raw X̂."""
    p = lay.width
    delta = replace_one_sensitivity(lay)
    out: dict[str, Any] = {
        "p": p,
        "lap_delta": delta,
        "lap_scale": {f"{e:g}": delta / e for e in epsilons},
        "lap_paper_scale": {f"{e:g}": p / e for e in epsilons},
    }
    for variant in VARIANTS:
        for k in (1, min(10, p)):
            fit = publish(rows, lay, epsilon=1.0, k=k, variant=variant, rng=np.random.default_rng(0))
            out[f"{variant}_k{k}"] = {
                m.name: {"sensitivity": float(m.sensitivity), "scale": float(m.scale), "defect": m.defect}
                for m in fit.measurements
            }
            out[f"{variant}_k{k}"]["step7_matches_ours"] = bool(
                np.array_equal(release(lay, fit.stages[2].state), lay.encode(fit.rows))
            )
    return out


# ---------------------------------------------------------------- the sweep


def trial(
    x: np.ndarray, rows: MixedRows, lay: Design, epsilon: float, ks: Sequence[int], seed: int
) -> dict[str, Any]:
    """Every method at one ε and trial seed: {method: {k or 'all': errors}} and publish times
    (x: the design matrix of ``rows``)."""
    delta = replace_one_sensitivity(lay)
    out: dict[str, Any] = {
        "lap": errors(lay, x, lap_release(x, delta / epsilon, rng_for("lap", epsilon, 0, seed))),
        "lap_paper": errors(
            lay, x, lap_release(x, lay.width / epsilon, rng_for("lap_paper", epsilon, 0, seed))
        ),
        "uniform": errors(
            lay, x, uniform_rows(lay, len(x), rng_for("uniform", epsilon, 0, seed)), decoded=True
        ),
        "times": {},
    }
    for variant in VARIANTS:
        out[variant] = {}
        times = []
        for k in ks:
            t0 = time.perf_counter()
            fit = publish(
                rows, lay, epsilon=epsilon, k=k, variant=variant, rng=rng_for(variant, epsilon, k, seed)
            )
            times.append(time.perf_counter() - t0)
            out[variant][str(k)] = errors(lay, x, fit.stages[2].state)
        out["times"][variant] = times
    return out


def _collect(trials: list[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """Per-method summaries over trials of every error metric."""
    metrics = ("mse", "frob2", "numeric_mse", "categorical_wrong", "raw_mse")
    out: dict[str, Any] = {}
    for method in ("lap", "lap_paper", "uniform"):
        out[method] = {m: summary([t[method][m] for t in trials]) for m in metrics}
    for variant in VARIANTS:
        out[variant] = {
            str(k): {m: summary([t[variant][str(k)][m] for t in trials]) for m in metrics} for k in ks
        }
        out[f"{variant}_publish_s"] = summary([s for t in trials for s in t["times"][variant]])
    return out


def significance(by_eps: dict[str, Any], ks: Sequence[int]) -> dict[str, Any]:
    """Welch t-tests, one-sided reading: PCA (each variant, k) below LAP (each scale) at level
    ALPHA. Counts the (ε, k) cells where the PCA mean is lower and p < ALPHA."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        for base in ("lap", "lap_paper"):
            wins, cells = 0, 0
            for r in by_eps.values():
                b = r[base]["mse"]["values"]
                for k in ks:
                    a = r[variant][str(k)]["mse"]["values"]
                    cells += 1
                    if len(a) > 1 and np.mean(a) < np.mean(b):
                        p = stats.ttest_ind(a, b, equal_var=False).pvalue
                        wins += int(bool(p < ALPHA) or (np.std(a) == 0 == np.std(b)))
            out[f"{variant}_vs_{base}"] = {"wins": wins, "cells": cells}
    return out


def trend_in_k(by_eps: dict[str, Any], ks: Sequence[int]) -> dict[str, Any]:
    """Spearman ρ of mean MSE against k at each ε (the paper: rises with k)."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        out[variant] = {}
        for e, r in by_eps.items():
            means = [r[variant][str(k)]["mse"]["mean"] for k in ks]
            rho = (
                stats.spearmanr(list(ks), means).statistic
                if len(ks) > 2
                else math.copysign(1, means[-1] - means[0])
            )
            out[variant][e] = float(rho)
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """The whole benchmark; JSON-serialisable figures (every rendered number, the per-trial
    values, seeds and wall times)."""
    t0 = time.perf_counter()
    info, date = machine(), now_utc()
    epsilons, ks, seeds = EPSILONS[quick], KS[quick], list(range(TRIALS[quick]))
    with threadpool_limits(1):
        data = paper_adult()
        lay = data.design(label=True)
        rows = data.rows(label=True)
        x = lay.encode(rows)
        t_ref = time.perf_counter()
        no_noise = {str(k): errors(lay, x, exact_reconstruction(x, k)) for k in ks}
        spectrum = energy(x)
        facts = mechanism_facts(rows, lay, epsilons)
        ref_s = time.perf_counter() - t_ref
        by_eps: dict[str, Any] = {}
        eps_wall: dict[str, float] = {}
        for epsilon in epsilons:
            t_e = time.perf_counter()
            trials = [trial(x, rows, lay, epsilon, ks, s) for s in seeds]
            by_eps[f"{epsilon:g}"] = _collect(trials, ks)
            eps_wall[f"{epsilon:g}"] = time.perf_counter() - t_e
            print(f"  pcappd ε = {epsilon:g}: {eps_wall[f'{epsilon:g}']:.1f} s", flush=True)
    return {
        "quick": quick,
        "command": run_command("pcappd", quick),
        "date": date,
        "machine": info,
        "base_seed": BASE_SEED,
        "seeds": seeds,
        "epsilons": list(epsilons),
        "ks": list(ks),
        "alpha": ALPHA,
        "data": describe(data, label=True),
        "facts": facts,
        "energy": spectrum,
        "no_noise": no_noise,
        "by_eps": by_eps,
        "significance": significance(by_eps, ks),
        "trend": trend_in_k(by_eps, ks),
        "wall_s": {"references": ref_s, **eps_wall},
        "elapsed_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("pcappd", run))
