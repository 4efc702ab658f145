"""Privacy accountants and the budget plan.

Two notions, both under the replace-one neighbour relation (n is public):

* ``zcdp`` (default): the spec's (ε, δ) is converted to the largest ρ whose (ε, δ)-DP
  guarantee holds by Canonne–Kamath–Steinke (2020, Cor. 13); stages get ρ_i with
  Σ ρ_i ≤ ρ (zCDP composes additively, adaptively too) and use the Gaussian mechanism.
* ``pure``: stages get ε_i with Σ ε_i ≤ ε (basic composition) and use Laplace; δ = 0.

Splits are rounded *down* with ``nextafter`` and re-checked with the same sums the audit
uses, so a plan never exceeds the spec by a floating-point ulp.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from scipy.optimize import brentq

from dprelease.mechanisms.errors import BudgetError

if TYPE_CHECKING:
    from collections.abc import Callable

    from dprelease.mechanisms.primitives import Measurement

__all__ = [
    "BudgetPlan",
    "Charge",
    "Headroom",
    "LifetimeSpend",
    "StageBudget",
    "account",
    "approximate_delta",
    "compose_lifetime",
    "headroom",
    "plan_budget",
    "split_budget",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]

Notion = Literal["zcdp", "pure"]
ChargeNotion = Literal["zcdp", "pure", "void"]


_ALPHA_MAX = 1e300  # the largest Rényi order searched: finite, so no bracket overflows


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath, Steinke 2020, Cor. 13).

    δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α. The log is convex in α with
    derivative (2α−1)ρ − ε + ln(1 − 1/α); any α > 1 gives a valid δ, so root-finding
    error only makes δ larger (safe). The guards keep to that: the search stops at
    α = 10³⁰⁰ (vanishing ρ, where δ underflows anyway), a search that does not converge
    keeps an α > 1 (``_root``), a bound above 1 is 1 (huge ρ), and a δ below the normal
    doubles (which exp rounds by a whole subnormal step, or to 0) is rounded up. ρ = 0
    is (ε, 0)-DP.
    """
    if rho <= 0:
        return 0.0

    def dlog(a: float) -> float:
        return (2 * a - 1) * rho - epsilon + math.log1p(-1 / a)

    hi = min(_ALPHA_MAX, max(2.0, (epsilon + 1) / (2 * rho) + 2))
    a = _root(dlog, 1 + 1e-12, hi) if dlog(1 + 1e-12) < 0 < dlog(hi) else hi
    delta = math.exp(min((a - 1) * (a * rho - epsilon) + a * math.log1p(-1 / a) - math.log(a - 1), 0.0))
    return math.nextafter(delta, 1.0) if delta < sys.float_info.min else delta


