"""What a release costs its dataset, read off its rows: pure functions, no database.

A release's charge is its latest ``reserved``/terminal row's (``charge_of``): the whole
plan while it is reserved (running, or a run that died: fail closed), else what its
closing row recorded (``spent_charge`` at the time). A release that is not differentially
private is reserved with accountant ``void``; once its synthesis starts (an
``unprotected`` stage row) it costs ``Charge.void()``, and no composed (ε, δ) statement
holds for its dataset from then on (``void_since``). A release_id is reserved again only
after attempts that drew no noise (``rerun_refusal``); the re-run closes an open one that
died (``abandoned``). Which window an attempt is charged to is ``ledger.windows``; the
budget policy's decision is ``ledger.policy``.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dprelease.ledger.row import STATES, LedgerRow, as_rows
from dprelease.mechanisms.accounting import zcdp_epsilon
from dprelease.mechanisms.lifetime import Charge

__all__ = [
    "STATES",
    "UNPROTECTED",
    "Policy",
    "abandoned",
    "by_release",
    "charge_of",
    "held_budget",
    "last_state",
    "listing",
    "policy_name",
    "public_row",
    "repeated_refusal",
    "rerun_refusal",
    "same_release",
    "spent_charge",
    "spent_stages",
    "stored",
    "void_since",
]

UNPROTECTED = "unprotected"  # the stage row a non-DP release writes when its synthesis starts


def _n(value: float | None) -> float:
    """A charge's column: stored for every charged row (a NULL reads as NaN: no check holds)."""
    return math.nan if value is None else value


def charge_of(rows: Iterable[LedgerRow]) -> Charge:
    """What one release_id costs, from its rows (see the module docstring): the plan of an
    open reservation, else what its closing row recorded (``spent_charge`` at the time).
    A row with accountant ``void`` and no ε is a non-DP release's unbounded charge."""
    states = [r for r in rows if r.is_state]
    if not states:
        return Charge("pure", None, 0.0, 0.0)
    last = states[-1]
    if last.accountant == "void":
        return Charge.void()
    return Charge(
        "zcdp" if last.accountant == "zcdp" else "pure",
        last.rho,
        _n(last.epsilon),
        _n(last.delta) if last.epsilon else 0.0,
    )


def spent_charge(rows: Iterable[LedgerRow | Mapping[str, Any]]) -> Charge:
    """The composed allocations of the stages with a ``spent`` row, at the reserved δ; a
    non-DP reservation costs ``Charge.void()`` once any stage row was written (its
    synthesis started), nothing before. ``rows``: one release_id's (``Ledger.entries``'
    dicts are read too)."""
    mine = as_rows(rows)
    reserved = [r for r in mine if r.kind == "release" and r.status == "reserved"][-1]
    spent = [r for r in mine if r.spent_stage is not None]
    if reserved.accountant == "void":
        return Charge.void() if spent else Charge("pure", None, 0.0, 0.0)
    if reserved.accountant == "zcdp":
        rho = math.fsum(_n(r.rho) for r in spent)
        delta = _n(reserved.delta)
        return Charge("zcdp", rho, zcdp_epsilon(rho, delta), delta if rho > 0 else 0.0)
    delta = math.fsum(r.delta or 0.0 for r in spent)  # > 0 only for schema discovery
    return Charge("pure", None, math.fsum(_n(r.epsilon) for r in spent), delta)


def stored(charge: Charge) -> dict:
    """The ledger columns of a charge (a void one has no finite ε: NULLs)."""
    if charge.is_void:
        return {"accountant": "void", "rho": None, "epsilon": None, "delta": None}
    return {"accountant": charge.notion, "rho": charge.rho, "epsilon": charge.epsilon, "delta": charge.delta}


def void_since(rows: Iterable[LedgerRow]) -> dict | None:
    """The first release_id among ``rows`` (one dataset's release rows, chain order) whose
    charge is void, with the time its void charge was recorded; None if every release was
    DP."""
    for rid, group in by_release(rows).items():
        if charge_of(group).is_void:
            first = next(r for r in group if r.kind == "release" and r.accountant == "void")
            return {"release_id": rid, "time": first.time}
    return None


