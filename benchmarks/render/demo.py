"""The section of item 3: the wall time of ``make demo`` (first run and later runs)."""

from __future__ import annotations

from typing import Any

from render.fmt import SERVER_VARS


def render(f: dict[str, Any]) -> list[str]:
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
        *_rehearsal(f),
    ]


def _rehearsal(f: dict[str, Any]) -> list[str]:
    """The rehearsal before the reserve (part of every later run above), timed in-process."""
    r = f.get("rehearsal")
    if r is None:
        return []
    times = ", ".join(f"{x:.2f} s" for x in r["wall_s"])
    return [
        "Of a later run, the rehearsal before the reserve (`flows/rehearsal.py`: the release's steps on a "
        f"{r['rows']}-row table drawn from the demo's public schema, vetted noise) took a median of "
        f"**{r['median_s']:.2f} s** ({times}; in one process after a first rehearsal, as in the flow): "
        f"{r['median_s'] / f['warm_median_s']:.0%} of the later runs' median, measured in the same session.",
        "",
    ]
