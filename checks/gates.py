"""The gated metrics, computed exactly as ``mechanisms.gates`` defines them (and bounds
their sensitivity), and the error a gated release ends with.

``gate_metrics`` is the only code path from the confidential rows to a gate: the flow
adds noise to its output (``mechanisms.gates.measure_gates``) and decides on the noisy
values; the exact values never leave this function's caller.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dprelease.checks import utility as ut
from dprelease.mechanisms.errors import GateError
from dprelease.mechanisms.gates import GATEABLE, GateResult
from dprelease.mechanisms.schema import Schema

__all__ = ["GateError", "failed_gates_message", "gate_metrics"]


def gate_metrics(
    real: pd.DataFrame,
    real_bins: np.ndarray,
    synthetic: pd.DataFrame,
    syn_bins: np.ndarray,
    schema: Schema,
    names: list[str],
    rng: np.random.Generator,
) -> dict[str, float]:
    """The exact (confidential) value of each gated metric on the k = len(real) compared
    rows: ``tvd_1way`` and ``tvd_2way`` on the public bins, ``wasserstein_max`` on the
    continuous columns' values over their public ranges (columns without ``missing:
    allowed``; 0.0 without such columns).
    ``rng`` only samples column pairs above 30 columns (never looks at the data)."""
    out = {}
    for name in names:
        if name not in GATEABLE:
            raise ValueError(f"gate {name!r} is not a gateable metric")
        if name == "tvd_1way":
            out[name] = ut.tvd_1way(real_bins, syn_bins, schema)["mean"]
        elif name == "tvd_2way":
            out[name] = ut.tvd_2way(real_bins, syn_bins, schema, rng)["mean"]
        else:
            scaled = ut.wasserstein_scaled(real, synthetic, schema, complete_only=True)
            out[name] = max(v for v in scaled.values() if v is not None) if scaled else 0.0
    return out


def failed_gates_message(results: list[GateResult], internal_dir: str) -> str:
    """Names each failed gate, its public bound and its noisy (differentially private) value."""
    parts = []
    for r in results:
        if r.passed:
            continue
        bound = " and ".join(f"{k} {v:g}" for k, v in (("min", r.min), ("max", r.max)) if v is not None)
        parts.append(
            f"gate '{r.gate}' ({bound}) failed: noisy value {r.noisy_value:.4g} (noise s.d. {r.noise_sd:.2g})"
        )
    return (
        "release stopped by its gates; public/ was not published:\n  "
        + "\n  ".join(parts)
        + f"\nThe decision is differentially private (noise on each metric, charged to the 'gates' stage); "
        f"the budget was spent. The internal reports are in {internal_dir}. Loosen the gate, raise epsilon "
        "or change the mechanism, then release again under a new release id."
    )
