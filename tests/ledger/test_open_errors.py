"""Issue 32: a PostgreSQL ledger whose login is refused says so ("authentication failed for
user X at host:port" and where the password goes), never "cannot be opened (OperationalError)",
and never the password. The refusal comes from libpq itself (psycopg's real exception), talking
to a stand-in server that asks for a password and refuses the one it gets."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from dprelease.ledger import PASSWORD_ENV, Ledger, LedgerError

MARK = "Wr0ngPassw0rd"


def _refusing_server() -> int:
    """A loopback server that speaks PostgreSQL's startup protocol just far enough: it
    declines SSL/GSS, asks for a cleartext password and answers it with PostgreSQL's own
    error (FATAL 28P01). Returns its port; serves connections until the process ends."""
    listener = socket.create_server(("127.0.0.1", 0))

    def exact(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while True:  # SSLRequest / GSSENCRequest, then the startup message
                    (length,) = struct.unpack("!i", exact(conn, 4))
                    (code,) = struct.unpack("!i", exact(conn, 4))
                    exact(conn, length - 8)
                    if code in (80877103, 80877104):
                        conn.sendall(b"N")
                        continue
                    break
                conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
                exact(conn, 1)
                (length,) = struct.unpack("!i", exact(conn, 4))
                exact(conn, length - 4)
                fields = b"".join(
                    k + v.encode() + b"\0"
                    for k, v in (
                        (b"S", "FATAL"),
                        (b"V", "FATAL"),
                        (b"C", "28P01"),
                        (b"M", 'password authentication failed for user "alice"'),
                    )
                )
                conn.sendall(b"E" + struct.pack("!i", len(fields) + 5) + fields + b"\0")
            except (ConnectionError, OSError):
                pass

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


@pytest.fixture(scope="module")
def port() -> int:
    pytest.importorskip("psycopg")
    return _refusing_server()


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
