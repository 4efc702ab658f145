"""The ledger's database: its tables, the canonical row hash, the connection (SQLite
by default, PostgreSQL by URL, via SQLAlchemy) and the locked write transaction.

Every row stores sha256(previous row's hash ‖ canonical JSON of its own fields)
(``row_hash``). All writes are serialised on one lock (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE`` of the chain head, ``transaction``).

The URL is read by ``ledger.url.parse_url`` (as its driver reads it; the password taken
out, every other secret refused) before a connection is made. A SQLite ledger file is
created private (0600; SQLite gives its journal files the file's mode) and waits at most
``LOCK_WAIT`` seconds for another process's lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    select,
    update,
)
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from dprelease.ledger.errors import BudgetRefused, LedgerError, LedgerLocked, NoLedger
from dprelease.ledger.format import check_writable, software, stored_format
from dprelease.ledger.url import PASSWORD_ENV, parse_url

__all__ = [
    "CHECKPOINT",
    "ENTRIES",
    "FIELDS",
    "GENESIS",
    "HEAD",
    "LOCK_WAIT",
    "METADATA",
    "PASSWORD_ENV",
    "BudgetRefused",
    "LedgerError",
    "LedgerLocked",
    "NoLedger",
    "Txn",
    "driver_error",
    "now",
    "open_engine",
    "open_problem",
    "raw_rows",
    "row_hash",
    "transaction",
]

GENESIS = "0" * 64

LOCK_WAIT = 30.0  # seconds a SQLite ledger waits for another process's lock (a release holds it < 1 s)


METADATA = MetaData()

HEAD = Table(
    "ledger_head",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)


CHECKPOINT = Table(  # the last row a reservation verified the chain up to
    "ledger_checkpoint",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)


ENTRIES = Table(
    "ledger_entries",
    METADATA,
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


def row_hash(row: dict) -> str:
    """sha256 of the previous hash and the row's canonical JSON (sorted keys, floats as
    their shortest round-trip repr, no NaN); the ``hash`` field itself is excluded."""
    body = json.dumps(
        {k: row[k] for k in FIELDS if k != "hash"}, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return hashlib.sha256((row["prev_hash"] + body).encode()).hexdigest()


def now() -> datetime:
    """The ledger's clock (UTC): the time of every row a transaction writes, and so the
    period a reservation falls in. Tests replace it to place releases in time."""
    return datetime.now(UTC)


def open_engine(url: str, create: bool, password: str | None = None) -> Engine:
    """An engine on the ledger at ``url`` (``parse_url``), with ``password`` if given, else
    the URL's. A SQLite ledger ignores passwords; its file is created private
    (``_private_file``) when ``create``, and it waits ``LOCK_WAIT`` seconds at most for
    another process's lock, then raises ``LedgerLocked``."""
    given = parse_url(url)
    if given.safe.get_backend_name() == "sqlite":
        return _sqlite_engine(given.safe, create)
    secret = password if password is not None else given.password
    try:
        return create_engine(given.safe.set(password=secret), pool_pre_ping=True)
    except ArgumentError:  # SQLAlchemy's multi-host form, e.g. ?port= that is not a number
        raise LedgerError(
            f"the ledger URL ({given.url}) cannot be used: write its hosts and ports as "
            "?host=H1:P1&host=H2:P2 or ?host=H1,H2&port=P1,P2"
        ) from None


