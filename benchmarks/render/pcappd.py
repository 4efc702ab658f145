"""The section of item 9: the DP-PCA data publishing reproduction (Fig. 2 on Adult): the noise
scales, the energy of the top eigenvectors, the per-entry MSE against LAP and uniform rows,
where the error sits, a reading of the paper's claims against ours, and what differs from the
paper."""

from __future__ import annotations

from typing import Any

from repro_pcappd import VARIANTS

from render.fmt import mean_sd

# The paper's Fig. 2 (read from the text; the figure itself gives no table of values).
PAPER = {
    "data": "Adult train + test, 45,222 complete rows, '35 features'",
    "energy": "top 10 eigenvectors > 90 % of the energy (Fig. 2a)",
    "trend": "MSE rises with k (noise overshadows the extra components)",
    "versus": "PCA < LAP and < EXP at every k = 1..10 and ε (t-test p < 0.01, Fig. 2b, c)",
}


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
        "- PCA: `pcappd.PCAPPD().fit(rows, schema, plan, PCAPPDParams(variant=…, components=k), "
        "m=n, rng=…)` with `plan = plan_budget('pure', ε, 0, PCAPPD().stage_weights(…))`, ε/2 per stage. "
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
            f"| {e} | {mean_sd(r['corrected'][lo]['mse'])} | {mean_sd(r['corrected'][hi]['mse'])} "
            f"| {mean_sd(r['paper'][lo]['mse'])} | {mean_sd(r['paper'][hi]['mse'])} "
            f"| {mean_sd(r['lap']['mse'])} "
            f"| {mean_sd(r['lap_paper']['mse'])} | {mean_sd(r['uniform']['mse'])} |"
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
        cells = " | ".join(mean_sd(r[variant][str(k)]["mse"]) for r in by.values())
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
        "One `PCAPPD.fit` call (decode included) on "
        f"{f['data']['rows']:,} × {f['data']['width']}: corrected "
        f"{1000 * pub['corrected']['mean']:.0f} ms, paper variant {1000 * pub['paper']['mean']:.0f} ms "
        "(mean over k and trials at the first ε).",
        "",
    ]
    return [*lines, *_reading(f), *_differences(f)]
