"""The budget policy's decision on a dataset's rows (``budget_refusal``): the policy a spec
declares must match the one the ledger holds (fixed once recorded), a dataset whose
guarantee is void takes no policy, a release that is not differentially private takes
none, and the account (the lifetime, or the window of the reservation's time) must hold
the release's whole plan.

The account is checked as it will be once the release is reserved: the rows it would write
(an open attempt of the same release_id closed as ``abandoned``, its ``reserved`` row at
the reservation's time) are added to the dataset's rows and the window's attempts composed
by ``ledger.windows``, the one rule every view of the account reads.
"""

from __future__ import annotations

from datetime import datetime

from dprelease.ledger.charges import (
    Policy,
    abandoned,
    held_budget,
    last_state,
    policy_name,
    stored,
    void_since,
)
from dprelease.ledger.row import LedgerRow
from dprelease.ledger.windows import composed, in_window
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.lifetime import Charge, headroom
from dprelease.mechanisms.periods import Period, PeriodBudget

__all__ = ["budget_refusal", "declared_policy", "plan_charge", "policy_detail"]


def declared_policy(lifetime: tuple[float, float] | None, period: PeriodBudget | None) -> Policy | None:
    """The spec's budget policy as the ledger records it: (ε, δ, None, False) for a lifetime,
    (ε, δ, length, disjoint) for a period (the spec refuses both)."""
    if period is not None:
        return period.epsilon, period.delta, str(period.length), period.disjoint
    return None if lifetime is None else (lifetime[0], lifetime[1], None, False)


def policy_detail(policy: Policy) -> dict | None:
    """A ``budget`` row's detail: a period's length, and ``disjoint`` only when declared (a
    row without it, as before the declaration existed, reads as not disjoint)."""
    if policy[2] is None:
        return None
    return {"period": policy[2], **({"disjoint": True} if policy[3] else {})}


def plan_charge(plan: BudgetPlan) -> Charge:
    """What a reservation of ``plan`` charges while it is open: the whole plan."""
    if plan.notion == "zcdp":
        return Charge("zcdp", plan.spent_rho, plan.spent_epsilon, plan.delta)
    return Charge("pure", None, plan.spent_epsilon, plan.delta)


def budget_refusal(
    rows: list[LedgerRow],
    dataset: str,
    release_id: str,
    plan: BudgetPlan,
    declared: Policy | None,
    at: datetime,
    not_dp: bool = False,
) -> tuple[str | None, Policy | None, list[LedgerRow]]:
    """The budget policy's decision on ``rows``, the dataset's release and budget rows, for a
    release reserved at ``at``: (reason to refuse or None, a policy to record or None, the
    rows the decision used, which the caller checks against the hash chain; none when no
    policy applies). ``declared``: the spec's policy (``Policy``); once recorded, a policy is
    fixed, the periods' declared disjointness included. Under a period policy the
    release is charged with the attempts reserved in the same UTC calendar period
    (``ledger.windows``)."""
    held = held_budget(rows)
    if held is not None and declared is not None and tuple(declared) != held:
        return (
            f"dataset '{dataset}' has {policy_name(held)} in the ledger, but the spec says "
            f"{policy_name(declared)}; make the spec match the ledger (a budget policy is fixed when first "
            "declared)",
            None,
            rows,
        )
    limit = held or declared
    if limit is None:
        return None, None, []  # no policy: the decision read nothing of the dataset
    void = void_since([r for r in rows if r.release_id != release_id])
    if void is not None:
        return (
            f"dataset '{dataset}' has had a release that was not differentially private "
            f"('{void['release_id']}', from {void['time']}): since then no composed (epsilon, delta) "
            f"guarantee holds for this dataset, so its {policy_name(limit)} cannot be honoured. Nothing was "
            "read or spent; a DP release of it can still run without a budget policy, and its bundle will "
            "say the dataset's guarantee is void",
            None,
            rows,
        )
    if not_dp:
        return (
            f"this release is not differentially private and dataset '{dataset}' has a "
            f"{policy_name(limit)}: a non-DP release would void every guarantee about the dataset. "
            "Nothing was read or spent; a non-DP release of these data voids their guarantee under any "
            "dataset name or ledger. To compare mechanisms without publishing, use dprelease.synthesize "
            "(in-process, recorded nowhere, marked not for publication)",
            None,
            rows,
        )
    reason = _over_budget(rows, dataset, release_id, plan, limit, at)
    return reason, (None if held or reason else limit), rows


