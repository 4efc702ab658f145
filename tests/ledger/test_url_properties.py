"""Issue 38, defect 1: "a secret is whatever the driver would use". The ledger URL is read by
SQLAlchemy and, for PostgreSQL, handed to psycopg, which writes it as libpq text for libpq's
own parser; libpq trims whitespace around a key (``?password%20=`` is the password). These
properties hold ``ledger.url`` to what the driver does, with the driver itself as the oracle
(``_driver_view``: SQLAlchemy's psycopg dialect, psycopg's ``make_conninfo``, libpq's
``PQconninfoParse``), over every placement and encoding of a marker password:

* a marker placed where a secret goes (user info, the value of any key libpq would read as
  a secret, of a key it would not read at all, of a key written with spaces, tabs, '+',
  percent-encoding, another case, twice, or holding a second key) is either refused, by a
  message that does not hold it, or taken out as the password: it is then in no URL that
  is kept or shown, and the driver reads the kept URL plus that password exactly as it
  reads what was given;
* any string at all that ``parse_url`` accepts is rebuilt into a URL the driver reads the
  same, that reads back as itself, and that holds no libpq secret.

``DPRELEASE_PROPERTY_SCALE=50 .venv/bin/python -m pytest -m property tests/ledger`` runs them
long. The end-to-end property (the real CLI, Prefect, the bundle) is in
tests/flows/test_ledger_secrets.py.
"""

from __future__ import annotations

import inspect
import random
import re
import string

import psycopg
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from dprelease.ledger import Ledger, LedgerError, ledger_url, parse_url, shown_url
from dprelease.ledger.database import open_problem
from dprelease.ledger.url import ALLOWED_KEYS
from tests.properties import property_settings

pytestmark = pytest.mark.property

# The driver's own word on what is a secret: libpq marks a password-like option with '*';
# the others hold a secret too (SCRAM keys), say where one is (a pass file, a client key), or
# write one out (TLS key log).
LIBPQ_SECRETS = {o.keyword.decode() for o in pq.Conninfo.get_defaults() if o.dispchar == b"*"} | {
    "passfile",
    "sslkey",
    "sslkeylogfile",
    "scram_client_key",
    "scram_server_key",
}
_DIALECT = create_engine("postgresql+psycopg://").dialect  # makes no connection
_PSYCOPG_OWN = set(inspect.signature(psycopg.Connection.connect).parameters) - {"conninfo", "kwargs"}

PG = "postgresql+psycopg://alice{userinfo}@db.example:5432/ledger"
SQLITE = "sqlite://{userinfo}/{db}"
SAFE = string.ascii_letters + string.digits + "-._~"  # a URL's unreserved characters
SPACES = [" ", "\t", "\n", "\r", "\x0b", "\x0c"]  # what C's isspace() skips around a libpq key
BENIGN = {"sslmode": "require", "connect_timeout": "5", "application_name": "dp", "host": "db2.example"}
_KINDS = st.sampled_from(["password", "secret", "word", "two keys"])
_WORDS = st.from_regex(r"[A-Za-z_]{1,14}", fullmatch=True).filter(lambda k: k not in ALLOWED_KEYS)
_BENIGN_KEYS = st.sampled_from(sorted(BENIGN))
_SPACE = st.sampled_from(SPACES)
_SECRETS = st.sampled_from(sorted(LIBPQ_SECRETS))
_OTHER_SECRETS = st.sampled_from(sorted(LIBPQ_SECRETS - {"password"}))
_PADS = st.sampled_from(["", " ", "\t", "  "])  # around a value
_SPACE_PADS = st.lists(_SPACE, max_size=2).map("".join)  # around a key
_CASES = st.lists(st.booleans(), min_size=20, max_size=20)
_PLACEMENTS = st.sampled_from(["user info", "query", "twice", "user info and query"])
_SEEDS = st.integers(0, 2**32 - 1)
# what the fuzzed URLs are made of: characters, URL signs, escapes, and the words of libpq keys
TOKENS = [
    *"aZ0-._~:/@?&=%+#;'\\\" \t\n,[]",
    *("%20", "%09", "%3D", "%26", "%40", "%2F", "%00", "%7E", "db.example", "5432", "require"),
    *("password", "passfile", "sslpassword", "sslkey", "user", "dbname", "requiressl", "PASSWORD"),
    *sorted(ALLOWED_KEYS),
]


