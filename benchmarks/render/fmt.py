"""Formatting shared by the sections: verdicts, summaries (mean ± sd, mean [min, max]),
durations, and the lines every section opens with (command, date, machine)."""

from __future__ import annotations

from typing import Any

PEER_VENV = "bash benchmarks/peer_envs.sh"
SERVER_VARS = "PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=90"
PREFECT_VARS = f"PREFECT_HOME=$(mktemp -d) {SERVER_VARS}"


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def mean_range(s: dict[str, Any], fmt: str = ".4f") -> str:
    """'mean [min, max]' of a summary."""
    return f"{s['mean']:{fmt}} [{s['min']:{fmt}}, {s['max']:{fmt}}]"


def mean_sd(s: dict[str, Any], fmt: str = ".4f") -> str:
    """'mean ± sd' of a summary."""
    return f"{s['mean']:{fmt}} ± {s['sd']:{fmt}}"


def seconds(s: float, ms_digits: int, s_digits: int, below: float = 1.0) -> str:
    """A duration in ms below ``below`` seconds, else in s (thousands separated)."""
    return f"{s * 1e3:,.{ms_digits}f} ms" if s < below else f"{s:,.{s_digits}f} s"


def duration(s: float) -> str:
    """Whole minutes from two minutes on, else whole seconds."""
    return f"{s / 60:.0f} min" if s >= 120 else f"{s:.0f} s"


def machine_lines(entry: dict[str, Any]) -> list[str]:
    """The lines under a section's title: how to rerun it, when, where."""
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
