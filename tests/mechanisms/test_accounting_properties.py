"""Issue 30: accounting that cannot crash. Properties of the zCDP conversions and of the
lifetime headroom over ε, δ, ρ and spent amounts, including a lifetime used up exactly and
values near 0 (down to the smallest subnormal) and ε up to 1000: nothing raises, every
answer stays on the safe side, and the guards leave normal values as OpenDP has them.

Deterministic for CI: ``derandomize=True`` (examples derived from the test's name, no
example database) and a bounded number of examples.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr

from dprelease.mechanisms.accounting import Notion, plan_budget, zcdp_delta, zcdp_epsilon, zcdp_rho
from dprelease.mechanisms.lifetime import Charge, approximate_delta, compose_lifetime, headroom

PROPERTY = settings(
    derandomize=True,
    database=None,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TINY = [5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, 1e-200, 1e-100, 1e-20, 1e-9]
EPSILONS = st.one_of(st.sampled_from(TINY), st.floats(0, 1000))
RHOS = st.one_of(st.sampled_from(TINY), st.floats(0, 1e4))
DELTAS = st.one_of(st.sampled_from(TINY), st.floats(0, 1, exclude_max=True))
REL = 1e-9  # slack for the oracle's own rounding and for bisection's last steps
WHOLE = plan_budget("zcdp", 1.0, 1e-6, {"all": 1.0})  # issue 30: one release of the whole lifetime


def gaussian_delta(rho: float, eps: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism with Δ/σ = μ = √(2ρ) (Balle & Wang 2018,
    Thm. 8): Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ), in logs. That mechanism is ρ-zCDP, so
    no sound conversion of ρ-zCDP to (ε, δ)-DP can state a smaller δ."""
    if rho <= 0:
        return 0.0
    mu = math.sqrt(2 * rho)
    head, tail = log_ndtr(mu / 2 - eps / mu), eps + log_ndtr(-mu / 2 - eps / mu)
    return 0.0 if tail >= head else math.exp(head) * -math.expm1(tail - head)


# ---------------------------------------------------------------- the conversions


@PROPERTY
@given(RHOS, RHOS, EPSILONS, EPSILONS)
@example(4e-69, 1e-8, 1.3e-8, 1.0)  # issue 30: brentq did not converge at ρ ≈ 4e-69
@example(5e-324, 1e-300, 1e-160, 1000.0)
@example(400.0, 1000.0, 1.0, 0.0)  # exp overflowed for ρ ≫ ε
def test_zcdp_delta_is_a_probability_monotone_and_never_below_the_gaussian(rho1, rho2, eps1, eps2):
    (rho1, rho2), (eps1, eps2) = sorted((rho1, rho2)), sorted((eps1, eps2))
    d = zcdp_delta(rho1, eps1)
    assert 0.0 <= d <= 1.0
    assert d <= zcdp_delta(rho2, eps1) and zcdp_delta(rho1, eps2) <= d  # more ρ, less ε: more δ
    assert d >= gaussian_delta(rho1, eps1) * (1 - REL)  # safe: never less δ than is true


@PROPERTY
@given(EPSILONS, EPSILONS, DELTAS, DELTAS)
@example(1.3e-8, 1.0, 1e-6, 1e-6)  # issue 30: the headroom's step-down reached this and crashed
@example(1e-300, 1e-300, 1e-6, 1e-6)
@example(1.0, 1.0, 0.0, 1e-6)  # δ = 0 divided by zero
def test_zcdp_rho_meets_delta_and_is_monotone(eps1, eps2, delta1, delta2):
    (eps1, eps2), (delta1, delta2) = sorted((eps1, eps2)), sorted((delta1, delta2))
    rho = zcdp_rho(eps1, delta1)
    assert 0.0 <= rho <= eps1
    assert zcdp_delta(rho, eps1) <= delta1
    assert gaussian_delta(rho, eps1) <= delta1 * (1 + REL)
    assert rho <= zcdp_rho(eps2, delta1) * (1 + REL) and rho <= zcdp_rho(eps1, delta2) * (1 + REL)


