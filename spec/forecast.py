"""The usability forecast of a release spec (``mechanisms.forecast``), before any noise is
drawn: from the spec's budget, plan, mechanism and public schema, and n alone."""

from __future__ import annotations

import math
from dataclasses import replace

from dprelease.mechanisms.forecast import Forecast, histogram_forecast
from dprelease.mechanisms.gate_forecast import GateForecast, forecast_gates
from dprelease.mechanisms.gates import GATES_STAGE, gate_sensitivity
from dprelease.mechanisms.primitives import stage_noise
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.synthesizer import HistogramNoise
from dprelease.spec.release import ReleaseSpec

__all__ = ["Forecast", "forecast", "gate_forecasts"]


def forecast(spec: ReleaseSpec, n: int | None) -> Forecast:
    """Refuse, or warn about, a budget whose histograms the noise would swamp for n fitted
    rows (``engines.inputs.fitted_rows``: the counted rows less the holdout); n None
    (not counted yet) forecasts nothing. The plan is the flow's (``ReleaseSpec.budget_plan``),
    at ``privacy.epsilon`` and at each ε the
    thresholds try; the noise is the mechanism's own (``Synthesizer.histograms``):
    σ = Δ₂/√(2ρ_h) or b = Δ₁/ε_h per count for each histogram's share ρ_h or ε_h, and the
    thresholds are sd ≥ n (refuse) and K·E|e|/n > 0.5 (warn), ``mechanisms.forecast``;
    a column's declared ``bins`` the noise swamps are warned about (``swamped_bins``), and
    a gate the noise and sampling alone would likely fail (``gate_forecasts``). Reads no
    data (the spec's dataset path is never opened)."""
    synth = MECHANISMS[spec.mechanism.name]
    schema, params = spec.public_schema(), spec.mechanism_params()
    privacy = spec.privacy

    def noise_at(epsilon: float) -> list[HistogramNoise]:
        plan = spec.budget_plan(epsilon)
        return synth.histograms(schema, params, plan, n)

    ahead = histogram_forecast(noise_at, privacy.epsilon, n, schema)
    if n is None:
        return ahead
    failing = [g for g in gate_forecasts(spec, n) if g.likely_to_fail]
    return replace(ahead, warnings=[*ahead.warnings, *(_likely_to_fail(g) for g in failing)])


def gate_forecasts(spec: ReleaseSpec, n: int) -> list[GateForecast]:
    """Each of the spec's gates forecast for n fitted rows (``mechanisms.gate_forecast``):
    its noise the flow's (the ``gates`` stage split evenly, Δ = 1/k over the k compared
    rows: the fitted rows, or a streaming engine's ``checks.sample_rows``), the metric from
    the mechanism's published histograms and m synthetic rows. Reads no data."""
    gates = spec.checks.gates
    if not gates or n < 1:
        return []
    plan = spec.budget_plan()
    k = min(n, spec.checks.sample_rows) if spec.engine.streaming else n
    sds = {}
    for name, part in zip(gates, plan.stage(GATES_STAGE).split(len(gates)), strict=True):
        delta = gate_sensitivity(name, k)
        kind, scale = stage_noise(part, l2_sensitivity=delta, l1_sensitivity=delta)
        sds[name] = scale if kind == "gaussian" else math.sqrt(2.0) * scale
    schema = spec.public_schema()
    histograms = MECHANISMS[spec.mechanism.name].histograms(schema, spec.mechanism_params(), plan, n)
    bounds = {name: g.model_dump() for name, g in gates.items()}
    return forecast_gates(bounds, sds, histograms, schema.names, n, spec.synthetic_rows or n)


def _likely_to_fail(g: GateForecast) -> str:
    return (
        f"gate {g.gate} will likely stop the release after its budget is spent: from the noise and the "
        f"sampling alone its metric is at least about {g.value:.3g}, against checks.gates.{g.gate}.max "
        f"{g.max:g} (chance of passing at most about {g.chance:.0%}); raise the bound above the floor, "
        "raise privacy.epsilon, or supply more rows"
    )
