"""The usability forecast of a release spec (``mechanisms.forecast``), before any noise is
drawn: from the spec's budget, plan, mechanism and public schema, and n alone."""

from __future__ import annotations

from dprelease.mechanisms.forecast import Forecast, histogram_forecast
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.synthesizer import HistogramNoise
from dprelease.spec.release import ReleaseSpec

__all__ = ["Forecast", "forecast"]


def forecast(spec: ReleaseSpec, n: int | None) -> Forecast:
    """Refuse, or warn about, a budget whose histograms the noise would swamp for n fitted
    rows (``engines.inputs.fitted_rows``: the counted rows less the holdout); n None
    (not counted yet) forecasts nothing. The plan is the flow's (``ReleaseSpec.budget_plan``),
    at ``privacy.epsilon`` and at each ε the
    thresholds try; the noise is the mechanism's own (``Synthesizer.histograms``):
    σ = Δ₂/√(2ρ_h) or b = Δ₁/ε_h per count for each histogram's share ρ_h or ε_h, and the
    thresholds are sd ≥ n (refuse) and K·E|e|/n > 0.5 (warn), ``mechanisms.forecast``;
    a column's declared ``bins`` the noise swamps are warned about (``swamped_bins``).
    Reads no data (the spec's dataset path is never opened)."""
    synth = MECHANISMS[spec.mechanism.name]
    schema, params = spec.public_schema(), spec.mechanism_params()
    privacy = spec.privacy

    def noise_at(epsilon: float) -> list[HistogramNoise]:
        plan = spec.budget_plan(epsilon)
        return synth.histograms(schema, params, plan, n)

    return histogram_forecast(noise_at, privacy.epsilon, n, schema)
