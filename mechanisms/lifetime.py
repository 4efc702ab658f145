"""A dataset's lifetime account: what its releases cost together (``compose_lifetime``)
and what the next release may still spend (``headroom``), under basic and zCDP
composition (replace-one neighbours). One release's own budget is ``mechanisms.accounting``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dprelease.mechanisms.accounting import Notion, zcdp_epsilon, zcdp_rho
from dprelease.mechanisms.errors import BudgetError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "USED_UP",
    "Charge",
    "Headroom",
    "LifetimeSpend",
    "approximate_delta",
    "compose_lifetime",
    "headroom",
]

ChargeNotion = Literal["zcdp", "pure", "void"]


@dataclass(frozen=True)
class Charge:
    """What one release costs the dataset: ρ-zCDP (``rho`` set, with the δ its ε was
    stated at) or pure ε-DP (``rho`` None, δ = 0). A release that drew no noise costs
    ``Charge("pure", None, 0.0, 0.0)``. A release that was not differentially private
    costs ``Charge.void()``: no finite (ε, δ) bounds it, so no composed statement about
    the dataset holds after it."""

    notion: ChargeNotion
    rho: float | None
    epsilon: float
    delta: float

    @classmethod
    def void(cls) -> Charge:
        return cls("void", None, math.inf, 1.0)

    @property
    def is_void(self) -> bool:
        return self.notion == "void"


@dataclass(frozen=True)
class LifetimeSpend:
    """The composed cost of a dataset's releases under the better of two valid rules;
    ``void`` (ε = ∞) once any of them was not differentially private."""

    epsilon: float
    delta: float
    rule: str
    basic: tuple[float, float]
    zcdp: tuple[float, float] | None

    @property
    def void(self) -> bool:
        return math.isinf(self.epsilon)


def compose_lifetime(charges: list[Charge], delta: float) -> LifetimeSpend:
    """Compose releases of one dataset (adaptive composition, replace-one neighbours).

    Two valid rules; the smaller ε whose δ fits ``delta`` is reported:

    * basic composition (Dwork et al. 2006): (Σε_i, Σδ_i);
    * zCDP (Bun & Steinke 2016, Lemma 2.3 and Prop. 1.4): a ρ_i-zCDP release adds ρ_i
      and a pure ε_i-DP release adds ε_i²/2; the total ρ converts to (ε, ``delta``) by
      CKS Cor. 13 (``zcdp_epsilon``), which needs ``delta`` > 0. An (ε_i, δ_i)-DP
      "pure" charge with δ_i > 0 (``schema`` discovery's partition selection: ε_i-DP
      outside an event of probability δ_i) is δ_i-approximately ε_i²/2-zCDP (Bun &
      Steinke 2016, Def. 8.1, which composes by adding ρ's and δ's): its δ_i is set
      aside and ρ converts at ``delta`` − Σδ_i.

    A void charge (a release that was not DP) makes the composition void: ε = ∞.
    """
    if any(c.is_void for c in charges):
        return LifetimeSpend(
            math.inf,
            1.0,
            "void: a release of this dataset was not differentially private, so no composed "
            "(epsilon, delta) guarantee holds for it",
            (math.inf, 1.0),
            None,
        )
    basic = (math.fsum(c.epsilon for c in charges), math.fsum(c.delta for c in charges))
    options = (
        [(basic[0], basic[1], "basic composition: sums of epsilon and delta")] if basic[1] <= delta else []
    )
    zcdp = None
    aside = approximate_delta(charges)
    if delta > aside:
        rho = _zcdp_cost(charges)
        zcdp = (zcdp_epsilon(rho, delta - aside), delta)
        at = f"delta {delta:g}" if not aside else f"delta {delta:g} - {aside:g} (approximate zCDP)"
        options.append((*zcdp, f"zCDP composition: rho {rho:.6g} converted at {at} (CKS Cor. 13)"))
    if not options:
        raise BudgetError(
            f"the releases' deltas sum to {basic[1]:g}, above the lifetime delta {delta:g}, and "
            + (
                f"the partition selections of schema discovery set aside delta {aside:g}, leaving none "
                "of the lifetime delta for zCDP composition"
                if 0 < delta <= aside
                else "pure composition needs a lifetime delta > 0 for zCDP releases"
            )
        )
    eps, dlt, rule = min(options, key=lambda o: o[0])
    return LifetimeSpend(eps, dlt, rule, basic, zcdp)


def _zcdp_cost(charges: list[Charge]) -> float:
    """Σρ_i of ``charges`` under zCDP composition: a pure ε_i-DP charge counts ε_i²/2 (Bun &
    Steinke 2016, Prop. 1.4), rounded up when that falls below the normal doubles (where
    a product rounds by a whole subnormal step), so that a tiny ε never counts as ρ = 0."""

    def pure(eps: float) -> float:
        rho = eps * eps / 2
        return math.nextafter(rho, math.inf) if 0 < eps and rho < sys.float_info.min else rho

    return math.fsum(c.rho if c.rho is not None else pure(c.epsilon) for c in charges)


def approximate_delta(charges: list[Charge]) -> float:
    """Σδ_i of the (ε_i, δ_i)-DP "pure" charges: set aside from the δ at which zCDP
    composition converts (``compose_lifetime``)."""
    return math.fsum(c.delta for c in charges if c.rho is None and not c.is_void)


USED_UP = 1e-12  # a remainder below this fraction of the lifetime is the splits' rounding, not budget


@dataclass(frozen=True)
class Headroom:
    """What a dataset's lifetime budget (ε_L, δ_L) still admits: the largest ``epsilon`` the
    next release can state (as a ``notion`` release at ``delta``), the ρ left under zCDP
    composition (None when δ_L = 0, or all of it is set aside: only basic composition
    applies), and whether the lifetime is ``used_up``: no release of any notion at any δ
    fits any more (``epsilon`` can be 0 at ``delta`` while a pure release still fits)."""

    epsilon: float
    delta: float
    notion: Notion
    rho: float | None
    used_up: bool


def headroom(
    charges: list[Charge], lifetime: tuple[float, float], notion: Notion = "zcdp", delta: float | None = None
) -> Headroom:
    """The largest ε of a next release that ``compose_lifetime`` still fits in ``lifetime``.

    Under zCDP composition "ε left" is not ε_L − ε_spent: ρ's add, not ε's. The next
    release fits when either rule fits (``compose_lifetime`` takes the smaller):

    * zCDP: Σρ_i + ρ_next ≤ ρ_L = ``zcdp_rho(ε_L, δ_L)``; a zCDP release at (ε, δ) has
      ρ_next = ``zcdp_rho(ε, δ)``, so ε = ``zcdp_epsilon(ρ_L − Σρ_i, δ)``; a pure one has
      ρ_next = ε²/2, so ε = √(2(ρ_L − Σρ_i));
    * basic: ε = ε_L − Σε_i, if Σδ_i + δ ≤ δ_L.

    ``delta`` (default δ_L) is the δ the next release states; a pure release has δ = 0,
    a zCDP one needs δ > 0. What is left below ``USED_UP`` of the lifetime (of ρ_L, of
    ε_L) is the rounding down of the splits (a release of ε_L leaves a few ulps), not
    budget: with no more than that left under either rule the lifetime is used up, which
    understates the room (safe). The answer is checked with ``compose_lifetime`` and
    lowered until it fits, else it is 0: a release at exactly that ε is accepted.
    """
    eps_l, delta_l = lifetime
    delta = 0.0 if notion == "pure" else (delta_l if delta is None else delta)
    if any(c.is_void for c in charges):
        return Headroom(0.0, delta, notion, 0.0 if delta_l > 0 else None, True)
    deltas, basic = math.fsum(c.delta for c in charges), eps_l - math.fsum(c.epsilon for c in charges)
    basic = basic if basic > USED_UP * eps_l and deltas <= delta_l else 0.0
    rho_left = _rho_left(charges, lifetime)
    options = []
    if notion == "pure" or delta > 0:
        if deltas + delta <= delta_l and basic > 0:
            options.append(basic)
        if rho_left:
            options.append(math.sqrt(2 * rho_left) if notion == "pure" else zcdp_epsilon(rho_left, delta))

    def fits(e: float) -> bool:
        rho = None if notion == "pure" else zcdp_rho(e, delta)
        return compose_lifetime([*charges, Charge(notion, rho, e, delta)], delta_l).epsilon <= eps_l

    eps = _lowered_until(fits, max([0.0, *options]))
    return Headroom(eps, delta, notion, rho_left, used_up=not rho_left and not basic)


def _rho_left(charges: list[Charge], lifetime: tuple[float, float]) -> float | None:
    """ρ_L − Σρ_i under zCDP composition at δ_L less the δ set aside (0 when below
    ``USED_UP`` of ρ_L; None when no δ is left to convert at: no zCDP rule)."""
    aside = approximate_delta(charges)
    if lifetime[1] <= aside:
        return None
    rho_l = zcdp_rho(lifetime[0], lifetime[1] - aside)
    left = rho_l - _zcdp_cost(charges)
    return left if left > USED_UP * rho_l else 0.0


def _lowered_until(fits: Callable[[float], bool], eps: float) -> float:
    """``eps``, or lowered (by 10⁻⁹ of it, then twice that, and so on: 30 steps take it to
    about a quarter) until ``fits`` holds, else 0: the conversions round."""
    for k in range(30):
        if eps <= 0 or fits(eps):
            return eps
        eps = math.nextafter(eps * (1 - 1e-9 * 2**k), 0.0)
    return 0.0