def pid_alive(row: LedgerRow) -> bool:
    """Whether the process a ``reserved`` row names (its ``detail``'s host and pid) may still run."""
    if row.detail_of("host") != socket.gethostname():
        return True  # another machine: assume it is still running
    try:
        os.kill(int(row.detail_of("pid")), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


def by_release(rows: Iterable[LedgerRow]) -> dict[str, list[LedgerRow]]:
    """Rows grouped by release_id, in chain order (rows without one, e.g. budgets, left out)."""
    groups: dict[str, list[LedgerRow]] = {}
    for r in rows:
        if r.release_id:
            groups.setdefault(r.release_id, []).append(r)
    return groups


def same_release(row: LedgerRow) -> dict[str, Any]:
    """The identifying fields a new row of the same release copies."""
    return {"dataset": row.dataset, "release_id": row.release_id, "mechanism": row.mechanism}


def last_state(rows: Iterable[LedgerRow]) -> LedgerRow | None:
    """The release's latest state row (``reserved`` or a closing one), None when it has none."""
    states = [r for r in rows if r.is_state]
    return states[-1] if states else None


def spent_stages(rows: Iterable[LedgerRow]) -> list[str]:
    """The stages ``rows`` (one release_id's) record as spent, sorted."""
    return sorted({r.spent_stage for r in rows if r.spent_stage is not None})


def rerun_refusal(release_id: str, rows: Sequence[LedgerRow]) -> str | None:
    """Why a new attempt at ``release_id`` must not start (None: it may)."""
    last = last_state(rows)
    if last is None:
        return None
    spent = spent_stages(rows)
    if last.status in ("released", "gated"):
        return (
            f"release '{release_id}' already exists in the ledger ({last.status} at {last.time}); "
            "choose another release_id"
        )
    running = last.status == "reserved" and pid_alive(last)
    if running:
        return (
            f"release '{release_id}' is in progress since {last.time} (host {last.detail_of('host')}, "
            f"pid {last.detail_of('pid')}); wait for it to finish"
            + (f" (it has spent stage(s) {spent} so far)" if spent else "")
        )
    if spent:
        return (
            f"release '{release_id}' already drew noise for stage(s) {spent} in an attempt that did not "
            "finish; drawing again would spend them twice, and this version does not resume from "
            "persisted outputs. Its spend stays charged; run again with a new release_id"
            + (
                " (`dprelease ledger settle` closes the dead attempt at what it spent)"
                if last.status == "reserved"
                else ""
            )
        )
    return None


def repeated_refusal(rows: Iterable[LedgerRow | Mapping[str, Any]], release_id: str) -> bool:
    """Whether ``release_id``'s last refusal repeats an earlier one: among ``rows`` (one
    dataset's, chain order), an earlier ``refused`` row gave the very same reason. The
    ledger's reason states everything a refusal depends on (the rule, the period and what it
    spent, the next ε, the reset time; a release id), so the same reason means that nothing
    has changed since the operator was told: the refusal is logged and not paged again
    (``flows.events``: ``dprelease.release.refused-again``; ``Ledger.entries``' dicts are
    read too)."""
    refused = [r for r in as_rows(rows) if r.kind == "release" and r.status == "refused"]
    mine = [i for i, r in enumerate(refused) if r.release_id == release_id]
    if not mine:
        return False
    reason = refused[mine[-1]].detail_of("reason")
    return any(r.detail_of("reason") == reason for r in refused[: mine[-1]])


def abandoned(rows: Sequence[LedgerRow]) -> dict[str, Any] | None:
    """The row a re-run writes to close the open attempt among ``rows`` (its release_id's)
    whose process is gone and which drew no noise (``rerun_refusal`` admits no other):
    ``failed``, charged what it spent, in that attempt's dataset; None when none is open."""
    last = last_state(rows)
    if last is None or last.status != "reserved":
        return None
    return {
        **same_release(last),
        "kind": "release",
        "status": "failed",
        **stored(spent_charge(rows)),
        "detail": {"reason": "abandoned: its process is gone and it drew no noise"},
    }


def public_row(row: LedgerRow) -> dict[str, Any]:
    """A row for display and JSON: no host/pid details beyond what the row says."""
    return {k: v for k, v in row.as_mapping().items() if k != "prev_hash"}


Policy = tuple[float, float, str | None, bool]
"""A budget policy as the ledger records it: (ε, δ, the period's length or None for a
lifetime, whether the steward declared the periods' tables disjoint)."""


def held_budget(rows: Iterable[LedgerRow]) -> Policy | None:
    """The dataset's budget policy in the ledger, from its ``budget`` rows (``detail``:
    ``period`` its length, ``disjoint`` when declared), or None when none was ever declared."""
    budgets = [r for r in rows if r.kind == "budget"]
    if not budgets:
        return None
    last = budgets[-1]
    return _n(last.epsilon), _n(last.delta), last.detail_of("period"), bool(last.detail_of("disjoint"))


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


def listing(rows: Iterable[LedgerRow]) -> list[dict]:
    """One dict per release_id among ``rows`` (chain order): dataset, release_id, status,
    what it is charged (``charge_of``: epsilon, delta, rho), times, its stage rows
    (measurements nested) and its release rows (``events``). What ``ledger show --json``
    prints: each row as ``LedgerRow.as_mapping`` without ``prev_hash``."""
    out = []
    for rid, mine in by_release(rows).items():
        last = last_state(mine)
        charge = charge_of(mine)
        stages = [
            {
                **public_row(r),
                "measurements": [
                    public_row(m) for m in mine if m.kind == "measurement" and m.stage == r.stage
                ],
            }
            for r in mine
            if r.kind == "stage"
        ]
        out.append(
            {
                "dataset": mine[0].dataset,
                "release_id": rid,
                "status": last.status if last else "refused",
                "mechanism": mine[0].mechanism,
                "accountant": charge.notion if last else None,
                "epsilon": None if charge.is_void else charge.epsilon,
                "delta": None if charge.is_void else charge.delta,
                "rho": charge.rho,
                "differentially_private": not charge.is_void,
                "started": mine[0].time,
                "last_update": mine[-1].time,
                "stages": stages,
                "events": [public_row(r) for r in mine if r.kind == "release"],
            }
        )
    return out
