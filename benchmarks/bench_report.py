"""Render the stored results as BENCHMARKS.md (and the same sections for the terminal)."""

from __future__ import annotations

import importlib
import math
import statistics
from typing import Any

REPRODUCTIONS = (
    "dpfm",
    "ron_gauss",
    "private_pca",
    "pcappd",
    "lda_ppd",
    "spectral",
)  # benchmarks/repro_<item>.py: run() and render()
BENCH_MODULES = ("sampler", "ledger", "stream")  # benchmarks/bench_<item>.py: run() and render()
ITEMS = ("mechanism", "scale", "demo", "utility", "peers", *REPRODUCTIONS, *BENCH_MODULES)
TITLES = {
    "mechanism": "1. Mechanism time on Adult (in-process, no Prefect)",
    "scale": "2. 1,000,000 rows × 15 columns through the CLI release",
    "demo": "3. `make demo` wall time",
    "utility": "4. Utility at ε = 1, δ = 1e-6 (Adult, 80/20 split)",
    "peers": "5. Peer benchmark: factor_gauss, smartnoise-synth MST and AIM at ε = 1 (Adult, 80/20 split)",
    "dpfm": "6. Reproduction: DPFM (Zhang, Xu, Tang, Qu), simulations I/II and Adult",
    "ron_gauss": "7. Reproduction: RON-Gauss (Chanyaswad, Liu, Mittal), the three tasks at ε = 1",
    "private_pca": "8. Reproduction: private PCA + low-dimensional synthesis (He, Strohmer, Vershynin, Zhu)",
    "pcappd": "9. Reproduction: DP-PCA data publishing on Adult",
    "lda_ppd": "10. Reproduction: DP-LDA data publishing on Adult",
    "spectral": "11. Reproduction: spectral anonymization P/J/O (Perkonoja, Virta), simulations and linkage",
    "sampler": "12. Noise sampler throughput: numpy against OpenDP (vetted), and the cost in a release",
    "ledger": "13. Budget ledger cost per release: SQLite against PostgreSQL, by the dataset's history",
    "stream": "14. Streaming releases: 100k, 1M and 10M rows on the local engine; Dask against local at 1M",
}
PEER_VENV = "python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.13.0 smartnoise-synth"
SERVER_VARS = "PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=90"
PREFECT_VARS = f"PREFECT_HOME=$(mktemp -d) {SERVER_VARS}"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _range(s: dict[str, Any], fmt: str = ".4f") -> str:
    return f"{s['mean']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"


def _machine(entry: dict[str, Any]) -> list[str]:
    m = entry["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    return [
        f"- Reproduce: `{entry['command']}`",
        f"- Measured: {entry['date']}, commit {m['commit']}, took {entry['elapsed_s']:.0f} s",
        f"- Machine: nproc {m['nproc']}, {m['cpu']}, {m['ram_gb']} GB RAM, {m['os']}, "
        f"Python {m['python']}; load average (1 min) at start {m['load_avg_1m']}",
        f"- Packages: {pk}",
        "",
    ]


