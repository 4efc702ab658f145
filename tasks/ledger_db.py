"""The budget ledger: an append-only, hash-chained table in a real database.

SQLite file by default, PostgreSQL by URL (``postgresql+psycopg://…``), via SQLAlchemy.
Rows (``kind`` / ``status``), in the order a release writes them:

* ``budget`` / ``set``: a dataset's lifetime (ε, δ), written when a spec first declares it;
* ``release`` / ``reserved``: before the data is read; the whole plan is charged;
* ``stage`` / ``spent``: *before* a step draws that stage's noise; its allocation;
* ``measurement`` / ``spent``: after the step, one per noisy statistic (sensitivity,
  noise scale, ρ or ε): the line-by-line record;
* ``release`` / ``released``, ``gated`` or ``failed``: the end of the attempt, with what it
  cost (the composed allocations of its spent stages) and the manifest's sha256;
* ``release`` / ``refused``: a release the lifetime budget or a rerun rule refused; it
  costs nothing and does not change the state of an earlier attempt.

What a release costs its dataset (``charge``): the stages with a ``spent`` row, or the
whole plan while its latest ``reserved``/terminal row is ``reserved`` (running, or a run
that died: fail closed). Lifetime composition is ``mechanisms.accounting.compose_lifetime``.

A release that is not differentially private (a paper-literal variant or spectral
anonymization, run with ``privacy.allow_non_dp``) is reserved with accountant ``void``.
Once its synthesis starts (``mark_unprotected`` writes a ``stage`` / ``spent`` row named
``unprotected``) it costs ``Charge.void()``: no composed (ε, δ) statement holds for its
dataset from then on (``void_since``), and a lifetime budget on that dataset is refused.

Every row stores sha256(previous row's hash ‖ canonical JSON of its own fields), so an
edited, deleted or reordered row breaks the chain from there on (``verify_chain``).
``reserve`` checks the chain before it admits a release, in time that does not grow with
the ledger: every row after the last verified checkpoint, the checkpoint row itself (a
re-chained rewrite changes its hash), and each row the lifetime decision reads (its own
hash and its successor's link). A broken chain refuses the release. All
writes are serialised on one lock (SQLite ``BEGIN IMMEDIATE``; PostgreSQL ``SELECT … FOR
UPDATE`` of the chain head): two releases started at once cannot both pass the lifetime
check, and a stage can be spent only once per ``release_id``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import (
    Column,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from mechanisms.accounting import BudgetPlan, Charge, LifetimeSpend, compose_lifetime, zcdp_epsilon
from mechanisms.errors import BudgetError, DPReleaseError
from mechanisms.primitives import Measurement

__all__ = [
    "PASSWORD_ENV",
    "UNPROTECTED",
    "BudgetRefused",
    "Ledger",
    "LedgerError",
    "default_url",
    "ledger_facts",
    "redact",
    "spent_charge",
    "split_password",
    "void_since",
]

GENESIS = "0" * 64
PASSWORD_ENV = "DPRELEASE_LEDGER_PASSWORD"  # the ledger database's password, never in a URL Prefect sees
UNPROTECTED = "unprotected"  # the stage row a non-DP release writes when its synthesis starts
STATES = ("reserved", "released", "gated", "failed")  # refused rows never change a state

_META = MetaData()
HEAD = Table(
    "ledger_head",
    _META,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)
CHECKPOINT = Table(  # the last row a reservation verified the chain up to
    "ledger_checkpoint",
    _META,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)
ENTRIES = Table(
    "ledger_entries",
    _META,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("time", String(40), nullable=False),
    Column("dataset", String(200), nullable=False, index=True),
    Column("release_id", String(200), index=True),
    Column("kind", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("stage", String(100)),
    Column("mechanism", String(100)),
    Column("statistic", String(200)),
    Column("accountant", String(10)),
    Column("sensitivity", Double),
    Column("sensitivity_norm", String(4)),
    Column("noise_scale", Double),
    Column("rho", Double),
    Column("epsilon", Double),
    Column("delta", Double),
    Column("detail", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)
FIELDS = [c.name for c in ENTRIES.columns]
_FLOATS = [c.name for c in ENTRIES.columns if isinstance(c.type, Double)]


class LedgerError(DPReleaseError):
    """The ledger cannot be reached or used."""


class BudgetRefused(BudgetError):
    """The ledger refused a release (lifetime budget, or a rerun that would spend twice);
    nothing was read and nothing was spent."""


def default_url(out_dir: Path | str) -> str:
    """``sqlite:///<out>/ledger.db`` (absolute)."""
    return f"sqlite:///{Path(out_dir).resolve() / 'ledger.db'}"


