"""A ledger states its format (``ledger.format``, issue 42): a new ledger is this version's,
every row names the software that wrote it; a ledger of dprelease 0.2.0 (the fixture
``tests/fixtures/v0.2.0``, made by that version) is read as it is, refused for writing until
``ledger migrate``, which changes no row and is recorded in the chain; a newer format is refused
for reading and writing alike."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from dprelease._version import __version__
from dprelease.ledger import FORMAT, Ledger, LedgerError, LedgerFormatError
from dprelease.ledger.database import raw_rows
from dprelease.ledger.format import FORMAT_TABLE
from tests.helpers import PURE_PLAN, record_release

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v0.2.0"


def _old_ledger(tmp_path: Path) -> str:
    path = tmp_path / "ledger.db"
    shutil.copy(FIXTURE / "ledger.db", path)
    return f"sqlite:///{path}"


def _rows(url: str) -> list[dict]:
    with Ledger(url, create=False) as led, led.engine.connect() as conn:
        return raw_rows(conn)


def _stamp(url: str, fmt: int, by: str) -> None:
    with Ledger(url) as led, led.engine.begin() as conn:
        conn.execute(update(FORMAT_TABLE).values(format=fmt, written_by=by))


def test_a_new_ledger_is_this_versions_format_and_every_row_names_its_software(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger(url) as led:
        assert (led.format.format, led.format.written_by) == (FORMAT, f"dprelease {__version__}")
        record_release(led, "r1")
        rows = led.entries()
    assert rows and all(r["detail"]["software"]["dprelease"] == __version__ for r in rows)


def test_a_ledger_of_0_2_0_is_read_as_it_is_and_refused_for_writing(tmp_path: Path):
    url = _old_ledger(tmp_path)
    before = _rows(url)
    with Ledger(url) as led:  # opening it as a writer changes nothing
        assert led.format.format == 1
        assert [r["release_id"] for r in led.releases()] == ["fixture-1", "fixture-2"]
        assert not led.verify_chain()
        with pytest.raises(LedgerFormatError, match=r"format 1 .*dprelease ledger migrate --ledger"):
            led.check_writable()
        with pytest.raises(LedgerFormatError, match="Nothing was read or spent"):
            record_release(led, "r3", dataset="adult")
        with pytest.raises(LedgerFormatError):
            led.checkpoint()
    assert _rows(url) == before


def test_migration_changes_no_row_is_recorded_in_the_chain_and_happens_once(tmp_path: Path):
    url = _old_ledger(tmp_path)
    before = _rows(url)
    with Ledger(url, create=False) as led:
        row = led.migrate()
        assert row is not None and row["kind"] == "ledger" and row["status"] == "migrated"
        assert row["detail"]["from_format"] == 1 and row["detail"]["to_format"] == FORMAT
        assert row["detail"]["software"]["dprelease"] == __version__
        assert led.format.format == FORMAT and not led.verify_chain()
        assert led.migrate() is None
        record_release(led, "r3", plan=PURE_PLAN, dataset="other")  # now it writes
        assert [r["release_id"] for r in led.releases()] == ["fixture-1", "fixture-2", "r3"]
    after = _rows(url)
    assert after[: len(before)] == before and after[len(before)]["seq"] == row["seq"]


def test_a_broken_chain_is_not_migrated(tmp_path: Path):
    url = _old_ledger(tmp_path)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE ledger_entries SET epsilon = 0.001 WHERE seq = 3")
    with Ledger(url, create=False) as led, pytest.raises(LedgerError, match="not migrated: its hash chain"):
        led.migrate()
    with Ledger(url, create=False) as led:
        assert led.format.format == 1


@settings(max_examples=10, deadline=None)
@given(ahead=st.integers(min_value=1, max_value=1000))
def test_a_newer_format_is_refused_for_reading_and_writing_naming_its_version(ahead: int):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'l.db'}"
        Ledger(url).close()
        _stamp(url, FORMAT + ahead, "dprelease 9.9.9")
        for create in (False, True):
            with pytest.raises(
                LedgerFormatError, match=rf"format {FORMAT + ahead} \(written by dprelease 9\.9\.9\)"
            ):
                Ledger(url, create=create)


def test_the_postgresql_setup_stamps_this_format_on_a_new_ledger_only():
    """``deploy/postgres/setup.sql`` creates the tables for a PostgreSQL ledger: it stamps
    ``FORMAT`` (the one this code writes), and only where no row exists yet."""
    import re

    sql = (Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "setup.sql").read_text()
    stamped = re.search(
        r"SELECT 1, (\d+), 'deploy/postgres/setup.sql' WHERE NOT EXISTS \(SELECT FROM ledger_entries\)", sql
    )
    assert stamped is not None and int(stamped[1]) == FORMAT
