"""The section of item 5: ``factor_gauss`` beside the maintained peers (dpmm's AIM, MST and
PrivBayes, mbi's MST) on Adult at ε = 1: how each ran, its budget, utility and disclosure checks."""

from __future__ import annotations

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
            done = (
                f"; killed after {r['rounds_done']} of {r['rounds_planned']} rounds"
                if r.get("rounds_done")
                else ""
            )
            return f"**did not finish in {duration(r.get('timeout_s', timeout_s))}**{done}"
        return "failed (" + ", ".join(sorted(statuses)) + ")"
    t = m["total_s"]
    text = f"{t['mean']:.2f} s" + ("" if m["completed"] == 1 else f" [{t['min']:.2f}, {t['max']:.2f}]")
    return (
        text
        if m["completed"] == len(m["runs"])
        else f"{text} ({len(m['runs']) - m['completed']} runs failed)"
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


def _budget(methods: dict[str, Any]) -> list[str]:
    """One line per peer: the ρ its accounting allows, what it spent, ours, preprocessing ε."""
    out = []
    for m in methods.values():
        run = next((r for r in m["runs"] if r.get("budget")), None)
        if run is None:
            continue
        b = run["budget"]
        pre = "none" if all(v in (None, 0) for v in b["preprocessing_epsilon"].values()) else "SPENT"
        pure = (
            f" plus ε = {b['pure_epsilon_selection']:g} pure-DP selection"
            if b.get("pure_epsilon_selection")
            else ""
        )
        out.append(
            f"- {m['label']}: its ρ for (ε, δ) {b['rho_peer']:.6f} ({b['rho_source']}), ours "
            f"{run['rho_ours']:.6f}; spent ρ {b['rho_spent']:.6f} of the {b['rho_limit']:.6f} its "
            f"accounting allows{pure}; preprocessing ε {pre} (`proc_epsilon={b['proc_epsilon']}`)."
        )
    return out


def render(f: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    if "peer_cells" not in f:
        return [
            "The stored figures are from the smartnoise-synth baseline this item used before issue 33 "
            "(see the git history); they are not shown. Rerun with the maintained peers: "
            f"`{PEER_VENV}`, then `.venv/bin/python benchmarks/run.py --only peers`.",
            "",
        ]
    methods, timeout_s = f["methods"], f["aim_timeout_s"]
    env = f.get("peer_env") or {}
    venvs = "; ".join(
        f"`{v}` (Python {e['python']}): " + ", ".join(f"{k} {x}" for k, x in e["packages"].items())
        for v, e in env.items()
    )
    bins = ", ".join(f"{k} {v}" for k, v in f["n_bins"].items())
    cells = ", ".join(f"{k} {v}" for k, v in f["peer_cells"].items())
    lines = [
        f"- Peer venvs used for this run: {venvs or 'none finished'}. Create them once with `{PEER_VENV}`. "
        "dpmm and mbi are not dependencies of the project.",
        "",
        f"Same split as item 4 ({f['train_rows']:,} training / {f['test_rows']:,} test rows). "
        "**factor_gauss**: in-process, `factor_gauss.FactorGauss().fit(MixedRows(bins), schema, "
        f"plan_budget('zcdp', {f['epsilon']:g}, {f['delta']:g}, STAGE_WEIGHTS), FactorGaussParams(), "
        f"m=n, rng=default_rng(seed))` on the demo spec's public bins ({bins}), decoded by `bins_to_table`. "
        "**The peers** (`benchmarks/peer_run.py`), each a fresh process in its own venv: dpmm 0.1.9's "
        "`AIMPipeline` (`max_model_size=80`: the AIM paper's setting; dpmm's defaults otherwise: every "
        "2-way marginal of at most 10,000 cells in the workload, 16·d rounds), `MSTPipeline` and "
        "`PrivBayesPipeline` (degree 2), all with `proc_epsilon=None` and `n_jobs=1`; and an MST we wrote "
        "after the reference `mechanisms/mst.py` of `ryan112358/mbi` on mbi 2.0 (`benchmarks/peer_mbi.py`). "
        f"They get the same public cells, from the spec by a public rule ({cells}: 32 equal-width "
        "intervals on the declared scale plus the declared atoms, or one cell per integer for ranges of "
        "at most 32 integers), as declared categories (dpmm's binner bins nothing and reads no category "
        "from the data), and are decoded the same way (`peer_run.decode`: a uniform draw inside an "
        f"interval). dpmm AIM: {len(methods['dpmm_aim']['runs'])} seed, killed (with its process group) "
        f"if not done after {duration(timeout_s)}. Every synthetic table is scored by the project's own "
        "checks (`checks.reports.utility_report` / `linkage_report` / `flat_metrics`, as in a release: real "
        "= the 80 %, `real_test` and the membership holdout = the 20 %). The reference resamples the real "
        "training rows (sampling noise only, no privacy).",
        "",
        "**Budget**, asserted on every peer run (`peer_run.check_budget`): the (ε, δ) given is the one it "
        "ran with, no preprocessing ε, the ρ it spent within its own accounting, its ρ for (ε, δ) equal to "
        "ours to 10⁻⁶:",
        "",
        *_budget(methods),
        "",
        "Time = fit + sample (decoding and scoring excluded), measured inside the peer process (its "
        "interpreter start and imports excluded, JAX compilation included), single-threaded. Values: mean "
        "[min, max] over the seeds that finished. dpmm draws its noise through OpenDP (unseedable), so its "
        "reruns differ.",
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
    lines += [
        "",
        "What differs between the methods: factor_gauss measures private 1-way marginals and one private "
        "latent correlation matrix (all pairs at once) and decodes inside a bin by the marginal's shape; "
        "MST measures the 1-way marginals and a privately chosen spanning tree of 2-way marginals; AIM "
        "adaptively chooses and measures 1- and 2-way marginals round by round; PrivBayes a Bayesian "
        "network of degree 2; all three peers fit a Private-PGM graphical model and decode an interval "
        "by a uniform draw. All treat n as public. Reading the disclosure columns: exact matches compare "
        "decoded values; DCR q05 is the 5 % quantile of the Gower distance from synthetic rows to their "
        "closest real training row; membership share is the share of synthetic rows closer to a training "
        "row than to any holdout row (0.5 = no closer to the fitted rows than to fresh rows).",
        "",
    ]
    return lines
