"""The ledger URL: read as its driver reads it, and rebuilt from what may be stored.

A steward names the ledger by a URL: ``sqlite:///PATH`` or
``postgresql+psycopg://USER@HOST:PORT/DB``. SQLAlchemy reads it (``make_url``, as
``create_engine`` does). For PostgreSQL its dialect hands the user, host, port, database
and every query item to psycopg, which writes them as libpq ``key=value`` text (the value
escaped, the key as it is) for libpq's conninfo parser. Measured with libpq 18.0 (psycopg
3.3) against PostgreSQL 15 asking for a password (docs/operator, "The ledger URL"): libpq
trims ASCII whitespace around a key, so ``?password%20=``, ``?%09password=`` and
``?password+=`` each carry the password, and the server checked it; it keeps a key's case
(``?PASSWORD=`` is an invalid option); it reads a key holding '=' and a space as several
keywords (``?sslmode%3Ddisable%20password=`` sets the password); it stops at a NUL.

So ``parse_url`` matches no key against a list of secrets: it keeps a query key only when
it is, exactly, one of ``ALLOWED_KEYS`` (libpq keywords that hold no secret and point to
none), takes the password from user info or ``?password=`` (one of them, once), and
refuses anything else, naming a key only as libpq reads it. What is stored, logged or
published (``LedgerURL.url``, ``shown_url``) is rebuilt from those components, never a
redacted copy of what was given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from dprelease.ledger.errors import LedgerError

__all__ = [
    "ALLOWED_KEYS",
    "PASSWORD_ENV",
    "LedgerURL",
    "default_url",
    "ledger_url",
    "parse_url",
    "shown_url",
    "split_password",
]

PASSWORD_ENV = "DPRELEASE_LEDGER_PASSWORD"  # the ledger database's password, never in a URL Prefect sees

# The libpq keywords a PostgreSQL ledger URL may carry in its query, each checked against
# libpq's documentation (PostgreSQL 18, 32.1.2) to hold no secret and name no file that holds
# one: where the server is (more hosts, a Unix socket folder, a service file entry), how the
# connection is protected (TLS and authentication modes, the public certificates and
# revocation lists they check), its timeouts, and what the session is.
ALLOWED_KEYS = frozenset(
    {
        "host",
        "hostaddr",
        "port",
        "service",
        "sslmode",
        "sslnegotiation",
        "sslcertmode",
        "sslsni",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "sslrootcert",
        "sslcert",
        "sslcrl",
        "sslcrldir",
        "channel_binding",
        "require_auth",
        "gssencmode",
        "krbsrvname",
        "connect_timeout",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "application_name",
        "options",
        "target_session_attrs",
        "load_balance_hosts",
    }
)

# libpq keywords that hold a secret or name where one is kept, and where each goes instead
_ELSEWHERE = {
    "password": f"give it once, as user info (USER:PASSWORD@) or ?password=, or set {PASSWORD_ENV}",
    "passfile": "set PGPASSFILE in the environment instead (libpq reads it)",
    "sslpassword": "put it in a libpq service file entry (PGSERVICEFILE, then ?service=NAME) or use a "
    "client key without a passphrase",
    "sslkey": "set PGSSLKEY in the environment instead (libpq reads it)",
    "oauth_client_secret": "keep it out of the ledger URL",
    "scram_client_key": "keep it out of the ledger URL",
    "scram_server_key": "keep it out of the ledger URL",
    "sslkeylogfile": "keep it out of the ledger URL (it writes the TLS session's secrets to a file)",
}

_DRIVERS = {"sqlite": "sqlite", "sqlite+pysqlite": "sqlite", "postgresql+psycopg": "postgresql"}
_MULTI = ("host", "port")  # SQLAlchemy's multi-host form repeats these
_PLAIN = re.compile(r"[A-Za-z0-9_]{1,64}")  # a key a message may name as written
_SCHEME_ONLY = re.compile(r"(sqlite|postgres(ql)?)(\+\w+)?:", re.IGNORECASE)

_UNREADABLE = "(not a database URL; not shown)"


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


def default_url(out_dir: Path | str) -> str:
    """``sqlite:///<out>/ledger.db`` (absolute)."""
    return f"sqlite:///{Path(out_dir).resolve() / 'ledger.db'}"