@PROPERTY
@given(RHOS, RHOS, DELTAS, DELTAS)
@example(1e-320, 1e-320, 1e-6, 1e-6)  # brentq did not converge
@example(400.0, 400.0, 1e-6, 1e-6)  # exp overflowed (a lifetime of ε up to 1000 spends this)
@example(1.0, 1.0, 0.0, 0.0)  # δ = 0 divided by zero
def test_zcdp_epsilon_meets_delta_and_is_monotone(rho1, rho2, delta1, delta2):
    (rho1, rho2), (delta1, delta2) = sorted((rho1, rho2)), sorted((delta1, delta2))
    eps = zcdp_epsilon(rho1, delta2)
    assert eps >= 0.0
    if math.isfinite(eps):
        assert zcdp_delta(rho1, eps) <= delta2
        assert gaussian_delta(rho1, eps) <= delta2 * (1 + REL)
    else:
        assert rho1 > 0 and delta2 == 0  # ρ-zCDP is never (ε, 0)-DP
    assert eps <= zcdp_epsilon(rho2, delta2) * (1 + REL) and eps <= zcdp_epsilon(rho1, delta1) * (1 + REL)


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0, 5.0, 20.0, 100.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-9, 1e-6, 1e-3])
def test_normal_values_match_opendp(scale, delta):
    """OpenDP's zCDP → approximate-DP map (the same CKS bound) for Gaussian noise of this
    scale: the guards leave the usual range as it was."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    gauss = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)
    rho = gauss.map(1.0)
    curve = dp.c.make_zCDP_to_approxDP(gauss).map(1.0)
    assert zcdp_epsilon(rho, delta) == pytest.approx(curve.epsilon(delta), rel=1e-12)
    eps = curve.epsilon(delta)
    assert zcdp_delta(rho, eps) == pytest.approx(curve.delta(eps), rel=1e-12)


def test_a_tiny_pure_epsilon_never_composes_to_nothing():
    """ε²/2 of ε = 10⁻¹⁷⁰ underflows to 0: a thousand such releases composed under zCDP
    were "ε = 0" and fitted a lifetime of 10⁻³⁰⁰. The cost is rounded up instead."""
    tiny = Charge("pure", None, 1e-170, 0.0)
    spent = compose_lifetime([tiny] * 1000, 1e-6)
    assert spent.zcdp is not None and spent.zcdp[0] > 1e-300
    assert headroom([tiny], (1e-300, 1e-6), "pure").epsilon == 0.0


# ---------------------------------------------------------------- the headroom


@st.composite
def _charge(draw, lifetime: tuple[float, float]) -> Charge:
    """A release of the dataset: a zCDP or pure plan (ε up to the lifetime's), schema
    discovery's (ε, δ) partition selection, or one plan of the whole lifetime."""
    kind = draw(st.sampled_from(["zcdp", "pure", "discovery", "whole"]))
    eps = draw(st.one_of(EPSILONS.filter(lambda e: e > 0), st.just(lifetime[0])))
    if kind == "whole":
        notion = "zcdp" if lifetime[1] > 0 else "pure"
        plan = plan_budget(notion, lifetime[0], lifetime[1], {"marginals": 1.0, "moments": 2.0, "gates": 0.5})
        return Charge(notion, plan.spent_rho, plan.spent_epsilon, plan.delta)
    if kind == "zcdp":
        delta = draw(st.floats(1e-300, 0.5))
        return Charge("zcdp", zcdp_rho(eps, delta), eps, delta)
    return Charge("pure", None, eps, draw(DELTAS) if kind == "discovery" else 0.0)


@st.composite
def _ledger(draw) -> tuple[tuple[float, float], list[Charge], Notion]:
    lifetime = (draw(EPSILONS.filter(lambda e: e > 0)), draw(st.one_of(st.just(0.0), DELTAS)))
    notion: Notion = "pure" if lifetime[1] == 0 else draw(st.sampled_from(["zcdp", "pure"]))
    return lifetime, draw(st.lists(_charge(lifetime), max_size=4)), notion


def _fits(
    charges: list[Charge], lifetime: tuple[float, float], notion: Notion, eps: float, delta: float
) -> bool:
    """Whether a next ``notion`` release at (ε, δ) composes within ``lifetime``."""
    rho = None if notion == "pure" else zcdp_rho(eps, delta)
    return compose_lifetime([*charges, Charge(notion, rho, eps, delta)], lifetime[1]).epsilon <= lifetime[0]


def _capped(eps: float, delta: float) -> bool:
    """Where ρ = ε meets δ already (tiny ε, large δ), ``zcdp_rho`` caps ρ at ε: less room
    than is true, so a release above the headroom can fit there."""
    return zcdp_delta(eps, eps) <= delta


@PROPERTY
@given(_ledger())
@example(((1.0, 1e-6), [Charge("zcdp", WHOLE.spent_rho, WHOLE.spent_epsilon, 1e-6)], "zcdp"))
def test_headroom_never_raises_and_is_the_largest_epsilon_that_fits(ledger):
    lifetime, charges, notion = ledger
    room = headroom(charges, lifetime, notion)
    assert room.epsilon >= 0.0
    if room.used_up:  # nothing fits: not at this delta, and not as a pure release either
        assert room.epsilon == 0.0 and headroom(charges, lifetime, "pure").epsilon == 0.0
    if room.epsilon == 0.0:
        return
    assert _fits(charges, lifetime, notion, room.epsilon, room.delta)
    above = max(room.epsilon * 1.001, math.nextafter(room.epsilon, math.inf))
    meaningful = not _capped(lifetime[0], lifetime[1] - approximate_delta(charges)) and (
        notion == "pure" or (zcdp_rho(above, room.delta) > 0 and not _capped(above, room.delta))
    )
    if meaningful:
        assert not _fits(charges, lifetime, notion, above, room.delta)


@pytest.mark.parametrize("lifetime", [(1.0, 1e-6), (0.1, 1e-9), (1000.0, 1e-6), (1e-9, 1e-6), (1.0, 0.0)])
@pytest.mark.parametrize("weights", [{"all": 1.0}, {"marginals": 1.0, "moments": 2.0, "refine": 0.3}])
def test_a_release_of_the_whole_lifetime_leaves_nothing(lifetime, weights):
    """The splits round each share down, so a release of ε_L leaves a few ulps; that is
    no budget: the lifetime is used up, and a second release of ε_L does not fit."""
    notion = "zcdp" if lifetime[1] > 0 else "pure"
    plan = plan_budget(notion, *lifetime, weights)
    spent = Charge(notion, plan.spent_rho, plan.spent_epsilon, plan.delta)
    assert compose_lifetime([spent], lifetime[1]).epsilon <= lifetime[0]  # the first one fits
    room = headroom([spent], lifetime, notion)
    assert room.used_up and room.epsilon == 0.0 and room.rho in (0.0, None)
    assert headroom([spent, spent], lifetime, notion).used_up
    assert compose_lifetime([spent, spent], lifetime[1]).epsilon > lifetime[0]
