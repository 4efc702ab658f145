"""Additive-noise primitives and the frozen record every noisy output travels in.

``Measurement`` holds the noisy value *and* how it was made (mechanism, sensitivity and
its norm, noise scale, ρ or ε). The ledger and the audit bundle serialise these records;
they never recompute a scale.

Where the noise comes from is a property of the ``rng`` a mechanism receives
(``mechanisms.randomness``): a ``VettedRNG`` draws through OpenDP's vetted samplers, a
plain generator through numpy's (seeded runs only). Every DP noise draw passes through
``_perturb``. The randomness module's public names are re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.axes import Axis, check_axes
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.randomness import (
    NUMPY_SAMPLER_NOTE,
    VETTED_SAMPLER_NOTE,
    Streams,
    VettedRNG,
    is_vetted,
    noise_rngs,
    opendp,
    release_streams,
    sampler_note,
    vetted_float_noise,
)

__all__ = [
    "NUMPY_SAMPLER_NOTE",
    "VETTED_SAMPLER_NOTE",
    "Measurement",
    "Streams",
    "VettedRNG",
    "discrete_laplace_mechanism",
    "discrete_laplace_noise",
    "exponential_mechanism",
    "exponential_scale",
    "gaussian_mechanism",
    "gaussian_sigma",
    "laplace_mechanism",
    "laplace_scale",
    "measure_stage",
    "noise_rngs",
    "release_streams",
    "sampler_note",
    "stage_noise",
    "unprotected",
]


@dataclass(frozen=True)
class Measurement:
    """A noisy statistic and the facts an auditor needs to check it.

    ``defect`` is None for a measurement whose cost is a valid DP guarantee; otherwise it
    says why not (a paper's too-small sensitivity, sorted noise, a value used without
    noise). The ledger then marks the release *not differentially private*. ``axes``: for
    a count table over public cells, which column each axis counts and how its declared
    cells are grouped (``axes.Axis``); empty for any other statistic. A table's noisy
    cells are published (``tables``): publishing a DP output costs nothing more.
    """

    name: str
    stage: str
    value: np.ndarray
    mechanism: Literal["gaussian", "laplace", "discrete_laplace", "noisy_max", "exponential", "none"]
    sensitivity: float
    norm: Literal["l1", "l2", "linf"]
    scale: float
    rho: float | None
    epsilon: float | None
    defect: str | None = None
    axes: tuple[Axis, ...] = ()

    def __post_init__(self) -> None:
        check_axes(self.axes, int(np.size(self.value)), self.name)

    @property
    def draws_noise(self) -> bool:
        """False for a value used without noise (mechanism ``none``): it costs no budget,
        which is exactly what makes it a defect."""
        return self.mechanism != "none"

    def ledger_row(self) -> dict:
        """Everything but the value: safe to publish."""
        return {
            "stage": self.stage,
            "statistic": self.name,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity,
            "sensitivity_norm": self.norm,
            "noise_scale": self.scale,
            "rho": self.rho,
            "epsilon": self.epsilon,
            "dimension": int(np.size(self.value)),
            "differentially_private": self.defect is None,
            "defect": self.defect,
        }


def gaussian_sigma(l2_sensitivity: float, rho: float) -> float:
    """σ = Δ₂ / √(2ρ) gives ρ-zCDP (Bun & Steinke 2016, Prop. 1.6); rounded up."""
    if not (rho > 0 and math.isfinite(rho)):
        raise BudgetError(f"rho ({rho}) must be a finite number > 0")
    return math.nextafter(l2_sensitivity / math.sqrt(2 * rho), math.inf)


def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """b = Δ₁ / ε gives ε-DP (Dwork et al. 2006); rounded up."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise BudgetError(f"epsilon ({epsilon}) must be a finite number > 0")
    return math.nextafter(l1_sensitivity / epsilon, math.inf)