def _sqlite_engine(parsed: URL, create: bool) -> Engine:
    """``parsed`` holds no password (``parse_url``'s ``safe``): it may be shown."""
    shown = parsed.render_as_string(hide_password=False)
    if parsed.database and parsed.database != ":memory:":
        path = Path(parsed.database)
        if not path.is_file():
            if not create:
                raise NoLedger(f"there is no ledger at {shown}; pass the --ledger the releases used")
            _private_file(path)
    engine = create_engine(parsed, connect_args={"timeout": LOCK_WAIT})
    where = parsed.database or ":memory:"

    @event.listens_for(engine, "connect")
    def _manual_transactions(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves

    @event.listens_for(engine, "begin")
    def _write_lock(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, taken before any read

    @event.listens_for(engine, "handle_error")
    def _locked(context) -> None:
        code = getattr(context.original_exception, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == sqlite3.SQLITE_BUSY:  # the busy timeout ran out
            raise LedgerLocked(
                f"the ledger at {where} is locked by another process (another release or a backup) and "
                f"was still locked after {LOCK_WAIT:g} s; run again once that process has finished"
            )

    return engine


def _private_file(path: Path) -> None:
    """Create the empty SQLite file ``path`` with mode 0600 whatever the umask (SQLite
    gives its -journal, -wal and -shm files the database file's mode), and the folders it
    needs with 0700; folders that exist keep their mode."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            continue
        folder.chmod(0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it meanwhile
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


@dataclass
class Txn:
    """One write transaction; every row it appends has its ``time`` (read once, ``now``)."""

    conn: Connection
    seq: int
    head: str
    time: str = field(default_factory=lambda: now().isoformat())

    def append(self, **fields: Any) -> dict[str, Any]:
        row: dict[str, Any] = {k: fields.get(k) for k in FIELDS}
        for k in _FLOATS:  # the database returns doubles: hash what it will return
            row[k] = None if row[k] is None else float(row[k])
        row.update(seq=self.seq + 1, time=self.time, prev_hash=self.head)
        detail = {**(fields.get("detail") or {}), "software": software()}
        row["detail"] = json.dumps(detail, sort_keys=True, allow_nan=False)
        row["hash"] = row_hash(row)
        self.conn.execute(insert(ENTRIES).values(**row))
        self.conn.execute(update(HEAD).where(HEAD.c.id == 1).values(seq=row["seq"], hash=row["hash"]))
        self.seq, self.head = int(row["seq"]), str(row["hash"])
        return row


def driver_error(e: SQLAlchemyError) -> str:
    """The database driver's error type (SQLAlchemy wraps it as ``.orig``), never its text."""
    return type(getattr(e, "orig", None) or e).__name__


# libpq's words when the server refused the login (password wrong, or none sent)
_AUTH_FAILED = re.compile(r"authentication failed|no password supplied", re.IGNORECASE)


def open_problem(e: SQLAlchemyError, url: str) -> str:
    """Why the ledger at ``url`` (which ``parse_url`` reads) could not be opened, for a
    message: that PostgreSQL refused the login (naming the user, host and port, and where the
    password goes), else the driver's error type. The driver's text is read to tell which,
    never shown (it may quote the URL)."""
    parsed = parse_url(url).safe
    if parsed.get_backend_name() != "postgresql" or not _AUTH_FAILED.search(str(e)):
        return f"cannot be opened ({driver_error(e)}); check --ledger and that the database is reachable"
    where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    return (
        f"cannot be opened: authentication failed for user {parsed.username or '(default)'} at {where} "
        f"(set the password in PGPASSFILE or {PASSWORD_ENV}, never in the URL)"
    )


def raw_rows(conn: Connection, *where) -> list[dict]:
    """Rows as stored (``detail`` as text, as hashed), in chain order."""
    return [r._asdict() for r in conn.execute(select(ENTRIES).where(*where).order_by(ENTRIES.c.seq))]


@contextmanager
def transaction(engine: Engine, shown: str, *, migrating: bool = False) -> Iterator[Txn]:
    """The one write lock: a transaction holding the chain head (``FOR UPDATE`` on
    PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` is taken on ``begin``), on a ledger of this
    code's format (``ledger.format.check_writable``, under the lock) unless ``migrating``
    it there. ``shown``: the ledger's URL as a message shows it (``shown_url``)."""
    try:
        with engine.begin() as conn:
            q = select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)
            if engine.dialect.name == "postgresql":
                q = q.with_for_update()
            seq, head = conn.execute(q).one()
            if not migrating:
                check_writable(stored_format(conn), shown)
            yield Txn(conn, seq, head)
    except SQLAlchemyError as e:
        raise LedgerError(
            f"writing to the ledger at {shown} failed ({driver_error(e)}); nothing further was drawn"
        ) from None
