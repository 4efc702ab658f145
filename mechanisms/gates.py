"""Gates that are themselves differentially private: a release is published only if
*noisy* check metrics fall within the spec's public bounds.

A gate computed without noise makes publication a deterministic function of the data:
on two neighbouring tables one may publish with probability 0 and the other with
probability > 0, so the privacy loss is unbounded. Here each gated metric g(D, S) of the
confidential fitted rows D and the synthetic table S is released with noise, and the
decision is post-processing of that release.

Metrics (on the k rows the checks compare: the fitted rows, or a streaming engine's
sample of them, chosen by row position only; k is public). Replace one of those rows;
the synthetic table S is fixed (adaptive composition: S is an earlier DP output):

* ``tvd_1way`` = (1/p) Σⱼ TV(h_j(D)/k, h_j(S)/m), h_j a column's histogram on the
  public bins. Replacing a row moves 1/k of mass between two bins of each h_j(D)/k, so
  each TV changes by at most ½·(1/k + 1/k) = 1/k (triangle inequality), and so does
  their mean: **Δ = 1/k**, attained with p = 1 (one binary column, n = 10: 0.0 vs 0.1).
* ``tvd_2way`` = the mean over column pairs (all, or a sample drawn without looking at
  the data) of TV of the two-way histograms: each changes by at most 1/k, **Δ = 1/k**.
* ``wasserstein_max`` = maxⱼ W₁(D_j, S_j)/(uⱼ − lⱼ) over continuous columns with public
  bounds [lⱼ, uⱼ] and a value in every row (not ``missing: allowed``: k values each).
  |W₁(P, S) − W₁(P', S)| ≤ W₁(P, P') = |x − x'|/k ≤ (uⱼ − lⱼ)/k, so each
  scaled term and their maximum change by at most **Δ = 1/k**, attained by moving one
  value from lⱼ to uⱼ when every other value sits at lⱼ.

A scalar's Δ₁ = Δ₂ = Δ. Noise: each of the g gates gets ρ/g of the ``gates`` stage
(σ = Δ/√(2ρ/g), Gaussian, zCDP) or ε/g (b = Δ·g/ε, Laplace, pure). Privacy: the gates
compose with the synthesis (ρ adds up). The decision (noisy value within the bounds),
the exit code, events and artifacts are post-processing. A gate can err: a metric at
distance d from its bound is misjudged with probability Φ(−d/σ) (Gaussian).

Metrics with no bounded sensitivity cannot gate (``NOT_GATEABLE`` says why); they stay
as advisory, internal reports that never change what is published.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.primitives import Measurement, measure_stage
from dprelease.mechanisms.synthesizer import Sensitivity

__all__ = [
    "ADVISORY_METRICS",
    "GATEABLE",
    "GATES_STAGE",
    "GATES_WEIGHT",
    "NOT_GATEABLE",
    "GateResult",
    "decide",
    "gate_sensitivities",
    "gate_sensitivity",
    "measure_gates",
]

GATES_STAGE = "gates"
GATES_WEIGHT = 0.05  # of the mechanism's total weight, unless allocation.gates says otherwise

GATEABLE = ("tvd_1way", "tvd_2way", "wasserstein_max")

NOT_GATEABLE = {
    "corr_diff": "Spearman's rho re-ranks every row and Cramér's V divides by cell counts; no bound "
    "on what one record changes is derived",
    "pmse": "it comes from a classifier fitted to the confidential rows; one record can change "
    "every prediction, so its sensitivity is unbounded",
    "tstr_auc": "it comes from a model scored on confidential rows; one record can change the "
    "model and the score without a useful bound",
    "tstr_r2": "it comes from a model scored on confidential rows; an R² has no bounded sensitivity",
    "tstr_ratio": "a ratio of two model scores has no bounded sensitivity",
    "exact_match_rate": "one record can equal every synthetic row, so it can move the rate across "
    "its whole range (sensitivity 1); a gate at 0 certifies that records are absent",
    "unique_exact_match_rate": "one record can make every synthetic row a unique match (sensitivity 1)",
    "dcr_q05": "a quantile of nearest-record distances; one record can move it across the whole range",
    "correct_link_rate": "one record can change which real row is nearest to many synthetic rows",
    "membership_share": "replacing one held-out record can move it from 1.0 to 0.5",
}

ADVISORY_METRICS = (*GATEABLE, *NOT_GATEABLE)


def gate_sensitivity(metric: str, k: int) -> float:
    """Δ (L1 = L2, a scalar) of a gateable metric over ``k`` compared real rows: 1/k
    (module docstring). ValueError for a metric without a bound."""
    if metric not in GATEABLE:
        raise ValueError(f"gate {metric!r} has no bounded sensitivity: {NOT_GATEABLE.get(metric, 'unknown')}")
    if k < 1:
        raise ValueError(f"the gates need at least one compared row (k = {k})")
    return 1.0 / k


def gate_sensitivities(metrics: list[str], k: int) -> dict[str, Sensitivity]:
    """For ``audit verify``: every gate's statistic name and its Δ, from public facts."""
    return {
        f"gate[{name}]": Sensitivity(GATES_STAGE, gate_sensitivity(name, k), gate_sensitivity(name, k), True)
        for name in metrics
    }