def _driver_view(url: str, password: str | None = None) -> dict[str, str] | str:
    """The connection parameters libpq gets from ``url`` (with ``password``, as the ledger
    adds it): SQLAlchemy's psycopg dialect's connect arguments (less those psycopg keeps for
    itself), written by psycopg as libpq text and parsed by libpq; or the error SQLAlchemy or
    psycopg refuses ``url`` with."""
    parsed = make_url(url) if password is None else make_url(url).set(password=password)
    try:
        _, kwargs = _DIALECT.create_connect_args(parsed)
        own = {k: v for k, v in kwargs.items() if k not in _PSYCOPG_OWN}
        return conninfo_to_dict(make_conninfo("", **own))
    except (ArgumentError, psycopg.ProgrammingError) as e:
        return f"refused: {type(e).__name__}"


# A marker password: 'PW~' (no hash, path or URL we write holds it), 10 to 20 unreserved characters.
MARKERS = st.text(SAFE, min_size=10, max_size=20).map("PW~".__add__)


def encoded(rnd: random.Random, text: str, *, plus: bool = True) -> str:
    """``text`` as a URL may write it: none, some or all of its characters percent-encoded
    (either case), a space as '+' (in a query); ``rnd`` is seeded by hypothesis."""
    share = rnd.choice([0.0, 0.3, 1.0])
    out = []
    for c in text:
        if plus and c == " " and rnd.random() < 0.5:
            out.append("+")
        elif (c in SAFE or (plus and c in "!$'()*,;:@/")) and rnd.random() >= share:
            out.append(c)
        else:
            hexed = "".join(f"%{b:02X}" for b in c.encode())
            out.append(hexed.lower() if rnd.random() < 0.5 else hexed)
    return "".join(out)


@st.composite
def secret_keys(draw) -> str:
    """A query key, as written before encoding, where a secret goes or that libpq would not
    take: ``password`` or another libpq secret, with whitespace around it or in another
    case; any other word; a key holding '=' and a second key."""
    kind = draw(_KINDS)
    if kind == "word":
        return draw(_WORDS)
    if kind == "two keys":
        key = draw(_BENIGN_KEYS)
        return f"{key}={BENIGN[key]}{draw(_SPACE)}{draw(_SECRETS)}"
    word = "password" if kind == "password" else draw(_OTHER_SECRETS)
    if draw(st.booleans()):  # another case
        word = "".join(c.upper() if up else c for c, up in zip(word, draw(_CASES), strict=False))
    return draw(_SPACE_PADS) + word + draw(_SPACE_PADS)


@st.composite
def marked_urls(draw, backend: str, db: str = "/srv/releases/ledger.db") -> tuple[str, str]:
    """(a ledger URL with a marker where a secret goes, the marker); ``db``: a SQLite
    ledger's path."""
    mark, rnd = draw(MARKERS), random.Random(draw(_SEEDS))
    value = draw(_PADS) + mark + draw(_PADS)
    items = [(k, v) for k, v in BENIGN.items() if backend == "postgresql" and draw(st.booleans())]
    userinfo = ""
    placement = draw(_PLACEMENTS)
    if placement in ("user info", "user info and query"):
        userinfo = ":" + encoded(rnd, value, plus=False)
    if placement in ("query", "twice", "user info and query"):
        key = "password" if placement != "query" else draw(secret_keys())
        items.append((key, value))
        if placement == "twice":
            items.append((key, "other" if draw(st.booleans()) else mark))
    if placement == "user info and query":
        items.append(("password", "other"))
    items = draw(st.permutations(items))
    query = "&".join(f"{encoded(rnd, k)}={encoded(rnd, v)}" for k, v in items)
    if backend == "postgresql":
        url = PG.format(userinfo=userinfo)
    else:
        url = SQLITE.format(userinfo=f"{userinfo}@" if userinfo else "", db=db)
    return (f"{url}?{query}" if query else url), mark


_BITS = st.lists(st.sampled_from(TOKENS), max_size=5).map("".join)
_KEYS = st.sampled_from(sorted(ALLOWED_KEYS | {"password"})) | _BITS


@st.composite
def fuzzed_urls(draw) -> str:
    """What follows ``postgresql+psycopg://``, shaped as a URL (user, password, host, port,
    database, query keys, most of them libpq's) with every part made of ``TOKENS``."""
    userinfo = draw(_BITS) + ("" if draw(st.booleans()) else ":" + draw(_BITS))
    port = draw(st.sampled_from(["", ":5432", ":x"]))
    query = "&".join(f"{draw(_KEYS)}={draw(_BITS)}" for _ in range(draw(st.integers(0, 4))))
    return f"{userinfo}@{draw(_BITS)}{port}/{draw(_BITS)}" + (f"?{query}" if query else "")