def _root(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The root of the increasing ``f`` on [lo, hi] (lo > 1), f(lo) < 0 < f(hi): brentq, as
    always; where it does not converge (a bracket many decades wide, at vanishing ρ),
    brentq on t = ln(α − 1), which such a bracket does not trouble; failing that too, the
    last α tried, which is still an α > 1."""
    a, found = brentq(f, lo, hi, full_output=True, disp=False)
    if found.converged:
        return a

    def in_log(t: float) -> float:
        return f(1 + math.exp(t))

    ends = (math.log(lo - 1), math.log(hi - 1))
    return 1 + math.exp(brentq(in_log, *ends, disp=False)) if in_log(ends[0]) < 0 < in_log(ends[1]) else a


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ (to bisection precision, rounded down) with zcdp_delta(ρ, ε) ≤ δ.

    Starts from the simple bound ρ = (√(ln(1/δ)+ε) − √ln(1/δ))², which always satisfies
    the target (computed as (ε / (√(ln(1/δ)+ε) + √ln(1/δ)))², which does not cancel for
    small ε), and bisects on [ρ_simple, ε] keeping the end that satisfies it. Capping ρ
    at ε understates it (safe) only where ρ = ε meets δ already (a tiny ε against a large
    δ: δ ≈ √ρ as ε → 0). ε = 0 or δ = 0 admits only ρ = 0 (a ρ > 0 is never (ε, 0)-DP);
    a ρ below the doubles' range is 0 (rounded down).
    """
    if epsilon <= 0 or delta <= 0:
        return 0.0
    log_inv = -math.log(delta)
    lo = math.nextafter((epsilon / (math.sqrt(log_inv + epsilon) + math.sqrt(log_inv))) ** 2, 0.0)
    if zcdp_delta(lo, epsilon) > delta:  # pragma: no cover - the simple bound is valid
        raise BudgetError("zCDP conversion failed: the simple bound does not hold")
    return _bisect(lambda rho: zcdp_delta(rho, epsilon) <= delta, lo, epsilon)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε (rounded up) with zcdp_delta(ρ, ε) ≤ δ: what a spent ρ is worth.

    Bisects on [0, ρ + 2√(ρ ln(1/δ))] (the simple bound holds), 200 halvings at most: the
    bound is within a small factor of the answer unless ε = 0 (nearly) meets δ already,
    where ε stays at the bound·2⁻²⁰⁰, an overstatement (safe) kept from earlier versions,
    whose bundles the audit recomputes. ρ = 0 is worth 0; a ρ > 0 at δ = 0 (or an
    infinite ρ) is worth no finite ε: ∞."""
    if rho <= 0:
        return 0.0
    if delta <= 0 or math.isinf(rho):
        return math.inf
    simple = rho + 2 * math.sqrt(rho * -math.log(delta))
    if zcdp_delta(rho, 0.0) <= delta:  # every halving holds: skip to where 200 of them end
        return math.ldexp(simple, -200)
    return _bisect(lambda eps: zcdp_delta(rho, eps) <= delta, simple, 0.0, 200)


def _bisect(ok: Callable[[float], bool], good: float, bad: float, halvings: int = 1100) -> float:
    """The end of [good, bad] (either order) where the monotone ``ok`` holds, halved until
    no double lies between the ends (~55 halvings when they are within a small factor),
    or ``halvings`` times: 1100 reach adjacent doubles from any two up to 10³."""
    for _ in range(halvings):
        mid = (good + bad) / 2
        if mid in (good, bad):
            break
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good


def split_budget(total: float, weights: list[float]) -> list[float]:
    """Shares of ``total`` proportional to ``weights``, each rounded down, Σ ≤ total.

    >>> parts = split_budget(1.0, [1, 1, 1])
    >>> parts[0] < 1 / 3, sum(parts) <= 1.0
    (True, True)
    """
    s = math.fsum(weights)
    parts = [math.nextafter(total * w / s, 0.0) for w in weights]
    while math.fsum(parts) > total or sum(parts) > total:
        i = parts.index(max(parts))
        parts[i] = math.nextafter(parts[i], 0.0)
    return parts


@dataclass(frozen=True)
class StageBudget:
    """One stage's share: ρ under zCDP, ε under pure DP (the other is None)."""

    stage: str
    weight: float
    rho: float | None
    epsilon: float | None

    @property
    def share(self) -> float:
        """The stage's ρ under zCDP, its ε under pure DP (the one that is set)."""
        share = self.rho if self.rho is not None else self.epsilon
        if share is None:
            raise BudgetError(f"stage '{self.stage}' has neither rho nor epsilon")
        return share

    @property
    def pure_epsilon(self) -> float:
        """The stage's ε, for a mechanism that is pure ε-DP only (Laplace noise); a zCDP
        share (ρ) is refused."""
        if self.epsilon is None:
            raise BudgetError(
                f"stage '{self.stage}' has a zCDP share (rho {self.rho}), but this mechanism is pure "
                "epsilon-DP only: set privacy.accountant: pure"
            )
        return self.epsilon

    def split(self, k: int) -> list[StageBudget]:
        """``k`` equal shares of this stage (ρ/k or ε/k, rounded down, Σ ≤ the stage's),
        for a stage that measures k statistics (one histogram per column, one metric per
        gate); each share keeps the stage's name."""
        return self.split_by([1.0] * k)

    def split_by(self, weights: list[float]) -> list[StageBudget]:
        """Shares of this stage proportional to ``weights`` (rounded down, Σ ≤ the
        stage's), each keeping the stage's name."""
        parts = split_budget(self.share, weights)
        total = math.fsum(weights)
        return [
            StageBudget(
                self.stage,
                self.weight * w / total,
                p if self.rho is not None else None,
                p if self.rho is None else None,
            )
            for p, w in zip(parts, weights, strict=True)
        ]


@dataclass(frozen=True)
class BudgetPlan:
    """The whole budget, fixed from the spec before any data is read."""

    notion: Notion
    epsilon: float
    delta: float
    rho: float | None
    stages: tuple[StageBudget, ...]

    def stage(self, name: str) -> StageBudget:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)

    def stage_delta(self, name: str) -> float:
        """The δ a stage's spent row records: the plan's δ under zCDP (the δ its ρ is
        stated at); under pure DP the stage's share of δ by ε (0 for every release plan,
        δ > 0 only for ``schema`` discovery's partition selection)."""
        if self.notion == "zcdp":
            return self.delta
        if self.delta == 0:
            return 0.0
        return self.delta * self.stage(name).share / math.fsum(s.share for s in self.stages)

    def as_dict(self) -> dict:
        """The plan as ``public/budget_plan.json`` and ``release.json`` publish it."""
        return {**dataclasses.asdict(self), "spent_epsilon": self.spent_epsilon, "spent_rho": self.spent_rho}

    @property
    def spent_rho(self) -> float | None:
        return None if self.notion == "pure" else math.fsum(s.share for s in self.stages)

    @property
    def spent_epsilon(self) -> float:
        """ε of the composed stages: Σε_i (pure) or ρ_total converted at δ (zCDP)."""
        total = math.fsum(s.share for s in self.stages)
        return total if self.notion == "pure" else zcdp_epsilon(total, self.delta)


