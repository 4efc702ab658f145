"""The one rule for the window a release belongs to: each *attempt* is charged what it
spent to the window of its own reservation.

An attempt is the rows of one release_id from one of its ``reserved`` rows up to, not
including, its next one. A release_id is reserved again only when no earlier attempt drew
noise (the rerun rule, ``charges.rerun_refusal``), so a re-run is a new attempt and every
attempt but the last costs nothing. An attempt costs ``charges.charge_of`` of its rows:
its whole plan while it is open (fail closed), else what its closing row recorded. It
belongs to the window (``mechanisms.periods.Period.window``) that holds the time of its
``reserved`` row, the time at which ``reserve`` checked it against that window's account,
under the same lock. A scheduled run refused at validation at 23:59 on 30 November and
retried (same release_id: a deployment names a run after its slot) at 00:10 on 1 December
is a December attempt, checked against and charged to December; its November attempt
stays in November at what it spent, nothing.

Every view of an account reads it here: the reserve's check (``ledger.policy``, on the
rows as they will be once the attempt is reserved), ``Ledger.period_spends``,
``headroom`` and ``all_time_guarantee``, ``dprelease ledger show`` (``ledger.summary``),
``release.json`` (``ledger.facts``) and ``audit verify`` (``records.audit``). Under a
lifetime budget there is one window, all time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from dprelease.ledger.charges import charge_of
from dprelease.ledger.row import LedgerRow
from dprelease.mechanisms.lifetime import Charge, LifetimeSpend, compose_lifetime
from dprelease.mechanisms.periods import Period

__all__ = ["Attempt", "attempts", "composed", "in_window", "latest_attempt", "window_spends"]


@dataclass(frozen=True)
class Attempt:
    """One reservation of a release_id and the rows that followed it (``attempts``)."""

    release_id: str
    reserved: datetime
    rows: tuple[LedgerRow, ...]

    @property
    def charge(self) -> Charge:
        """What it costs its dataset: its plan while open, else what its closing row says."""
        return charge_of(self.rows)


def attempts(rows: Iterable[LedgerRow]) -> list[Attempt]:
    """The attempts among ``rows`` (chain order), in the order of their reservations. A
    release_id's rows before its first reservation (refusals) belong to no attempt and
    cost nothing; a refusal after one changes nothing (``charge_of`` reads states only)."""
    open_: dict[str, list[LedgerRow]] = {}
    started: list[list[LedgerRow]] = []
    for r in rows:
        rid = r.release_id
        if not rid:
            continue
        if r.kind == "release" and r.status == "reserved":
            open_[rid] = [r]
            started.append(open_[rid])
        elif rid in open_:
            open_[rid].append(r)
    return [Attempt(str(g[0].release_id), datetime.fromisoformat(g[0].time), tuple(g)) for g in started]


def in_window(rows: Iterable[LedgerRow], period: Period | None, at: datetime) -> list[Attempt]:
    """The attempts charged to the window that holds ``at``; every attempt when ``period``
    is None (a lifetime)."""
    every = attempts(rows)
    if period is None:
        return every
    window = period.window(at)
    return [a for a in every if period.window(a.reserved) == window]


def composed(chosen: list[Attempt], delta: float) -> LifetimeSpend:
    """The attempts' charges composed at ``delta`` (``compose_lifetime``)."""
    return compose_lifetime([a.charge for a in chosen], delta)


def window_spends(
    rows: Iterable[LedgerRow], period: Period, delta: float
) -> dict[str, tuple[LifetimeSpend, int]]:
    """Each window's composed charges at ``delta`` and how many release_ids have an attempt
    in it, by window label (``Period.label``), in time order."""
    groups: dict[datetime, list[Attempt]] = {}
    for a in attempts(rows):
        groups.setdefault(period.window(a.reserved)[0], []).append(a)
    return {
        period.label(start): (composed(group, delta), len({a.release_id for a in group}))
        for start, group in sorted(groups.items())
    }


def latest_attempt(rows: Iterable[LedgerRow]) -> Attempt | None:
    """The last attempt among ``rows`` (one release_id's): the one a bundle belongs to."""
    every = attempts(rows)
    return every[-1] if every else None
