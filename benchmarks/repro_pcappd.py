"""Reproduction of DP-PCA data publishing (Alg A of ``../shared/seeds/dp-pca-lda-data-publishing.txt``;
probably Jiang et al., TDP 2013), Fig. 2: the error ‖X̂ − X‖²_F of the released Adult matrix.

``.venv/bin/python benchmarks/run.py --only pcappd [--quick]`` (or this file directly, which
prints the markdown). Data: ``publishing_data`` (the paper's Adult columns, complete rows,
public bounds; 35 coordinates in [0, 1] with the income label's two). For every ε and trial:

* ``pcappd.publish`` with k = 1..10 components, variant ``corrected`` (ε-DP) and ``paper``
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
from bench_common import machine, now_utc, standalone
from publishing_data import describe, paper_adult
from scipy import stats
from threadpoolctl import threadpool_limits

from mechanisms.design import Design
from mechanisms.schema import Continuous, Nominal

COMMAND = ".venv/bin/python benchmarks/run.py --only pcappd"
EPSILONS = {False: (0.1, 0.25, 0.5, 1.0, 1.25, 1.5), True: (0.1, 1.0)}
KS = {False: tuple(range(1, 11)), True: (1, 5, 10)}
TRIALS = {False: 10, True: 2}
VARIANTS = ("corrected", "paper")
BASE_SEED = 20_130_003
STREAM = {"corrected": 1, "paper": 2, "lap": 3, "lap_paper": 4, "uniform": 5}
ALPHA = 0.01  # the paper's t-test level
ENERGY_K = 10

# The paper's Fig. 2 (read from the text; the figure itself gives no table of values).
PAPER = {
    "data": "Adult train + test, 45,222 complete rows, '35 features'",
    "energy": "top 10 eigenvectors > 90 % of the energy (Fig. 2a)",
    "trend": "MSE rises with k (noise overshadows the extra components)",
    "versus": "PCA < LAP and < EXP at every k = 1..10 and ε (t-test p < 0.01, Fig. 2b, c)",
}


# ---------------------------------------------------------------- helpers


def rng_for(stream: str, epsilon: float, k: int, seed: int) -> np.random.Generator:
    """``default_rng([BASE_SEED, stream, round(100 ε), k, seed])``."""
    return np.random.default_rng([BASE_SEED, STREAM[stream], round(100 * epsilon), k, seed])


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sd (ddof 1; 0 for one value) and the values."""
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "n": len(v),
        "values": [float(a) for a in v],
    }


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
    x: np.ndarray, lay: Design, *, epsilon: float, k: int, variant: str, rng: np.random.Generator
) -> Any:
    """``mechanisms.pcappd.publish`` (imported here: the module is another engineer's); a
    ``Publication`` with ``raw`` (X̂ before step 7), ``rows`` (after) and ``measurements``."""
    from mechanisms import pcappd

    return pcappd.publish(x, lay, epsilon=epsilon, k=k, variant=variant, rng=rng)


def mechanism_facts(x: np.ndarray, lay: Design, epsilons: Sequence[float]) -> dict[str, Any]:
    """The noise in play: LAP's Δ and scales; for each variant the sensitivity and Laplace
    scale of both measurements at ε = 1 (k = 1 and 10), and whether the module's own step 7
    (``rows``) equals our decoding of ``raw``."""
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
            pub = publish(x, lay, epsilon=1.0, k=k, variant=variant, rng=np.random.default_rng(0))
            out[f"{variant}_k{k}"] = {
                m.name: {"sensitivity": float(m.sensitivity), "scale": float(m.scale), "defect": m.defect}
                for m in pub.measurements
            }
            out[f"{variant}_k{k}"]["step7_matches_ours"] = bool(
                np.array_equal(release(lay, pub.raw), pub.rows)
            )
    return out


# ---------------------------------------------------------------- the sweep


