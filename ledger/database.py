"""The ledger's database: its tables, the canonical row hash, the connection (SQLite
by default, PostgreSQL by URL, via SQLAlchemy), the locked write transaction, and the
URL helpers that keep a password out of anything Prefect stores.

Every row stores sha256(previous row's hash ‖ canonical JSON of its own fields)
(``row_hash``). All writes are serialised on one lock (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE`` of the chain head, ``transaction``).

A ledger URL is read once (``parse_url``): its password (user info or ``?password=``)
is taken out before the URL goes anywhere, and a URL that names another secret
(``?passfile=``, ``?sslpassword=``) is refused. Messages show URLs through ``redact``,
which never prints a secret, even of a string that is not a URL. A SQLite ledger file is
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
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from dprelease.mechanisms.errors import BudgetError, DPReleaseError

__all__ = [
    "CHECKPOINT",
    "ENTRIES",
    "FIELDS",
    "GENESIS",
    "HEAD",
    "LOCK_WAIT",
    "METADATA",
    "PASSWORD_ENV",
    "SECRET_KEYS",
    "BudgetRefused",
    "LedgerError",
    "LedgerLocked",
    "LedgerURL",
    "NoLedger",
    "Txn",
    "default_url",
    "driver_error",
    "ledger_url",
    "now",
    "open_engine",
    "open_problem",
    "parse_url",
    "raw_rows",
    "redact",
    "row_hash",
    "split_password",
    "transaction",
    "url_password",
]

GENESIS = "0" * 64


PASSWORD_ENV = "DPRELEASE_LEDGER_PASSWORD"  # the ledger database's password, never in a URL Prefect sees

SECRET_KEYS = ("password", "passfile", "sslpassword")  # libpq's URL keys that hold or point to a secret

_ELSEWHERE = {  # where a secret other than the password goes instead of the URL
    "passfile": "set PGPASSFILE in the environment instead (libpq reads it)",
    "sslpassword": "put it in a libpq service file entry (PGSERVICEFILE, then ?service=NAME) or use a "
    "client key without a passphrase",
}

_SECRET_VALUE = re.compile(rf"(?i)\b({'|'.join(SECRET_KEYS)})\s*=[^&;#]*")

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


class LedgerError(DPReleaseError):
    """The ledger cannot be reached or used."""


class NoLedger(LedgerError):
    """The database holds no ledger yet (opened with ``create=False``)."""


class LedgerLocked(LedgerError):
    """Another process held the SQLite ledger's lock for longer than ``LOCK_WAIT``."""


class BudgetRefused(BudgetError):
    """The ledger refused a release (lifetime budget, or a rerun that would spend twice);
    nothing was read and nothing was spent."""


def default_url(out_dir: Path | str) -> str:
    """``sqlite:///<out>/ledger.db`` (absolute)."""
    return f"sqlite:///{Path(out_dir).resolve() / 'ledger.db'}"


def ledger_url(given: str | None, out_dir: Path | str) -> str:
    """The ledger as a steward names it: a database URL (``sqlite:///…``,
    ``postgresql+psycopg://…``), a path to a SQLite ledger file, a folder that holds
    ``ledger.db`` (a release's ``--out``), or nothing: ``<out_dir>/ledger.db``. A database
    URL missing its ``//``, or a libpq ``key=value`` string with a secret, is refused, not
    taken for a path (which a bundle would publish).

    >>> ledger_url("postgresql+psycopg://me@db/ledger", "releases")
    'postgresql+psycopg://me@db/ledger'
    >>> ledger_url("/srv/releases/ledger.db", "releases")
    'sqlite:////srv/releases/ledger.db'
    """
    if not given:
        return default_url(out_dir)
    if "://" in given:
        return given
    if re.match(r"(sqlite|postgres(ql)?)(\+\w+)?:", given, re.IGNORECASE) or _SECRET_VALUE.search(given):
        raise LedgerError(
            f"--ledger ({redact(given)}) must be a database URL written scheme://…, e.g. "
            "sqlite:///path/ledger.db or postgresql+psycopg://user@host/db, or a path"
        )
    path = Path(given).expanduser()
    return default_url(path) if path.is_dir() else f"sqlite:///{path.resolve()}"


@dataclass(frozen=True)
class LedgerURL:
    """A ledger URL read once (``parse_url``): ``safe`` holds no secret (what Prefect's
    parameters, bundles and messages may hold); ``password`` travels apart
    (``PASSWORD_ENV``, a Prefect Secret block)."""

    safe: URL
    password: str | None = field(repr=False)

    @property
    def url(self) -> str:
        return self.safe.render_as_string(hide_password=False)


