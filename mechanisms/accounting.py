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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from scipy.optimize import brentq

from mechanisms.errors import BudgetError

if TYPE_CHECKING:
    from mechanisms.primitives import Measurement

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


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath, Steinke 2020, Cor. 13).

    δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α. The log is convex in α with
    derivative (2α−1)ρ − ε + ln(1 − 1/α); any α > 1 gives a valid δ, so root-finding
    error only makes δ larger (safe).
    """
    if rho <= 0:
        return 0.0

    def dlog(a: float) -> float:
        return (2 * a - 1) * rho - epsilon + math.log1p(-1 / a)

    hi = max(2.0, (epsilon + 1) / (2 * rho) + 2)
    a = brentq(dlog, 1 + 1e-12, hi) if dlog(1 + 1e-12) < 0 < dlog(hi) else hi
    logd = (a - 1) * (a * rho - epsilon) + a * math.log1p(-1 / a) - math.log(a - 1)
    return min(1.0, math.exp(logd))


def zcdp_rho(epsilon: float, delta: float, iters: int = 200) -> float:
    """Largest ρ (to bisection precision, rounded down) with zcdp_delta(ρ, ε) ≤ δ.

    Starts from the simple bound ρ = (√(ln(1/δ)+ε) − √ln(1/δ))², which always satisfies
    the target, and bisects on [ρ_simple, ε] keeping the end that satisfies it.
    """
    log_inv = math.log(1 / delta)
    lo = math.nextafter((math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2, 0.0)
    hi = epsilon
    if zcdp_delta(lo, epsilon) > delta:  # pragma: no cover - the simple bound is valid
        raise BudgetError("zCDP conversion failed: the simple bound does not hold")
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_delta(mid, epsilon) <= delta else (lo, mid)
    return lo


def zcdp_epsilon(rho: float, delta: float, iters: int = 200) -> float:
    """Smallest ε (rounded up) with zcdp_delta(ρ, ε) ≤ δ: what a spent ρ is worth."""
    if rho <= 0:
        return 0.0
    lo, hi = 0.0, rho + 2 * math.sqrt(rho * math.log(1 / delta))  # the simple bound holds
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if zcdp_delta(rho, mid) <= delta else (mid, hi)
    return hi


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
        rho = math.fsum(c.rho if c.rho is not None else c.epsilon**2 / 2 for c in charges)
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


def approximate_delta(charges: list[Charge]) -> float:
    """Σδ_i of the (ε_i, δ_i)-DP "pure" charges: set aside from the δ at which zCDP
    composition converts (``compose_lifetime``)."""
    return math.fsum(c.delta for c in charges if c.rho is None and not c.is_void)


@dataclass(frozen=True)
class Headroom:
    """What a dataset's lifetime budget (ε_L, δ_L) still admits: the largest ``epsilon`` the
    next release can state (as a ``notion`` release at ``delta``), and the ρ left under zCDP
    composition (None when δ_L = 0, where only basic composition applies)."""

    epsilon: float
    delta: float
    notion: Notion
    rho: float | None


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

    ``delta`` (default δ_L) is the δ the next release states; a pure release has δ = 0.
    The answer is checked with ``compose_lifetime`` and lowered until it fits (the
    conversions round), so a release at exactly that ε is accepted.
    """
    eps_l, delta_l = lifetime
    delta = 0.0 if notion == "pure" else (delta_l if delta is None else delta)
    if any(c.is_void for c in charges):
        return Headroom(0.0, delta, notion, 0.0 if delta_l > 0 else None)
    rho_left = None
    options = []
    basic_eps = math.fsum(c.epsilon for c in charges)
    if math.fsum(c.delta for c in charges) + delta <= delta_l:
        options.append(eps_l - basic_eps)
    aside = approximate_delta(charges)
    if delta_l > aside:
        spent = math.fsum(c.rho if c.rho is not None else c.epsilon**2 / 2 for c in charges)
        rho_left = max(0.0, zcdp_rho(eps_l, delta_l - aside) - spent)
        if rho_left > 0 and (notion == "pure" or delta > 0):
            options.append(math.sqrt(2 * rho_left) if notion == "pure" else zcdp_epsilon(rho_left, delta))
    eps = max([0.0, *options])

    def fits(e: float) -> bool:
        rho = None if notion == "pure" else zcdp_rho(e, delta)
        nxt = Charge(notion, rho, e, delta)
        return compose_lifetime([*charges, nxt], delta_l).epsilon <= eps_l

    for _ in range(60):  # the conversions round: step down until it fits
        if eps <= 0 or fits(eps):
            break
        eps = math.nextafter(eps * (1 - 1e-9), 0.0)
    return Headroom(max(0.0, eps), delta, notion, rho_left)


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