def _mechanism(f: dict[str, Any]) -> list[str]:
    tr, full, load = f["train"], f["full"], f["loading_full"]
    lines = [
        f"Median of {tr['repeats']} runs (seeds 0–{tr['repeats'] - 1}, after one untimed warm-up) of "
        "`factor_gauss.fit(bins, schema, plan, params, m=len(bins), rng=default_rng(seed))` "
        "followed by `bins_to_table(...)` (the decode to values), ε = 1, δ = 1e-6, zCDP, "
        "default stage weights. Reading and binning are not included (listed below for scale).",
        "",
        "| data | rows | fit | decode | fit + decode | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r, target in (("80% training split", tr, "< 1 s"), ("full Adult", full, "")):
        verdict = f"{target}: {_met(r['total_s'] < 1.0)}" if target else ""
        lines.append(
            f"| {name} | {r['rows']:,} | {r['fit_s']:.3f} s | {r['decode_s']:.3f} s | "
            f"**{r['total_s']:.3f} s** | {verdict} |"
        )
    lines += [
        "",
        f"Not timed above: `read_table` of the full CSV {load['read_table_s']:.3f} s, "
        f"`table_to_bins` {load['table_to_bins_s']:.3f} s (medians of {load['repeats']}).",
        "",
    ]
    return lines


def _phase_table(big: dict[str, Any], small: dict[str, Any], n_big: str) -> list[str]:
    if not big["phases"] or not small["phases"]:
        return ["(phase breakdown unavailable: the verbose log lines were not found)", ""]
    keys = list(dict.fromkeys([*small["phases"], *big["phases"]]))
    lines = [f"| phase | Adult 32,561 rows | {n_big} rows |", "|---|---:|---:|"]
    for k in keys:
        a, b = small["phases"].get(k), big["phases"].get(k)
        lines.append(f"| {k} | {'' if a is None else f'{a:.1f} s'} | {'' if b is None else f'{b:.1f} s'} |")
    lines.append(f"| **total wall** | {small['wall_s']:.1f} s | {big['wall_s']:.1f} s |")
    return [*lines, ""]


def _server_rows(cli: dict[str, Any], rows: str) -> list[str]:
    """Runs against a long-lived ``prefect server start`` (PREFECT_API_URL set): no
    temporary server to start or stop; RSS excludes the server process."""
    if "big_server" not in cli:
        return []
    big, small = cli["big_server"], cli["adult_server"]
    return [
        f"| 1M release, running Prefect server | {rows} | **{big['wall_s']:.1f} s** | "
        f"{big['peak_rss_tree_mb'] / 1024:.2f} GB | {big['peak_rss_main_mb'] / 1024:.2f} GB | "
        f"< 30 s: {_met(big['wall_s'] < 30)} |",
        f"| Adult demo data, running Prefect server | 32,561 | {small['wall_s']:.1f} s | "
        f"{small['peak_rss_tree_mb'] / 1024:.2f} GB | {small['peak_rss_main_mb'] / 1024:.2f} GB | |",
        "",
        "The last two rows ran with `PREFECT_API_URL` pointing at a `prefect server start` on "
        "loopback (same PREFECT_HOME), as scheduled releases run; their RSS excludes the server.",
    ]


def _scale(f: dict[str, Any]) -> list[str]:
    cli, mech = f["cli"], f["inprocess"]
    big, small = cli["big"], cli["adult"]
    rows = f"{f['rows']:,}"
    gb = big["peak_rss_tree_mb"] / 1024
    lines = [
        f"Input: {rows} rows drawn with replacement from Adult (seed {f['seed']}), "
        f"{cli['input_csv_mb']:.0f} MB of CSV written in {f['make_csv_s']:.1f} s (not counted); "
        "the spec is `flows/demo/adult.yaml` with `dataset.path` pointing at it and δ lowered to "
        "1/(10·n) = 1e-7 (the flow refuses δ ≥ 1/n), so each release also runs "
        "the demo's post-release checks, report and gates. "
        "The runs share one PREFECT_HOME whose database a first, discarded 32k-row run created, "
        "as on a steward's machine after its first release (item 3 gives the cold first-run "
        "cost); any PREFECT_* variable of the caller's environment is removed. "
        f"Peak RSS is the sum over the CLI process and its children (the temporary Prefect "
        "server), sampled every 0.1 s; shared pages count once per process, and spikes "
        "shorter than 0.1 s can be missed. One run each, back to back.",
        "",
        f"CLI command (the benchmark runs it with {PREFECT_VARS}):",
        "",
        f"    {big['command']}",
        f"    {small['command']}",
        "",
        "| run | rows | wall | peak RSS (tree) | peak RSS (CLI process) | targets |",
        "|---|---:|---:|---:|---:|---|",
        f"| 1M release | {rows} | **{big['wall_s']:.1f} s** | **{gb:.2f} GB** | "
        f"{big['peak_rss_main_mb'] / 1024:.2f} GB | < 30 s: {_met(big['wall_s'] < 30)}; "
        f"< 3 GB: {_met(gb < 3)} |",
        f"| Adult demo data | 32,561 | {small['wall_s']:.1f} s | {small['peak_rss_tree_mb'] / 1024:.2f} GB | "
        f"{small['peak_rss_main_mb'] / 1024:.2f} GB | |",
        *_server_rows(cli, rows),
        "",
        f"Fixed cost vs data-dependent part: the 32k-row run ({small['wall_s']:.1f} s) is mostly "
        "fixed cost (imports, Prefect's temporary server start, GX context set-up, flow "
        f"bookkeeping). The difference, **{cli['data_dependent_s']:.1f} s**, estimates the part "
        f"that grows with the data (1M / 32k wall ratio {cli['wall_ratio']:.2f}, same session).",
    ]
    server = big["phases"].get("Prefect temporary server start")
    if server is not None:
        lines.append(
            f"Prefect's temporary server start alone (from its 'Starting temporary server' log line "
            f"to 'Beginning flow run'): {server:.1f} s in the 1M run, "
            f"{small['phases']['Prefect temporary server start']:.1f} s in the 32k run."
        )
    lines += [
        "",
        "Phases, from the timestamps of the `--verbose` log (millisecond resolution; each task's "
        "time runs from the previous task's end, so it includes Prefect's per-task overhead):",
        "",
        *_phase_table(big, small, rows),
        f"In-process mechanism time on the same {rows} rows (as in item 1, median of "
        f"{mech['repeats']} after a warm-up): fit {mech['fit_s']:.2f} s, decode "
        f"{mech['decode_s']:.2f} s, **fit + decode {mech['total_s']:.2f} s**. Not included: "
        f"`read_table` {mech['loading']['read_table_s']:.2f} s, `table_to_bins` "
        f"{mech['loading']['table_to_bins_s']:.2f} s (medians of {mech['loading']['repeats']}).",
        "",
    ]
    return lines


def _demo(f: dict[str, Any]) -> list[str]:
    warm = ", ".join(f"{x:.1f} s" for x in f["warm_wall_s"])
    return [
        "`make demo` with the environment already installed is `.venv/bin/dprelease demo --out releases`; "
        "the benchmark runs exactly that with `--out` in a temporary folder and a private "
        f"PREFECT_HOME (and {SERVER_VARS}). The times **exclude the "
        "first-time venv install** (`pip install -e '.[dev]'`) that `make demo` does on a fresh clone.",
        "",
        f"    {f['command']}",
        "",
        "| run | wall | peak RSS (tree) |",
        "|---|---:|---:|",
        f"| first ever run (empty PREFECT_HOME: Prefect creates its database), 1 run | "
        f"{f['cold']['wall_s']:.1f} s | {f['cold']['peak_rss_tree_mb'] / 1024:.2f} GB |",
        f"| later runs (database exists), median of {len(f['warm_wall_s'])} ({warm}) | "
        f"**{f['warm_median_s']:.1f} s** | {f['warm_peak_rss_tree_mb'] / 1024:.2f} GB |",
        "",
    ]


def _utility(f: dict[str, Any]) -> list[str]:
    cfg = f["configs"]
    lines = [
        f"Split: `train_test_split(test_size=0.2, random_state=0)` of the 32,561 rows → "
        f"{f['train_rows']:,} training / {f['test_rows']:,} test rows (test positive rate "
        f"{f['positive_rate_test']:.3f}). Each release: `fit` on the training bins with "
        f"m = {f['train_rows']:,}, `rng = default_rng(seed)` for seeds 0–{f['seeds'] - 1}, "
        "then `bins_to_table` with the same generator.",
        "",
        "- **1-way TVD**: per column ½ Σ|p − q| between the normalised `np.bincount`s of the "
        "real training bins and the synthetic table re-binned with `table_to_bins` (i.e. the "
        "released values seen through the public bins); averaged over the 15 columns.",
        "- **AUC**: ROC-AUC for `income == '>50K'` of `HistGradientBoostingClassifier(random_state=0, "
        "categorical_features='from_dtype')` trained on the synthetic table (categoricals as "
        "pandas Categorical with the schema's declared categories, continuous as float), tested "
        "on the real 20%.",
        "",
        f"Values: mean over {f['seeds']} seeds [min, max].",
        "",
        "| release | mean 1-way TVD | worst column (TVD) | AUC (synthetic → real) |",
        "|---|---|---|---|",
    ]
    for c in cfg.values():
        lines.append(
            f"| {c['label']} | {_range(c['mean_tvd'])} | {c['worst_column']} "
            f"({_range(c['worst_column_tvd'])}) | {_range(c['auc'])} |"
        )
    ref = f["resample_reference"]
    lines += [
        f"| reference: trained on the real 80% | | | {f['real_auc']:.4f} (one model, deterministic) |",
        f"| reference: iid resample of the real 80% (same size), sampling noise only | "
        f"{_range(ref['mean_tvd'])} | {ref['worst_column']} ({_range(ref['worst_column_tvd'])}) | |",
        "",
    ]
    d = cfg["default"]
    g = f["correction_gain"]
    lines += [
        f"Targets (on the mean over seeds, default release): mean 1-way TVD ≤ 0.02: "
        f"{d['mean_tvd']['mean']:.4f}, {_met(d['mean_tvd']['mean'] <= 0.02)}; synthetic AUC ≥ 0.85: "
        f"{d['auc']['mean']:.4f}, {_met(d['auc']['mean'] >= 0.85)} "
        f"(worst seed {d['auc']['min']:.4f}).",
        "",
        "What the attenuation correction contributes (with minus without, paired by seed: the "
        "correction is post-processing, so the same seed gives the same noisy measurements): "
        f"AUC {_range(g['auc'], '+.4f')}, mean 1-way TVD {_range(g['mean_tvd'], '+.4f')}.",
        "",
        "Mean TVD per column, default release at ε = 1 (over seeds):",
        "",
        "| " + " | ".join(d["per_column_mean"]) + " |",
        "|" + "---:|" * len(d["per_column_mean"]),
        "| " + " | ".join(f"{v:.3f}" for v in d["per_column_mean"].values()) + " |",
        "",
    ]
    return lines


def _cell(s: dict[str, Any] | None, fmt: str, runs: int) -> str:
    if s is None:
        return "n/a"
    return f"{s['mean']:{fmt}}" if runs == 1 else f"{s['mean']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


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
            return f"**did not finish in {_duration(timeout_s)}**{done}"
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


def _peers(f: dict[str, Any], machine: dict[str, Any]) -> list[str]:
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
        "- **factor_gauss**: in-process, `factor_gauss.fit(bins, schema, "
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
        f"{_duration(timeout_s)} wall time.",
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


RENDER = {"mechanism": _mechanism, "scale": _scale, "demo": _demo, "utility": _utility}


def section(item: str, entry: dict[str, Any] | None) -> list[str]:
    lines = [f"## {TITLES[item]}", ""]
    if entry is None:
        run = " --only peers` (needs the peer venv)" if item == "peers" else "` (without `--quick`)"
        return [*lines, f"Not measured yet: run `.venv/bin/python benchmarks/run.py{run}.", ""]
    if item == "peers":
        return [*lines, *_machine(entry), *_peers(entry["figures"], entry["machine"])]
    if item in REPRODUCTIONS:
        render = importlib.import_module(f"repro_{item}").render
        return [*lines, *_machine(entry), *render(entry["figures"]), ""]
    if item in BENCH_MODULES:  # benchmarks/bench_<item>.py: run() and render()
        return [
            *lines,
            *_machine(entry),
            *importlib.import_module(f"bench_{item}").render(entry["figures"]),
            "",
        ]
    return [*lines, *_machine(entry), *RENDER[item](entry["figures"])]


def _summary(results: dict[str, Any]) -> list[str]:
    rows = ["| item | target | measured | |", "|---|---|---|---|"]
    if m := results.get("mechanism"):
        t = m["figures"]["train"]["total_s"]
        rows.append(f"| 1 | fit + decode < 1 s on 26,048 rows | {t:.3f} s | {_met(t < 1)} |")
    if s := results.get("scale"):
        big = s["figures"]["cli"]["big"]
        gb = big["peak_rss_tree_mb"] / 1024
        rows.append(
            f"| 2 | 1M-row CLI release < 30 s (temporary Prefect server) | {big['wall_s']:.1f} s | "
            f"{_met(big['wall_s'] < 30)} |"
        )
        if srv := s["figures"]["cli"].get("big_server"):
            rows.append(
                f"| 2 | 1M-row CLI release < 30 s (running Prefect server) | {srv['wall_s']:.1f} s | "
                f"{_met(srv['wall_s'] < 30)} |"
            )
        rows.append(f"| 2 | 1M-row CLI release peak RSS < 3 GB | {gb:.2f} GB | {_met(gb < 3)} |")
    if d := results.get("demo"):
        f = d["figures"]
        rows.append(
            f"| 3 | (none stated) `make demo`, venv installed | {f['warm_median_s']:.1f} s "
            f"(first ever run {f['cold']['wall_s']:.1f} s) | |"
        )
    if u := results.get("utility"):
        c = u["figures"]["configs"]["default"]
        tvd, auc = c["mean_tvd"]["mean"], c["auc"]["mean"]
        rows.append(f"| 4 | mean 1-way TVD ≤ 0.02 at ε = 1 | {tvd:.4f} | {_met(tvd <= 0.02)} |")
        rows.append(f"| 4 | synthetic AUC ≥ 0.85 at ε = 1 | {auc:.4f} | {_met(auc >= 0.85)} |")
    if p := results.get("peers"):
        f = p["figures"]
        cells = []
        names = {"factor_gauss": "factor_gauss", "mst": "MST", "aim": "AIM"}
        for key, m in f["methods"].items():
            if key not in names:
                continue
            if m["completed"]:
                t, x = m["total_s"]["mean"], m["metrics"]
                auc = x["tstr_auc"]["mean"] if x.get("tstr_auc") else float("nan")
                cells.append(
                    f"{names[key]} {t:.1f} s, 2-way TVD {x['tvd_2way']['mean']:.3f}, TSTR AUC {auc:.3f}"
                )
            else:
                cells.append(f"{names[key]} did not finish in {_duration(f['aim_timeout_s'])}")
        rows.append(f"| 5 | (comparison, no target) peers at ε = 1 | {'; '.join(cells)} | |")
    rows += _reproduction_rows(results)
    if sm := results.get("sampler"):
        fits = sm["figures"]["fits"]
        n, o = (statistics.median(fits[k]) for k in ("numpy", "opendp"))
        rows.append(
            "| 12 | (cost, no target) OpenDP's vetted noise in a `factor_gauss` fit on Adult | "
            f"{o:.3f} s against {n:.3f} s with numpy's samplers | |"
        )
    if lg := results.get("ledger"):
        rows.append(_ledger_row(lg["figures"]))
    if st := results.get("stream"):
        rows += _stream_rows(st["figures"])
    return [*rows, ""]


def _stream_rows(f: dict[str, Any]) -> list[str]:
    out = []
    if big := next((r for r in f["runs"] if r["rows"] == 10_000_000), None):
        t, gb = big["wall_s"], big["peak_rss_tree_mb"] / 1024
        out += [
            f"| 14 | 10M-row streaming release (local engine) < 5 min | {t:.0f} s | {_met(t < 300)} |",
            f"| 14 | 10M-row streaming release peak RSS < 3 GB | {gb:.2f} GB | {_met(gb < 3)} |",
        ]
    out.append(
        f"| 14 | (cost, no target) time against n; Dask (2 workers) over local at 1M rows | "
        f"{f['fit']['s_per_million_rows']:.1f} s per million rows; {f['dask_over_local_1m']:.2f}× | |"
    )
    return out


def _ledger_row(f: dict[str, Any]) -> str:
    def ms(s: float) -> str:
        return f"{s * 1e3:,.0f} ms" if s < 1 else f"{s:,.1f} s"

    backends = [(n, f["backends"][k]) for n, k in (("SQLite", "sqlite"), ("PostgreSQL", "postgresql"))]
    done = [(n, b) for n, b in backends if "error" not in b]
    first, last = done[0][1]["levels"][0], done[0][1]["levels"][-1]
    cells = [
        f"{lv['earlier']:,} earlier releases: " + " / ".join(ms(b["levels"][i]["flow"]) for _, b in done)
        for i, lv in ((0, first), (-1, last))
    ]
    missing = "" if len(done) == 2 else " (PostgreSQL not measured)"
    return (
        f"| 13 | (cost, no target) ledger work of one release with a lifetime budget, "
        f"{' / '.join(n for n, _ in done)}{missing} | {'; '.join(cells)} | |"
    )


def _reproduction_rows(results: dict[str, Any]) -> list[str]:
    """One headline per reproduction (no target: the papers' numbers are what we compare)."""
    rows = []
    if d := results.get("dpfm"):
        c = d["figures"]["datasets"]["adult"]["configs"]
        rows.append(
            "| 6 | (reproduction) DPFM, Adult, validating ROC-AUC at ε = 1 "
            "(the paper: 0.829 at ε = 0.1, 0.828 at ε = 5) | "
            f"corrected {c['corrected_1']['valid_auc']['mean']:.3f}, paper variant "
            f"{c['paper_1']['valid_auc']['mean']:.3f}, paper variant without noise "
            f"{c['paper_inf']['valid_auc']['mean']:.3f} | |"
        )
    if g := results.get("ron_gauss"):
        f = g["figures"]
        acc = f["tasks"]["classification"]["meckes"]["corrected"]["mean"]
        majority = f["baselines"]["classification"]["majority_accuracy"]
        rows.append(
            "| 7 | (reproduction) RON-Gauss, Adult income, SVM accuracy at ε = 1 (paper 87.16 % on "
            f"Realdisp) | corrected {acc:.1f} %, majority class {majority:.1f} % | |"
        )
    if q := results.get("private_pca"):
        main = next(c for c in q["figures"]["configs"] if c.get("main"))
        last = main["rows"][-1]
        rows.append(
            f"| 8 | (reproduction) private PCA, W1 at n = {last['n']:,}, d' = {main['dims']}, "
            f"ε = {main['epsilon']:g} | corrected {last['methods']['corrected']['w1']['mean']:.4f} "
            f"(sampling floor {last['floor']['fresh']['mean']:.4f}) | |"
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    last = results.get("_last_run", {})
    lines = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/run.py` (`make bench`, i.e. `.venv/bin/python benchmarks/run.py`); "
        "do not edit by hand. `--quick` skips item 2 (the slowest) and keeps its last stored "
        "figures; `--only ITEM` reruns one item. Item 5 (peers) needs a separate venv and runs only "
        "with `--only peers`. Raw figures: `benchmarks/results.json`. "
        "Each section states its own command, machine and date. Machines are shared and noisy: "
        "times are medians over repeats, and comparisons are made within one run.",
        "",
    ]
    if last:
        lines += [
            f"Last run: {last['date']}, items {', '.join(last['items'])}, "
            f"`benchmarks/run.py{' --quick' if last['quick'] else ''}` took {last['elapsed_s']:.0f} s.",
            "",
        ]
    lines += ["## Summary", "", *_summary(results)]
    for item in ITEMS:
        lines += section(item, results.get(item))
    return "\n".join(lines).rstrip() + "\n"
