"""The section of item 10: the DP-LDA data publishing reproduction (Figs. 3 and 4 on Adult):
accuracy and AUC on the real held-out rows, entropy and KL of the released rows, times, a
reading of the paper's claims against ours, and what differs from the paper."""

from __future__ import annotations

from typing import Any

from repro_lda_ppd import CLASSIFIERS, VARIANTS

from render.fmt import mean_sd

# The paper's Fig. 3/4 (read from the text: the figures give no table of values).
PAPER = {
    "ba": 85.3,
    "la": 75.5,
    "aca": "rises with ε; LDA > DiffGen-INFOGAIN for ε ≥ 0.25, slightly < DiffGen-MAX at high ε; small sd",
    "auc": "LDA > both DiffGen for ε > 0.5; lowest sd at every ε",
    "entropy": "LDA ≈ the original data; DiffGen-INFOGAIN ≈ 30 %, DiffGen-MAX ≈ 20 % of it",
    "kl": "LDA ≈ 1/3 of either DiffGen",
}


def _cut(f: dict[str, Any]) -> str:
    """A note when the time budget stopped the trials early."""
    done, planned = len(f["seeds"]), f.get("planned_trials", len(f["seeds"]))
    return (
        "" if done >= planned else f" — {planned} planned, stopped by the {f['budget_s']:.0f} s time budget"
    )


def _header(f: dict[str, Any]) -> list[str]:
    m, d, seeds = f["machine"], f["data"], f["seeds"]
    nominal = ", ".join(f"{k} {v}" for k, v in d["nominal"].items())
    walls = f["trial_wall_s"]
    return [
        f"- Reproduce: `{f['command']}` (or `.venv/bin/python benchmarks/repro_lda_ppd.py"
        f"{' --quick' if f['quick'] else ''}`)"
        + (" — these figures: `--quick`, 2 ε, 2 trials" if f["quick"] else ""),
        f"- Measured: {f['date']}, commit {m['commit']}, took {f['elapsed_s']:.0f} s ({len(walls)} trials, "
        f"{min(walls):.0f}–{max(walls):.0f} s each, {f.get('workers', 1)} worker processes); "
        f"nproc {m['nproc']}, {m['cpu']}, load average (1 min) at start {m['load_avg_1m']}; BLAS/OpenMP "
        "limited to one thread per process",
        f"- Trials: {len(seeds)}, seeds {seeds[0]}–{seeds[-1]} (the paper: 10){_cut(f)}; each draws a new "
        f"2/3 : 1/3 split and new noise; mean ± sd (the paper's error bars are sd). Generators "
        f"`default_rng([{f['base_seed']}, stream, round(100ε), seed])`, streams 0 split, 1 corrected, "
        "2 paper, 3 no noise.",
        f"- Data: `flows/demo/adult.csv`, {d['rows_dropped']:,} rows with `?` dropped → {d['rows']:,} "
        f"complete rows (the paper: 45,222 from train + test); {d['train_rows']:,} go to the mechanism, "
        f"{d['test_rows']:,} are the test rows. Features ({d['width']}): numeric "
        f"{', '.join(d['numeric'])} linear onto [0, 1] by the public bounds of `flows/demo/adult.yaml` "
        f"(p1 = {d['p1']}); "
        f"one-hot {nominal} (p2 = {d['p2']}); "
        f"label income > 50K (share {100 * d['positive_share']:.1f} %). Dropped: {', '.join(d['dropped'])}.",
        "- Released rows: `lda_ppd.LDAPPD().fit(rows, schema, plan, LDAPPDParams(variant=…, "
        "target='income'), m=n, rng=…)` with "
        "`plan = plan_budget('pure', ε, 0, LDAPPD().stage_weights(…))` "
        "on the 2/3 (as many rows as it holds): the greedy rows, decoded by "
        "`mechanisms.design` (numerics clipped to [0, 1], one-hot blocks by their largest coordinate) with "
        "their synthetic labels; classifiers: "
        + "; ".join(f"{k} = {v}" for k, v in f["classifiers"].items())
        + ".",
        "- Our diagnostic column 'LDA rule from the released statistics': no synthesis, the Fisher rule "
        "w = Σ⁻¹(μ̃₁ − μ̃₀) from the model's noisy class means μ̃_c, second moment M̃ and shares π̃, with "
        f"Σ = M̃ − Σ_c π̃_c μ̃_c μ̃_cᵀ, eigenvalues clipped at 0 plus {f['rule_ridge']:g}·I "
        "(the paper claims the samples serve better than the noisy statistics).",
        "",
    ]