def measure_gates(
    values: Mapping[str, float], k: int, stage_part: StageBudget, *, rng: np.random.Generator
) -> list[Measurement]:
    """Each gated metric + noise, the ``gates`` stage split evenly over them (shares
    rounded down).

    Sensitivity: Δ = ``gate_sensitivity`` = 1/k for each metric (L1 = L2, a scalar;
    module docstring), for the fixed synthetic table.
    Noise: Gaussian σ = Δ/√(2ρ_g) under zCDP, Laplace b = Δ/ε_g under pure, with
    ρ_g = ρ/g or ε_g = ε/g for g gates.
    Privacy: Σ_g ρ_g ≤ ρ (or Σ ε_g ≤ ε) of the ``gates`` stage, composed with the
    synthesis (adaptive: the synthetic table is an earlier DP output); the decision is
    post-processing.
    Reference: ours (no paper); the noisy-gate argument in the module docstring.
    """
    out = []
    for name, part in zip(values, stage_part.split(len(values)), strict=True):
        delta = gate_sensitivity(name, k)
        value = float(values[name])
        if not math.isfinite(value):
            raise ValueError(f"gate {name!r}: the metric is not a finite number")
        out.append(
            measure_stage(
                np.array([value]),
                part,
                l2_sensitivity=delta,
                l1_sensitivity=delta,
                rng=rng,
                name=f"gate[{name}]",
            )
        )
    return out


@dataclass(frozen=True)
class GateResult:
    """A gate's public record: its bounds, the noisy metric, the noise's standard
    deviation and the decision (post-processing of the noisy metric)."""

    gate: str
    min: float | None
    max: float | None
    noisy_value: float
    noise_sd: float
    passed: bool

    def as_dict(self) -> dict:
        return {
            "gate": self.gate,
            "min": self.min,
            "max": self.max,
            "noisy_value": self.noisy_value,
            "noise_sd": self.noise_sd,
            "passed": self.passed,
        }


def decide(
    measurements: list[Measurement], bounds: Mapping[str, Mapping[str, float | None]]
) -> list[GateResult]:
    """Pass iff each noisy metric lies within its public bounds."""
    out = []
    for m in measurements:
        name = m.name.removeprefix("gate[").removesuffix("]")
        lo, hi = bounds[name].get("min"), bounds[name].get("max")
        value = float(m.value[0])
        sd = m.scale if m.mechanism == "gaussian" else math.sqrt(2.0) * m.scale
        ok = (lo is None or value >= lo) and (hi is None or value <= hi)
        out.append(GateResult(name, lo, hi, value, sd, bool(ok)))
    return out
