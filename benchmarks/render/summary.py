"""The summary table at the top of BENCHMARKS.md: each item's targets and headline figures."""

from __future__ import annotations

import statistics
from typing import Any

from render.fmt import duration, met, seconds
from render.wide import MECHANISM as MECHANISM_TASKS


def table(results: dict[str, Any]) -> list[str]:
    rows = ["| item | target | measured | |", "|---|---|---|---|"]
    if m := results.get("mechanism"):
        t = m["figures"]["train"]["total_s"]
        rows.append(f"| 1 | fit + decode < 1 s on 26,048 rows | {t:.3f} s | {met(t < 1)} |")
    if s := results.get("scale"):
        big = s["figures"]["cli"]["big"]
        gb = big["peak_rss_tree_mb"] / 1024
        rows.append(
            f"| 2 | 1M-row CLI release < 30 s (temporary Prefect server) | {big['wall_s']:.1f} s | "
            f"{met(big['wall_s'] < 30)} |"
        )
        if srv := s["figures"]["cli"].get("big_server"):
            rows.append(
                f"| 2 | 1M-row CLI release < 30 s (running Prefect server) | {srv['wall_s']:.1f} s | "
                f"{met(srv['wall_s'] < 30)} |"
            )
        rows.append(f"| 2 | 1M-row CLI release peak RSS < 3 GB | {gb:.2f} GB | {met(gb < 3)} |")
        cli = s["figures"]["cli"]
        for key, where, limit in (("adult", "temporary", 10), ("adult_server", "running", 6)):
            if run := cli.get(key):  # issue 18's targets for the demo release (Adult, 32,561 rows)
                wall = run["wall_s"]
                rows.append(
                    f"| 2 | demo release (Adult) < {limit} s ({where} Prefect server) | {wall:.1f} s | "
                    f"{met(wall < limit)} |"
                )
    if d := results.get("demo"):
        f = d["figures"]
        rows.append(
            f"| 3 | (none stated) `make demo`, venv installed | {f['warm_median_s']:.1f} s "
            f"(first ever run {f['cold']['wall_s']:.1f} s) | |"
        )
    if u := results.get("utility"):
        c = u["figures"]["configs"]["default"]
        tvd, auc = c["mean_tvd"]["mean"], c["auc"]["mean"]
        rows.append(f"| 4 | mean 1-way TVD ≤ 0.02 at ε = 1 | {tvd:.4f} | {met(tvd <= 0.02)} |")
        rows.append(f"| 4 | synthetic AUC ≥ 0.85 at ε = 1 | {auc:.4f} | {met(auc >= 0.85)} |")
    if p := results.get("peers"):
        rows += _peers_row(p["figures"])
    if q := results.get("quality"):
        rows += _quality_rows(q["figures"])
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
    if wd := results.get("wide"):
        rows += _wide_rows(wd["figures"])
    return [*rows, ""]


def _peers_row(f: dict[str, Any]) -> list[str]:
    """Item 5: each method's time, 2-way TVD and TSTR AUC (figures of the maintained peers only)."""
    if "peer_cells" not in f:
        return []
    cells = []
    for key, m in f["methods"].items():
        if key == "resample":
            continue
        if m["completed"]:
            t, x = m["total_s"]["mean"], m["metrics"]
            auc = x["tstr_auc"]["mean"] if x.get("tstr_auc") else float("nan")
            cells.append(f"{m['label']} {t:.1f} s, 2-way TVD {x['tvd_2way']['mean']:.3f}, TSTR AUC {auc:.3f}")
        else:
            cells.append(f"{m['label']} did not finish in {duration(f['aim_timeout_s'])}")
    return [f"| 5 | (comparison, no target) peers at ε = 1 | {'; '.join(cells)} | |"]


ISSUE33_TARGETS = (
    ("tvd_1way", "1-way TVD", "≤", 0.011),
    ("tvd_2way", "2-way TVD", "≤", 0.050),
    ("tstr_auc", "TSTR AUC", "≥", 0.91),
    ("pmse_cells", "pMSE cells", "≤", 0.033),
    ("pmse", "raw pMSE", "≤", 0.045),
)
"""Issue 33's targets on Adult at ε = 1 for the project's best mechanism (a little better than
dpmm AIM as the issue measured it; 120 s is the time target)."""
TIME_TARGET_S = 120.0


