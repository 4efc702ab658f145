"""Issue 32: `dprelease ledger show` reads a password-protected PostgreSQL ledger with the
reader's password in libpq's password file (PGPASSFILE) and a URL without one, as the operator
guide says. On the real test server (.ci/postgres.sh, which trusts loopback) one line put
first in pg_hba.conf makes this test's role alone log in with scram-sha-256."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dprelease.ledger import PASSWORD_ENV, Ledger

CLI = Path(sys.executable).with_name("dprelease")


@pytest.fixture
def reader(postgres_url, postgres_database):
    """(URL without a password, role, password) of a reader role that must authenticate by
    password on a ledger in ``postgres_database``; the pg_hba line is removed afterwards."""
    from sqlalchemy import create_engine, text

    role, password = f"reader_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    Ledger(postgres_database).engine.dispose()  # the ledger's tables
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
        hba = Path(c.execute(text("SHOW hba_file")).scalar())
    db = create_engine(postgres_database, isolation_level="AUTOCOMMIT")
    with db.connect() as c:
        c.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
    db.dispose()
    if not os.access(hba, os.W_OK):
        pytest.skip(f"pg_hba.conf ({hba}) is not writable by the tests")
    before = hba.read_text()
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + before)
    try:
        with admin.connect() as c:
            c.execute(text("SELECT pg_reload_conf()"))
        host_port_db = postgres_database.split("@", 1)[1]
        yield f"postgresql+psycopg://{role}@{host_port_db}", role, password
    finally:
        hba.write_text(before)
        with admin.connect() as c:
            c.execute(text("SELECT pg_reload_conf()"))
        db = create_engine(postgres_database, isolation_level="AUTOCOMMIT")
        with db.connect() as c:
            c.execute(text(f"DROP OWNED BY {role}"))  # its grants, so that the role can go
        db.dispose()
        with admin.connect() as c:
            c.execute(text(f"DROP ROLE {role}"))
        admin.dispose()


def _show(url: str, pgpassfile: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_ENV} | {"PGPASSFILE": str(pgpassfile)}
    return subprocess.run(
        [str(CLI), "ledger", "show", "--ledger", url], env=env, capture_output=True, text=True, timeout=60
    )


def test_ledger_show_reads_the_password_from_pgpassfile(reader, tmp_path):
    url, role, password = reader
    host, port_db = url.split("@", 1)[1].split(":", 1)
    port, db = port_db.split("/", 1)
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{host}:{port}:{db}:{role}:{password}\n")
    passfile.chmod(0o600)  # libpq ignores a pass file others can read

    refused = _show(url, tmp_path / "absent")  # the role does need its password
    assert refused.returncode == 2 and "authentication failed" in refused.stdout + refused.stderr

    shown = _show(url, passfile)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "hash chain intact" in shown.stdout and password not in shown.stdout + shown.stderr