COLUMNS = (
    ("lda", "corrected", "LDA classifier: corrected"),
    ("lda", "paper", "paper variant"),
    ("tree", "corrected", "tree: corrected"),
    ("tree", "paper", "paper variant"),
    ("model", "corrected", "LDA rule from the released statistics (no synthesis): corrected"),
    ("model", "paper", "paper variant"),
)


def _class_table(f: dict[str, Any], metric: str) -> list[str]:
    r = f["results"]
    fmt, unit = (".1f", "accuracy %") if metric == "accuracy" else (".3f", "ROC-AUC")
    paper = PAPER["aca"] if metric == "accuracy" else PAPER["auc"]
    lines = [
        f"**{unit} on the real held-out 1/3** (the paper, Fig. 3{'a' if metric == 'accuracy' else 'b'}: "
        f"{paper})",
        "",
        "| ε | " + " | ".join(c[2] for c in COLUMNS) + " |",
        "|---:|" + "---:|" * len(COLUMNS),
    ]
    for e in f["epsilons"]:
        rel = {v: r["releases"][f"{v}@{e:g}"] for v in VARIANTS}
        lines.append(
            f"| {e:g} | " + " | ".join(mean_sd(rel[v][c][metric], fmt) for c, v, _ in COLUMNS) + " |"
        )
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    cells = [mean_sd(nn[c][metric], fmt) if v == "corrected" else "" for c, v, _ in COLUMNS]
    lines.append(
        f"| ∞ (no noise, ε = {f['no_noise_epsilon']:g}; first {f['no_noise_trials']} trials) | "
        + " | ".join(cells)
        + " |"
    )
    ba = f" (paper BA {PAPER['ba']} %)" if metric == "accuracy" else ""
    la = f" (paper LA {PAPER['la']} %)" if metric == "accuracy" else ""
    best = {c: mean_sd(r["best"][c][metric], fmt) for c in CLASSIFIERS}
    lowest = mean_sd(r["lowest"][metric], fmt)
    lines += [
        f"| best achievable: trained on the real 2/3{ba} | "
        + " | ".join(best.get(c, "") if v == "corrected" else "" for c, v, _ in COLUMNS)
        + " |",
        f"| lowest achievable: majority class{la} | "
        + " | ".join(lowest if v == "corrected" and c != "model" else "" for c, v, _ in COLUMNS)
        + " |",
    ]
    return [*lines, ""]


