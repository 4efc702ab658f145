"""The section of item 5: ``factor_gauss`` beside smartnoise-synth's MST and AIM (how each ran,
utility and disclosure checks, what differs between the methods)."""

from __future__ import annotations

import math
from typing import Any

from render.fmt import PEER_VENV, duration, mean_range


def _cell(s: dict[str, Any] | None, fmt: str, runs: int) -> str:
    if s is None:
        return "n/a"
    return f"{s['mean']:{fmt}}" if runs == 1 else mean_range(s, fmt)


def _peer_time(m: dict[str, Any], timeout_s: float) -> str:
    if m["completed"] and m.get("total_s") is None:
        return "–"
    if m["completed"] == 0:
        statuses = {r["status"] for r in m["runs"]}
        if statuses == {"timeout"}:
            r = m["runs"][0]
            done = ""
            if r.get("rounds_done"):
                used = r.get("budget_used_share")
                share = "" if used is None else f", {used:.0%} of its ρ spent"
                done = f"; killed after {r['rounds_done']} rounds{share}"
            return f"**did not finish in {duration(timeout_s)}**{done}"
        return "failed (" + ", ".join(sorted(statuses)) + ")"
    t = m["total_s"]
    text = f"{t['mean']:.2f} s" + ("" if m["completed"] == 1 else f" [{t['min']:.2f}, {t['max']:.2f}]")
    return (
        text
        if m["completed"] == len(m["runs"])
        else f"{text} ({len(m['runs']) - m['completed']} runs failed)"
    )


def _noise_note(f: dict[str, Any], rho: float | None) -> str:
    """MST's and AIM's per-cell noise against the sizes of the 2-way tables (public facts)."""
    k = sorted(f["n_bins"].values(), reverse=True)
    cells = k[0] * k[1]
    if rho is None:
        return f"the largest 2-way table has {cells:,} cells for {f['train_rows']:,} rows."
    mst = math.sqrt(3 / (2 * rho))
    aim = math.sqrt(16 * len(k) / (2 * 0.9 * rho))
    return (
        f"at ρ = {rho:.4f} each MST 2-way measurement adds noise of σ = {mst:.1f} to every cell "
        f"(AIM starts at σ = {aim:.0f} per cell over 16·d = {16 * len(k)} planned rounds), and the largest "
        f"2-way table has {cells:,} cells for {f['train_rows']:,} rows (expected L1 noise ≈ "
        f"{cells * mst * math.sqrt(2 / math.pi):,.0f} there for MST)."
    )


def _busy(m: dict[str, Any]) -> list[str]:
    if m["load_avg_1m"] <= m["nproc"]:
        return []
    return [
        f"**The machine was busy with other work during this run** (1-min load average "
        f"{m['load_avg_1m']} at start on {m['nproc']} CPUs): the times are inflated by an unknown "
        "factor; their order of magnitude, not their exact value, is the result.",
        "",
    ]


