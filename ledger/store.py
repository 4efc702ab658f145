"""The budget ledger: an append-only, hash-chained table in a real database.

SQLite file by default, PostgreSQL by URL (``postgresql+psycopg://…``), via SQLAlchemy.
Rows (``kind`` / ``status``), in the order a release writes them:

* ``budget`` / ``set``: a dataset's budget policy, written when a spec first declares it: a
  lifetime (ε, δ), or (ε, δ) per period (``detail.period``: its ISO-8601 length, e.g. P1M;
  ``detail.disjoint``: true when the spec declares the periods' tables disjoint);
* ``release`` / ``reserved``: before the data is read; the whole plan is charged;
* ``stage`` / ``spent``: *before* a step draws that stage's noise; its allocation;
* ``measurement`` / ``spent``: after the step, one per noisy statistic (sensitivity,
  noise scale, ρ or ε): the line-by-line record;
* ``release`` / ``released``, ``gated`` or ``failed``: the end of the attempt, with what it
  cost (the composed allocations of its spent stages) and the manifests' sha256; a dead
  attempt closed by ``settle`` is ``failed`` with who settled it, why, and the evidence;
* ``release`` / ``refused``: a release the budget policy or a rerun rule refused; it
  costs nothing and does not change the state of an earlier attempt.
* ``ledger`` / ``migrated``: ``ledger migrate`` brought the ledger to this code's format
  (``ledger.format``); no release, no dataset (``(ledger)``), no charge.

Every row's ``detail`` names the software that wrote it (``software``; from format 2 on).

A release_id whose attempt drew no noise may be reserved again: a new attempt, charged to
the window of its own reservation (``ledger.windows``, the one rule every account reads).
What a release costs (``ledger.charges``), the budget policy's decision (``ledger.policy``),
the chain's checks (``ledger.chain``) and the tables (``ledger.database``) live beside this
class, which reads and writes the rows.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import insert, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from dprelease.ledger import database
from dprelease.ledger import format as ledger_format
from dprelease.ledger.chain import chain_problems, read_rows_problems, set_checkpoint, tail_problems
from dprelease.ledger.charges import (
    STATES,
    UNPROTECTED,
    abandoned,
    charge_of,
    held_budget,
    last_state,
    listing,
    same_release,
    spent_charge,
    spent_stages,
    stored,
    void_since,
)
from dprelease.ledger.database import ENTRIES, GENESIS, HEAD, METADATA, open_engine, open_problem, transaction
from dprelease.ledger.decision import Asked, decide, read_rows
from dprelease.ledger.errors import BudgetRefused, LedgerError, NoLedger
from dprelease.ledger.migrate import migrate
from dprelease.ledger.policy import declared_policy, plan_charge, policy_detail
from dprelease.ledger.row import LedgerRow
from dprelease.ledger.url import PASSWORD_ENV, parse_url
from dprelease.ledger.windows import attempts, composed, in_window, latest_attempt, window_spends
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.lifetime import Charge, Headroom, LifetimeSpend, compose_lifetime, headroom
from dprelease.mechanisms.periods import Period, PeriodBudget
from dprelease.mechanisms.primitives import Measurement

__all__ = ["Ledger"]


class Ledger:
    """The ledger at ``url``; tables are created on first use (unless ``create=False``)."""

    def __init__(self, url: str, *, create: bool = True, password: str | None = None) -> None:
        """``create=False`` (audits, ``ledger show``): refuse a database without a ledger
        rather than create one. The database password: ``password``, else the URL's, else
        the environment's ``DPRELEASE_LEDGER_PASSWORD`` (so that a URL passed to Prefect
        need not hold it). ``url``: the URL rebuilt with no secret (``parse_url``)."""
        given = parse_url(url)
        self.url = given.url
        if password is None and given.password is None:
            password = os.environ.get(PASSWORD_ENV) or None
        self.engine = open_engine(url, create, password)
        try:
            if not create:
                if not inspect(self.engine).has_table(ENTRIES.name):
                    raise NoLedger(f"there is no ledger at {self.url}; pass the --ledger the releases used")
            else:
                with self.engine.begin() as conn:
                    if self.engine.dialect.name == "postgresql":
                        conn.execute(text("SELECT pg_advisory_xact_lock(7151)"))  # concurrent first use
                    new = not inspect(conn).has_table(ENTRIES.name)
                    METADATA.create_all(conn)
                    if new:  # a new ledger is in this code's format
                        ledger_format.stamp(conn)
                    if conn.execute(select(HEAD.c.id)).first() is None:
                        conn.execute(insert(HEAD).values(id=1, seq=0, hash=GENESIS))
            self.format = self._format()
        except SQLAlchemyError as e:
            raise LedgerError(f"the ledger at {self.url} {open_problem(e, self.url)}") from None
        ledger_format.check_readable(self.format, self.url)

    def _format(self) -> ledger_format.StoredFormat:
        with self.engine.connect() as conn:
            return ledger_format.stored_format(conn)

    def check_writable(self) -> None:
        """Refuse now, before anything is read or spent, what every write would refuse: a
        ledger of another format than this code writes (``ledger.format.check_writable``)."""
        ledger_format.check_writable(self._format(), self.url)

    def migrate(self) -> dict | None:
        """Bring an older ledger to this code's format (``ledger.migrate.migrate``); the
        ``ledger``/``migrated`` row, or None when it is in this format already."""
        row = migrate(self.engine, self.url)
        self.format = self._format()
        return row

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _txn(self):
        return transaction(self.engine, self.url)

    # reading -------------------------------------------------------------------------

    def rows(
        self,
        *,
        dataset: str | None = None,
        release_id: str | None = None,
        kinds: tuple[str, ...] | None = None,
    ) -> list[LedgerRow]:
        """Rows in chain order (of ``kinds`` only, when given)."""
        where = {k: v for k, v in (("dataset", dataset), ("release_id", release_id)) if v is not None}
        return self._select(kinds, **where)

    def entries(self, **where: Any) -> list[dict]:
        """``rows`` (``dataset``, ``release_id``, ``kinds``) as dicts (``LedgerRow.as_mapping``:
        every column, ``detail`` decoded)."""
        return [r.as_mapping() for r in self.rows(**where)]

    def _select(self, kinds: tuple[str, ...] | None, **where) -> list[LedgerRow]:
        with self.engine.connect() as conn:
            return read_rows(conn, kinds, **where)

    def lifetime(self, dataset: str) -> tuple[float, float] | None:
        """The dataset's lifetime (ε, δ), or None when none was declared (or a period was)."""
        held = held_budget(self._select(("budget",), dataset=dataset))
        return None if held is None or held[2] is not None else (held[0], held[1])

    def period_budget(self, dataset: str) -> PeriodBudget | None:
        """The dataset's period budget, or None when none was declared (or a lifetime was)."""
        held = held_budget(self._select(("budget",), dataset=dataset))
        if held is None or held[2] is None:
            return None
        return PeriodBudget(Period.parse(held[2]), held[0], held[1], held[3])

    def period_spends(self, dataset: str, budget: PeriodBudget) -> dict[str, tuple[LifetimeSpend, int]]:
        """Each period's composed charges at ``budget.delta`` and how many releases have an
        attempt in it, by period label, in time order: each attempt is charged to the
        period of its own reservation (``ledger.windows``)."""
        return window_spends(self._select(("release",), dataset=dataset), budget.length, budget.delta)

    def period_spend(self, dataset: str, budget: PeriodBudget, at: datetime) -> tuple[LifetimeSpend, int]:
        """The composed charges of the period that holds ``at`` and how many releases it holds."""
        return self.period_spends(dataset, budget).get(
            budget.length.label(at), (compose_lifetime([], 0.0), 0)
        )

    def all_time_guarantee(self, dataset: str, budget: PeriodBudget) -> LifetimeSpend:
        """What bounds one person's privacy loss over all periods so far, at ``budget.delta``.
        Periods declared disjoint (each person's row in one period's tables) compose in
        parallel (McSherry 2009; under zCDP alike): the largest period's composed spend.
        Otherwise a person may be in every period's tables: every release composed."""
        if not budget.disjoint:
            return self.spend_so_far(dataset, budget.delta)
        spends = [spend for spend, _ in self.period_spends(dataset, budget).values()]
        return max(spends, key=lambda s: s.epsilon, default=compose_lifetime([], budget.delta))

    def reserved_at(self, release_id: str) -> datetime | None:
        """When ``release_id``'s latest attempt was reserved (the period it is charged to,
        and the one its bundle states); None when it never was (refused)."""
        latest = latest_attempt(self._select(("release",), release_id=release_id))
        return None if latest is None else latest.reserved

    def charge(self, release_id: str) -> Charge:
        """What ``release_id``'s latest attempt costs its dataset now (earlier attempts of a
        re-run drew no noise: the rerun rule)."""
        latest = latest_attempt(self._select(("release",), release_id=release_id))
        return charge_of([]) if latest is None else latest.charge

    def void_since(self, dataset: str) -> dict | None:
        """The dataset's first non-DP release (``void_since``), or None."""
        return void_since(self._select(("release",), dataset=dataset))

    def charged_releases(self, dataset: str) -> int:
        """How many release_ids of the dataset have a reservation (refused ones do not count)."""
        return len({a.release_id for a in attempts(self._select(("release",), dataset=dataset))})

    def spend_so_far(self, dataset: str, delta: float) -> LifetimeSpend:
        """The dataset's composed charges, every attempt, at ``delta``."""
        return composed(attempts(self._select(("release",), dataset=dataset)), delta)

    def headroom(self, dataset: str, at: datetime | None = None) -> Headroom | None:
        """What the dataset's budget policy still admits (None: no policy): the largest ε of
        a next zCDP release stated at the policy's δ (pure when δ is 0), and the ρ left
        (``mechanisms.lifetime.headroom``); under a period policy, in the period that holds
        ``at`` (default now, the ledger's clock)."""
        held = held_budget(self._select(("budget",), dataset=dataset))
        if held is None:
            return None
        period = None if held[2] is None else Period.parse(held[2])
        chosen = in_window(self._select(("release",), dataset=dataset), period, at or database.now())
        return headroom([a.charge for a in chosen], held[:2], "zcdp" if held[1] > 0 else "pure")

    def releases(self, dataset: str | None = None) -> list[dict]:
        """One dict per release_id (``charges.listing``): dataset, release_id, status, what
        it is charged (epsilon, delta, rho), times, and its stage rows (measurements nested)."""
        return listing(self.rows(dataset=dataset))

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row: publish it elsewhere to anchor the chain."""
        with self.engine.connect() as conn:
            return tuple(conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one())

    def verify_chain(self) -> list[str]:
        """Problems with the hash chain (empty when every row and the head check out)."""
        with self.engine.connect() as conn:
            return chain_problems(conn)

    def checkpoint(self) -> list[str]:
        """Verify the whole chain (``verify_chain``) and, when it is intact, move the
        checkpoint to the head so the next ``reserve`` checks only what follows. Returns
        the problems found (the checkpoint does not move then)."""
        with self._txn() as t:
            problems = chain_problems(t.conn)
            if not problems:
                set_checkpoint(t)
        return problems

    # writing -------------------------------------------------------------------------

    def refusal(
        self,
        *,
        dataset: str,
        release_id: str | None,
        plan: BudgetPlan,
        lifetime: tuple[float, float] | None,
        not_dp: list[str] | None = None,
        period: PeriodBudget | None = None,
        schema: str | None = None,
        new_dataset: str | None = None,
    ) -> str | None:
        """Why ``reserve`` would refuse this release now (the rerun rule, when its id is
        known, the schema's binding, then the budget policy: ``lifetime`` or ``period``), or
        None; reads only, writes nothing. The CLI asks before Prefect starts; ``reserve``
        decides again under the lock, by the same ``ledger.decision.decide``."""
        asked = Asked.of(dataset, release_id or "", plan, lifetime, period, not_dp, schema, new_dataset)
        with self.engine.connect() as conn:
            return decide(conn, asked, database.now()).reason

    def reserve(
        self,
        *,
        dataset: str,
        release_id: str,
        mechanism: str,
        plan: BudgetPlan,
        lifetime: tuple[float, float] | None,
        not_dp: list[str] | None = None,
        hold: Callable[[], None] | None = None,
        period: PeriodBudget | None = None,
        schema: str | None = None,
        new_dataset: str | None = None,
    ) -> dict:
        """Charge the whole plan to ``release_id`` before any data is read, or refuse.
        ``not_dp``: why the release is not differentially private (its reservation is then
        ``void``: unbounded, see the module docstring). ``schema``: the fingerprint of the
        release's public schema, which binds the dataset name (``ledger.identity``);
        ``new_dataset``: the steward's reason why a schema another dataset name holds is a
        new dataset all the same.

        Refuses (a ``refused`` row, then ``BudgetRefused``) when the release_id was
        published or gated, already spent a stage, is running elsewhere, or when the
        dataset's budget policy (``lifetime``, or ``period``: the attempts reserved in this
        UTC calendar period, the transaction's time, ``ledger.windows``) cannot take the
        plan, or when another dataset name holds ``schema`` and this one does not (without
        ``new_dataset``). A re-run of a release_id whose attempt died before any noise closes that
        attempt (``abandoned``) and starts a new one, in the window of its own time.
        ``hold`` runs inside the locked transaction after the checks (tests use it to widen
        a race window)."""
        base = {"dataset": dataset, "release_id": release_id, "mechanism": mechanism}
        asked = Asked.of(dataset, release_id, plan, lifetime, period, not_dp, schema, new_dataset)
        with self._txn() as t:
            broken, upto = tail_problems(t)
            decided = decide(t.conn, asked, datetime.fromisoformat(t.time))
            broken += read_rows_problems(t, [r.seq for r in decided.read], upto)
            if broken:
                raise BudgetRefused(
                    f"the ledger's hash chain is broken ({'; '.join(broken[:3])}): a ledger that may have "
                    "been edited cannot hold the privacy budget, so no release is admitted. Nothing was read "
                    "or spent. Run `dprelease ledger show` to see every problem, then restore the ledger "
                    "from a backup whose chain head matches the one you anchored"
                )
            if hold is not None:
                hold()
            reason = decided.reason
            if reason is not None:
                t.append(**base, kind="release", status="refused", detail={"reason": reason})
            else:
                budget = decided.policy
                if budget is not None:
                    t.append(
                        dataset=dataset,
                        kind="budget",
                        status="set",
                        epsilon=budget[0],
                        delta=budget[1],
                        detail=policy_detail(budget),
                    )
                closing = abandoned(decided.mine)
                if closing is not None:  # died before any noise
                    t.append(**closing)
                charge = Charge.void() if not_dp else plan_charge(plan)
                row = t.append(
                    **base,
                    kind="release",
                    status="reserved",
                    **stored(charge),
                    detail={
                        "plan": [[s.stage, s.rho, s.epsilon] for s in plan.stages],
                        "lifetime": lifetime,
                        **({} if period is None else {"period": declared_policy(None, period)}),
                        "host": socket.gethostname(),
                        "pid": os.getpid(),
                        **({"not_dp": list(not_dp)} if not_dp else {}),
                        **decided.schema,
                    },
                )
            set_checkpoint(t)
        if reason is not None:
            raise BudgetRefused(reason)
        return row

    def spend(self, release_id: str, stages: list[str], plan: BudgetPlan) -> list[dict]:
        """Record ``stages`` of ``release_id``'s plan as spent; call *before* drawing their
        noise. Refuses a stage already spent (its noise must never be drawn twice)."""
        if not stages:
            return []
        with self._txn() as t:
            mine = read_rows(t.conn, release_id=release_id)
            last = last_state(mine)
            if last is None or last.status != "reserved":
                raise LedgerError(f"release '{release_id}' has no open reservation in the ledger")
            twice = sorted(set(stages) & set(spent_stages(mine)))
            if twice:
                raise BudgetRefused(
                    f"release '{release_id}' already spent stage(s) {twice}; their noise is never "
                    "drawn twice. Start a new release_id"
                )
            return [
                t.append(
                    **same_release(last),
                    kind="stage",
                    status="spent",
                    stage=s,
                    accountant=plan.notion,
                    rho=plan.stage(s).rho,
                    epsilon=plan.stage(s).epsilon,
                    delta=plan.stage_delta(s),
                )
                for s in stages
            ]

    @contextmanager
    def spending(
        self, release_id: str, stages: list[str], plan: BudgetPlan, *, not_dp: bool = False
    ) -> Iterator[Callable[[Iterable[Measurement]], None]]:
        """Bracket one step: ``stages`` are recorded as spent *before* it runs (a non-DP
        release's synthesis also marks its charge unbounded first); the step hands its
        measurements to the yielded callback, and on leaving they are recorded, one row
        each. A measurement in a stage the step did not declare is refused (an internal
        error: its noise would be uncharged). A step that raises leaves its stages spent
        (fail closed) and records nothing."""
        if not_dp:
            self.mark_unprotected(release_id)
        self.spend(release_id, stages, plan)
        made: list[Measurement] = []
        yield made.extend
        stray = sorted({m.stage for m in made if m.draws_noise} - set(stages))
        if stray:
            raise LedgerError(f"internal error: release '{release_id}' measured undeclared stage(s) {stray}")
        self.record_measurements(release_id, made)

    def mark_unprotected(self, release_id: str) -> dict | None:
        """A non-DP release's synthesis is about to start: write its ``unprotected`` stage
        row (once), from which the attempt costs ``Charge.void()``."""
        with self._txn() as t:
            mine = read_rows(t.conn, release_id=release_id)
            last = last_state(mine)
            if last is None or last.status != "reserved" or last.accountant != "void":
                raise LedgerError(f"release '{release_id}' has no open non-DP reservation in the ledger")
            if any(r.kind == "stage" and r.stage == UNPROTECTED for r in mine):
                return None
            return t.append(
                **same_release(last),
                kind="stage",
                status="spent",
                stage=UNPROTECTED,
                accountant="void",
                detail={"reason": "synthesis of a release that is not differentially private started"},
            )

    def record_measurements(self, release_id: str, measurements: list[Measurement]) -> list[dict]:
        """One row per noisy statistic (after the step): sensitivity, noise scale, ρ/ε."""
        if not measurements:
            return []
        with self._txn() as t:
            mine = read_rows(t.conn, release_id=release_id)
            unspent = sorted({m.stage for m in measurements if m.draws_noise} - set(spent_stages(mine)))
            if unspent:  # the flow checks `spends` before a step: this is the last line of defence
                raise LedgerError(f"internal error: noise drawn for stage(s) {unspent} not recorded as spent")
            return [
                t.append(
                    **same_release(mine[0]),
                    kind="measurement",
                    status="spent",
                    stage=m.stage,
                    statistic=m.name,
                    accountant="zcdp" if m.rho is not None else "pure",
                    sensitivity=m.sensitivity,
                    sensitivity_norm=m.norm,
                    noise_scale=m.scale,
                    rho=m.rho,
                    epsilon=m.epsilon,
                    detail={
                        "mechanism": m.mechanism,
                        "dimension": int(m.value.size),
                        "defect": m.defect,
                    },
                )
                for m in measurements
            ]

    def finish(
        self, release_id: str, status: str, detail: dict | None = None, *, after_seal: bool = False
    ) -> dict:
        """Close the attempt as ``released``, ``gated`` or ``failed``, charged its spent stages.
        ``after_seal``: mark a sealed (released/gated) attempt ``failed`` because its bundle
        could not be moved into place after all."""
        if status not in STATES[1:] or (after_seal and status != "failed"):
            raise ValueError(f"status {status!r} must be one of {STATES[1:]} (failed after a seal)")
        open_states = ("released", "gated") if after_seal else ("reserved",)
        with self._txn() as t:
            mine = read_rows(t.conn, release_id=release_id)
            last = last_state(mine)
            if last is None or last.status not in open_states:
                raise LedgerError(f"release '{release_id}' has no open reservation in the ledger")
            return t.append(
                **same_release(last),
                kind="release",
                status=status,
                **stored(spent_charge(mine)),
                detail=detail,
            )

    def state(self, release_id: str) -> tuple[LedgerRow, list[str]] | None:
        """The attempt's state row (None: the ledger does not know it) and the stages it
        recorded as spent; ``attempt`` as a dict."""
        mine = self.rows(release_id=release_id)
        last = last_state(mine)
        return None if last is None else (last, spent_stages(mine))

    def attempt(self, release_id: str) -> dict | None:
        """``state`` as one dict: the row's columns (``detail`` decoded) and ``spent``."""
        found = self.state(release_id)
        return None if found is None else {**found[0].as_mapping(), "spent": found[1]}

    def settle(self, release_id: str, *, by: str, reason: str, evidence: str) -> dict:
        """Close a dead attempt that is still ``reserved`` as ``failed``, charged what its
        spent stage rows show (``spent_charge``: the composed allocations of the stages whose
        noise may have been drawn; a stage without a ``spent`` row drew none, since a step
        records its stages before drawing). The row says who settled it, why, and the
        evidence that its process is gone; the caller establishes that evidence."""
        detail = {"stage": "settled", "settled": {"by": by, "reason": reason, "evidence": evidence}}
        return {**self.finish(release_id, "failed", detail), "detail": detail}