def plan_budget(notion: Notion, epsilon: float, delta: float, weights: dict[str, float]) -> BudgetPlan:
    """Split (ε, δ) across the named stages by weight; refuse invalid budgets. No stages
    (a mechanism that measures nothing) gives a plan that allows nothing.

    The demo's plan: (1, 10⁻⁶) is ρ = 0.02436 by CKS Cor. 13, half to each stage.

    >>> plan = plan_budget("zcdp", 1.0, 1e-6, {"marginals": 0.5, "moments": 0.5})
    >>> round(plan.rho, 5), [(s.stage, round(s.rho, 6)) for s in plan.stages]
    (0.02436, [('marginals', 0.012178), ('moments', 0.012178)])
    """
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise BudgetError(f"privacy.epsilon ({epsilon}) must be a finite number > 0")
    if any(not (math.isfinite(w) and w > 0) for w in weights.values()):
        raise BudgetError(f"allocation weights ({weights}) must all be finite numbers > 0")
    names, ws = list(weights), list(weights.values())
    if notion == "pure":
        if delta != 0:
            raise BudgetError(f"privacy.delta ({delta}) must be 0 with accountant 'pure'")
        parts = split_budget(epsilon, ws)
        stages = tuple(StageBudget(n, w, None, e) for n, w, e in zip(names, ws, parts, strict=True))
        return BudgetPlan("pure", epsilon, 0.0, None, stages)
    if notion != "zcdp":
        raise BudgetError(f"privacy.accountant ({notion}) must be 'zcdp' or 'pure'")
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise BudgetError(f"privacy.delta ({delta}) must be in (0, 1) with accountant 'zcdp'")
    rho = zcdp_rho(epsilon, delta)
    parts = split_budget(rho, ws)
    stages = tuple(StageBudget(n, w, r, None) for n, w, r in zip(names, ws, parts, strict=True))
    return BudgetPlan("zcdp", epsilon, delta, rho, stages)


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


def account(
    plan: BudgetPlan,
    measurements: list[Measurement],
    *,
    allow_non_dp: bool = False,
    mechanism_defects: list[str] | None = None,
) -> dict:
    """A release's account: per-measurement rows, per-stage sums against the plan, and the
    total with its ρ → (ε, δ) conversion (CKS Cor. 13) under zCDP; refuses (raises)
    if any stage or the total exceeds what the plan allows, or if a measurement is not DP
    (``defect``) and the spec did not set ``privacy.allow_non_dp``. A value used without
    noise (mechanism ``none``) costs nothing here, which is exactly why it makes the
    release non-DP. ``mechanism_defects`` are reasons the mechanism as a whole is not DP
    (e.g. spectral anonymization, which measures nothing)."""
    rows = [m.ledger_row() for m in measurements]
    defects = [f"mechanism: {d}" for d in mechanism_defects or []]
    defects += [f"{r['stage']}/{r['statistic']}: {r['defect']}" for r in rows if r["defect"]]
    if defects and not allow_non_dp:
        raise BudgetError(
            "measurements that are not differentially private were made without "
            f"privacy.allow_non_dp: {'; '.join(defects)}"
        )
    key = "rho" if plan.notion == "zcdp" else "epsilon"
    stages: list[dict[str, Any]] = []
    for s in plan.stages:
        spent = math.fsum(r[key] or 0.0 for r in rows if r["stage"] == s.stage)
        allowed = s.share
        if spent > allowed:
            raise BudgetError(f"stage '{s.stage}' spent {key} {spent!r} > its allocation {allowed!r}")
        stages.append(
            {"stage": s.stage, "weight": s.weight, f"{key}_allocated": allowed, f"{key}_spent": spent}
        )
    total = math.fsum(st[f"{key}_spent"] for st in stages)
    if plan.notion == "zcdp":
        eps = zcdp_epsilon(total, plan.delta)
        totals = {
            "rho": total,
            "epsilon": eps,
            "delta": plan.delta,
            "conversion": "rho-zCDP -> (epsilon, delta)-DP, Canonne-Kamath-Steinke 2020 Cor. 13",
        }
    else:
        eps = total
        totals = {"epsilon": total, "delta": 0.0, "conversion": "basic composition"}
    if eps > plan.epsilon:
        raise BudgetError(f"total epsilon spent ({eps!r}) exceeds privacy.epsilon ({plan.epsilon!r})")
    status = (
        "differentially private"
        if not defects
        else "NOT differentially private: the totals are what the paper claims, not a guarantee"
    )
    return {"status": status, "defects": defects, "measurements": rows, "stages": stages, "totals": totals}
