"""What ``dprelease ledger show`` prints, as data: the releases a ledger holds, what each is
charged, each dataset's account under its budget policy (a lifetime, or a period: each
period's and the all-time composed totals), and whether the hash chain holds.

``show`` reads the ledger only (opened, never created); the CLI prints from it and the
Python API (``dprelease.ledger.show``) returns it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dprelease.ledger import database
from dprelease.ledger.charges import by_release, charge_of, listing
from dprelease.ledger.row import LedgerRow
from dprelease.ledger.store import Ledger
from dprelease.ledger.url import ledger_url
from dprelease.mechanisms.lifetime import Headroom, LifetimeSpend
from dprelease.mechanisms.periods import PeriodBudget

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DatasetAccount", "LedgerSummary", "PeriodAccount", "show"]


@dataclass(frozen=True)
class PeriodAccount:
    """One period of a period budget.

    Attributes:
        period: Its name (``2026-11`` for a month of ``P1M``; ``mechanisms.periods``).
        spent: The composed charge of the attempts reserved in it, at the budget's δ: each
            attempt of a release is charged to the period of its own reservation
            (``ledger.windows``).
        releases: How many releases have an attempt in it.
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
        schema: What its reservations recorded of its public schema (``ledger.identity``),
            in chain order: each time the steward declared it a new dataset although
            another dataset name had its schema (``new_dataset``: the reason), and each
            change of its schema's fingerprint (``schema_before``); with the
            ``release_id`` and ``time`` of the reservation.
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
    schema: tuple[dict, ...] = ()

    def _line(self) -> str:
        """The spend and what is left, rounded to 4 significant digits for reading (the
        fields keep the exact values)."""
        s = self.spent
        spent = "void (a release was not DP)" if s.void else f"({s.epsilon:.4g}, {s.delta:.3g}) by {s.rule}"
        life = (
            ""
            if self.lifetime is None
            else f" of a lifetime ({self.lifetime[0]:.4g}, {self.lifetime[1]:.3g})"
        )
        h = self.headroom
        left = "" if h is None else f"; next release up to ε {h.epsilon:.4g} at δ {h.delta:.3g}"
        left += "; used up" if h is not None and h.used_up else ""
        return f"spent {spent}{life}{left}"

    def __repr__(self) -> str:
        """One line (issue 41: the dataclass's repr printed ε as 0.9999999999999999)."""
        return f"DatasetAccount({self.dataset!r}: {self._line()})"


@dataclass(frozen=True)
class LedgerSummary:
    """A ledger's releases and accounts, as ``dprelease ledger show`` reports them.

    Attributes:
        url: The ledger's database URL, rebuilt with no secret in it (``ledger.url.parse_url``).
        releases: One dict per release_id, in chain order: dataset, release_id, status,
            its charge (epsilon, delta, rho), times and its stage rows (``Ledger.releases``).
        accounts: Each dataset's account under its budget policy, by dataset name.
        chain_problems: What is wrong with the hash chain (empty: it is intact).
        head: The chain head (row, sha256): publish it elsewhere to anchor the chain.
        format: The ledger's format (``ledger.format``; below this version's, a release
            refuses it until ``migrate``).
    """

    url: str
    releases: list[dict]
    accounts: dict[str, DatasetAccount]
    chain_problems: list[str]
    head: tuple[int, str]
    format: int

    @property
    def chain_intact(self) -> bool:
        """Whether every row and the head check out."""
        return not self.chain_problems

    def __repr__(self) -> str:
        """A few lines for a notebook (issue 41: the dataclass's repr was 10 KB on one line):
        the ledger, its chain, and each dataset's spend and headroom; the rows are in
        ``releases`` and ``accounts``."""
        chain = "intact" if self.chain_intact else f"{len(self.chain_problems)} problem(s)"
        head = f"{len(self.releases)} release(s), chain {chain}, head row {self.head[0]}"
        lines = [f"LedgerSummary({self.url!r}: {head})"]
        lines += [f"  {name}: {a._line()}" for name, a in self.accounts.items()]
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        """The releases as a DataFrame, one row each in chain order: dataset, release_id,
        status, mechanism, accountant, epsilon, delta, rho, differentially_private, started,
        last_update (their stage and event rows stay in ``releases``)."""
        import pandas as pd

        columns = [k for k in (self.releases[0] if self.releases else {}) if k not in ("stages", "events")]
        return pd.DataFrame([{k: r[k] for k in columns} for r in self.releases], columns=columns)

    def _repr_html_(self) -> str:
        """A notebook's view: the summary's lines, then the releases' table."""
        return f"<pre>{html.escape(repr(self))}</pre>{self.to_frame().to_html(index=False)}"


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
        rows = led.rows(dataset=dataset)
        releases = listing(rows)
        groups = by_release(rows)
        accounts = {}
        for name in dict.fromkeys(g[0].dataset for g in groups.values()):
            mine = [g for g in groups.values() if g[0].dataset == name]
            life, budget = led.lifetime(name), led.period_budget(name)
            # no policy: compose at the releases' summed δ, where basic composition holds
            charges = [charge_of(g) for g in mine]
            deltas = [c.delta for c in charges if not c.is_void]
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
                _schema_events(mine),
            )
        return LedgerSummary(led.url, releases, accounts, led.verify_chain(), led.head(), led.format.format)


def _periods(led: Ledger, dataset: str, budget: PeriodBudget) -> tuple[PeriodAccount, ...]:
    """Each period's account under ``budget``, in time order."""
    return tuple(PeriodAccount(k, spend, n) for k, (spend, n) in led.period_spends(dataset, budget).items())


def _schema_events(releases: Iterable[list[LedgerRow]]) -> tuple[dict, ...]:
    """The reservations that declared a new dataset or recorded a changed schema, among
    ``releases`` (each a release_id's rows)."""
    out = []
    for mine in releases:
        for e in mine:
            d = e.detail or {}
            if (
                e.kind == "release"
                and e.status == "reserved"
                and ("new_dataset" in d or "schema_before" in d)
            ):
                keys = [k for k in ("new_dataset", "schema_before", "schema") if k in d]
                out.append({"release_id": e.release_id, "time": e.time, **{k: d[k] for k in keys}})
    return tuple(out)


def migrate(ledger: str | Path | None = None, *, out: str | Path = "releases") -> dict | None:
    """Bring a ledger of an older format to this version's (``ledger.format``,
    ``ledger.migrate``): no row changes; ``ledger_format`` is stamped and a
    ``ledger``/``migrated`` row is appended to the hash chain. Back the ledger up first.

    Args:
        ledger: As for ``show``; default ``OUT/ledger.db``.
        out: The folder the releases went to (read when ``ledger`` is None).

    Returns:
        The ``migrated`` row (``detail``: ``from_format``, ``to_format``, ``software``), or
        None when the ledger is in this version's format already.

    Raises:
        NoLedger: There is no ledger there.
        LedgerFormatError: The ledger is of a newer format than this version knows.
        LedgerError: The ledger cannot be opened, or its hash chain is broken.
    """
    url = ledger_url(None if ledger is None else str(ledger), out)
    with Ledger(url, create=False) as led:
        return led.migrate()
