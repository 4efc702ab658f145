"""The section of item 16: releases of 15 to 200 mixed columns through the CLI (wall time,
peak RSS, the mechanism's task times against the 15-column time scaled by (p/15)², the
checks' figures), and the table with missing incomes."""

from __future__ import annotations

from typing import Any

from common import run_command

MECHANISM = ("encode", "estimate_private_moments", "project_and_sample", "decode")


def _mechanism_s(r: dict[str, Any]) -> float | None:
    found = [r["phases"].get(f"task {t}") for t in MECHANISM]
    return None if any(v is None for v in found) else float(sum(found))


def _f(x: Any, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def render(figures: dict[str, Any]) -> list[str]:
    f = figures
    la = f["load_avg_1m"]
    base = next((r for r in f["runs"] if r["columns"] == 15), None)
    base_mech = _mechanism_s(base) if base else None
    lines = [
        f"`{run_command('wide')}` ({'quick: 15 and 50 columns' if f['quick'] else 'full'}; load average "
        f"{la['start']} at start, {la['end']} at end; took {f['wall_s']:.0f} s). Each row is one "
        "`dprelease release SPEC --insecure-seed 1 --verbose` (memory engine, ε = 1, δ = 1e-6, "
        f"`factor_gauss` with the first nominal column as `params.target`, checks on, no gates) of "
        f"{f['rows']:,} rows from the public generator in `benchmarks/bench_wide.py` (40 % continuous, a "
        "fifth of them with 10 % missing, 15 % ordinal, 45 % nominal; a 5-factor latent Gaussian), after a "
        "discarded warm-up. Mechanism: the tasks encode + estimate_private_moments + project_and_sample + "
        "decode from Prefect's log; the next column scales the 15-column mechanism time by (p/15)², the "
        "cost of the latent second moment ZᵀZ (its O(p³) eigendecomposition is inside "
        "estimate_private_moments). "
        "Checks: the release's own internal utility report (1-way and 2-way TVD on the public bins, "
        "association difference, raw pMSE, TSTR ROC-AUC against TRTR on the holdout).",
        "",
        "| columns | wall | peak RSS tree | mechanism | 15-col. mechanism × (p/15)² "
        "| checks (utility + linkage) | 1-way TVD | 2-way TVD | assoc. diff | pMSE | TSTR / TRTR |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in f["runs"]:
        mech = _mechanism_s(r)
        scaled = None if base_mech is None else base_mech * (r["columns"] / 15) ** 2
        checks = sum(r["phases"].get(f"task {t}", 0.0) for t in ("check_utility", "check_linkage"))
        c = r["checks"]
        lines.append(
            f"| {r['columns']} | {r['wall_s']:.1f} s | {r['peak_rss_tree_mb'] / 1024:.2f} GB | "
            f"{_f(mech, '.2f')} s | {_f(scaled, '.1f')} s | {checks:.1f} s | {_f(c['tvd_1way'])} | "
            f"{_f(c['tvd_2way'])} | {_f(c['assoc_diff'])} | {_f(c['pmse'])} | "
            f"{_f(c['tstr'])} / {_f(c['trtr'])} |"
        )
    inc = f["incomes"]
    c = inc["checks"]
    lines += [
        "",
        f"**Missing incomes** ({inc['rows']:,} people; income `missing: allowed`, missing for 70 % of "
        "people out of work and 5 % of the employed; same command and settings, target `work`): "
        f"wall {inc['wall_s']:.1f} s.",
        "",
        "| income missing | overall | out of work | employed |",
        "|---|---:|---:|---:|",
        *(
            f"| {label} | {inc[k]['all']:.3f} | {inc[k]['out']:.3f} | {inc[k]['employed']:.3f} |"
            for label, k in (("real", "real"), ("synthetic", "synthetic"))
        ),
        "",
        f"Checks: 1-way TVD {_f(c['tvd_1way'])}, 2-way TVD {_f(c['tvd_2way'])}, association difference "
        f"{_f(c['assoc_diff'])}, pMSE {_f(c['pmse'])}, TSTR {_f(c['tstr'])} (TRTR {_f(c['trtr'])}).",
    ]
    return lines
