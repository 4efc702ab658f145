"""What a release costs its dataset, read off its rows: pure functions, no database.

A release's charge is its latest ``reserved``/terminal row's (``charge_of``): the whole
plan while it is reserved (running, or a run that died: fail closed), else what its
closing row recorded (``spent_charge`` at the time). A release that is not differentially
private is reserved with accountant ``void``; once its synthesis starts (an
``unprotected`` stage row) it costs ``Charge.void()``, and no composed (ε, δ) statement
holds for its dataset from then on (``void_since``). ``budget_refusal`` is the budget
policy's decision (a lifetime, or a period: ``mechanisms.periods``) on the dataset's release
and budget rows.
"""

from __future__ import annotations

import math
import os
import socket
from datetime import datetime

from dprelease.mechanisms.accounting import BudgetPlan, zcdp_epsilon
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.lifetime import Charge, compose_lifetime, headroom
from dprelease.mechanisms.periods import Period

__all__ = [
    "STATES",
    "UNPROTECTED",
    "Policy",
    "budget_refusal",
    "by_release",
    "charge_of",
    "charged_in",
    "held_budget",
    "last_state",
    "policy_name",
    "public_row",
    "rerun_refusal",
    "reserved_at",
    "same_release",
    "spent_charge",
    "stored",
    "void_since",
]

UNPROTECTED = "unprotected"  # the stage row a non-DP release writes when its synthesis starts


STATES = ("reserved", "released", "gated", "failed")  # refused rows never change a state


def charge_of(rows: list[dict]) -> Charge:
    """What one release_id costs, from its rows (see the module docstring): the plan of an
    open reservation, else what its closing row recorded (``spent_charge`` at the time).
    A row with accountant ``void`` and no ε is a non-DP release's unbounded charge."""
    states = [r for r in rows if r["kind"] == "release" and r["status"] in STATES]
    if not states:
        return Charge("pure", None, 0.0, 0.0)
    last = states[-1]
    if last["accountant"] == "void":
        return Charge.void()
    return Charge(last["accountant"], last["rho"], last["epsilon"], last["delta"] if last["epsilon"] else 0.0)


def spent_charge(rows: list[dict]) -> Charge:
    """The composed allocations of the stages with a ``spent`` row, at the reserved δ; a
    non-DP reservation costs ``Charge.void()`` once any stage row was written (its
    synthesis started), nothing before."""
    reserved = [r for r in rows if r["kind"] == "release" and r["status"] == "reserved"][-1]
    spent = [r for r in rows if r["kind"] == "stage" and r["status"] == "spent"]
    if reserved["accountant"] == "void":
        return Charge.void() if spent else Charge("pure", None, 0.0, 0.0)
    if reserved["accountant"] == "zcdp":
        rho = math.fsum(r["rho"] for r in spent)
        delta = reserved["delta"]
        return Charge("zcdp", rho, zcdp_epsilon(rho, delta), delta if rho > 0 else 0.0)
    delta = math.fsum(r["delta"] or 0.0 for r in spent)  # > 0 only for schema discovery
    return Charge("pure", None, math.fsum(r["epsilon"] for r in spent), delta)


def stored(charge: Charge) -> dict:
    """The ledger columns of a charge (a void one has no finite ε: NULLs)."""
    if charge.is_void:
        return {"accountant": "void", "rho": None, "epsilon": None, "delta": None}
    return {"accountant": charge.notion, "rho": charge.rho, "epsilon": charge.epsilon, "delta": charge.delta}


def void_since(rows: list[dict]) -> dict | None:
    """The first release_id among ``rows`` (one dataset's release rows, chain order) whose
    charge is void, with the time its void charge was recorded; None if every release was
    DP."""
    for rid, group in by_release(rows).items():
        if charge_of(group).is_void:
            first = next(r for r in group if r["kind"] == "release" and r["accountant"] == "void")
            return {"release_id": rid, "time": first["time"]}
    return None