def _quality_rows(f: dict[str, Any]) -> list[str]:
    """Item 15, issue 33: on Adult at ε = 1, the project's best mechanism (by 2-way TVD)
    against each target and against dpmm AIM's figures of the same run."""
    block = f.get("tables", {}).get("adult", {}).get("results", {}).get("1")
    if not block or "peer_intervals" not in f:
        return []
    ours = {k: m for k, m in block.items() if k.startswith("factor_gauss") and m.get("completed")}
    if not ours:
        return []
    best_key = min(ours, key=lambda k: ours[k]["metrics"]["tvd_2way"]["mean"])
    best = ours[best_key]["metrics"]
    aim = block.get("dpmm_aim", {})
    aim_x = aim.get("metrics") if aim.get("completed") else None
    out = []
    for key, label, op, limit in ISSUE33_TARGETS:
        if best.get(key) is None:
            continue
        v = best[key]["mean"]
        ok = v <= limit if op == "≤" else v >= limit
        peer = f"; dpmm AIM {aim_x[key]['mean']:.3f}" if aim_x and aim_x.get(key) else "; dpmm AIM n/a"
        out.append(
            f"| 15 | Adult, ε = 1: {label} {op} {limit:g} (issue 33) | {ours[best_key]['label']} "
            f"{v:.3f}{peer} | {met(ok)} |"
        )
    t = ours[best_key]["total_s"]["mean"]
    aim_t = f"; dpmm AIM {aim['total_s']['mean']:.0f} s" if aim_x else ""
    out.append(
        f"| 15 | Adult, ε = 1: fit + sample ≤ {TIME_TARGET_S:.0f} s (issue 33) | {ours[best_key]['label']} "
        f"{t:.2f} s{aim_t} | {met(t <= TIME_TARGET_S)} |"
    )
    return out


def _wide_rows(f: dict[str, Any]) -> list[str]:
    """Issue 19: the widest release's mechanism time against the 15-column path scaled by
    the second moment's O(p²), and the missing incomes' shares."""
    runs = {r["columns"]: r for r in f["runs"]}
    out = []
    if 15 in runs and len(runs) > 1:
        p = max(runs)
        mech = [sum(runs[k]["phases"].get(f"task {t}", 0.0) for t in MECHANISM_TASKS) for k in (15, p)]
        scaled = mech[0] * (p / 15) ** 2
        out.append(
            f"| 16 | {p}-column release within the 15-column mechanism time × (p/15)² | {mech[1]:.1f} s "
            f"(scaled: {scaled:.1f} s; wall {runs[p]['wall_s']:.0f} s, peak RSS "
            f"{runs[p]['peak_rss_tree_mb'] / 1024:.2f} GB) | {met(mech[1] <= scaled)} |"
        )
    inc = f["incomes"]
    out.append(
        "| 16 | (no target) missing incomes: share among people out of work, real / synthetic | "
        f"{inc['real']['out']:.3f} / {inc['synthetic']['out']:.3f} | |"
    )
    return out


def _stream_rows(f: dict[str, Any]) -> list[str]:
    out = []
    if big := next((r for r in f["runs"] if r["rows"] == 10_000_000), None):
        t, gb = big["wall_s"], big["peak_rss_tree_mb"] / 1024
        out += [
            f"| 14 | 10M-row streaming release (local engine) < 5 min | {t:.0f} s | {met(t < 300)} |",
            f"| 14 | 10M-row streaming release peak RSS < 3 GB | {gb:.2f} GB | {met(gb < 3)} |",
        ]
    out.append(
        f"| 14 | (cost, no target) time against n; Dask (2 workers) over local at 1M rows | "
        f"{f['fit']['s_per_million_rows']:.1f} s per million rows; {f['dask_over_local_1m']:.2f}× | |"
    )
    return out


def _ledger_row(f: dict[str, Any]) -> str:
    backends = [(n, f["backends"][k]) for n, k in (("SQLite", "sqlite"), ("PostgreSQL", "postgresql"))]
    done = [(n, b) for n, b in backends if "error" not in b]
    first, last = done[0][1]["levels"][0], done[0][1]["levels"][-1]
    cells = [
        f"{lv['earlier']:,} earlier releases: "
        + " / ".join(seconds(b["levels"][i]["flow"], 0, 1) for _, b in done)
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
