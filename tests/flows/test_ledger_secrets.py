"""Issue 30, item 2, and issue 38, end to end: a password planted in ``--ledger`` in each
form it can take (user info, ``?password=``, ``?sslpassword=``, ``?passfile=``, a key libpq
reads as the password, a malformed URL, an unreachable PostgreSQL server) reaches none of:
the files under ``--out`` (the bundle, failure records, queues), Prefect's database and its
WAL and files (the flow run's parameters, its logs, artifacts, events), the terminal, the
events the release emits. A release on a URL that carries the password connects and keeps
the URL without it, in the bundle's ``internal/ledger.json`` only: ``public/`` names no
ledger location (its chain head instead). The flow itself refuses a ``ledger_url`` that holds
any secret. ``test_a_marker_anywhere_in_the_ledger_url_never_leaks`` is the property over
placements and encodings (the strategies of tests/ledger/test_url_properties.py)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from hypothesis import event, example, given
from typer.testing import CliRunner

import dprelease.flows.delivery as delivery
from dprelease.cli.main import app
from dprelease.flows.release import release
from dprelease.ledger import PASSWORD_ENV, Ledger
from dprelease.mechanisms.errors import DPReleaseError
from tests.helpers import adult_rows, write_spec
from tests.ledger.test_url_properties import marked_urls
from tests.properties import property_settings

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


def _public_names_no_location(out: Path, rid: str, url: str, *places: str) -> None:
    """``public/`` holds the ledger's chain head and no part of where it is (``places``: its
    file's path, its host and database); ``internal/ledger.json`` holds ``url``."""
    public = b"".join(p.read_bytes() for p in (out / rid / "public").rglob("*") if p.is_file())
    assert not [p for p in places if p.encode() in public]
    record = json.loads((out / rid / "public" / "release.json").read_text())["privacy"]["ledger_record"]
    assert "url" not in record and len(record["chain_head"]["hash"]) == 64
    assert json.loads((out / rid / "internal" / "ledger.json").read_text()) == {"url": url}


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


NOWHERE = "postgresql+psycopg://steward@127.0.0.1:1/ledger"  # nothing listens on port 1

REFUSED = {  # exit 2 before Prefect starts, nothing read or spent
    "sslpassword": (NOWHERE + "?sslpassword={mark}", "?sslpassword="),
    "passfile": (NOWHERE + "?passfile=/home/steward/{mark}", "PGPASSFILE"),
    "padded key": (NOWHERE + "?password%20={mark}", "reads as password"),
    "malformed port": ("postgresql+psycopg://steward:{mark}@localhost:notaport/ledger", "database URL"),
    "unreachable server": (NOWHERE + "?password={mark}", "cannot be opened"),
}


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
    host_port, database = postgres_database.split("@", 1)[1].split("/", 1)
    _public_names_no_location(out, "pg", postgres_database, host_port, f"/{database}", "postgres@")
    _assert_nowhere(f"{MARK}-pg", result, out, seen, capfd, caplog)


def test_a_postgresql_password_under_a_key_libpq_reads_as_password_is_refused(
    tmp_path, seen, capfd, caplog, postgres_database
):
    """libpq trims whitespace around a key: ``?password%20=`` is the password to the driver
    (the server's check of it was measured: tests/ledger/test_url_properties.py). Before
    issue 38 this release connected, published, and the password was in release.json,
    Prefect's database and the terminal; now it is refused before anything is opened."""
    url = f"{postgres_database}?password%20={MARK}-padded"
    result, out = _release(tmp_path, url, "padded")
    assert result.exit_code == 2, result.output
    assert "libpq reads as password" in " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert not (out / "padded").exists()
    _assert_nowhere(f"{MARK}-padded", result, out, seen, capfd, caplog)


@pytest.mark.parametrize(
    ("query", "says"),
    [("password=x", "must not contain a password"), ("sslpassword=x", r"takes no query key but \?password=")],
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


@pytest.mark.property
@given(case=marked_urls("sqlite", db="DBPATH"))
@example(case=("sqlite:///DBPATH?password%20=PW~e2e-padded-key", "PW~e2e-padded-key"))  # issue 38
@example(case=("sqlite://:PW%7Ee2e-user-info@/DBPATH", "PW~e2e-user-info"))  # taken apart
@example(case=("sqlite:///DBPATH?password=+PW~e2e-query%09", "PW~e2e-query"))  # taken apart
@property_settings(2)
def test_a_marker_anywhere_in_the_ledger_url_never_leaks(tmp_path_factory, seen, capfd, caplog, case):
    """A release through the real CLI and Prefect on a SQLite ledger URL with a marker
    password placed and encoded anyhow (tests/ledger/test_url_properties.py): refused (exit
    2) before anything is opened, or published on the ledger (SQLite ignores the password)
    with the marker nowhere under ``--out``, in Prefect's database, WAL and home, the logs,
    the events or the terminal, and ``public/`` naming no ledger location."""
    url, mark = case
    tmp = tmp_path_factory.mktemp("marked")
    db = tmp / "ledger.db"
    result, out = _release(tmp, url.replace("DBPATH", str(db)), "marked")
    assert result.exit_code in (0, 2), result.output
    event("published" if result.exit_code == 0 else "refused")
    _assert_nowhere(mark, result, out, seen, capfd, caplog)
    if result.exit_code == 0:
        _public_names_no_location(out, "marked", f"sqlite:///{db}", str(db), str(tmp))
        with Ledger(f"sqlite:///{db}", create=False) as led:
            assert led.releases()[0]["status"] == "released"
    else:
        assert not db.exists() and not (out / "marked").exists()
