"""Gates: bounds on check metrics that stop a release."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mechanisms.errors import DPReleaseError

__all__ = ["GATE_METRICS", "GateError", "evaluate_gates", "failed_gates_message"]

GATE_METRICS = (
    "tvd_1way",
    "tvd_2way",
    "corr_diff",
    "pmse",
    "wasserstein_max",
    "tstr_auc",
    "tstr_r2",
    "tstr_ratio",
    "exact_match_rate",
    "unique_exact_match_rate",
    "dcr_q05",
    "correct_link_rate",
    "membership_share",
)


class GateError(DPReleaseError):
    """A release check fell outside a gate: nothing was published. The message names the
    gates and their public bounds only; ``internal_dir`` holds gates.json with the
    measured values (confidential, non-DP), which the CLI shows on the steward's terminal
    but which never reach a log, an event or Prefect."""

    internal_dir: str | None = None


def evaluate_gates(gates: dict[str, dict[str, float | None]], metrics: dict[str, float | None]) -> list[dict]:
    """One row per gate: the bound, the measured value and whether it passed. A metric
    that could not be measured (e.g. AUC with one class) fails its gate."""
    rows = []
    for name, bound in gates.items():
        value = metrics.get(name)
        lo, hi = bound.get("min"), bound.get("max")
        ok = value is not None and not math.isnan(value)
        ok = ok and (lo is None or value >= lo) and (hi is None or value <= hi)
        rows.append({"gate": name, "min": lo, "max": hi, "value": value, "passed": bool(ok)})
    return rows


def failed_gates_message(rows: list[dict], internal_dir: str) -> str:
    """Names each failed gate and its public bound, never the measured value."""
    parts = []
    for r in rows:
        if r["passed"]:
            continue
        bound = " and ".join(f"{k} {r[k]:g}" for k in ("min", "max") if r[k] is not None)
        parts.append(f"gate '{r['gate']}' ({bound}) failed")
    return (
        "release stopped by its checks; public/ was not published:\n  "
        + "\n  ".join(parts)
        + f"\nThe measured values are in {internal_dir}/gates.json and report.html; the budget was "
        "spent (the noise was drawn). Loosen the gate, raise epsilon or change the mechanism, then "
        "release again under a new release id."
    )


def measured_values(internal_dir: str) -> list[str]:
    """``gate: value`` for each failed gate, read from ``internal_dir/gates.json`` (for the
    steward's terminal only)."""
    path = Path(internal_dir) / "gates.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text())
    return [
        f"{r['gate']}: {'not measurable' if r['value'] is None else format(r['value'], '.6g')}"
        for r in rows
        if not r["passed"]
    ]