def _read(url: str) -> URL | None:
    """SQLAlchemy's reading of ``url``; None when it is not a URL, or when its host holds
    '@' (an unencoded '@' in the password: the rest would show as the host)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # e.g. a port that is not a number
        return None
    return None if "@" in (parsed.host or "") else parsed


def _secret_keys(parsed: URL) -> list[str]:
    return [k for k in parsed.query if k.lower() in SECRET_KEYS]


def parse_url(url: str) -> LedgerURL:
    """``url`` split into the URL without its password and the password, given either as
    user info (``user:PW@``) or as ``?password=PW``. Raises ``LedgerError`` (showing the
    URL redacted) for a string that is not a database URL, for a password given twice, and
    for ``?passfile=`` / ``?sslpassword=``, which are refused rather than carried: libpq
    reads the pass file from PGPASSFILE, and a key's passphrase belongs in a service file.

    >>> given = parse_url("postgresql+psycopg://alice@db.example/ledger?password=s3cret&sslmode=require")
    >>> given.url, given.password
    ('postgresql+psycopg://alice@db.example/ledger?sslmode=require', 's3cret')
    """
    parsed = _read(url)
    if parsed is None:
        raise LedgerError(
            f"ledger URL ({redact(url)}) must be a database URL such as sqlite:///path/ledger.db or "
            "postgresql+psycopg://user@host/db (write '@', ':' or '/' in a user name or password as %40, "
            "%3A, %2F)"
        )
    keys = _secret_keys(parsed)
    for key in keys:
        if key.lower() in _ELSEWHERE:
            raise LedgerError(
                f"ledger URL ({redact(url)}) must not hold {key} (Prefect stores the URL and the bundle "
                f"publishes it); {_ELSEWHERE[key.lower()]}"
            )
    given = [parsed.password] if parsed.password is not None else []
    for key in keys:
        value = parsed.query[key]
        given += [value] if isinstance(value, str) else list(value)
    if len(given) > 1:
        raise LedgerError(f"ledger URL ({redact(url)}) must give the password once, not {len(given)} times")
    safe = parsed._replace(username=parsed.username or None, password=None).difference_update_query(keys)
    return LedgerURL(safe, None if not given else str(given[0]))


def redact(url: str) -> str:
    """``url`` as messages and bundles show it: every secret (user info's password, the
    values of ``SECRET_KEYS``) as ``***``. A string SQLAlchemy cannot read is masked
    (``_masked``), never shown as given.

    >>> redact("postgresql+psycopg://alice:s3cret@db.example/ledger")
    'postgresql+psycopg://alice:***@db.example/ledger'
    >>> redact("postgresql+psycopg://alice@db.example/ledger?sslmode=require&password=s3cret")
    'postgresql+psycopg://alice@db.example/ledger?sslmode=require&password=***'
    >>> redact("postgresql+psycopg://alice:s3cret@db.example:notaport/ledger")
    'postgresql+psycopg://alice:***@db.example:notaport/ledger'
    """
    parsed = _read(url)
    if parsed is None:
        return _masked(url)
    keys = _secret_keys(parsed)
    shown = parsed.difference_update_query(keys).render_as_string(hide_password=True)
    hidden = "&".join(f"{k}=***" for k in keys)
    return shown if not hidden else f"{shown}{'&' if parsed.query.keys() - set(keys) else '?'}{hidden}"


def _masked(text: str) -> str:
    """``text``, which SQLAlchemy cannot read as a URL, with all that may be a secret
    masked: every ``SECRET_KEYS`` value, and all from the first ':' after the scheme's
    ``://`` (or from the first ':', without one) to the last '@'."""
    text = _SECRET_VALUE.sub(r"\1=***", text)
    start = text.find("://") + 3 if "://" in text else 0
    colon, at = text.find(":", start), text.rfind("@")
    return f"{text[: colon + 1]}***{text[at:]}" if 0 <= colon < at else text


def split_password(url: str) -> tuple[str, str | None]:
    """(the URL with no password in it, the password or None): what may be handed to
    Prefect as a parameter, and what must travel another way (``PASSWORD_ENV``, a Prefect
    Secret block). ``parse_url`` as a pair; it raises what ``parse_url`` raises.

    >>> split_password("postgresql+psycopg://alice:s3cret@db.example/ledger")
    ('postgresql+psycopg://alice@db.example/ledger', 's3cret')
    >>> split_password("sqlite:////srv/releases/ledger.db")
    ('sqlite:////srv/releases/ledger.db', None)
    """
    given = parse_url(url)
    return given.url, given.password


def url_password(url: str) -> str | None:
    """The password written in ``url`` (user info or ``?password=``), if any; None for a
    string ``parse_url`` refuses (opening it names the problem)."""
    try:
        return parse_url(url).password
    except LedgerError:
        return None


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
    secret = password if password is not None else given.password
    backend = given.safe.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(given.safe, create)
    if backend == "postgresql":
        parsed = given.safe if secret is None else given.safe.set(password=secret)
        return create_engine(parsed, pool_pre_ping=True)
    raise LedgerError(f"ledger URL ({given.url}) must be sqlite or postgresql")


def _sqlite_engine(parsed: URL, create: bool) -> Engine:
    """``parsed`` holds no password (``parse_url``'s ``safe``): it may be shown."""
    shown = parsed.render_as_string(hide_password=False)
    if parsed.database and parsed.database != ":memory:":
        path = Path(parsed.database)
        if not path.is_file():
            if not create:
                raise NoLedger(f"there is no ledger at {shown}; pass the --ledger the releases used")
            _private_file(path)
    try:
        engine = create_engine(parsed, connect_args={"timeout": LOCK_WAIT})
    except ArgumentError:  # e.g. a user name or host in a SQLite URL
        raise LedgerError(
            f"ledger URL ({shown}) must be a SQLite URL such as sqlite:///path/ledger.db (no user name, "
            "password or host)"
        ) from None
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
        row["detail"] = json.dumps(fields.get("detail") or {}, sort_keys=True, allow_nan=False)
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
    """Why the ledger at ``url`` could not be opened, for a message: that PostgreSQL refused
    the login (naming the user, host and port, and where the password goes), else the driver's
    error type. The driver's text is read to tell which, never shown (it may quote the URL)."""
    parsed = _read(url)
    if parsed is None or parsed.get_backend_name() != "postgresql" or not _AUTH_FAILED.search(str(e)):
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