def _over_budget(
    rows: list[LedgerRow],
    dataset: str,
    release_id: str,
    plan: BudgetPlan,
    limit: Policy,
    at: datetime,
) -> str | None:
    """Why this release does not fit the policy's account (lifetime, or ``at``'s window),
    composed (``ledger.windows``) on the rows as the reservation would leave them."""
    period = None if limit[2] is None else Period.parse(limit[2])
    budget = (limit[0], limit[1])
    this = plan_charge(plan)
    # a dead open attempt of this release_id, closed by the reservation; it spent no stage (the
    # rerun rule, decided first, admits no other), so these release rows price it right
    closing = abandoned([r for r in rows if r.release_id == release_id])
    now = at.isoformat()
    before_rows = [*rows, *([LedgerRow.from_mapping({**closing, "time": now})] if closing else [])]
    reserved = LedgerRow.from_mapping(
        {"release_id": release_id, "kind": "release", "status": "reserved", "time": now, **stored(this)}
    )
    earlier = in_window(before_rows, period, at)
    try:
        before = composed(earlier, budget[1])
        after = composed(in_window([*before_rows, reserved], period, at), budget[1])
    except BudgetError as e:
        return f"dataset '{dataset}': {e}"
    if after.epsilon <= budget[0]:
        return None
    others = len({a.release_id for a in earlier} - {release_id})
    running = sum(
        1 for a in earlier if (last := last_state(a.rows)) is not None and last.status == "reserved"
    )
    where = "" if period is None else f" in period {period.label(at)}"
    return (
        f"{policy_name(limit, dataset)} would be exceeded{where}: {others} earlier "
        f"release(s){where}"
        + (f" ({running} of them still open, charged its whole plan until it closes)" if running else "")
        + f" spent epsilon={before.epsilon:.4g}; this release needs epsilon={this.epsilon:.4g}, which "
        f"would make {after.epsilon:.4g} ({after.rule}). "
        + _what_is_left(
            [a.charge for a in earlier],
            budget,
            plan,
            running,
            None if period is None else period.window(at)[1],
        )
    )


def _what_is_left(
    charges: list[Charge],
    limit: tuple[float, float],
    plan: BudgetPlan,
    running: int,
    resets: datetime | None = None,
) -> str:
    """What the next release can still take (``headroom``); that the budget is used up
    (for now, if ``running`` open reservations may still close without spending their
    plans); or, when no release like this one fits but a pure one does, how much that takes.
    ``resets``: when a period budget's account starts again at zero."""
    room = headroom(charges, limit, plan.notion, plan.delta)
    name = "lifetime budget" if resets is None else "period budget"
    until = "" if resets is None else f" until the period resets at {resets:%Y-%m-%dT%H:%MZ}"
    if room.used_up:
        return f"The {name} is used up: no further release of this dataset fits in it{until}. " + (
            "Wait for the open release(s) to close (one that fails before drawing noise gives its plan "
            "back; `dprelease ledger settle` closes one whose process died); nothing was read or spent"
            if running
            else ("Stop releasing this dataset" if resets is None else "Wait for the next period")
            + "; nothing was read or spent"
        )
    if room.epsilon <= 0 and plan.notion == "zcdp":
        pure = headroom(charges, limit, "pure")
        return (
            f"No zCDP release at delta={room.delta:g} fits any more{until} (the earlier releases' deltas "
            f"leave too little of the {name}'s delta); a pure-DP release (privacy.accountant: pure, "
            f"delta: 0) can take epsilon up to {pure.epsilon:.4g}, a zCDP one at a smaller delta may fit "
            "too; nothing was read or spent"
        )
    at = f" at delta={room.delta:g}" if room.notion == "zcdp" else " (pure DP)"
    rho = "" if room.rho is None else f"; rho left under zCDP composition: {room.rho:.4g}"
    return (
        f"The largest epsilon the next release can take{at}{until} is {room.epsilon:.4g}{rho} "
        "(releases compose in rho, not by subtracting epsilons). Lower privacy.epsilon to at most that "
        + ("or stop releasing this dataset" if resets is None else "or wait for the next period")
        + "; nothing was read or spent"
    )
