"""Formatting shared by the sections: verdicts, summaries (mean ± sd, mean [min, max]),
durations, the lines every section opens with (command, date, machine), and the mark of figures
measured from an uncommitted tree."""

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


UNCOMMITTED = "(unreproducible: uncommitted tree)"
"""The mark of figures measured from a working tree with uncommitted changes: their commit does
not hold the code that made them (``run.py --allow-dirty``, or runs stored before run.py refused)."""
UNRECORDED = "(unreproducible: commit not recorded)"
"""The mark of figures whose run's commit was not stored (item 15's earliest tables)."""
DIRTY_SUFFIX = "+uncommitted changes"
"""What ``common.machine`` appended to the commit of a run from a dirty tree before results.json
had a ``dirty`` field."""


def dirty(run: dict[str, Any]) -> bool | None:
    """Whether a run (an entry's ``dirty`` and its machine's ``commit``, or a record of item 15's
    ``remeasured``) came from an uncommitted tree: its ``dirty`` field, else (runs stored before
    that field) its commit's suffix; None when its commit is unknown."""
    if run.get("dirty") is not None:
        return bool(run["dirty"])
    commit = run.get("commit")
    if commit in (None, "", "unknown"):
        return None
    return commit.endswith(DIRTY_SUFFIX)


def entry_run(entry: dict[str, Any]) -> dict[str, Any]:
    """An item's stored entry as a run: its date, command, commit and dirtiness."""
    return {
        "date": entry["date"],
        "command": entry["command"],
        "commit": entry["machine"].get("commit"),
        "dirty": entry.get("dirty"),
    }


def tree_mark(run: dict[str, Any]) -> str:
    """'' for a run from a committed tree, else its mark (UNCOMMITTED, or UNRECORDED)."""
    state = dirty(run)
    return "" if state is False else UNCOMMITTED if state else UNRECORDED


def commit_of(run: dict[str, Any]) -> str:
    """The run's commit without the old dirty suffix ('not recorded' when unknown)."""
    commit = run.get("commit") or "not recorded"
    return commit.removesuffix(DIRTY_SUFFIX)


def day(date: str) -> str:
    """'2026-11-24 23:35 UTC' → '2026-11-24'."""
    return date.split(" ", 1)[0]


def machine_lines(entry: dict[str, Any]) -> list[str]:
    """The lines under a section's title: how to rerun it, when, where."""
    m = entry["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    mark = tree_mark(entry_run(entry))
    return [
        f"- Reproduce: `{entry['command']}`",
        f"- Measured: {entry['date']}, commit {commit_of(entry_run(entry))}"
        + (f" **{mark}**" if mark else "")
        + f", took {entry['elapsed_s']:.0f} s",
        f"- Machine: nproc {m['nproc']}, {m['cpu']}, {m['ram_gb']} GB RAM, {m['os']}, "
        f"Python {m['python']}; load average (1 min) at start {m['load_avg_1m']}",
        f"- Packages: {pk}",
        "",
    ]