def gaussian_mechanism(
    value: np.ndarray,
    *,
    l2_sensitivity: float,
    rho: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """value + N(0, σ²I): the Gaussian mechanism.

    Sensitivity: the caller's Δ₂ (``l2_sensitivity``), recorded as given.
    Noise: σ = Δ₂/√(2ρ), rounded up (``gaussian_sigma``). With a ``VettedRNG`` the noise
    is OpenDP's discrete Gaussian of scale σ on the lattice 2^-1074, and σ is raised by an
    ulp if OpenDP's own map needs it; the record carries the σ actually used.
    Privacy: ρ-zCDP for a query of L2 sensitivity Δ₂ (the discrete Gaussian too, for the
    same Δ₂); zCDP composes additively, adaptively too (``accounting``).
    Reference: Bun & Steinke 2016, Prop. 1.6; Canonne–Kamath–Steinke 2020 (discrete).
    """
    sigma = gaussian_sigma(l2_sensitivity, rho)
    noisy, sigma = _perturb(np.asarray(value, dtype=float), "gaussian", sigma, l2_sensitivity, rho, rng)
    return Measurement(name, stage, noisy, "gaussian", l2_sensitivity, "l2", sigma, rho, None)


def laplace_mechanism(
    value: np.ndarray,
    *,
    l1_sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """value + Lap(b)^d: the Laplace mechanism.

    Sensitivity: the caller's Δ₁ (``l1_sensitivity``), recorded as given.
    Noise: b = Δ₁/ε, rounded up (``laplace_scale``). With a ``VettedRNG`` the noise is
    OpenDP's discrete Laplace of scale b on the lattice 2^-1074; the record carries the b
    actually used (b, or an ulp above it if OpenDP's own map needs it).
    Privacy: ε-DP for a query of L1 sensitivity Δ₁ (the discrete Laplace too, for the
    same Δ₁); ε's add up under basic composition.
    Reference: Dwork et al. 2006; Canonne–Kamath–Steinke 2020 (discrete).
    """
    b = laplace_scale(l1_sensitivity, epsilon)
    noisy, b = _perturb(np.asarray(value, dtype=float), "laplace", b, l1_sensitivity, epsilon, rng)
    return Measurement(name, stage, noisy, "laplace", l1_sensitivity, "l1", b, None, epsilon)


def discrete_laplace_noise(scale: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Integer noise Lap_Z(σ), P(z) ∝ e^{−|z|/σ}, of shape ``size`` (the noise alone).

    Sensitivity: the caller's; an integer query of L1 sensitivity Δ.
    Noise: discrete Laplace of scale σ. A ``VettedRNG`` draws it with OpenDP's exact
    sampler (``make_laplace`` on i64 vectors, with σ as an exact rational); a plain
    generator as G₁ − G₂ with G ~ Geometric(1 − e^{−1/σ}) (numpy's Geometric counts
    trials ≥ 1; the shift cancels).
    Privacy: added to that query it is (Δ/σ)-DP (exact integer addition: no float issue).
    Reference: Canonne–Kamath–Steinke 2020 (the discrete Laplace and its sampler).
    """
    if is_vetted(rng):
        n = int(np.prod(size))
        dp = opendp()
        domain = dp.vector_domain(dp.atom_domain(T="i64"), size=n)
        meas = dp.m.make_laplace(domain, dp.l1_distance(T="i64"), float(scale))
        return np.asarray(meas([0] * n) if n else [], dtype=np.int64).reshape(size)
    p = -math.expm1(-1.0 / scale)
    return rng.geometric(p, size) - rng.geometric(p, size)


def discrete_laplace_mechanism(
    counts: np.ndarray,
    *,
    l1_sensitivity: float,
    scale: float,
    epsilon: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
    defect: str | None = None,
) -> Measurement:
    """Integer ``counts`` + Lap_Z(``scale``) per entry: the discrete Laplace mechanism.

    Sensitivity: the caller's Δ₁ (``l1_sensitivity``), recorded as given.
    Noise: Lap_Z(``scale``), chosen by the caller (``discrete_laplace_noise``).
    Privacy: (Δ₁/scale)-DP for counts of L1 sensitivity Δ₁, recorded at the ``epsilon``
    the caller's plan assigns (≥ Δ₁/scale for a DP release; a paper-literal variant
    records its claim and a ``defect``).
    Reference: Canonne–Kamath–Steinke 2020; used by ``private_pca``'s PMM and PSMM.
    """
    noisy, _ = _perturb(np.asarray(counts), "discrete_laplace", scale, l1_sensitivity, epsilon, rng)
    return Measurement(
        name, stage, noisy, "discrete_laplace", l1_sensitivity, "l1", scale, None, epsilon, defect
    )


def exponential_scale(linf_sensitivity: float, rho: float) -> float:
    """s = Δ∞/√(2ρ): the Gumbel scale at which the exponential mechanism is ρ-zCDP; rounded up.

    The exponential mechanism choosing argmax(q + Gumbel(s)) is ε-DP with ε = 2Δ∞/s for
    scores each changing by at most Δ∞ between neighbours (not necessarily in the same
    direction), and ε-bounded-range, hence (ε²/8)-zCDP (Cesar & Rogers 2021, Lemma 3.2 and
    Thm 3.3): ε²/8 = Δ∞²/(2s²) = ρ.
    """
    if not (rho > 0 and math.isfinite(rho)):
        raise BudgetError(f"rho ({rho}) must be a finite number > 0")
    return math.nextafter(linf_sensitivity / math.sqrt(2 * rho), math.inf)


def exponential_mechanism(
    scores: np.ndarray,
    *,
    linf_sensitivity: float,
    rho: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """The index of the best of ``scores`` after Gumbel noise: the exponential mechanism.

    Sensitivity: the caller's Δ∞, the most any one score moves between neighbours.
    Noise: Gumbel of scale s = Δ∞/√(2ρ), rounded up (``exponential_scale``); a ``VettedRNG``
    selects with OpenDP's ``make_noisy_max`` under zero-concentrated divergence (its own
    map at Δ∞ checked ≤ ρ, the scale raised by an ulp if needed), a seeded generator with
    numpy's Gumbel sampler (the same law). The record's value is the chosen index.
    Privacy: ρ-zCDP (bounded range: ε = 2Δ∞/s, ε²/8 = ρ), composing with the Gaussian
    measurements of the same plan.
    Reference: McSherry & Talwar 2007; Cesar & Rogers 2021; McKenna et al. 2022 (AIM, §4).
    """
    s = exponential_scale(linf_sensitivity, rho)
    chosen, s = _select(np.asarray(scores, dtype=float), s, linf_sensitivity, rho, rng)
    return Measurement(name, stage, chosen, "exponential", linf_sensitivity, "linf", s, rho, None)


def _select(
    scores: np.ndarray, scale: float, sensitivity: float, rho: float, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """The one place where a private selection meets its scores: [argmax(scores +
    Gumbel(scale))] and the scale actually used. Every selection of every mechanism passes
    here, so the wiring tests (``tests/wiring.py``) replace it, as ``_perturb``, to read the
    exact scores."""
    if not np.all(np.isfinite(scores)):
        raise ValueError("the scores of a selection must be finite")
    if is_vetted(rng):
        dp = opendp()
        space = (
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.linf_distance(T=float, monotonic=False),
        )
        for _ in range(64):  # OpenDP's map rounds up: the smallest scale whose map is ≤ ρ
            chooser = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)
            if chooser.map(float(sensitivity)) <= rho:
                return np.array([int(chooser([float(v) for v in scores]))]), scale
            scale = math.nextafter(scale, math.inf)
        raise BudgetError(
            f"OpenDP's noisy max costs more than rho {rho!r} at scale {scale!r}"
        )  # pragma: no cover
    return np.array([int(np.argmax(scores + rng.gumbel(0.0, scale, scores.shape)))]), scale


def _perturb(
    value: np.ndarray,
    kind: Literal["gaussian", "laplace", "discrete_laplace"],
    scale: float,
    sensitivity: float,
    share: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """The one place where DP noise meets a statistic: ``value`` + noise of ``kind`` and
    ``scale``, and the scale actually used. Every DP noise draw of every mechanism passes
    here (only the paper-literal ``dpfm`` variant's sorted noise, which is not DP, is drawn
    in ``dpfm`` itself), so the wiring tests (``tests/wiring.py``) replace this function to
    read the exact statistic each stage measures, with the noise switched off.

    Sensitivity: ``sensitivity``, as the calling mechanism computed it (used only by
    OpenDP's privacy map for a ``VettedRNG``).
    Noise: ``scale`` (σ or b): discrete Laplace on integers; float Laplace / Gaussian
    from OpenDP (``_vetted_float_noise``) or numpy's samplers (seeded generator).
    Privacy: that of the calling mechanism, ``share`` (ε or ρ) at ``sensitivity``.
    Reference: see ``measure_stage``, ``gaussian_mechanism``, ``laplace_mechanism``,
    ``discrete_laplace_mechanism``.
    """
    if kind == "discrete_laplace":
        return value + discrete_laplace_noise(scale, value.shape, rng), scale
    if is_vetted(rng):
        return vetted_float_noise(value, kind, scale, sensitivity, share)
    draw = rng.normal if kind == "gaussian" else rng.laplace
    return value + draw(0.0, scale, size=value.shape), scale


def stage_noise(
    part: StageBudget, *, l2_sensitivity: float, l1_sensitivity: float
) -> tuple[Literal["gaussian", "laplace"], float]:
    """The noise ``measure_stage`` draws for this part: the accountant's one dispatch.
    Gaussian σ = ``gaussian_sigma``(Δ₂, ρ) under zCDP (``part.rho`` set), Laplace
    b = ``laplace_scale``(Δ₁, ε) under pure DP (a ``VettedRNG`` may raise either by an
    ulp). Forecasts call it too, before any data is read: it draws and spends nothing.

    >>> from dprelease.mechanisms.accounting import StageBudget
    >>> stage_noise(StageBudget("s", 1.0, 0.5, None), l2_sensitivity=1.0, l1_sensitivity=1.0)
    ('gaussian', 1.0000000000000002)
    """
    if part.rho is not None:
        return "gaussian", gaussian_sigma(l2_sensitivity, part.rho)
    return "laplace", laplace_scale(l1_sensitivity, part.share)


def measure_stage(
    value: np.ndarray,
    part: StageBudget,
    *,
    l2_sensitivity: float,
    l1_sensitivity: float,
    rng: np.random.Generator,
    name: str,
    axes: tuple[Axis, ...] = (),
) -> Measurement:
    """``value`` + the noise of its ``part`` of the plan: the mechanism every stage of
    every synthesizer measures with (the last step of the road in ``BudgetPlan``).

    Sensitivity: the caller's Δ₂ (zCDP) or Δ₁ (pure), recorded as given; the other is
    not used. ``axes``: the table's public layout when ``value`` is a count table.
    Noise: ``stage_noise``: Gaussian σ = Δ₂/√(2ρ) under zCDP, Laplace b = Δ₁/ε under pure
    DP, drawn by ``_perturb`` (OpenDP's samplers for a ``VettedRNG``).
    Privacy: ρ-zCDP or ε-DP at the part's share; a stage measuring several statistics
    splits its part first (``StageBudget.split``), so they compose to at most its share.
    Reference: Bun & Steinke 2016, Prop. 1.6; Dwork et al. 2006.
    """
    kind, scale = stage_noise(part, l2_sensitivity=l2_sensitivity, l1_sensitivity=l1_sensitivity)
    norm: Literal["l1", "l2"] = "l2" if kind == "gaussian" else "l1"
    sensitivity = l2_sensitivity if kind == "gaussian" else l1_sensitivity
    noisy, scale = _perturb(np.asarray(value, dtype=float), kind, scale, sensitivity, part.share, rng)
    return Measurement(
        name, part.stage, noisy, kind, sensitivity, norm, scale, part.rho, part.epsilon, axes=axes
    )


def unprotected(value: np.ndarray, *, name: str, stage: str, defect: str) -> Measurement:
    """A value computed from the data and used *without* noise (only a paper-literal
    variant does this): recorded so the ledger shows it and marks the release non-DP."""
    return Measurement(
        name, stage, np.asarray(value, dtype=float), "none", 0.0, "l1", 0.0, None, None, defect
    )
