"""Issue 30, item 2, end to end: a password planted in ``--ledger`` in each form it can
take (user info, ``?password=``, ``?sslpassword=``, ``?passfile=``, a malformed URL, an
unreachable PostgreSQL server) reaches none of: the files under ``--out`` (the bundle,
failure records, queues), Prefect's database and files (the flow run's parameters, its
logs, artifacts, events), the terminal, the events the release emits. A release on a URL
that carries the password connects and publishes the URL without it; the flow itself
refuses a ``ledger_url`` that holds any secret."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dprelease.flows.delivery as delivery
from dprelease.cli.main import app
from dprelease.flows.release import release
from dprelease.ledger import PASSWORD_ENV, Ledger
from dprelease.mechanisms.errors import DPReleaseError
from tests.helpers import adult_rows, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

MARK = "PW-MARKER-7f3a"


def _prefect_bytes() -> bytes:
    """Prefect's test server's SQLite database (with its write-ahead log) and every file
    under PREFECT_HOME, as bytes, after the CLI's queued logs were sent."""
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import get_current_settings

    APILogWorker.drain_all()
    settings = get_current_settings()
    db = Path(settings.server.database.connection_url.get_secret_value().split("///", 1)[1])
    files = {db, db.with_name(db.name + "-wal"), *Path(settings.home).rglob("*")}
    return b"".join(p.read_bytes() for p in files if p.is_file() and p.stat().st_size < 50_000_000)


def _out_bytes(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())


@pytest.fixture
def seen(monkeypatch, caplog):
    """The events the release emits (still sent to Prefect), the log records. The
    password variable is unset, and restored after the test (the CLI sets it)."""
    monkeypatch.setenv(PASSWORD_ENV, "placeholder")  # so that undoing the next line restores it
    monkeypatch.delenv(PASSWORD_ENV)
    caplog.set_level(logging.DEBUG)
    emitted: list[dict] = []
    send = delivery.emit_event

    def record(**event):
        emitted.append(event)
        return send(**event)

    monkeypatch.setattr(delivery, "emit_event", record)
    return emitted


def _release(tmp_path: Path, ledger: str, rid: str):
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    args = ["release", str(spec), "--out", str(out), "--release-id", rid, "--ledger", ledger]
    return CliRunner().invoke(app, args), out


def _assert_nowhere(mark: str, result, out: Path, emitted: list[dict], capfd, caplog) -> None:
    captured = capfd.readouterr()
    said = result.output + captured.out + captured.err + caplog.text
    assert mark not in re.sub(r"[\s│╭╮╰╯─]", "", said)  # rich may wrap the URL anywhere
    assert mark.encode() not in _out_bytes(out)
    assert mark not in json.dumps(emitted, default=str)
    assert mark.encode() not in _prefect_bytes()


CARRIED = {  # connects: the release is published
    "query password": "sqlite:///{db}?password={mark}",
    "user info": "sqlite://:{mark}@/{db}",
}

REFUSED = {  # exit 2 before Prefect starts, nothing read or spent
    "sslpassword": ("sqlite:///{db}?sslpassword={mark}", "must not hold sslpassword"),
    "passfile": ("sqlite:///{db}?passfile=/home/steward/{mark}", "PGPASSFILE"),
    "malformed port": ("postgresql+psycopg://steward:{mark}@localhost:notaport/ledger", "database URL"),
    "unreachable server": (
        "postgresql+psycopg://steward@127.0.0.1:1/ledger?password={mark}",  # nothing listens on port 1
        "cannot be opened",
    ),
}


@pytest.mark.parametrize("form", CARRIED.values(), ids=CARRIED.keys())
def test_a_password_in_the_ledger_url_is_used_and_never_stored(tmp_path, seen, capfd, caplog, form):
    db = tmp_path / "ledger.db"
    result, out = _release(tmp_path, form.format(db=db, mark=MARK), "carried")
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "carried" / "public" / "release.json").read_text())
    assert doc["privacy"]["ledger_record"]["url"] == f"sqlite:///{db}"
    with Ledger(f"sqlite:///{db}", create=False) as led:
        assert led.releases()[0]["status"] == "released"
    _assert_nowhere(MARK, result, out, seen, capfd, caplog)


@pytest.mark.parametrize(("form", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_ledger_url_is_never_echoed(tmp_path, seen, capfd, caplog, form, says):
    db = tmp_path / "ledger.db"
    result, out = _release(tmp_path, form.format(db=db, mark=MARK), "refused")
    assert result.exit_code == 2, result.output
    assert says in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert not db.exists() and not (out / "refused").exists()
    _assert_nowhere(MARK, result, out, seen, capfd, caplog)


def test_a_postgresql_password_in_the_query_is_used_and_never_stored(
    tmp_path, seen, capfd, caplog, postgres_database
):
    """Loopback PostgreSQL trusts any password; what matters is where the string goes."""
    url = f"{postgres_database}?password={MARK}-pg"
    result, out = _release(tmp_path, url, "pg")
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "pg" / "public" / "release.json").read_text())
    assert doc["privacy"]["ledger_record"]["url"] == postgres_database
    _assert_nowhere(f"{MARK}-pg", result, out, seen, capfd, caplog)


@pytest.mark.parametrize(
    ("query", "says"),
    [("password=x", "must not contain a password"), ("sslpassword=x", "must not hold sslpassword")],
)
def test_the_flow_refuses_a_ledger_url_that_holds_a_secret(tmp_path, query, says):
    """Called directly (a deployment's parameter), the flow refuses it before the ledger
    is opened: nothing is reserved. (Prefect has stored the parameter by then, hence a
    string unlike the marker above.)"""
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    db = tmp_path / "ledger.db"
    with pytest.raises(DPReleaseError, match=says):
        release(str(spec), str(tmp_path / "out"), release_id="flow", ledger_url=f"sqlite:///{db}?{query}")
    assert not db.exists()
