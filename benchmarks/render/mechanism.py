"""The section of item 1: the in-process time of ``factor_gauss`` fit + decode on Adult."""

from __future__ import annotations

from typing import Any

from render.fmt import met


def render(f: dict[str, Any]) -> list[str]:
    tr, full, load = f["train"], f["full"], f["loading_full"]
    lines = [
        f"Median of {tr['repeats']} runs (seeds 0–{tr['repeats'] - 1}, after one untimed warm-up) of "
        "`factor_gauss.FactorGauss().fit(MixedRows(bins), schema, plan, params, m=len(bins), "
        "rng=default_rng(seed))` "
        "followed by `bins_to_table(fit.rows.bins, ...)` (the decode to values), ε = 1, δ = 1e-6, zCDP, "
        "default stage weights. Reading and binning are not included (listed below for scale).",
        "",
        "| data | rows | fit | decode | fit + decode | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, r, target in (("80% training split", tr, "< 1 s"), ("full Adult", full, "")):
        verdict = f"{target}: {met(r['total_s'] < 1.0)}" if target else ""
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
