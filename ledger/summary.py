"""What ``dprelease ledger show`` prints, as data: the releases a ledger holds, what each is
charged, each dataset's account under its budget policy (a lifetime, or a period: each
period's and the all-time composed totals), and whether the hash chain holds.

``show`` reads the ledger only (opened, never created); the CLI prints from it and the
Python API (``dprelease.ledger.show``) returns it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dprelease.ledger import database
from dprelease.ledger.database import ledger_url, redact
from dprelease.ledger.store import Ledger
from dprelease.mechanisms.lifetime import Headroom, LifetimeSpend
from dprelease.mechanisms.periods import PeriodBudget

__all__ = ["DatasetAccount", "LedgerSummary", "PeriodAccount", "show"]


@dataclass(frozen=True)
class PeriodAccount:
    """One period of a period budget.

    Attributes:
        period: Its name (``2026-11`` for a month of ``P1M``; ``mechanisms.periods``).
        spent: The composed charge of the releases first reserved in it, at the budget's δ.
        releases: How many releases it holds.
    """

    period: str
    spent: LifetimeSpend
    releases: int


@dataclass(frozen=True)
class DatasetAccount:
    """One dataset's account under its budget policy.

    Attributes:
        dataset: The dataset's name (``dataset.name`` in its specs).
        lifetime: Its lifetime (ε, δ), or None when none was declared.
        spent: Its releases' composed charge, all time (the better of basic and zCDP
            composition), at the policy's δ, or at the releases' summed δ without a policy.
        void_since: The first release that was not differentially private (its
            ``release_id`` and ``time``), after which no composed guarantee holds; else None.
        headroom: What the budget policy still admits (None without one); under a period
            budget, in the current period.
        period: Its period budget, or None when none was declared.
        periods: Under a period budget, each period's account, in time order.
        current: Under a period budget, the current period's name.
        per_person: Under a period budget, what bounds one person's loss over all periods:
            with the periods declared disjoint, the largest period's spend (parallel
            composition); else ``spent``.
    """

    dataset: str
    lifetime: tuple[float, float] | None
    spent: LifetimeSpend
    void_since: dict | None
    headroom: Headroom | None
    period: PeriodBudget | None = None
    periods: tuple[PeriodAccount, ...] = ()
    current: str | None = None
    per_person: LifetimeSpend | None = None


@dataclass(frozen=True)
class LedgerSummary:
    """A ledger's releases and accounts, as ``dprelease ledger show`` reports them.

    Attributes:
        url: The ledger's database URL, its password (if any) redacted.
        releases: One dict per release_id, in chain order: dataset, release_id, status,
            its charge (epsilon, delta, rho), times and its stage rows (``Ledger.releases``).
        accounts: Each dataset's account under its budget policy, by dataset name.
        chain_problems: What is wrong with the hash chain (empty: it is intact).
        head: The chain head (row, sha256): publish it elsewhere to anchor the chain.
    """

    url: str
    releases: list[dict]
    accounts: dict[str, DatasetAccount]
    chain_problems: list[str]
    head: tuple[int, str]

    @property
    def chain_intact(self) -> bool:
        """Whether every row and the head check out."""
        return not self.chain_problems


def show(
    ledger: str | Path | None = None, *, out: str | Path = "releases", dataset: str | None = None
) -> LedgerSummary:
    """Read a ledger: its releases, their charges, each dataset's account under its budget
    policy (lifetime; or period: each period's and the all-time totals) and the hash
    chain's state. Nothing is written.

    Args:
        ledger: A database URL (``sqlite:///PATH``, ``postgresql+psycopg://USER@HOST/DB``), a
            SQLite ledger file, or a folder holding ``ledger.db``; default ``OUT/ledger.db``.
        out: The folder the releases went to (read when ``ledger`` is None).
        dataset: Only this dataset's releases and account.

    Raises:
        NoLedger: There is no ledger there.
        LedgerError: The ledger cannot be opened or read.
    """
    url = ledger_url(None if ledger is None else str(ledger), out)
    with Ledger(url, create=False) as led:
        releases = led.releases(dataset)
        accounts = {}
        for name in dict.fromkeys(r["dataset"] for r in releases):
            life, budget = led.lifetime(name), led.period_budget(name)
            # no policy: compose at the releases' summed δ, where basic composition holds
            deltas = [r["delta"] for r in releases if r["dataset"] == name and r["delta"] is not None]
            delta = life[1] if life else budget.delta if budget else math.fsum(deltas)
            periods = () if budget is None else _periods(led, name, budget)
            accounts[name] = DatasetAccount(
                name,
                life,
                led.spend_so_far(name, delta),
                led.void_since(name),
                led.headroom(name),
                budget,
                periods,
                None if budget is None else budget.length.label(database.now()),
                None if budget is None else led.all_time_guarantee(name, budget),
            )
        return LedgerSummary(redact(url), releases, accounts, led.verify_chain(), led.head())


def _periods(led: Ledger, dataset: str, budget: PeriodBudget) -> tuple[PeriodAccount, ...]:
    """Each period's account under ``budget``, in time order."""
    return tuple(PeriodAccount(k, spend, n) for k, (spend, n) in led.period_spends(dataset, budget).items())