def render(f: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    methods, timeout_s = f["methods"], f["aim_timeout_s"]
    env = f.get("peer_env") or {}
    pk = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items()) or "unknown (no peer run finished)"
    bins = ", ".join(f"{k} {v}" for k, v in f["n_bins"].items())
    lines = [
        f"- Peer venv used for this run: `{f['peer_python']}` (Python {env.get('python', '?')}): {pk}. "
        f"Create it once with `{PEER_VENV}` (torch first, so pip takes the CPU wheel); "
        "`--peer-python PATH` points elsewhere. smartnoise-synth is not a dependency of the project.",
        "",
        f"Same split as item 4 ({f['train_rows']:,} training / {f['test_rows']:,} test rows). Every method "
        "gets the training rows as **public-bin indices** (`table_to_bins`: "
        f"{bins} bins), returns {f['train_rows']:,} synthetic rows of bin indices, and all are decoded by "
        "the same `bins_to_table` and scored by the project's own checks (`checks.reports."
        "utility_report` / `linkage_report` / `flat_metrics`, as in a release: real = the 80 %, "
        "`real_test` and the membership holdout = the 20 %). Decoding and the checks' subsamples use "
        "generators seeded by the seed index only, so within a seed the methods differ only by their bins.",
        "",
        "How each method was run:",
        "",
        "- **factor_gauss**: in-process, `factor_gauss.SYNTHESIZER.fit(MixedRows(bins), schema, "
        f"plan_budget('zcdp', {f['epsilon']:g}, {f['delta']:g}, STAGE_WEIGHTS), FactorGaussParams(), "
        "m=n, rng=default_rng(seed))` (fit includes drawing the m rows).",
        f"- **MST / AIM**: smartnoise-synth `Synthesizer.create('mst' | 'aim', epsilon={f['epsilon']:g}, "
        f"delta={f['delta']:g})` (AIM with its defaults: degree 2, max_model_size 80, 16·d rounds), "
        "`fit(df, transformer=tt, preprocessor_eps=0.0)`, `sample(n)`, in a fresh peer-venv process "
        "(`benchmarks/peer_smartnoise.py`) with `np.random.seed(seed)`. `tt` is a `TableTransformer` of "
        "one `LabelTransformer(nullable=False)` per column, fitted on a frame built from the public "
        "domain only (column j holds 0..k_j−1, cycled), and checked to be the identity on 0..k_j−1 with "
        "cardinalities = the public bin counts. Because it is already fitted, snsynth skips its own "
        "preprocessing: **no category set is read from the data** and no budget goes to preprocessing. "
        "Both then spend the whole (ε, δ): they convert it to ρ with OpenDP's Gaussian (ε, δ) search "
        "(MST: ρ/3 one-way marginals, ρ/3 tree selection, ρ/3 two-way marginals; AIM: 0.9 measure / "
        "0.1 select per round). factor_gauss converts with its own `zcdp_rho` and splits ρ 0.5 / 0.5 "
        "(marginals / latent second moment).",
        f"- AIM: {len(methods['aim']['runs'])} seed, killed (with its process group) if not done after "
        f"{duration(timeout_s)} wall time.",
        "- Reference row: n rows drawn with replacement from the real training bins (what sampling "
        "noise alone costs; no privacy at all), decoded and scored the same way.",
        "",
        "Time = fit + sample to bin indices (decoding and scoring excluded, they are the same for all); "
        "MST/AIM times are measured inside the peer process, so they exclude its interpreter start and "
        "imports but include JAX tracing/compilation in that fresh process. No warm-up for any method. "
        "Values: mean [min, max] over the seeds that finished.",
        "",
        *_busy(machine),
        "| method | (ε, δ) given | seeds | fit + sample | 1-way TVD | 2-way TVD | corr. diff | pMSE | "
        "TSTR AUC | TRTR AUC |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in methods.values():
        x, n = m.get("metrics") or {}, m["completed"]
        eps = f"({f['epsilon']:g}, {f['delta']:g})" if m.get("total_s") or not m["completed"] else "none"
        seeds = ", ".join(str(s) for s in m["seeds"])
        lines.append(
            f"| {m['label']} | {eps} | {seeds} | {_peer_time(m, timeout_s)} | "
            + " | ".join(
                _cell(x.get(k), ".4f", n) if n else "n/a"
                for k in ("tvd_1way", "tvd_2way", "corr_diff", "pmse", "tstr_auc", "trtr_auc")
            )
            + " |"
        )
    lines += [
        "",
        "Disclosure checks (same runs):",
        "",
        "| method | exact-match rate | unique exact-match rate | DCR q05 (Gower) | membership share |",
        "|---|---|---|---|---|",
    ]
    for m in methods.values():
        x, n = m.get("metrics") or {}, m["completed"]
        lines.append(
            f"| {m['label']} | "
            + " | ".join(
                _cell(x.get(k), ".4f", n) if n else "n/a"
                for k in ("exact_match_rate", "unique_exact_match_rate", "dcr_q05", "membership_share")
            )
            + " |"
        )
    rho = {k: r["rho"] for k, m in methods.items() for r in m["runs"] if r.get("rho") is not None}
    rss = {
        k: max(r["peak_rss_mb"] for r in m["runs"] if "peak_rss_mb" in r)
        for k, m in methods.items()
        if any("peak_rss_mb" in r for r in m["runs"])
    }
    lines += [
        "",
        "What differs between the methods:",
        "",
        "- **Model.** factor_gauss: private 1-way marginals plus one private latent correlation matrix "
        "(Gaussian copula with a factor model), all pairs at once. MST: private 1-way marginals, a "
        "privately selected maximum spanning tree of 2-way marginals (d − 1 pairs), Private-PGM "
        "graphical model. AIM: adaptively, privately selected 1- and 2-way marginals, Private-PGM.",
        "- **Accounting.** Same (ε, δ) = "
        f"({f['epsilon']:g}, {f['delta']:g}) for all, each converted to ρ-zCDP by its own accountant: "
        + ", ".join(f"{k} ρ = {v:.6f}" for k, v in rho.items())
        + " (factor_gauss: `mechanisms.accounting.zcdp_rho`; smartnoise: `snsynth.utils.cdp_rho`, an "
        "OpenDP search). All three treat n as public (replace-one neighbours): factor_gauss uses it in "
        "its sensitivities, MST passes the true row count to its estimator.",
        "- **Randomness.** factor_gauss draws everything from the seeded generator (bit-reproducible). "
        "smartnoise draws its Gaussian noise through OpenDP's unseedable CSPRNG; only selection, domain "
        "compression and sampling follow `np.random.seed`, so its seeds are not reproducible.",
        "- **Domain.** All three see the same public bins. MST additionally merges the categories whose "
        "noisy count is below 3σ into one and, when sampling, redraws them uniformly among the merged "
        "ones (post-processing of its noisy 1-way marginals). These bins are fine-grained for MST and AIM, "
        "which measure whole marginal tables cell by cell: "
        + _noise_note(f, rho.get("mst") or rho.get("aim"))
        + " Coarser public bins (e.g. Private-PGM's usual Adult preprocessing) would suit them better; "
        "factor_gauss measures only 1-way histograms and one p × p matrix, whatever the bin counts.",
        "- **Output.** All emit bin indices; `bins_to_table` draws continuous values uniformly within "
        "their bin for every method, so differences within a bin are not measured.",
        "- **Runtime.** factor_gauss is numpy in-process; MST and AIM run Private-PGM (JAX on CPU) "
        "mirror descent (MST: 1,000 iterations for selection, 5,000 for the final estimate; AIM: 1,000 "
        "after every round)"
        + (
            "; peak RSS of the peer process (max over seeds): "
            + ", ".join(f"{k.upper()} {v / 1024:.1f} GB" for k, v in rss.items())
            if rss
            else ""
        )
        + ".",
        "",
        "Reading the disclosure columns: exact matches compare decoded values, and continuous values "
        "are redrawn uniformly within their bin, so an exact match needs every continuous column to "
        "land on the same value (likely only for narrow integer bins); the rate is near 0 for every "
        "method here, including the non-private resample, and says little. DCR q05 is the 5 % "
        "quantile of the Gower distance from synthetic rows to their closest real training row; "
        "membership share is the share of synthetic rows closer to a training row than to any "
        "holdout row (0.5 = no closer to the fitted rows than to fresh rows).",
        "",
    ]
    return lines