def _assert_kept_apart(url: str, mark: str) -> None:
    """``url`` is refused by a message without ``mark``, or ``mark`` is the password, which
    no kept or shown URL holds; on PostgreSQL the driver reads the kept URL plus the password
    exactly as it reads ``url``, and the kept one holds no libpq secret."""
    assert mark not in shown_url(url)
    try:
        got = parse_url(url)
    except LedgerError as e:
        assert mark not in str(e)
        event("refused")
        return
    event("taken apart as the password")
    assert mark in (got.password or ""), "a marker in a secret's place was kept as something else"
    assert mark not in got.url and mark not in repr(got)
    auth = OperationalError("connect", {}, Exception('password authentication failed for user "alice"'))
    assert mark not in open_problem(auth, got.url)
    if got.safe.get_backend_name() == "postgresql":
        assert _driver_view(url) == _driver_view(got.url, got.password)
        assert not LIBPQ_SECRETS & set(_driver_view(got.url))


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
@given(data=st.data())
@property_settings(300)
def test_a_marker_where_a_secret_goes_is_refused_unshown_or_taken_apart(backend, data):
    url, mark = data.draw(marked_urls(backend))
    _assert_kept_apart(url, mark)


@given(text=st.one_of(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join), fuzzed_urls()))
@example(text="alice@db/ledger?password%20=x&sslmode=require")
@example(text="alice@db/ledger?options=-c%20x%3D'y\\'&application_name=a%26b")
@example(text=":pw@/ledger?host=%2Fvar%2Frun%2Fpostgresql&host=db2:5433")
@example(text="alice@db/ledger?sslmode%3Ddisable%20password=x")
@property_settings(800)
def test_whatever_is_accepted_is_read_by_the_driver_as_it_is_kept(text):
    """Any string after the scheme: refused, or kept as a URL that reads back as itself,
    that the driver reads as it reads the string (the password apart), with no secret."""
    url = f"postgresql+psycopg://{text}"
    try:
        got = parse_url(url)
    except LedgerError:
        event("refused")
        return
    event(f"accepted, {'a' if got.password else 'no'} password, {'' if got.safe.query else 'no '}query keys")
    assert parse_url(got.url).url == got.url and parse_url(got.url).password is None
    assert _driver_view(url) == _driver_view(got.url, got.password)
    assert not LIBPQ_SECRETS & set(_driver_view(got.url))
    assert shown_url(url) == got.url


@given(
    mark=MARKERS,
    words=st.permutations(["host=db.example", "dbname=ledger", "password={}"]),
    gap=st.sampled_from([" ", "  ", "\t", " \n "]),
)
@property_settings(200)
def test_a_connection_string_is_not_taken_for_a_path(mark, words, gap):
    """``--ledger`` given as libpq ``key=value`` text (which a path would have made a SQLite
    file named after the password) is refused, never quoting it."""
    with pytest.raises(LedgerError, match="scheme://") as e:
        ledger_url(gap.join(words).format(mark), "releases")
    assert mark not in str(e.value)


def test_the_allowed_keys_are_libpq_keywords_that_hold_no_secret():
    """Each is a keyword libpq reads as itself (so a URL keeps it as the driver reads it),
    and none is one libpq marks as a secret or that holds, names or writes one."""
    known = {o.keyword.decode() for o in pq.Conninfo.get_defaults()}
    assert ALLOWED_KEYS <= known
    assert not ALLOWED_KEYS & LIBPQ_SECRETS
    for key in ALLOWED_KEYS:
        assert list(conninfo_to_dict(make_conninfo("", **{key: "x"}))) == [key]


PADDED = ["password%20", "%20password", "password+", "password%09", "%0Apassword", "password%0D"]


@pytest.mark.parametrize("key", PADDED)
def test_the_driver_sends_a_padded_key_as_the_password_and_the_ledger_refuses_it(refusing_server, key):
    """What was measured (libpq 18, PostgreSQL 15), against a stand-in server that records
    the password it is sent: SQLAlchemy and psycopg, given ``?<key>=MARK``, log in with MARK.
    The ledger refuses the same URL before it connects, never quoting MARK."""
    mark = f"PW~padded-{PADDED.index(key)}"
    url = f"postgresql+psycopg://alice@127.0.0.1:{refusing_server.port}/ledger?sslmode=disable&{key}={mark}"
    engine = create_engine(url)
    with pytest.raises(OperationalError, match="password authentication failed"):
        engine.connect()
    engine.dispose()
    assert refusing_server.received[-1] == mark.encode()
    sent = len(refusing_server.received)
    with pytest.raises(LedgerError, match=re.escape("libpq reads as password")) as e:
        Ledger(url, create=False)
    assert mark not in str(e.value) and len(refusing_server.received) == sent
