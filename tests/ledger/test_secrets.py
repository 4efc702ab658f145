"""Issue 30, item 2, and issue 38: the ledger's secrets and its SQLite file. A password in a
ledger URL (user info or ``?password=``) is taken out once (``parse_url``) and never shown;
``?passfile=`` / ``?sslpassword=``, and every key libpq would read as the password but
``password`` itself, are refused; a string that is not a URL is never shown; a SQLite ledger
is created 0600 (its journal files too) whatever the umask; a locked SQLite ledger says so
after ``LOCK_WAIT`` seconds, not after minutes. The properties over every placement and
encoding are in test_url_properties.py."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from dprelease.ledger import (
    LOCK_WAIT,
    PASSWORD_ENV,
    Ledger,
    LedgerError,
    LedgerLocked,
    ledger_facts,
    ledger_url,
    parse_url,
    shown_url,
    split_password,
)
from dprelease.ledger import database as ledger_database
from tests.helpers import PURE_PLAN as PURE

MARK = "PW-MARKER-7f3a"
PG = "postgresql+psycopg://alice{}@db.example:5432/ledger"

# the password in each form a ledger URL takes it; every one connects with MARK
CARRIED = {
    "userinfo": PG.format(f":{MARK}"),
    "query": PG.format("") + f"?sslmode=require&password={MARK}",
    "userinfo, percent-encoded": PG.format(":PW-MARKER%2D7f3a"),
    "query, percent-encoded key": PG.format("") + f"?pass%77ord={MARK}",
}

# strings that are refused; none may be echoed with MARK
REFUSED = {
    "sslpassword": (PG.format("") + f"?sslpassword={MARK}", "sslpassword"),
    "passfile": (PG.format("") + f"?passfile=/home/alice/{MARK}", "PGPASSFILE"),
    "password twice": (PG.format(":first") + f"?password={MARK}", "password once"),
    "malformed port": (f"postgresql+psycopg://alice:{MARK}@db.example:notaport/ledger", "database URL"),
    "malformed port, query": (
        f"postgresql+psycopg://alice@db.example:notaport/ledger?password={MARK}",
        "database URL",
    ),
    "unencoded @": (f"postgresql+psycopg://alice:x@{MARK}@db.example/ledger", "%40"),
    "unencoded @ and /": (f"postgresql+psycopg://alice:x@PW/{MARK}@db.example/ledger", "%40"),
    "no scheme separator": (f"postgresql+psycopg//alice:{MARK}@db.example/ledger", "database URL"),
    # issue 38: libpq trims ASCII whitespace around a key, so each of these is the password
    "key with a trailing space": (PG.format("") + f"?password%20={MARK}", "libpq reads as password"),
    "key with a leading space": (PG.format("") + f"?%20password={MARK}", "libpq reads as password"),
    "key with a trailing '+'": (PG.format("") + f"?password+={MARK}", "libpq reads as password"),
    "key with a tab": (PG.format("") + f"?password%09={MARK}", "libpq reads as password"),
    "key holding a second key": (
        PG.format("") + f"?sslmode%3Ddisable%20password={MARK}",
        "libpq reads as password and sslmode",
    ),
    "upper-case key": (PG.format("") + f"?PASSWORD={MARK}", "not a libpq keyword"),
    "sslkey": (PG.format("") + f"?sslkey=/home/alice/{MARK}", "PGSSLKEY"),
    "unknown key": (PG.format("") + f"?passwd={MARK}", "must not hold ?passwd="),
    "twice in the query": (PG.format("") + f"?password=x&password={MARK}", "password once"),
    "NUL in the password": (PG.format(f":{MARK}%00x"), "NUL"),
    "another driver": (f"postgresql://alice:{MARK}@db.example/ledger", "postgresql+psycopg://"),
    "SQLite, padded key": (f"sqlite:////tmp/ledger.db?password%20={MARK}", "SQLite ledger URL takes no"),
    "SQLite, a host": (f"sqlite://alice:{MARK}@host/tmp/ledger.db", "names a file only"),
}


@pytest.mark.parametrize("url", CARRIED.values(), ids=CARRIED.keys())
def test_the_password_is_taken_out_in_every_form(url):
    given = parse_url(url)
    assert given.password == MARK
    assert MARK not in given.url and "7f3a" not in given.url and MARK not in repr(given)
    assert given.url.startswith("postgresql+psycopg://alice@db.example:5432/ledger")
    assert shown_url(url) == given.url
    assert split_password(url) == (given.url, MARK)


def test_what_is_not_secret_stays_in_the_url():
    given = parse_url(CARRIED["query"])
    assert given.url == "postgresql+psycopg://alice@db.example:5432/ledger?sslmode=require"
    assert shown_url(CARRIED["query"]) == given.url


@pytest.mark.parametrize(("url", "names"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_url_is_never_echoed(url, names):
    """The message names what to change; it and ``shown_url`` show nothing of a secret."""
    with pytest.raises(LedgerError, match=re.escape(names)) as e:
        parse_url(url)
    assert MARK not in str(e.value)
    assert MARK not in shown_url(url)


@pytest.mark.parametrize(("url", "names"), REFUSED.values(), ids=REFUSED.keys())
def test_opening_a_refused_url_never_echoes_it(url, names):
    with pytest.raises(LedgerError) as e:
        Ledger(url)
    assert MARK not in str(e.value)


def test_an_unreachable_database_never_echoes_the_password():
    """Nothing listens on port 1 of loopback: the connection fails, and the message
    names the ledger with the password masked."""
    url = f"postgresql+psycopg://alice@127.0.0.1:1/ledger?password={MARK}"
    with pytest.raises(LedgerError, match="cannot be opened") as e:
        Ledger(url)
    assert MARK not in str(e.value) and "postgresql+psycopg://alice@127.0.0.1:1/ledger " in str(e.value)


@pytest.mark.parametrize(
    "given",
    [f"postgresql+psycopg:/alice:{MARK}@db.example/ledger", f"host=db.example password={MARK} dbname=ledger"],
    ids=["missing //", "libpq key=value"],
)
def test_a_url_that_is_not_written_as_one_is_not_taken_for_a_path(tmp_path, monkeypatch, given):
    """Taken for a path, it would become a SQLite file under the working folder, its
    name (password included) published in the bundle."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError, match="scheme://") as e:
        ledger_url(given, tmp_path)
    assert MARK not in str(e.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("form", ["?password=", "user info"])
def test_a_sqlite_ledger_ignores_a_password_and_never_publishes_it(tmp_path, form):
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}?password={MARK}" if form == "?password=" else f"sqlite://:{MARK}@/{db}"
    with Ledger(url) as led:
        led.reserve(dataset="d", release_id="r", mechanism="m", plan=PURE, lifetime=None)
        facts = ledger_facts(led, "d", "r")
    assert MARK not in str(facts) and db.is_file()
    assert parse_url(url).url == f"sqlite:///{db}"