def ledger_url(given: str | None, out_dir: Path | str) -> str:
    """The ledger as a steward names it: a database URL (``sqlite:///…``,
    ``postgresql+psycopg://…``), a path to a SQLite ledger file, a folder that holds
    ``ledger.db`` (a release's ``--out``), or nothing: ``<out_dir>/ledger.db``. A database
    URL missing its ``//``, or a string libpq reads as a ``key=value`` connection string,
    is refused, not taken for a path (a file named after it would hold its password); so is
    a path with '?' in it (a URL would read what follows as its query). The message never
    quotes what was given.

    >>> ledger_url("postgresql+psycopg://me@db/ledger", "releases")
    'postgresql+psycopg://me@db/ledger'
    >>> ledger_url("/srv/releases/ledger.db", "releases")
    'sqlite:////srv/releases/ledger.db'
    """
    if not given:
        return default_url(out_dir)
    if "://" in given:
        return given
    if _SCHEME_ONLY.match(given) or _is_conninfo(given):
        raise LedgerError(
            "--ledger must be a database URL written scheme://…, e.g. sqlite:///path/ledger.db or "
            "postgresql+psycopg://user@host/db, or a path (what was given is not shown: it may hold a "
            "password)"
        )
    path = Path(given).expanduser()
    if "?" in str(path):
        raise LedgerError("--ledger must be a path without '?' (a URL reads what follows as its query)")
    return default_url(path) if path.is_dir() else f"sqlite:///{path.resolve()}"


def parse_url(url: str) -> LedgerURL:
    """``url`` read as its driver reads it and rebuilt from its allowed components: the
    driver, user, host, port, database and the query keys of ``ALLOWED_KEYS``; the
    password apart, given either as user info (``user:PW@``) or as ``?password=PW``, once.
    A SQLite URL takes no query key but ``password`` (ignored: SQLite has none).

    Raises ``LedgerError``, never quoting a value of ``url``: for a string that is not a
    database URL, another driver, a query key not allowed (named as libpq reads it, with
    where a secret goes instead), a password given twice, a NUL character, and a rebuilt URL
    that would not read back the same.

    >>> given = parse_url("postgresql+psycopg://alice@db.example/ledger?password=s3cret&sslmode=require")
    >>> given.url, given.password
    ('postgresql+psycopg://alice@db.example/ledger?sslmode=require', 's3cret')
    """
    parsed = _read(url)
    if parsed is None:
        raise LedgerError(
            "the ledger URL must be a database URL such as sqlite:///path/ledger.db or "
            "postgresql+psycopg://user@host/db (write '@', ':' or '/' in a user name or password as %40, "
            "%3A, %2F); it is not shown: it may hold a password"
        )
    kind = _DRIVERS.get(parsed.drivername)
    if kind is None:
        raise LedgerError(
            "the ledger URL must start with sqlite:/// or postgresql+psycopg:// (psycopg is the PostgreSQL "
            "driver dprelease installs)"
        )
    passwords = [] if parsed.password is None else [str(parsed.password)]
    kept: dict[str, str | tuple[str, ...]] = {}
    refused = []
    for key, value in parsed.query.items():
        values = (value,) if isinstance(value, str) else tuple(value)
        if key == "password":
            passwords += values
        elif kind == "postgresql" and key in ALLOWED_KEYS:
            if len(values) > 1 and key not in _MULTI:
                raise LedgerError(f"the ledger URL must give ?{key}= once, not {len(values)} times")
            kept[key] = value
        else:
            refused.append(key)
    if refused:
        raise _refusal(kind, refused)
    if len(passwords) > 1:
        raise LedgerError(
            f"the ledger URL must give the password once (user info or ?password=), not {len(passwords)} "
            "times"
        )
    if any("\0" in text for text in (*_texts(parsed), *passwords)):
        raise LedgerError("the ledger URL must not hold a NUL character (%00): its driver cuts text there")
    return LedgerURL(_rebuilt(parsed, kind, kept), passwords[0] if passwords else None)


def shown_url(url: str) -> str:
    """``url`` as a message, record or manifest shows it, rebuilt, never masked: the URL
    ``parse_url`` keeps; for another database URL (e.g. Prefect's) or one ``parse_url``
    refuses, its driver, user, host, port and database only; for a string that is not a
    database URL, nothing of it.

    >>> shown_url("postgresql+psycopg://alice:s3cret@db.example/ledger?password%20=s3cret")
    'postgresql+psycopg://alice@db.example/ledger'
    """
    try:
        return parse_url(url).url
    except LedgerError:
        pass
    parsed = _read(url)
    if parsed is None or any("\0" in text for text in _texts(parsed)):
        return _UNREADABLE
    return URL.create(
        parsed.drivername,
        username=parsed.username or None,
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
    ).render_as_string(hide_password=False)


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


