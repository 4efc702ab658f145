"""The section of item 14: streaming releases through the CLI (100k, 1M and 10M rows; Dask against
local at 1M): wall time, peak RSS and phases per run, the slope against n, and the 10M-row
target."""

from __future__ import annotations

from typing import Any

from common import run_command

LIMITS = {"rows": 10_000_000, "wall_s": 300.0, "rss_gb": 3.0}
"""The target: 10M rows under 5 minutes, with a peak RSS under 3 GB."""


PHASES = (
    ("scan_input",),
    ("stream_encode",),
    ("stream_estimate",),
    ("stream_sample", "stream_decode"),
    ("check_utility",),
    ("check_linkage",),
)
"""The table's phase columns: the streaming tasks' names in Prefect's log (a column may add up two)."""


def _phase_cells(r: dict[str, Any]) -> str:
    ph = r["phases"]
    cells = []
    for names in PHASES:
        found = [ph[f"task {k}"] for k in names if f"task {k}" in ph]
        cells.append(f"{sum(found):.1f}" if len(found) == len(names) else "–")
    return " | ".join(cells)


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    la = f["load_avg_1m"]
    lines = [
        f"`{run_command('stream')}` ({'quick: no 10M run' if f['quick'] else 'full'}; "
        f"load average {la['start']} at "
        f"start, {la['end']} at end; took {f['wall_s']:.0f} s). Each row is one "
        "`dprelease release SPEC --insecure-seed 1 --verbose` of Adult resampled with replacement "
        f"(15 columns, the demo's schema, checks and gates; δ = 0.1/n; `engine.chunk_rows` "
        f"{f['chunk_rows']:,}), after a discarded warm-up run in the same PREFECT_HOME. Peak RSS: the "
        "whole process tree (CLI, Prefect's temporary server, Dask workers), sampled every 0.1 s. "
        "Phase times (s) from Prefect's log: pass 1 (scan_input), the marginals' noise (stream_encode), "
        "pass 2 (stream_estimate), sampling and writing (stream_sample + stream_decode), the checks "
        "on 50,000-row samples.",
        "",
        "| engine | rows | input CSV | wall | peak RSS tree | peak RSS CLI | pass 1 | encode | pass 2 | "
        "decode+write | utility | linkage |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in [*f["runs"], f["dask"]]:
        lines.append(
            f"| {r['engine']} | {r['rows']:,} | {r['input_csv_mb']:.0f} MB | {r['wall_s']:.1f} s | "
            f"{r['peak_rss_tree_mb'] / 1024:.2f} GB | {r['peak_rss_main_mb'] / 1024:.2f} GB | "
            f"{_phase_cells(r)} |"
        )
    fit = f["fit"]
    lines += [
        "",
        f"- Slope of wall time against n (least squares over the {len(f['runs'])} local runs): "
        f"**{fit['s_per_million_rows']:.1f} s per million rows**, intercept {fit['intercept_s']:.1f} s "
        "(Prefect's start, GX's import, the checks on fixed-size samples).",
        f"- Dask LocalCluster (2 worker processes, 1 thread each) over the local engine at 1M rows: "
        f"**{f['dask_over_local_1m']:.2f}×** the wall time. Its overhead: starting the cluster, a third "
        "pass that counts each byte range's rows (a CSV does not say where its rows start), GX imported "
        "in each worker, and two processes sharing the same 2 cores as the driver.",
    ]
    big = next((r for r in f["runs"] if r["rows"] == LIMITS["rows"]), None)
    if big is not None:
        ok_t = big["wall_s"] < LIMITS["wall_s"]
        ok_m = big["peak_rss_tree_mb"] / 1024 < LIMITS["rss_gb"]
        lines.append(
            f"- Target (10M rows under {LIMITS['wall_s']:.0f} s, peak RSS under {LIMITS['rss_gb']:g} GB): "
            f"{big['wall_s']:.0f} s ({'met' if ok_t else 'NOT met'}), "
            f"{big['peak_rss_tree_mb'] / 1024:.2f} GB ({'met' if ok_m else 'NOT met'})."
        )
    return lines
