"""Will a gate pass? A forecast from public facts only (the budget plan, the noise on each
count histogram the mechanism publishes, n, the synthetic rows m), before any budget is
reserved: a release stopped by a gate has spent its budget and published nothing.

A gate compares a metric of the k compared rows and the m synthetic rows, plus its own
noise e_g (``mechanisms.gates``: s.d. σ_g), with its bounds. The metric's share that the
noise and the sampling alone explain, per column j of K_j published bins:

    TV_j ≈ ½·√(L1_noise² + L1_sample²),   L1_noise = min(K_j·E|e_j|/n, 2),
    L1_sample = √(2(K_j − 1)/(π·m))

(E‖e‖₁/n the histogram's expected L1 noise, ``forecast.expected_l1``, before the
mechanism's smoothing, which lowers it; L1_sample the expected L1 error of m draws from K
cells at its largest, the uniform distribution). Hence:

* ``tvd_1way`` (the mean of the TV_j) is forecast *at most about* that value, and the chance
  of passing a ``max`` bound *at least about* Φ((max − value)/σ_g).
* ``tvd_2way`` is *at least about* the mean over pairs of max(TV_i, TV_j) (the TV of a
  pair's table is at least its columns'), the model's error on the pair coming on top; the
  chance of passing a ``max`` bound *at most about* Φ((max − floor)/σ_g).
* ``wasserstein_max`` is not forecast (it depends on where the data's values lie).

A gate whose chance is at most ``LIKELY_FAIL`` is warned about before the budget is spent.
Both sides hold on Adult through the mechanism's own fit (``tests/spec/test_gate_forecast.py``,
factor_gauss at ε = 0.3 and 1, which prints the figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

from scipy import stats

from dprelease.mechanisms.forecast import expected_l1
from dprelease.mechanisms.synthesizer import HistogramNoise

__all__ = ["LIKELY_FAIL", "GateForecast", "column_tv", "forecast_gates"]

LIKELY_FAIL = 0.5


@dataclass(frozen=True)
class GateForecast:
    """One gate: its bounds, the forecast ``value`` of its metric (None: not forecast) and
    whether that is an upper estimate (``at most``) or a floor (``at least``), the gate's
    noise s.d., and the chance of passing."""

    gate: str
    min: float | None
    max: float | None
    value: float | None
    side: Literal["at most", "at least"] | None
    noise_sd: float

    @property
    def chance(self) -> float | None:
        """P(min ≤ value + e_g ≤ max) for Gaussian e_g of s.d. ``noise_sd``: a lower bound
        on the chance of passing a ``max`` when ``value`` is an upper estimate, an upper
        bound when it is a floor (and the other way round for a ``min``)."""
        if self.value is None:
            return None
        sd = max(self.noise_sd, 1e-300)
        hi = 1.0 if self.max is None else float(stats.norm.cdf((self.max - self.value) / sd))
        lo = 0.0 if self.min is None else float(stats.norm.cdf((self.min - self.value) / sd))
        return max(hi - lo, 0.0)

    @property
    def likely_to_fail(self) -> bool:
        """The forecast says the gate stops the release: its chance of passing is at most
        ``LIKELY_FAIL`` though the forecast leans towards passing (a floor against a max)."""
        chance = self.chance
        return (
            chance is not None and self.side == "at least" and self.max is not None and chance <= LIKELY_FAIL
        )

    def line(self) -> str:
        """What ``dprelease validate`` prints."""
        bound = " and ".join(f"{k} {v:g}" for k, v in (("min", self.min), ("max", self.max)) if v is not None)
        head = f"gate {self.gate} ({bound}), noise s.d. {self.noise_sd:.2g}: "
        if self.value is None:
            return head + "not forecast (it depends on where the data's values lie)"
        chance = self.chance
        assert chance is not None
        towards = "at least" if (self.side == "at most") == (self.max is not None) else "at most"
        return (
            f"{head}the metric {self.side} about {self.value:.3g} from the noise and the sampling alone; "
            f"chance of passing {towards} about {chance:.0%}"
        )


def column_tv(h: HistogramNoise, n: int, m: int) -> float:
    """½·√(L1_noise² + L1_sample²) for one column's histogram (module doc)."""
    noise = min(expected_l1(h, n), 2.0)
    sample = math.sqrt(2.0 * max(h.bins - 1, 0) / (math.pi * max(m, 1)))
    return 0.5 * math.sqrt(noise * noise + sample * sample)


def forecast_gates(
    gates: Mapping[str, Mapping[str, float | None]],
    noise_sd: Mapping[str, float],
    histograms: Sequence[HistogramNoise],
    columns: Sequence[str],
    n: int,
    m: int,
) -> list[GateForecast]:
    """Each gate's forecast (module doc): ``noise_sd`` its noise's s.d., ``histograms`` the
    mechanism's (the first for each column), ``columns`` the modelled columns, n fitted
    rows, m synthetic rows. A metric over a column without a published histogram is not
    forecast."""
    tv: dict[str, float] = {}
    for h in histograms:
        tv.setdefault(h.column, column_tv(h, n, m))
    known = all(c in tv for c in columns)
    out = []
    for gate, bounds in gates.items():
        value: float | None = None
        side: Literal["at most", "at least"] | None = None
        if known and gate == "tvd_1way":
            value, side = sum(tv[c] for c in columns) / len(columns), "at most"
        elif known and gate == "tvd_2way" and len(columns) > 1:
            pairs = list(combinations(columns, 2))
            value, side = sum(max(tv[a], tv[b]) for a, b in pairs) / len(pairs), "at least"
        out.append(GateForecast(gate, bounds.get("min"), bounds.get("max"), value, side, noise_sd[gate]))
    return out
