"""The backup command never prints or stores a database password, even of a URL it cannot
read, and never puts one on pg_dump's command line."""

import pytest
from sqlalchemy.engine import make_url

from deploy.backup import BackupError, _libpq, _url, backup
from dprelease.ledger import Ledger

MARK = "PW-MARKER-7f3a"


def test_a_malformed_url_is_refused_without_its_password():
    with pytest.raises(BackupError) as refused:
        _url(f"postgresql+psycopg://steward:{MARK}@db.example:notaport/ledger")
    assert MARK not in str(refused.value) and "not a database URL" in str(refused.value)


def test_a_backup_manifest_names_the_source_without_a_password_the_driver_would_read(tmp_path):
    """Issue 38: the manifest's ``source`` is rebuilt from the URL's non-secret parts, so a
    password under a key libpq reads as ``password`` (``?password%20=``) is not in it."""
    db = tmp_path / "ledger.db"
    Ledger(f"sqlite:///{db}").close()
    manifest = backup("ledger", f"sqlite:///{db}?password%20={MARK}", tmp_path / "backups")
    assert manifest["source"] == f"sqlite:///{db}"
    assert not [p for p in (tmp_path / "backups").rglob("*.json") if MARK in p.read_text()]


def test_pg_dump_gets_no_password_on_its_command_line():
    """pg_dump's connection string (``ps`` shows it to every local user) is rebuilt from the
    URL's user, host, port, database and the libpq keys that hold no secret (``ALLOWED_KEYS``):
    no user-info password (before issue 38 it was there: SQLAlchemy's ``URL.set(password=None)``
    leaves the password unchanged), no query password, no other driver's keys. The password
    goes in the environment."""
    url = make_url(
        f"postgresql+asyncpg://prefect:pw@db.example/prefect?password%20={MARK}&ssl=on&sslmode=require"
    )
    conninfo, env = _libpq(url, "pw")
    assert conninfo == "postgresql://prefect@db.example/prefect?sslmode=require" and env["PGPASSWORD"] == "pw"
