"""Fixtures of the ledger tests."""

import socket
import struct
import threading
from dataclasses import dataclass, field

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    """A fresh, empty ledger database: a SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("postgres_database")


@dataclass
class RefusingServer:
    """A stand-in PostgreSQL server on loopback (``port``) that asks for a cleartext password
    and refuses it; ``received``: the passwords libpq sent it, in order."""

    port: int = 0
    received: list[bytes] = field(default_factory=list)


@pytest.fixture(scope="module")
def refusing_server() -> RefusingServer:
    pytest.importorskip("psycopg")
    server = RefusingServer()
    server.port = _serve_refusals(server.received)
    return server


def _serve_refusals(received: list[bytes]) -> int:
    """A loopback server that speaks PostgreSQL's startup protocol just far enough: it
    declines SSL/GSS, asks for a cleartext password and answers it with PostgreSQL's own
    error (FATAL 28P01). Appends each password it receives to ``received``. Returns its port;
    serves connections until the process ends."""
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
                received.append(exact(conn, length - 4).rstrip(b"\0"))  # PasswordMessage
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