def redact(url: str) -> str:
    """The URL without its password, for bundles and messages."""
    return make_url(url).render_as_string(hide_password=True)


def split_password(url: str) -> tuple[str, str | None]:
    """(the URL with no password in it, the password or None): what may be handed to
    Prefect as a parameter, and what must travel another way (``PASSWORD_ENV``, a Prefect
    Secret block)."""
    try:
        parsed = make_url(url)
    except Exception:
        return url, None  # not a URL: _engine names the problem
    if parsed.password is None:
        return url, None
    return parsed._replace(password=None).render_as_string(hide_password=False), str(parsed.password)


def make_url_password(url: str) -> str | None:
    try:
        return make_url(url).password
    except Exception:
        return None


def row_hash(row: dict) -> str:
    """sha256 of the previous hash and the row's canonical JSON (sorted keys, floats as
    their shortest round-trip repr, no NaN); the ``hash`` field itself is excluded."""
    body = json.dumps(
        {k: row[k] for k in FIELDS if k != "hash"}, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return hashlib.sha256((row["prev_hash"] + body).encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _engine(url: str, create: bool, password: str | None = None) -> Engine:
    try:
        parsed = make_url(url)
        if password is not None:
            parsed = parsed.set(password=password)
    except Exception:
        raise LedgerError(
            f"ledger URL {url!r} is not a database URL; use sqlite:///path/ledger.db or "
            "postgresql+psycopg://user@host/db"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            if not (create or Path(parsed.database).is_file()):
                raise LedgerError(f"there is no ledger at {url}; pass the --ledger the releases used")
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": 120})

        @event.listens_for(engine, "connect")
        def _manual_transactions(dbapi_connection, _record) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves

        @event.listens_for(engine, "begin")
        def _write_lock(conn) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, taken before any read

        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True)
    raise LedgerError(f"ledger URL {redact(url)!r}: only sqlite and postgresql are supported")


@dataclass
class _Txn:
    conn: Connection
    seq: int
    head: str

    def append(self, **fields) -> dict:
        row = {k: fields.get(k) for k in FIELDS}
        for k in _FLOATS:  # the database returns doubles: hash what it will return
            row[k] = None if row[k] is None else float(row[k])
        row.update(seq=self.seq + 1, time=_now(), prev_hash=self.head)
        row["detail"] = json.dumps(fields.get("detail") or {}, sort_keys=True, allow_nan=False)
        row["hash"] = row_hash(row)
        self.conn.execute(insert(ENTRIES).values(**row))
        self.conn.execute(update(HEAD).where(HEAD.c.id == 1).values(seq=row["seq"], hash=row["hash"]))
        self.seq, self.head = row["seq"], row["hash"]
        return row


def _charge(rows: list[dict]) -> Charge:
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
    return Charge("pure", None, math.fsum(r["epsilon"] for r in spent), 0.0)


def _stored(charge: Charge) -> dict:
    """The ledger columns of a charge (a void one has no finite ε: NULLs)."""
    if charge.is_void:
        return {"accountant": "void", "rho": None, "epsilon": None, "delta": None}
    return {"accountant": charge.notion, "rho": charge.rho, "epsilon": charge.epsilon, "delta": charge.delta}


def void_since(rows: list[dict]) -> dict | None:
    """The first release_id among ``rows`` (one dataset's release rows, chain order) whose
    charge is void, with the time its void charge was recorded; None if every release was
    DP."""
    for rid, group in _by_release(rows).items():
        if _charge(group).is_void:
            first = next(r for r in group if r["kind"] == "release" and r["accountant"] == "void")
            return {"release_id": rid, "time": first["time"]}
    return None


def _pid_alive(detail: dict) -> bool:
    if detail.get("host") != socket.gethostname():
        return True  # another machine: assume it is still running
    try:
        os.kill(int(detail["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError):
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    """The ledger at ``url``; tables are created on first use (unless ``create=False``)."""

    def __init__(self, url: str, *, create: bool = True, password: str | None = None) -> None:
        """``create=False`` (audits, ``ledger show``): refuse a database without a ledger
        rather than create one. The database password: ``password``, else the URL's, else
        the environment's ``DPRELEASE_LEDGER_PASSWORD`` (so that a URL passed to Prefect
        need not hold it)."""
        self.url = url
        if password is None and make_url_password(url) is None:
            password = os.environ.get(PASSWORD_ENV) or None
        self.engine = _engine(url, create, password)
        try:
            if not create:
                if not inspect(self.engine).has_table(ENTRIES.name):
                    raise LedgerError(
                        f"there is no ledger at {redact(url)}; pass the --ledger the releases used"
                    )
                return
            with self.engine.begin() as conn:
                if self.engine.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(7151)"))  # concurrent first use
                _META.create_all(conn)
                if conn.execute(select(HEAD.c.id)).first() is None:
                    conn.execute(insert(HEAD).values(id=1, seq=0, hash=GENESIS))
        except SQLAlchemyError as e:
            raise LedgerError(
                f"the ledger at {redact(url)} cannot be opened ({type(e.orig or e).__name__}); "
                "check --ledger and that the database is reachable"
            ) from None

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _txn(self) -> Iterator[_Txn]:
        try:
            with self.engine.begin() as conn:
                q = select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)
                if self.engine.dialect.name == "postgresql":
                    q = q.with_for_update()
                seq, head = conn.execute(q).one()
                yield _Txn(conn, seq, head)
        except SQLAlchemyError as e:
            raise LedgerError(
                f"writing to the ledger at {redact(self.url)} failed ({type(e.orig or e).__name__}); "
                "nothing further was drawn"
            ) from None

    # reading -------------------------------------------------------------------------

    def entries(self, *, dataset: str | None = None, release_id: str | None = None) -> list[dict]:
        """Rows in chain order, ``detail`` decoded."""
        where = {k: v for k, v in (("dataset", dataset), ("release_id", release_id)) if v is not None}
        return self._select(None, **where)

    def _read(self, conn: Connection, kinds: tuple[str, ...] | None = None, **where) -> list[dict]:
        q = select(ENTRIES).order_by(ENTRIES.c.seq)
        if kinds is not None:
            q = q.where(ENTRIES.c.kind.in_(kinds))
        for k, v in where.items():
            q = q.where(ENTRIES.c[k] == v)
        return [{**r._asdict(), "detail": json.loads(r.detail)} for r in conn.execute(q)]

    def _select(self, kinds: tuple[str, ...] | None, **where) -> list[dict]:
        with self.engine.connect() as conn:
            return self._read(conn, kinds=kinds, **where)

    def lifetime(self, dataset: str) -> tuple[float, float] | None:
        """The dataset's lifetime (ε, δ), or None when none was declared."""
        rows = self._select(("budget",), dataset=dataset)
        return None if not rows else (rows[-1]["epsilon"], rows[-1]["delta"])

    def charge(self, release_id: str) -> Charge:
        """What ``release_id`` costs its dataset now."""
        return _charge(self._select(("release",), release_id=release_id))

    def void_since(self, dataset: str) -> dict | None:
        """The dataset's first non-DP release (``void_since``), or None."""
        return void_since(self._select(("release",), dataset=dataset))

    def charged_releases(self, dataset: str) -> int:
        """How many release_ids of the dataset have a reservation (refused ones do not count)."""
        rows = self._select(("release",), dataset=dataset)
        return sum(any(r["status"] in STATES for r in g) for g in _by_release(rows).values())

    def spend_so_far(self, dataset: str, delta: float, exclude: str | None = None) -> LifetimeSpend:
        """The dataset's composed charges (all release_ids but ``exclude``) at ``delta``."""
        return self._spend(self._select(("release",), dataset=dataset), delta, exclude)

    @staticmethod
    def _spend(rows: list[dict], delta: float, exclude: str | None = None) -> LifetimeSpend:
        groups = _by_release(rows)
        return compose_lifetime([_charge(g) for i, g in groups.items() if i != exclude], delta)

    def releases(self, dataset: str | None = None) -> list[dict]:
        """One dict per release_id: dataset, release_id, status, what it is charged
        (epsilon, delta, rho), times, and its stage rows (measurements nested)."""
        out = []
        for rid, mine in _by_release(self.entries(dataset=dataset)).items():
            states = [r for r in mine if r["kind"] == "release" and r["status"] in STATES]
            charge = _charge(mine)
            stages = [
                {
                    **_public(r),
                    "measurements": [
                        _public(m) for m in mine if m["kind"] == "measurement" and m["stage"] == r["stage"]
                    ],
                }
                for r in mine
                if r["kind"] == "stage"
            ]
            out.append(
                {
                    "dataset": mine[0]["dataset"],
                    "release_id": rid,
                    "status": states[-1]["status"] if states else "refused",
                    "mechanism": mine[0]["mechanism"],
                    "accountant": charge.notion if states else None,
                    "epsilon": None if charge.is_void else charge.epsilon,
                    "delta": None if charge.is_void else charge.delta,
                    "rho": charge.rho,
                    "differentially_private": not charge.is_void,
                    "started": mine[0]["time"],
                    "last_update": mine[-1]["time"],
                    "stages": stages,
                    "events": [_public(r) for r in mine if r["kind"] == "release"],
                }
            )
        return out

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row: publish it elsewhere to anchor the chain."""
        with self.engine.connect() as conn:
            return tuple(conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one())

    def verify_chain(self) -> list[str]:
        """Problems with the hash chain (empty when every row and the head check out)."""
        with self.engine.connect() as conn:
            return _chain_problems_full(conn)

    def checkpoint(self) -> list[str]:
        """Verify the whole chain (``verify_chain``) and, when it is intact, move the
        checkpoint to the head so the next ``reserve`` checks only what follows. Returns
        the problems found (the checkpoint does not move then)."""
        with self._txn() as t:
            problems = _chain_problems_full(t.conn)
            if not problems:
                _set_checkpoint(t)
        return problems

    # writing -------------------------------------------------------------------------

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
    ) -> dict:
        """Charge the whole plan to ``release_id`` before any data is read, or refuse.
        ``not_dp``: why the release is not differentially private (its reservation is then
        ``void``: unbounded, see the module docstring).

        Refuses (a ``refused`` row, then ``BudgetRefused``) when the release_id was
        published or gated, already spent a stage, is running elsewhere, or when the
        dataset's lifetime budget cannot take the plan. ``hold`` runs inside the locked
        transaction after the checks (tests use it to widen a race window)."""
        base = {"dataset": dataset, "release_id": release_id, "mechanism": mechanism}
        with self._txn() as t:
            broken, upto = _tail_problems(t)
            mine = self._read(t.conn, release_id=release_id)
            reason, budget, read = _rerun_refusal(release_id, mine), None, []
            if reason is None:
                reason, budget, read = self._lifetime_refusal(
                    t, dataset, release_id, plan, lifetime, bool(not_dp)
                )
            broken += _rows_problems(t, [r["seq"] for r in (*mine, *read)], upto)
            if broken:
                raise BudgetRefused(
                    f"the ledger's hash chain is broken ({'; '.join(broken[:3])}): a ledger that may have "
                    "been edited cannot hold the privacy budget, so no release is admitted. Nothing was read "
                    "or spent. Run `dprelease ledger show` to see every problem, then restore the ledger "
                    "from a backup whose chain head matches the one you anchored"
                )
            if hold is not None:
                hold()
            if reason is not None:
                t.append(**base, kind="release", status="refused", detail={"reason": reason})
            else:
                if budget is not None:
                    t.append(dataset=dataset, kind="budget", status="set", epsilon=budget[0], delta=budget[1])
                last = _last_state(mine)
                if last is not None and last["status"] == "reserved":  # died before any noise
                    t.append(
                        **base,
                        kind="release",
                        status="failed",
                        **_stored(spent_charge(mine)),
                        detail={"reason": "abandoned: its process is gone and it drew no noise"},
                    )
                charge = (
                    Charge.void()
                    if not_dp
                    else Charge(plan.notion, plan.spent_rho, plan.spent_epsilon, plan.delta)
                )
                row = t.append(
                    **base,
                    kind="release",
                    status="reserved",
                    **_stored(charge),
                    detail={
                        "plan": [[s.stage, s.rho, s.epsilon] for s in plan.stages],
                        "lifetime": lifetime,
                        "host": socket.gethostname(),
                        "pid": os.getpid(),
                        **({"not_dp": list(not_dp)} if not_dp else {}),
                    },
                )
            _set_checkpoint(t)
        if reason is not None:
            raise BudgetRefused(reason)
        return row

    def _lifetime_refusal(
        self,
        t: _Txn,
        dataset: str,
        release_id: str,
        plan: BudgetPlan,
        lifetime: tuple[float, float] | None,
        not_dp: bool = False,
    ) -> tuple[str | None, tuple[float, float] | None, list[dict]]:
        """(reason to refuse or None, a lifetime to record or None, the rows it read)."""
        rows = self._read(t.conn, kinds=("release", "budget"), dataset=dataset)  # enough to charge
        budgets = [r for r in rows if r["kind"] == "budget"]
        held = None if not budgets else (budgets[-1]["epsilon"], budgets[-1]["delta"])
        if held is not None and lifetime is not None and tuple(lifetime) != held:
            return (
                f"dataset '{dataset}' has lifetime budget epsilon={held[0]:g}, delta={held[1]:g} in the "
                f"ledger, but the spec says epsilon={lifetime[0]:g}, delta={lifetime[1]:g}; make the spec "
                "match the ledger (a lifetime budget is fixed when first declared)",
                None,
                rows,
            )
        limit = held or (None if lifetime is None else tuple(lifetime))
        if limit is None:
            return None, None, []  # no lifetime: the decision read nothing of the dataset
        void = void_since([r for r in rows if r["release_id"] != release_id])
        if void is not None:
            return (
                f"dataset '{dataset}' has had a release that was not differentially private "
                f"('{void['release_id']}', from {void['time']}): since then no composed (epsilon, delta) "
                f"guarantee holds for this dataset, so its lifetime budget (epsilon={limit[0]:g}) cannot be "
                "honoured. Nothing was read or spent; a DP release of it can still run without a lifetime "
                "budget, and its bundle will say the dataset's guarantee is void",
                None,
                rows,
            )
        if not_dp:
            return (
                f"this release is not differentially private and dataset '{dataset}' has a lifetime budget "
                f"(epsilon={limit[0]:g}): a non-DP release would void every guarantee about the dataset. "
                "Nothing was read or spent; run comparisons on another dataset name (a copy of the data)",
                None,
                rows,
            )
        this = (
            Charge("zcdp", plan.spent_rho, plan.spent_epsilon, plan.delta)
            if plan.notion == "zcdp"
            else Charge("pure", None, plan.spent_epsilon, 0.0)
        )
        charges = [_charge(g) for i, g in _by_release(rows).items() if i != release_id]  # no void among them
        try:
            before = compose_lifetime(charges, limit[1])
            after = compose_lifetime([*charges, this], limit[1])
        except BudgetError as e:
            return f"dataset '{dataset}': {e}", None, rows
        if after.epsilon > limit[0]:
            left = max(0.0, limit[0] - before.epsilon)
            return (
                f"lifetime budget of dataset '{dataset}' (epsilon={limit[0]:g}, delta={limit[1]:g}) would be "
                f"exceeded: {len(charges)} earlier release(s) spent epsilon={before.epsilon:.4g} "
                f"({before.rule}); this release needs epsilon={this.epsilon:.4g}, which would make "
                f"{after.epsilon:.4g}. Budget left: epsilon={left:.4g}. Lower privacy.epsilon or stop "
                "releasing this dataset; nothing was read or spent",
                None,
                rows,
            )
        return None, (None if held else limit), rows

    def spend(self, release_id: str, stages: list[str], plan: BudgetPlan) -> list[dict]:
        """Record ``stages`` of ``release_id``'s plan as spent; call *before* drawing their
        noise. Refuses a stage already spent (its noise must never be drawn twice)."""
        if not stages:
            return []
        with self._txn() as t:
            mine = self._read(t.conn, release_id=release_id)
            last = _last_state(mine)
            if last is None or last["status"] != "reserved":
                raise LedgerError(f"release '{release_id}' has no open reservation in the ledger")
            done = {r["stage"] for r in mine if r["kind"] == "stage" and r["status"] == "spent"}
            twice = sorted(set(stages) & done)
            if twice:
                raise BudgetRefused(
                    f"release '{release_id}' already spent stage(s) {twice}; their noise is never "
                    "drawn twice. Start a new release_id"
                )
            return [
                t.append(
                    **_same_release(last),
                    kind="stage",
                    status="spent",
                    stage=s,
                    accountant=plan.notion,
                    rho=plan.stage(s).rho,
                    epsilon=plan.stage(s).epsilon,
                    delta=plan.delta if plan.notion == "zcdp" else 0.0,
                )
                for s in stages
            ]

    def mark_unprotected(self, release_id: str) -> dict | None:
        """A non-DP release's synthesis is about to start: write its ``unprotected`` stage
        row (once), from which the attempt costs ``Charge.void()``."""
        with self._txn() as t:
            mine = self._read(t.conn, release_id=release_id)
            last = _last_state(mine)
            if last is None or last["status"] != "reserved" or last["accountant"] != "void":
                raise LedgerError(f"release '{release_id}' has no open non-DP reservation in the ledger")
            if any(r["kind"] == "stage" and r["stage"] == UNPROTECTED for r in mine):
                return None
            return t.append(
                **_same_release(last),
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
            mine = self._read(t.conn, release_id=release_id)
            spent = {r["stage"] for r in mine if r["kind"] == "stage" and r["status"] == "spent"}
            unspent = sorted({m.stage for m in measurements if m.draws_noise} - spent)
            if unspent:  # the flow checks `spends` before a step: this is the last line of defence
                raise LedgerError(f"internal error: noise drawn for stage(s) {unspent} not recorded as spent")
            return [
                t.append(
                    **_same_release(mine[0]),
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
            mine = self._read(t.conn, release_id=release_id)
            last = _last_state(mine)
            if last is None or last["status"] not in open_states:
                raise LedgerError(f"release '{release_id}' has no open reservation in the ledger")
            return t.append(
                **_same_release(last),
                kind="release",
                status=status,
                **_stored(spent_charge(mine)),
                detail=detail,
            )


def _raw(conn: Connection, *where) -> list[dict]:
    """Rows as stored (``detail`` as text, as hashed), in chain order."""
    return [r._asdict() for r in conn.execute(select(ENTRIES).where(*where).order_by(ENTRIES.c.seq))]


def _tail_problems(t: _Txn) -> tuple[list[str], int]:
    """The checkpoint row still has the hash verified earlier, and every row after it
    matches its hash and links to the one before: (problems, the checkpoint's seq)."""
    conn = t.conn
    cp = conn.execute(select(CHECKPOINT.c.seq, CHECKPOINT.c.hash).where(CHECKPOINT.c.id == 1)).first()
    start = (0, GENESIS) if cp is None else (cp.seq, cp.hash)
    problems: list[str] = []
    tail = _raw(conn, ENTRIES.c.seq >= max(start[0], 1))
    prev = GENESIS
    if start[0] > 0:
        if not tail or tail[0]["seq"] != start[0] or tail[0]["hash"] != start[1]:
            problems.append(f"ledger row {start[0]} no longer has the hash verified earlier (rows rewritten)")
        prev = start[1]
        tail = tail[1:]
    for i, r in enumerate(tail, start=start[0] + 1):
        if r["seq"] != i:
            problems.append(f"ledger row {i} is missing")
            break
        if r["prev_hash"] != prev or row_hash(r) != r["hash"]:
            problems.append(f"ledger row {i} does not match its hash or the row before it (edited)")
        prev = r["hash"]
    if (t.seq, t.head) != (start[0] + len(tail), prev):
        problems.append("ledger head does not match the last row (rows removed or added at the end)")
    return problems, start[0]


def _rows_problems(t: _Txn, seqs: list[int], upto: int) -> list[str]:
    """The rows a decision read, up to the checkpoint (later ones ``_tail_problems``
    checks): each matches its hash, and its successor links to that hash."""
    seqs = sorted({s for s in seqs if s <= upto})
    if not seqs:
        return []
    rows = _raw(t.conn, ENTRIES.c.seq.in_(seqs))
    after = {
        r.seq: r.prev_hash
        for r in t.conn.execute(
            select(ENTRIES.c.seq, ENTRIES.c.prev_hash).where(ENTRIES.c.seq.in_([s + 1 for s in seqs]))
        )
    }
    return [
        f"ledger row {r['seq']} does not match its hash (edited)"
        for r in rows
        if row_hash(r) != r["hash"]
        or after.get(r["seq"] + 1, r["hash"] if r["seq"] == t.seq else None) != r["hash"]
    ] + [f"ledger row {s} is missing" for s in sorted(set(seqs) - {r["seq"] for r in rows})]


def _chain_problems_full(conn: Connection) -> list[str]:
    """Every row from the genesis, and the head (``verify_chain``, ``checkpoint``)."""
    problems, prev = [], GENESIS
    rows = _raw(conn)
    head = conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one()
    for i, r in enumerate(rows, start=1):
        if r["seq"] != i:
            problems.append(f"ledger row {i} is missing (found seq {r['seq']} in its place)")
        if r["prev_hash"] != prev:
            problems.append(f"ledger row {r['seq']}: prev_hash does not match the row before it")
        if row_hash(r) != r["hash"]:
            problems.append(f"ledger row {r['seq']}: its hash does not match its contents (edited)")
        prev = r["hash"]
    if (head.seq, head.hash) != (len(rows), prev):
        problems.append("ledger head does not match the last row (rows removed or added at the end)")
    return problems


def _set_checkpoint(t: _Txn) -> None:
    """The chain up to the head is verified: remember where (inside the same transaction)."""
    if t.conn.execute(select(CHECKPOINT.c.id)).first() is None:
        t.conn.execute(insert(CHECKPOINT).values(id=1, seq=t.seq, hash=t.head))
    else:
        t.conn.execute(update(CHECKPOINT).where(CHECKPOINT.c.id == 1).values(seq=t.seq, hash=t.head))


def _by_release(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by release_id, in chain order (rows without one, e.g. budgets, left out)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r["release_id"]:
            groups.setdefault(r["release_id"], []).append(r)
    return groups


def _same_release(row: dict) -> dict:
    """The identifying fields a new row of the same release copies."""
    return {k: row[k] for k in ("dataset", "release_id", "mechanism")}


def _last_state(rows: list[dict]) -> dict | None:
    states = [r for r in rows if r["kind"] == "release" and r["status"] in STATES]
    return states[-1] if states else None


def _rerun_refusal(release_id: str, rows: list[dict]) -> str | None:
    """Why a new attempt at ``release_id`` must not start (None: it may)."""
    last = _last_state(rows)
    if last is None:
        return None
    spent = sorted({r["stage"] for r in rows if r["kind"] == "stage" and r["status"] == "spent"})
    if last["status"] in ("released", "gated"):
        return (
            f"release '{release_id}' already exists in the ledger ({last['status']} at {last['time']}); "
            "choose another release_id"
        )
    if spent:
        return (
            f"release '{release_id}' already drew noise for stage(s) {spent} in an attempt that did not "
            "finish; drawing again would spend them twice, and this version does not resume from "
            "persisted outputs. Its spend stays charged; run again with a new release_id"
        )
    if last["status"] == "reserved" and _pid_alive(last["detail"]):
        return (
            f"release '{release_id}' is in progress since {last['time']} (host {last['detail'].get('host')}, "
            f"pid {last['detail'].get('pid')}); wait for it to finish"
        )
    return None


def _public(row: dict) -> dict:
    """A row for display and JSON: no host/pid details beyond what the row says."""
    return {k: v for k, v in row.items() if k != "prev_hash"}


def ledger_facts(ledger: Ledger, spec, release_id: str) -> dict:
    """For ``release.json``: where the spend is recorded, the rows of this release (seq and
    hash, for ``audit verify`` to find and compare), and the dataset's lifetime account
    with this release included (its whole plan is charged while it runs)."""
    rows = ledger.entries(release_id=release_id)
    lifetime = ledger.lifetime(spec.dataset.name)
    void = ledger.void_since(spec.dataset.name)
    doc = {
        "url": redact(ledger.url),
        "rows": [
            {k: r[k] for k in ("seq", "hash", "kind", "status", "stage", "statistic")}
            for r in rows
            if r["kind"] != "release" or r["status"] == "reserved"
        ],
        "dataset_guarantee": {
            "void_since": void,
            "statement": (
                f"VOID: release '{void['release_id']}' of this dataset was not differentially private, so no "
                "composed (epsilon, delta) guarantee holds for the dataset since then; this release's own "
                "guarantee is stated above but does not compose with that one"
                if void
                else "every release of this dataset in the ledger so far was differentially private"
            ),
        },
        "lifetime": None,
    }
    if lifetime is not None:
        spend = ledger.spend_so_far(spec.dataset.name, lifetime[1])
        doc["lifetime"] = {
            "epsilon": lifetime[0],
            "delta": lifetime[1],
            "spent_epsilon": spend.epsilon,
            "spent_delta": spend.delta,
            "left_epsilon": max(0.0, lifetime[0] - spend.epsilon),
            "rule": spend.rule,
            "releases_counted": ledger.charged_releases(spec.dataset.name),
        }
    return doc