def _info_table(f: dict[str, Any]) -> list[str]:
    r = f["results"]
    lines = [
        "**Information** (sum over the 11 columns of the 1-way entropy, bits, and of "
        f"KL(released ‖ real 2/3), bits; the paper, Fig. 4: entropy {PAPER['entropy']}; "
        f"KL {PAPER['kl']}) and the released rows' "
        "positive share",
        "",
        "| ε | entropy: corrected | paper variant | KL: corrected | paper variant | >50K share: corrected |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for e in f["epsilons"]:
        c, p = r["releases"][f"corrected@{e:g}"], r["releases"][f"paper@{e:g}"]
        lines.append(
            f"| {e:g} | {mean_sd(c['info']['entropy'], '.2f')} | {mean_sd(p['info']['entropy'], '.2f')} "
            f"| {mean_sd(c['info']['kl'], '.3f')} | {mean_sd(p['info']['kl'], '.3f')} "
            f"| {100 * c['positive_share']['mean']:.1f} % |"
        )
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    lines += [
        f"| ∞ (no noise) | {mean_sd(nn['info']['entropy'], '.2f')} | | {mean_sd(nn['info']['kl'], '.3f')} | "
        f"| {100 * nn['positive_share']['mean']:.1f} % |",
        f"| real 2/3 (the original) | {mean_sd(r['info_original']['entropy'], '.2f')} | | 0 | "
        f"| {100 * f['data']['positive_share']:.1f} % |",
        f"| real held-out 1/3 (sampling floor of KL) | {mean_sd(r['info_holdout']['entropy'], '.2f')} | "
        f"| {mean_sd(r['info_holdout']['kl'], '.3f')} | | |",
        "",
    ]
    return [*lines, *_info_by_column(f)]


def _info_by_column(f: dict[str, Any]) -> list[str]:
    """Per-column entropy and KL (means over trials): where the KL sits."""
    r, top = f["results"], f"{f['epsilons'][-1]:g}"
    c, nn = (
        r["releases"][f"corrected@{top}"]["info"],
        r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]["info"],
    )
    orig = r["info_original"]
    lines = [
        f"<details><summary>Entropy / KL (bits) per column: real 2/3, corrected at ε = {top}, "
        "no noise</summary>",
        "",
        f"| column | entropy: real | corrected ε = {top} | no noise | KL: corrected ε = {top} | no noise |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for j, name in enumerate(f["info_columns"]):
        lines.append(
            f"| {name} | {orig['entropy_by_column'][j]:.2f} | {c['entropy_by_column'][j]:.2f} "
            f"| {nn['entropy_by_column'][j]:.2f} | {c['kl_by_column'][j]:.3f} | {nn['kl_by_column'][j]:.3f} |"
        )
    return [*lines, "", "</details>", ""]


def _time_table(f: dict[str, Any]) -> list[str]:
    r = f["results"]
    lines = [
        f"**Time** of one release on the {f['data']['train_rows']:,} training rows (mean ± sd over trials, "
        f"seconds; the paper reports none). Measured inside {f.get('workers', 1)} concurrent worker "
        "processes on shared cores, so the spread follows the machine's load. One release is one "
        "`LDAPPD.fit` call: the two noisy measurements (milliseconds), the greedy synthesis (a "
        "Python loop over rows, O(m·p²): nearly all of the time) and the decode.",
        "",
        "| ε | release: corrected | release: paper |",
        "|---:|---:|---:|",
    ]
    keys = [(f"{e:g}", f"corrected@{e:g}", f"paper@{e:g}") for e in f["epsilons"]]
    for label, ck, pk in keys:
        c, p = r["releases"][ck], r["releases"][pk]
        lines.append(f"| {label} | {mean_sd(c['release_s'], '.2f')} | {mean_sd(p['release_s'], '.2f')} |")
    return [*lines, ""]


def _reading(f: dict[str, Any]) -> list[str]:
    r, eps = f["results"], f["epsilons"]
    rel = {e: r["releases"][f"corrected@{e:g}"] for e in eps}
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    acc = {e: rel[e]["lda"]["accuracy"]["mean"] for e in eps}
    la, ba = r["lowest"]["accuracy"]["mean"], r["best"]["lda"]["accuracy"]["mean"]
    beats_rule = sum(rel[e]["lda"]["accuracy"]["mean"] > rel[e]["model"]["accuracy"]["mean"] for e in eps)
    top = eps[-1]
    kl_cols = sorted(zip(rel[top]["info"]["kl_by_column"], f["info_columns"], strict=True), reverse=True)[:2]
    h_ratio = {e: rel[e]["info"]["entropy"]["mean"] / r["info_original"]["entropy"]["mean"] for e in eps}
    accs = ", ".join(f"{acc[e]:.1f} %" for e in eps)
    eps_list = ", ".join(f"{e:g}" for e in eps)
    above = sum(a > la for a in acc.values())
    auc0, auc1 = rel[eps[0]]["lda"]["auc"]["mean"], rel[top]["lda"]["auc"]["mean"]
    nn_acc = nn["lda"]["accuracy"]["mean"]
    ceiling = (
        "the synthesis, not the noise, sets the ceiling (the module notes that later numerics collapse "
        "towards the class means, so within-class spread is lost)"
        if nn_acc <= max(acc.values()) + 1.0
        else "noise still costs accuracy at every ε"
    )
    h_txt = ", ".join(f"{100 * h:.0f} %" for h in h_ratio.values())
    return [
        "The paper's claims against ours (corrected, LDA classifier unless said):",
        "",
        f"- BA {PAPER['ba']} % / LA {PAPER['la']} % — ours BA {ba:.1f} % (LDA), "
        f"{r['best']['tree']['accuracy']['mean']:.1f} % (tree), LA {la:.1f} %.",
        f"- Accuracy rises with ε — ours {accs} at ε = {eps_list}; above the majority class at {above} of "
        f"{len(eps)} ε; AUC {auc0:.3f} → {auc1:.3f}.",
        f"- Samples serve better than the noisy statistics (§3.2) — the LDA classifier on the released rows "
        f"beats the rule read off the statistics at {beats_rule} of {len(eps)} ε.",
        f"- Without noise the greedy synthesis alone gives {nn_acc:.1f} % "
        f"(AUC {nn['lda']['auc']['mean']:.3f}) against BA {ba:.1f} % and {acc[top]:.1f} % at ε = {top:g}: "
        f"{ceiling}.",
        f"- Entropy ≈ the original — ours {h_txt} of the real 2/3's sum of 1-way entropies (ε = {eps_list}); "
        f"KL at ε = {top:g} is dominated by "
        + " and ".join(f"{name} ({v:.2f} bits)" for v, name in kl_cols)
        + ": matching moments does not reproduce point masses (capital loss 0, 40 hours a week).",
        "- The DiffGen comparisons (ACA, AUC, entropy 30 % / 20 %, KL 1/3) cannot be checked: DiffGen is "
        "not run.",
        "",
    ]


def _differences(f: dict[str, Any]) -> list[str]:
    d = f["data"]
    return [
        "What differs from the paper:",
        "",
        f"- Data: the UCI training file only ({d['rows']:,} complete rows, not 45,222), so the mechanism "
        f"sees {d['train_rows']:,} rows, not about 30,150. Features as the paper describes (its '35' "
        f"cannot be matched exactly: ours are {d['width']} plus the label).",
        "- DiffGen-INFOGAIN / DiffGen-MAX (Mohammed et al., KDD 2011) are not run: they need a taxonomy "
        "tree per attribute, which the paper does not give. Only the BA / LA reference points are "
        "comparable.",
        "- Classifiers: the paper trains an LDA classifier on its own output and C4.5 on DiffGen's; we train "
        f"both an LDA classifier and a decision tree ({f['classifiers']['tree']}) on every release. "
        "BA / LA are computed on our split per trial, not copied.",
        "- `corrected` replaces the paper's categorical Δ (too small: not a valid bound) with a proven one "
        "and spends 5 % of ε on noisy class counts (ε-DP); `paper` is the literal Δ with the true n₁, n₂ "
        "(not DP). Both treat n as public (replace-one neighbours, as the paper's proofs do). The no-noise "
        "row (ε = 1e9, corrected) is our ablation: the greedy synthesis's own loss.",
        "- Entropy and KL: the paper's estimators are unstated (and DiffGen releases generalised values, "
        "so its entropy is over its own cells); ours are sums of 1-way marginals over public bins, which "
        "ignore dependence between columns. Our numbers only say how close the released marginals are to "
        "the real ones.",
        "- Numeric columns are normalised by public bounds (the paper's data-derived normalisation "
        "would leak).",
        "",
    ]


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    return [
        *_header(f),
        *_class_table(f, "accuracy"),
        *_class_table(f, "auc"),
        *_info_table(f),
        *_time_table(f),
        *_reading(f),
        *_differences(f),
    ]