def pid_alive(detail: dict) -> bool:
    if detail.get("host") != socket.gethostname():
        return True  # another machine: assume it is still running
    try:
        os.kill(int(detail["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError):
        return False
    except PermissionError:
        return True
    return True


def by_release(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by release_id, in chain order (rows without one, e.g. budgets, left out)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["release_id"]:
            groups.setdefault(r["release_id"], []).append(r)
    return groups


def same_release(row: dict) -> dict:
    """The identifying fields a new row of the same release copies."""
    return {k: row[k] for k in ("dataset", "release_id", "mechanism")}


def last_state(rows: list[dict]) -> dict | None:
    states = [r for r in rows if r["kind"] == "release" and r["status"] in STATES]
    return states[-1] if states else None


def rerun_refusal(release_id: str, rows: list[dict]) -> str | None:
    """Why a new attempt at ``release_id`` must not start (None: it may)."""
    last = last_state(rows)
    if last is None:
        return None
    spent = sorted({r["stage"] for r in rows if r["kind"] == "stage" and r["status"] == "spent"})
    if last["status"] in ("released", "gated"):
        return (
            f"release '{release_id}' already exists in the ledger ({last['status']} at {last['time']}); "
            "choose another release_id"
        )
    running = last["status"] == "reserved" and pid_alive(last["detail"])
    if running:
        return (
            f"release '{release_id}' is in progress since {last['time']} (host {last['detail'].get('host')}, "
            f"pid {last['detail'].get('pid')}); wait for it to finish"
            + (f" (it has spent stage(s) {spent} so far)" if spent else "")
        )
    if spent:
        return (
            f"release '{release_id}' already drew noise for stage(s) {spent} in an attempt that did not "
            "finish; drawing again would spend them twice, and this version does not resume from "
            "persisted outputs. Its spend stays charged; run again with a new release_id"
            + (
                " (`dprelease ledger settle` closes the dead attempt at what it spent)"
                if last["status"] == "reserved"
                else ""
            )
        )
    return None


def public_row(row: dict) -> dict:
    """A row for display and JSON: no host/pid details beyond what the row says."""
    return {k: v for k, v in row.items() if k != "prev_hash"}


Policy = tuple[float, float, str | None, bool]
"""A budget policy as the ledger records it: (ε, δ, the period's length or None for a
lifetime, whether the steward declared the periods' tables disjoint)."""


def held_budget(rows: list[dict]) -> Policy | None:
    """The dataset's budget policy in the ledger, from its ``budget`` rows (``detail``:
    ``period`` its length, ``disjoint`` when declared), or None when none was ever declared."""
    budgets = [r for r in rows if r["kind"] == "budget"]
    if not budgets:
        return None
    detail = budgets[-1]["detail"]
    return budgets[-1]["epsilon"], budgets[-1]["delta"], detail.get("period"), bool(detail.get("disjoint"))


def policy_name(policy: Policy, dataset: str = "") -> str:
    """``lifetime budget epsilon=…, delta=…`` (``period budget epsilon=…, delta=… per P1M``,
    ``… (UTC calendar periods; declared disjoint)``); with ``dataset``: ``lifetime budget of dataset 'd'
    (epsilon=…, delta=…)``."""
    eps, delta, length, disjoint = policy
    kind = "lifetime budget" if length is None else "period budget"
    terms = f"epsilon={eps:g}, delta={delta:g}" + ("" if length is None else f" per {length}")
    calendar = (
        "" if length is None else " (UTC calendar periods" + ("; declared disjoint)" if disjoint else ")")
    )
    return f"{kind} of dataset '{dataset}' ({terms}){calendar}" if dataset else f"{kind} {terms}{calendar}"


def reserved_at(group: list[dict]) -> datetime:
    """When a release_id was first reserved: the period it is charged to."""
    first = next(r for r in group if r["kind"] == "release" and r["status"] in STATES)
    return datetime.fromisoformat(first["time"])


def charged_in(
    rows: list[dict], period: Period | None, at: datetime, exclude: str = ""
) -> dict[str, list[dict]]:
    """The release_ids among ``rows`` with a reservation (refused attempts cost nothing),
    but ``exclude``; with a ``period``, only those reserved in the window that holds ``at``."""
    charged = {i: g for i, g in by_release(rows).items() if i != exclude and last_state(g) is not None}
    if period is None:
        return charged
    window = period.window(at)
    return {i: g for i, g in charged.items() if period.window(reserved_at(g)) == window}


def budget_refusal(
    rows: list[dict],
    dataset: str,
    release_id: str,
    plan: BudgetPlan,
    declared: Policy | None,
    at: datetime,
    not_dp: bool = False,
) -> tuple[str | None, Policy | None, list[dict]]:
    """The budget policy's decision on ``rows``, the dataset's release and budget rows, for a
    release reserved at ``at``: (reason to refuse or None, a policy to record or None, the
    rows the decision used, which the caller checks against the hash chain; none when no
    policy applies). ``declared``: the spec's policy (``Policy``); once recorded, a policy is
    fixed, the periods' declared disjointness included. Under a period policy the
    release is charged with the releases reserved in the same UTC calendar period."""
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
    void = void_since([r for r in rows if r["release_id"] != release_id])
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
            "Nothing was read or spent; run comparisons on another dataset name (a copy of the data)",
            None,
            rows,
        )
    reason = _over_budget(rows, dataset, release_id, plan, limit, at)
    return reason, (None if held or reason else limit), rows


def _over_budget(
    rows: list[dict],
    dataset: str,
    release_id: str,
    plan: BudgetPlan,
    limit: Policy,
    at: datetime,
) -> str | None:
    """Why this release does not fit the policy's account (lifetime, or ``at``'s period)."""
    period = None if limit[2] is None else Period.parse(limit[2])
    budget = (limit[0], limit[1])
    this = (
        Charge("zcdp", plan.spent_rho, plan.spent_epsilon, plan.delta)
        if plan.notion == "zcdp"
        else Charge("pure", None, plan.spent_epsilon, plan.delta)
    )
    charged = charged_in(rows, period, at, exclude=release_id)
    charges = [charge_of(g) for g in charged.values()]  # no void here
    try:
        before = compose_lifetime(charges, budget[1])
        after = compose_lifetime([*charges, this], budget[1])
    except BudgetError as e:
        return f"dataset '{dataset}': {e}"
    if after.epsilon <= budget[0]:
        return None
    running = sum((last_state(g) or {}).get("status") == "reserved" for g in charged.values())
    where = "" if period is None else f" in period {period.label(at)}"
    return (
        f"{policy_name(limit, dataset)} would be exceeded{where}: {len(charges)} earlier "
        f"release(s){where}"
        + (f" ({running} of them still open, charged its whole plan until it closes)" if running else "")
        + f" spent epsilon={before.epsilon:.4g}; this release needs epsilon={this.epsilon:.4g}, which "
        f"would make {after.epsilon:.4g} ({after.rule}). "
        + _what_is_left(charges, budget, plan, running, None if period is None else period.window(at)[1])
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