def test_a_password_in_the_environment_does_not_stop_a_sqlite_ledger(tmp_path, monkeypatch):
    """DPRELEASE_LEDGER_PASSWORD set for a PostgreSQL ledger elsewhere: a SQLite ledger
    still opens (SQLite has no password; SQLAlchemy refuses one in a SQLite URL)."""
    monkeypatch.setenv(PASSWORD_ENV, MARK)
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        assert led.releases() == []


# ------------------------------------------------------------------ the SQLite file


@pytest.fixture(params=[0o000, 0o022], ids=lambda u: f"umask{u:03o}")
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _write(led: Ledger, check) -> None:
    """A write transaction that calls ``check`` while SQLite's journal file exists."""
    with led._txn() as t:
        t.append(kind="budget", status="set", dataset="d", epsilon=1.0, delta=0.0)
        check()


@pytest.mark.usefixtures("umask")
def test_a_new_sqlite_ledger_is_private_and_its_folder_unchanged(tmp_path):
    """The file and its rollback journal are 0600; a folder that existed keeps its mode;
    a folder the ledger needed is 0700."""
    tmp_path.chmod(0o755)
    db = tmp_path / "made" / "ledger.db"
    with Ledger(f"sqlite:///{db}") as led:
        _write(led, lambda: _assert_files(db, {"ledger.db", "ledger.db-journal"}))
    assert _mode(db) == 0o600 and _mode(db.parent) == 0o700 and _mode(tmp_path) == 0o755


@pytest.mark.usefixtures("umask")
def test_a_sqlite_ledger_in_wal_mode_keeps_its_files_private(tmp_path):
    """A ledger switched to WAL (e.g. by an operator): -wal and -shm are 0600 too."""
    db = tmp_path / "ledger.db"
    Ledger(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA journal_mode=WAL")
    with Ledger(f"sqlite:///{db}") as led:
        _write(led, lambda: _assert_files(db, {"ledger.db", "ledger.db-wal", "ledger.db-shm"}))


def _assert_files(db: Path, names: set[str]) -> None:
    modes = {p.name: _mode(p) for p in db.parent.iterdir()}
    assert modes == dict.fromkeys(names, 0o600), {k: oct(v) for k, v in modes.items()}


# ------------------------------------------------------------------ a locked SQLite ledger


def test_the_lock_wait_is_bounded(tmp_path):
    """The busy timeout is ``LOCK_WAIT`` (seconds, well above the < 1 s a release holds
    the lock, far below minutes)."""
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led, led.engine.connect() as c:
        assert c.execute(text("PRAGMA busy_timeout")).scalar_one() == LOCK_WAIT * 1000
    assert 5 <= LOCK_WAIT <= 60


@pytest.mark.parametrize("when", ["opening", "writing"])
def test_a_locked_sqlite_ledger_says_it_is_locked(tmp_path, monkeypatch, when):
    """Another process holds the lock (here another connection, as a release or a backup
    would): the ledger waits LOCK_WAIT, then says the ledger is locked, naming its file."""
    monkeypatch.setattr(ledger_database, "LOCK_WAIT", 0.5)
    db = tmp_path / "ledger.db"
    url = f"sqlite:///{db}"
    Ledger(url).close()
    led = Ledger(url) if when == "writing" else None
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    try:
        with pytest.raises(LedgerLocked, match="locked by another process") as e:
            if led is None:
                Ledger(url, create=False)
            else:
                led.reserve(dataset="d", release_id="r", mechanism="m", plan=PURE, lifetime=None)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert time.monotonic() - started < 10
    assert str(db) in str(e.value) and "another release or a backup" in str(e.value)
    if led is not None:
        assert led.releases() == []  # nothing was written
        led.close()
