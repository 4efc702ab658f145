"""The ledger's database: its tables, the canonical row hash, the connection (SQLite
by default, PostgreSQL by URL, via SQLAlchemy), the locked write transaction, and the
URL helpers that keep a password out of anything Prefect stores.

Every row stores sha256(previous row's hash ‖ canonical JSON of its own fields)
(``row_hash``). All writes are serialised on one lock (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE`` of the chain head, ``transaction``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from mechanisms.errors import BudgetError, DPReleaseError

__all__ = [
    "CHECKPOINT",
    "ENTRIES",
    "FIELDS",
    "GENESIS",
    "HEAD",
    "METADATA",
    "PASSWORD_ENV",
    "BudgetRefused",
    "LedgerError",
    "NoLedger",
    "Txn",
    "default_url",
    "driver_error",
    "ledger_url",
    "open_engine",
    "raw_rows",
    "redact",
    "row_hash",
    "split_password",
    "transaction",
    "url_password",
]

GENESIS = "0" * 64


PASSWORD_ENV = "DPRELEASE_LEDGER_PASSWORD"  # the ledger database's password, never in a URL Prefect sees


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


class LedgerError(DPReleaseError):
    """The ledger cannot be reached or used."""


class NoLedger(LedgerError):
    """The database holds no ledger yet (opened with ``create=False``)."""


class BudgetRefused(BudgetError):
    """The ledger refused a release (lifetime budget, or a rerun that would spend twice);
    nothing was read and nothing was spent."""


def default_url(out_dir: Path | str) -> str:
    """``sqlite:///<out>/ledger.db`` (absolute)."""
    return f"sqlite:///{Path(out_dir).resolve() / 'ledger.db'}"


def ledger_url(given: str | None, out_dir: Path | str) -> str:
    """The ledger as a steward names it: a database URL (``sqlite:///…``,
    ``postgresql+psycopg://…``), a path to a SQLite ledger file, a folder that holds
    ``ledger.db`` (a release's ``--out``), or nothing: ``<out_dir>/ledger.db``.

    >>> ledger_url("postgresql+psycopg://me@db/ledger", "releases")
    'postgresql+psycopg://me@db/ledger'
    >>> ledger_url("/srv/releases/ledger.db", "releases")
    'sqlite:////srv/releases/ledger.db'
    """
    if not given:
        return default_url(out_dir)
    if "://" in given:
        return given
    path = Path(given).expanduser()
    return default_url(path) if path.is_dir() else f"sqlite:///{path.resolve()}"


def redact(url: str) -> str:
    """The URL without its password, for bundles and messages.

    >>> redact("postgresql+psycopg://alice:s3cret@db.example/ledger")
    'postgresql+psycopg://alice:***@db.example/ledger'
    """
    return make_url(url).render_as_string(hide_password=True)


def split_password(url: str) -> tuple[str, str | None]:
    """(the URL with no password in it, the password or None): what may be handed to
    Prefect as a parameter, and what must travel another way (``PASSWORD_ENV``, a Prefect
    Secret block).

    >>> split_password("postgresql+psycopg://alice:s3cret@db.example/ledger")
    ('postgresql+psycopg://alice@db.example/ledger', 's3cret')
    >>> split_password("sqlite:////srv/releases/ledger.db")
    ('sqlite:////srv/releases/ledger.db', None)
    """
    try:
        parsed = make_url(url)
    except Exception:
        return url, None  # not a URL: _engine names the problem
    if parsed.password is None:
        return url, None
    return parsed._replace(password=None).render_as_string(hide_password=False), str(parsed.password)


def url_password(url: str) -> str | None:
    """The password written in ``url``, if any (None for a string that is not a URL)."""
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


def open_engine(url: str, create: bool, password: str | None = None) -> Engine:
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
                raise NoLedger(f"there is no ledger at {url}; pass the --ledger the releases used")
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
class Txn:
    conn: Connection
    seq: int
    head: str

    def append(self, **fields: Any) -> dict[str, Any]:
        row: dict[str, Any] = {k: fields.get(k) for k in FIELDS}
        for k in _FLOATS:  # the database returns doubles: hash what it will return
            row[k] = None if row[k] is None else float(row[k])
        row.update(seq=self.seq + 1, time=_now(), prev_hash=self.head)
        row["detail"] = json.dumps(fields.get("detail") or {}, sort_keys=True, allow_nan=False)
        row["hash"] = row_hash(row)
        self.conn.execute(insert(ENTRIES).values(**row))
        self.conn.execute(update(HEAD).where(HEAD.c.id == 1).values(seq=row["seq"], hash=row["hash"]))
        self.seq, self.head = int(row["seq"]), str(row["hash"])
        return row


def driver_error(e: SQLAlchemyError) -> str:
    """The database driver's error type (SQLAlchemy wraps it as ``.orig``), never its text."""
    return type(getattr(e, "orig", None) or e).__name__


def raw_rows(conn: Connection, *where) -> list[dict]:
    """Rows as stored (``detail`` as text, as hashed), in chain order."""
    return [r._asdict() for r in conn.execute(select(ENTRIES).where(*where).order_by(ENTRIES.c.seq))]


@contextmanager
def transaction(engine: Engine, redacted: str) -> Iterator[Txn]:
    """The one write lock: a transaction holding the chain head (``FOR UPDATE`` on
    PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` is taken on ``begin``)."""
    try:
        with engine.begin() as conn:
            q = select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)
            if engine.dialect.name == "postgresql":
                q = q.with_for_update()
            seq, head = conn.execute(q).one()
            yield Txn(conn, seq, head)
    except SQLAlchemyError as e:
        raise LedgerError(
            f"writing to the ledger at {redacted} failed ({driver_error(e)}); nothing further was drawn"
        ) from None
