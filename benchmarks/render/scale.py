"""The section of item 2: one million rows × 15 columns through the CLI release (wall time, peak
RSS, phases)."""

from __future__ import annotations

from typing import Any

from render.fmt import PREFECT_VARS, met


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
        f"< 30 s: {met(big['wall_s'] < 30)} |",
        f"| Adult demo data, running Prefect server | 32,561 | {small['wall_s']:.1f} s | "
        f"{small['peak_rss_tree_mb'] / 1024:.2f} GB | {small['peak_rss_main_mb'] / 1024:.2f} GB | |",
        "",
        "The last two rows ran with `PREFECT_API_URL` pointing at a `prefect server start` on "
        "loopback (same PREFECT_HOME), as scheduled releases run; their RSS excludes the server.",
    ]


def render(f: dict[str, Any]) -> list[str]:
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
        f"{big['peak_rss_main_mb'] / 1024:.2f} GB | < 30 s: {met(big['wall_s'] < 30)}; "
        f"< 3 GB: {met(gb < 3)} |",
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