def trial(x: np.ndarray, lay: Design, epsilon: float, ks: Sequence[int], seed: int) -> dict[str, Any]:
    """Every method at one ε and trial seed: {method: {k or 'all': errors}} and publish times."""
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
            pub = publish(
                x, lay, epsilon=epsilon, k=k, variant=variant, rng=rng_for(variant, epsilon, k, seed)
            )
            times.append(time.perf_counter() - t0)
            out[variant][str(k)] = errors(lay, x, pub.raw)
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
        x = data.matrix(label=True)
        t_ref = time.perf_counter()
        no_noise = {str(k): errors(lay, x, exact_reconstruction(x, k)) for k in ks}
        spectrum = energy(x)
        facts = mechanism_facts(x, lay, epsilons)
        ref_s = time.perf_counter() - t_ref
        by_eps: dict[str, Any] = {}
        eps_wall: dict[str, float] = {}
        for epsilon in epsilons:
            t_e = time.perf_counter()
            trials = [trial(x, lay, epsilon, ks, s) for s in seeds]
            by_eps[f"{epsilon:g}"] = _collect(trials, ks)
            eps_wall[f"{epsilon:g}"] = time.perf_counter() - t_e
            print(f"  pcappd ε = {epsilon:g}: {eps_wall[f'{epsilon:g}']:.1f} s", flush=True)
    return {
        "quick": quick,
        "command": COMMAND + (" --quick" if quick else ""),
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


# ---------------------------------------------------------------- rendering


def _ms(s: dict[str, Any], fmt: str = ".4f") -> str:
    return f"{s['mean']:{fmt}} ± {s['sd']:{fmt}}"


def _header(f: dict[str, Any]) -> list[str]:
    m, d, seeds = f["machine"], f["data"], f["seeds"]
    wall = ", ".join(f"ε = {e}: {s:.0f} s" for e, s in f["wall_s"].items() if e != "references")
    nominal = ", ".join(f"{k} {v}" for k, v in d["nominal"].items())
    bounds = ", ".join(f"{k} [{lo:g}, {hi:g}]" for k, (lo, hi) in d["bounds"].items())
    return [
        f"- Reproduce: `{f['command']}` (or `.venv/bin/python benchmarks/repro_pcappd.py"
        f"{' --quick' if f['quick'] else ''}`)"
        + (" — these figures: `--quick`, reduced grid" if f["quick"] else ""),
        f"- Measured: {f['date']}, commit {m['commit']}, took {f['elapsed_s']:.0f} s ({wall}); nproc "
        f"{m['nproc']}, {m['cpu']}, load average (1 min) at start {m['load_avg_1m']}; BLAS/OpenMP limited "
        "to one thread",
        f"- Trials: {len(seeds)} per (ε, k, method), seeds {seeds[0]}–{seeds[-1]} (the paper: 10); "
        f"mean ± sd. Generators `default_rng([{f['base_seed']}, stream, round(100ε), k, seed])`, streams "
        "1 corrected, 2 paper, 3 LAP, 4 LAP at the paper's scale, 5 uniform rows.",
        f"- Data: `flows/demo/adult.csv` (UCI training file, {d['rows_csv']:,} rows); "
        f"{d['rows_dropped']:,} rows with `?` in any column dropped → n = {d['rows']:,} "
        f"(the paper: 45,222 from train + test). Dropped columns: {', '.join(d['dropped'])}. "
        f"Numeric (p1 = {d['p1']}), linear onto [0, 1] by the public bounds of "
        f"`flows/demo/adult.yaml`: {bounds}. One-hot (p2 = {d['p2']} blocks, public category "
        f"lists without `?`): {nominal}. Width p = {d['width']} (the paper's '35 features'; workclass keeps "
        "Never-worked, which no complete row has, and the label is a column).",
        "- Metric: the paper's 'F-norm / cumulative MSE' ‖X̂ − X‖²_F with the normalisation unstated; "
        f"we report the **per-entry MSE ‖X̂ − X‖²_F / (n·p)** on the [0, 1] design scale (multiply by "
        f"n·p = {d['rows'] * d['width']:,} for the cumulative figure; stored as `frob2`). X̂ is the "
        "published matrix: numerics clipped to [0, 1], each one-hot block set to its largest coordinate "
        "(the paper's §3.1 recovery), for every method alike.",
        "",
    ]


def _scales(f: dict[str, Any]) -> list[str]:
    fa, n = f["facts"], f["data"]["rows"]
    c1, p1 = fa["corrected_k1"], fa["paper_k1"]
    c10, p10 = fa.get("corrected_k10", c1), fa.get("paper_k10", p1)
    moments = fa["p"] + fa["p"] * (fa["p"] + 1) // 2
    same = all(fa[key]["step7_matches_ours"] for key in fa if key.startswith(("corrected_k", "paper_k")))
    return [
        f"- LAP: Lap(Δ/ε) per entry with Δ = p1 + 2·p2 = {fa['lap_delta']} (one replaced row moves each "
        f"numeric coordinate by ≤ 1 and each one-hot block by ≤ 2 in L1); 'LAP, paper scale' uses the "
        f"paper's Lap(p/ε) = Lap({fa['p']}/ε) (Theorem 3). Both then decode like X̂.",
        "- PCA: `mechanisms.pcappd.publish(x, design, epsilon=ε, k=k, variant=…, rng=…)`, ε/2 per stage. "
        f"At ε = 1: moments (the {moments} entries of Σx and triu(Σxxᵀ), then ÷ n = {n:,}) Δ = "
        f"{c1['moments']['sensitivity']:.4g} corrected (exact maximum) vs the paper's s = "
        f"{p1['moments']['sensitivity']:.4g}, Laplace b = {c1['moments']['scale']:.4g} vs "
        f"{p1['moments']['scale']:.4g}; component scores Δ = √(k(p1+2p2)) corrected vs √(kp) paper: "
        f"{c1['component_scores']['sensitivity']:.3g} vs {p1['component_scores']['sensitivity']:.3g} "
        "at k = 1, "
        f"{c10['component_scores']['sensitivity']:.3g} vs {p10['component_scores']['sensitivity']:.3g} at "
        f"k = 10 (b = 2Δ/ε). `corrected` is ε-DP; `paper` is not (its s is below the exact maximum). "
        f"The module's own step 7 equals our decoding: {'yes' if same else '**no**'}.",
        "",
    ]


def _energy_table(f: dict[str, Any]) -> list[str]:
    cum = f["energy"]["cumulative"]
    return [
        "**Energy of the top k eigenvectors** (cumulative share of the trace of the covariance of the "
        f"design matrix; the paper: {PAPER['energy']})",
        "",
        "| k | " + " | ".join(str(i + 1) for i in range(len(cum))) + " |",
        "|---|" + "---:|" * len(cum),
        "| ours, covariance (what the mechanism decomposes) | "
        + " | ".join(f"{100 * c:.1f} %" for c in cum)
        + " |",
        "| ours, uncentred XᵀX/n | "
        + " | ".join(f"{100 * c:.1f} %" for c in f["energy"]["cumulative_uncentred"])
        + " |",
        "",
    ]


def _main_table(f: dict[str, Any]) -> list[str]:
    ks, by = f["ks"], f["by_eps"]
    lo, hi = str(ks[0]), str(ks[-1])
    lines = [
        f"**Per-entry MSE of the published matrix** (mean ± sd over {len(f['seeds'])} trials; the paper "
        f"gives Fig. 2 only: {PAPER['versus']})",
        "",
        f"| ε | corrected k = {lo} | corrected k = {hi} | paper variant k = {lo} | paper variant k = {hi} "
        "| LAP (Δ = p1 + 2p2) | LAP, paper scale (p/ε) | uniform rows (no data) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e, r in by.items():
        lines.append(
            f"| {e} | {_ms(r['corrected'][lo]['mse'])} | {_ms(r['corrected'][hi]['mse'])} "
            f"| {_ms(r['paper'][lo]['mse'])} | {_ms(r['paper'][hi]['mse'])} | {_ms(r['lap']['mse'])} "
            f"| {_ms(r['lap_paper']['mse'])} | {_ms(r['uniform']['mse'])} |"
        )
    nn = f["no_noise"]
    lines.append(
        f"| ∞ (exact PCA, no noise) | {nn[lo]['mse']:.4f} | {nn[hi]['mse']:.4f} | {nn[lo]['mse']:.4f} "
        f"| {nn[hi]['mse']:.4f} | 0 | 0 | |"
    )
    return [*lines, ""]


def _k_table(f: dict[str, Any], variant: str) -> list[str]:
    ks, by = f["ks"], f["by_eps"]
    lines = [
        "| k | " + " | ".join(f"ε = {e}" for e in by) + " | no noise (decoded) | no noise (raw) |",
        "|---:|" + "---:|" * (len(by) + 2),
    ]
    for k in ks:
        cells = " | ".join(_ms(r[variant][str(k)]["mse"]) for r in by.values())
        lines.append(
            f"| {k} | {cells} | {f['no_noise'][str(k)]['mse']:.4f} | {f['no_noise'][str(k)]['raw_mse']:.4f} |"
        )
    return [*lines, ""]


def _diagnostics(f: dict[str, Any]) -> list[str]:
    """Numeric MSE and the share of categorical cells decoded wrong, at the smallest k."""
    k = str(f["ks"][0])
    lines = [
        f"**Where the error sits** (k = {k}): numeric-coordinate MSE / share of categorical cells "
        "(one-hot blocks) decoded to a wrong category",
        "",
        "| ε | corrected | paper variant | LAP | LAP, paper scale | uniform rows |",
        "|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(s: dict[str, Any]) -> str:
        return f"{s['numeric_mse']['mean']:.3f} / {100 * s['categorical_wrong']['mean']:.1f} %"

    for e, r in f["by_eps"].items():
        lines.append(
            f"| {e} | {cell(r['corrected'][k])} | {cell(r['paper'][k])} | {cell(r['lap'])} "
            f"| {cell(r['lap_paper'])} | {cell(r['uniform'])} |"
        )
    nn = f["no_noise"][k]
    lines.append(f"| ∞ | {nn['numeric_mse']:.3f} / {100 * nn['categorical_wrong']:.1f} % | | | | |")
    return [*lines, ""]


def _raw_table(f: dict[str, Any]) -> list[str]:
    """Per-entry MSE before decoding: the noise Theorem 3 compares."""
    ks = f["ks"]
    lo, hi = str(ks[0]), str(ks[-1])
    lines = [
        "**Before decoding** (per-entry MSE of the raw noisy matrix, the quantity Theorem 3 bounds: "
        "PCA O(k²/ε²) against LAP O(p²/ε²) per entry)",
        "",
        f"| ε | corrected k = {lo} | corrected k = {hi} | paper variant k = {lo} | LAP (Δ = p1 + 2p2) "
        "| LAP, paper scale |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for e, r in f["by_eps"].items():
        cells = (r["corrected"][lo], r["corrected"][hi], r["paper"][lo], r["lap"], r["lap_paper"])
        lines.append(f"| {e} | " + " | ".join(f"{c['raw_mse']['mean']:.3g}" for c in cells) + " |")
    return [*lines, ""]


def _reading(f: dict[str, Any]) -> list[str]:
    sig, cum = f["significance"], f["energy"]["cumulative"]
    cells = sig["corrected_vs_lap"]["cells"]
    rising = {v: sum(rho > 0 for rho in f["trend"][v].values()) for v in VARIANTS}
    rhos = {v: ", ".join(f"{rho:+.2f}" for rho in f["trend"][v].values()) for v in VARIANTS}
    best = {
        e: min(f["ks"], key=lambda k, r=r: r["corrected"][str(k)]["mse"]["mean"])
        for e, r in f["by_eps"].items()
    }
    return [
        "The paper's claims against ours:",
        "",
        f"- Energy: {PAPER['energy']} — ours {100 * cum[-1]:.1f} % for the top {len(cum)} of the covariance "
        f"({100 * cum[0]:.1f} % for the first); {100 * f['energy']['cumulative_uncentred'][-1]:.1f} % of the "
        "uncentred second moment.",
        f"- {PAPER['trend']} — ours: mean MSE rises with k (Spearman ρ > 0) at {rising['corrected']} of "
        f"{len(f['by_eps'])} ε for corrected (ρ = {rhos['corrected']}) and {rising['paper']} for the paper "
        f"variant (ρ = {rhos['paper']}); best k for corrected per ε: "
        + ", ".join(f"{e}: {k}" for e, k in best.items())
        + ".",
        f"- {PAPER['versus']} — ours (Welch t-test, p < {f['alpha']:g}, PCA mean lower), of {cells} (ε, k) "
        f"cells: corrected below LAP in {sig['corrected_vs_lap']['wins']}, below LAP at the paper's scale in "
        f"{sig['corrected_vs_lap_paper']['wins']}; paper variant {sig['paper_vs_lap']['wins']} and "
        f"{sig['paper_vs_lap_paper']['wins']}.",
        f"- Not in the paper: a data-free release (uniform random rows) is beaten by corrected in "
        f"{_count(f, 'corrected', 'uniform')} of {cells} cells and by LAP at {_count_lap(f)} of "
        f"{len(f['by_eps'])} ε; corrected is below the paper variant in {_count(f, 'corrected', 'paper')} "
        "of the cells — the paper variant is not DP yet adds more noise to the component scores "
        "(√(kp) > √(k(p1+2p2))) and only slightly less to the moments.",
        "",
    ]


def _count(f: dict[str, Any], variant: str, other: str) -> int:
    """(ε, k) cells where ``variant``'s mean per-entry MSE is below ``other``'s (a variant at
    the same k, or a k-free baseline)."""
    n = 0
    for r in f["by_eps"].values():
        for k in f["ks"]:
            theirs = r[other][str(k)] if other in VARIANTS else r[other]
            n += r[variant][str(k)]["mse"]["mean"] < theirs["mse"]["mean"]
    return n


def _count_lap(f: dict[str, Any]) -> int:
    return sum(r["lap"]["mse"]["mean"] < r["uniform"]["mse"]["mean"] for r in f["by_eps"].values())


def _differences(f: dict[str, Any]) -> list[str]:
    d = f["data"]
    return [
        "What differs from the paper:",
        "",
        f"- Data: the UCI training file only ({d['rows']:,} complete rows, not 45,222); the '35 features' "
        f"are our reconstruction ({d['p1']} numeric + 28 workclass/marital/relationship/race/sex dummies + "
        "2 income dummies); the paper's exact list is not given (the digest counts 32 + label, with "
        "workclass at 7 levels).",
        "- Normalisation of the error is ours (per entry on the [0, 1] design scale); the paper's axis "
        "is unlabelled beyond 'cumulative MSE'. Its Fig. 2 gives no numbers, so only the claims "
        "(ordering, trend, significance, energy) can be compared.",
        "- EXP (exponential mechanism with Blum–Ligett–Roth's utility) is not run: the paper does not "
        "define its output space or sampler, and a faithful one over Adult-sized databases is infeasible.",
        "- LAP: we give it the replace-one sensitivity p1 + 2p2 (its L1 sensitivity as an identity query "
        "on the design matrix) as well as the paper's p/ε; both are decoded like PCA's output.",
        "- `corrected` replaces the paper's categorical sensitivity s (too small: brute force over 0/1 "
        "records exceeds it) with a proven bound, and is ε-DP; `paper` is the literal algorithm (not DP).",
        "- Numeric columns are normalised by public bounds (the paper does not say how; data-derived "
        "min–max would leak). The ε = ∞ row is our ablation: exact mean and covariance, no noise.",
        "- The t-test is Welch's two-sample test on the per-trial MSEs (the paper says 'Student t-test').",
        "",
    ]


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    lines = [*_header(f), *_scales(f), *_energy_table(f), *_main_table(f), *_diagnostics(f), *_raw_table(f)]
    for variant, title in (("corrected", "corrected (ε-DP)"), ("paper", "paper variant (not DP)")):
        lines += [f"<details><summary>Per-entry MSE, {title}, every k</summary>", "", *_k_table(f, variant)]
        lines += ["</details>", ""]
    pub = {v: f["by_eps"][next(iter(f["by_eps"]))][f"{v}_publish_s"] for v in VARIANTS}
    lines += [
        f"One `publish` call on {f['data']['rows']:,} × {f['data']['width']}: corrected "
        f"{1000 * pub['corrected']['mean']:.0f} ms, paper variant {1000 * pub['paper']['mean']:.0f} ms "
        "(mean over k and trials at the first ε).",
        "",
    ]
    return [*lines, *_reading(f), *_differences(f)]


if __name__ == "__main__":
    sys.exit(standalone(run, render, sys.argv))