def _read(url: str) -> URL | None:
    """SQLAlchemy's reading of ``url``; None when it is not a URL, or when its host or
    (PostgreSQL) its database holds '@': an unencoded '@' in the password, whose rest would
    show as the host or the database."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # e.g. a port that is not a number
        return None
    places = [parsed.host] + ([parsed.database] if parsed.get_backend_name() == "postgresql" else [])
    return None if any("@" in (p or "") for p in places) else parsed


def _texts(parsed: URL) -> list[str]:
    """Every text the driver receives from ``parsed``, the password aside."""
    texts = [parsed.username or "", parsed.host or "", parsed.database or ""]
    for key, value in parsed.query.items():
        texts += [key, *((value,) if isinstance(value, str) else value)]
    return texts


def _rebuilt(parsed: URL, kind: str, kept: dict[str, str | tuple[str, ...]]) -> URL:
    """The URL made from ``parsed``'s allowed components only, which must read back as itself."""
    if kind == "sqlite":
        if parsed.username or parsed.host or parsed.port:
            raise LedgerError(
                "a SQLite ledger URL names a file only: sqlite:///PATH (no user name, host or port)"
            )
        safe = URL.create(parsed.drivername, database=parsed.database)
    else:
        safe = URL.create(
            parsed.drivername,
            username=parsed.username or None,
            host=parsed.host,
            port=parsed.port,
            database=parsed.database,
            query=kept,
        )
    if _read(safe.render_as_string(hide_password=False)) != safe:
        raise LedgerError(
            "the ledger URL's user name, host or database does not read back the same once written "
            "out; percent-encode its special characters"
        )
    return safe


def _refusal(kind: str, keys: list[str]) -> LedgerError:
    """The refusal of query ``keys``: each named as libpq reads it; a secret's, with where
    it goes instead."""
    if kind == "sqlite":
        named = ", ".join(_named(k, None) for k in keys)
        return LedgerError(
            f"a SQLite ledger URL takes no query key but ?password= (ignored: SQLite has none), not {named}"
        )
    for key in keys:
        words = _libpq_keywords(key)
        secret = next((w for w in words if w in _ELSEWHERE), None)
        if secret is not None:
            return LedgerError(
                f"the ledger URL must not hold {_named(key, words)}: libpq would read {secret} from it, a "
                f"secret or where one is kept (Prefect stores the URL); {_ELSEWHERE[secret]}"
            )
    named = ", ".join(_named(k, _libpq_keywords(k)) for k in keys)
    return LedgerError(
        f"the ledger URL must not hold {named}: a PostgreSQL ledger URL takes ?password= and the libpq "
        "keys that hold no secret (e.g. sslmode, sslrootcert, connect_timeout, application_name, "
        "target_session_attrs; the operator guide lists them), the user before '@' and the database "
        "after '/'"
    )


def _named(key: str, words: list[str] | None) -> str:
    """How a message names query ``key``: as libpq reads it (``words``; None for SQLite),
    and as written only when that is a plain word (a key written with whitespace, '=' or
    other signs may hold a value)."""
    plain = _PLAIN.fullmatch(key) is not None
    if words == [key] or (words is None and plain):
        return f"?{key}="
    if words:
        read = " and ".join(sorted(words))
        return f"?{key}= (libpq reads it as {read})" if plain else f"a query key libpq reads as {read}"
    if plain:
        return f"?{key}= (not a libpq keyword; they are lower case)"
    return "a query key with whitespace, '=' or other signs in it (not shown)"


def _libpq_keywords(key: str) -> list[str]:
    """The keywords libpq's conninfo parser reads from ``key=…`` as psycopg writes it for
    libpq (``make_conninfo``): ``[key]`` for a keyword, another or several for a key with
    whitespace or '=' in it, ``[]`` for one libpq refuses."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if "\0" in key:
        return []
    try:
        return list(conninfo_to_dict(make_conninfo("", **{key: "x"})))
    except ProgrammingError:
        return []


def _is_conninfo(text: str) -> bool:
    """libpq reads ``text`` as a ``key=value`` connection string with at least one keyword."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        return "\0" not in text and bool(conninfo_to_dict(text))
    except ProgrammingError:
        return False
