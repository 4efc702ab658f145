"""Issue 32: a PostgreSQL ledger whose login is refused says so ("authentication failed for
user X at host:port" and where the password goes), never "cannot be opened (OperationalError)",
and never the password. The refusal comes from libpq itself (psycopg's real exception), talking
to a stand-in server that asks for a password and refuses the one it gets
(``refusing_server``, tests/ledger/conftest.py)."""

from __future__ import annotations

import pytest

from dprelease.ledger import PASSWORD_ENV, Ledger, LedgerError

MARK = "Wr0ngPassw0rd"


@pytest.fixture(scope="module")
def port(refusing_server) -> int:
    return refusing_server.port


@pytest.mark.parametrize("password", [MARK, None], ids=["wrong", "missing"])
def test_a_refused_login_says_authentication_failed(port, password, monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")  # libpq must find no password of its own
    url = f"postgresql+psycopg://alice@127.0.0.1:{port}/ledger?sslmode=disable&connect_timeout=5"
    with pytest.raises(LedgerError) as e:
        Ledger(url, create=False, password=password)
    said = str(e.value)
    assert f"authentication failed for user alice at 127.0.0.1:{port}" in said, said
    assert "PGPASSFILE" in said and PASSWORD_ENV in said and "OperationalError" not in said
    assert MARK not in said
