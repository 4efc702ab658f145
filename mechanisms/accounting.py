"""Privacy accountants and the budget plan of one release (the composition of a dataset's
releases over its lifetime is ``mechanisms.lifetime``).

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
import decimal
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
    "StageBudget",
    "account",
    "plan_budget",
    "shown_up",
    "split_budget",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho",
]

Notion = Literal["zcdp", "pure"]


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

    >>> shares = split_budget(1.0, [1, 1, 1])
    >>> shares[0] < 1 / 3, sum(shares) <= 1.0
    (True, True)
    """
    s = math.fsum(weights)
    shares = [math.nextafter(total * w / s, 0.0) for w in weights]
    while math.fsum(shares) > total or sum(shares) > total:
        i = shares.index(max(shares))
        shares[i] = math.nextafter(shares[i], 0.0)
    return shares


@dataclass(frozen=True)
class StageBudget:
    """A part of the plan: a stage's whole allotment (``BudgetPlan.stage``) or one
    statistic's slice of it (``split``, ``split_by``, ``take``), named ``part`` wherever it
    travels; its ``share`` is the float: ρ under zCDP, ε under pure DP (the other is None)."""

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
        shares = split_budget(self.share, weights)
        total = math.fsum(weights)
        return [self._part(share, self.weight * w / total) for share, w in zip(shares, weights, strict=True)]

    def take(self, share: float) -> StageBudget:
        """The slice of this stage at ``share`` (ρ or ε, the stage's notion), for a stage
        whose statistics take adaptive shares (aim's rounds); the caller keeps their sum
        within the stage's share."""
        if not 0 < share <= self.share:
            raise BudgetError(f"stage '{self.stage}': a slice ({share!r}) must be > 0 and <= its share")
        return self._part(share, self.weight * share / self.share)

    def _part(self, share: float, weight: float) -> StageBudget:
        return StageBudget(
            self.stage, weight, share if self.rho is not None else None, share if self.rho is None else None
        )


@dataclass(frozen=True)
class BudgetPlan:
    """The whole budget, fixed from the spec before any data is read.

    The road of ε from the spec to the noise (one name per kind of thing: ``share`` a float
    ρ or ε, ``part`` a ``StageBudget``, ``stage_part`` a whole stage's):

    1. ``tasks.budget.allocate_budget``: ``plan_budget(accountant, privacy.epsilon,
       privacy.delta, spec.stage_weights())``: ρ = ``zcdp_rho``(ε, δ) under zCDP (ε itself
       under pure DP), split by the weights (``split_budget``, rounded down) into one part
       per stage; the ledger reserves the plan.
    2. a synthesizer's stage (``Synthesizer.encode`` / ``estimate``, given the plan):
       ``stage_part = plan.stage(name)``;
    3. ``stage_part.split(k)`` (or ``split_by``, ``take``): one ``part`` per statistic,
       Σ shares ≤ the stage's;
    4. ``primitives.measure_stage(value, part, l2_sensitivity=Δ₂, l1_sensitivity=Δ₁, rng,
       name)``: the accountant's one dispatch (``primitives.stage_noise``): Gaussian
       σ = Δ₂/√(2ρ) if ``part.rho`` is set, Laplace b = Δ₁/ε otherwise;
    5. ``primitives._perturb(value, kind, scale, Δ, part.share, rng)``: the draw (numpy's
       samplers for a seeded run, OpenDP's for a ``VettedRNG``).

    A pure-ε paper mechanism takes ``plan.stage(name).pure_epsilon`` and calls
    ``laplace_mechanism`` / ``discrete_laplace_mechanism``, which draw through
    ``_perturb`` too; ``account`` then checks every recorded share against the plan.
    """

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
        shares = split_budget(epsilon, ws)
        stages = tuple(StageBudget(n, w, None, e) for n, w, e in zip(names, ws, shares, strict=True))
        return BudgetPlan("pure", epsilon, 0.0, None, stages)
    if notion != "zcdp":
        raise BudgetError(f"privacy.accountant ({notion}) must be 'zcdp' or 'pure'")
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise BudgetError(f"privacy.delta ({delta}) must be in (0, 1) with accountant 'zcdp'")
    rho = zcdp_rho(epsilon, delta)
    shares = split_budget(rho, ws)
    stages = tuple(StageBudget(n, w, r, None) for n, w, r in zip(names, ws, shares, strict=True))
    return BudgetPlan("zcdp", epsilon, delta, rho, stages)


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


def shown_up(x: float, digits: int = 12) -> float:
    """x rounded *up* to ``digits`` significant digits: the ledger's ε computed back from ρ
    reads 0.9999999999999999 for a spec's 1; shown rounded up, a privacy loss is never
    understated.

    >>> shown_up(0.9999999999999999), shown_up(1e-06), shown_up(0.0), shown_up(2.7182818284590455)
    (1.0, 1e-06, 0.0, 2.71828182846)
    """
    if x <= 0 or not math.isfinite(x):
        return x
    nearest = float(f"{x:.{digits}g}")
    if nearest >= x:  # 0.9999999999999999 reads 1.0, the double nearest 0.001 reads 0.001
        return nearest
    exact = decimal.Decimal(x)
    step = decimal.Decimal(1).scaleb(exact.adjusted() - digits + 1)
    shown = float(exact.quantize(step, rounding=decimal.ROUND_CEILING))
    return shown if shown >= x else math.nextafter(shown, math.inf)
