"""The section of item 17: the coverage and width of ``dprelease query``'s intervals."""

from __future__ import annotations

import statistics
from typing import Any

METHODS = ("analytic", "bracket", "model", "bounds")


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    la = f["load_avg_1m"]
    lines = [
        f"{f['queries']} random queries of 1 to 3 conditions per run (a set of categories or an integer "
        "or real range each), 90 % intervals from `records.query.answer_where` on the mechanism's own "
        "fit, tables and replicates (`tests/intervals.py`), against the true count among the fitted "
        f"rows; seeds {', '.join(map(str, f['seeds']))} (ε = 1, δ = 1e-6; load average {la['start']} "
        f"at start, {la['end']} at end; took {f['wall_s']:.0f} s). *Ratio*: the median half-width over "
        "the median |synthetic count − truth| (the target: ≤ 3.5). Per method: queries, the share held.",
        "",
        "| mechanism | table | seed | coverage | median half-width | median synthetic error | ratio | "
        "analytic | bracket | model | bounds | fit s | replicates s | ms per query |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|",
    ]
    for r in f["rows"]:
        per = [
            f"{r['by_method'][m][0]}: {r['by_method'][m][1]:.0%}" if m in r["by_method"] else "–"
            for m in METHODS
        ]
        lines.append(
            f"| {r['mechanism']} | {r['table']} | {r['seed']} | {r['coverage']:.3f} | "
            f"{r['median_half_width']:,.1f} | {r['median_synthetic_error']:,.1f} | {r['ratio']:.2f} | "
            f"{' | '.join(per)} | {r['fit_seconds']:.1f} | {r['replicates_seconds']:.1f} | "
            f"{1000 * r['query_seconds']:.0f} |"
        )
    lines += ["", "Mean over seeds:", ""]
    keys = sorted({(r["mechanism"], r["table"]) for r in f["rows"]})
    for m, t in keys:
        mine = [r for r in f["rows"] if (r["mechanism"], r["table"]) == (m, t)]
        cov = statistics.mean(r["coverage"] for r in mine)
        ratio = statistics.mean(r["ratio"] for r in mine)
        met = "meets" if cov >= 0.87 and ratio <= 3.5 else "misses"
        lines.append(
            f"- {m} on {t}: coverage {cov:.3f}, ratio {ratio:.2f}: {met} the targets (≥ 0.87, ≤ 3.5)."
        )
    lines += [
        "",
        "mst and aim publish no replicates (re-running them ten times at release time costs 10× "
        "their fit), so a query no measured table holds gets Fréchet bounds: valid and wide.",
    ]
    return lines
