"""Issue 41: a ledger row is a ``LedgerRow`` (``ledger.row``), not a dict with string kinds.
Its fields are the table's columns, in their order; it reads a row as stored (``detail`` as
text) and gives back what ``Ledger.entries`` gave before (``detail`` decoded), so what
``ledger show --json`` prints is unchanged; a kind, status or accountant this version does not
know is refused, naming the row."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from dprelease.ledger import FIELDS, Ledger, LedgerError, LedgerRow
from dprelease.ledger.charges import listing, public_row, repeated_refusal, spent_charge
from dprelease.ledger.database import raw_rows
from dprelease.ledger.row import KINDS, STATUSES
from tests.helpers import PURE_PLAN, record_release

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v0.2.0" / "ledger.db"


def _stored(tmp_path: Path) -> tuple[str, list[dict]]:
    """The 0.2.0 fixture's ledger (a copy) and its rows as stored."""
    path = tmp_path / "ledger.db"
    shutil.copy(FIXTURE, path)
    url = f"sqlite:///{path}"
    with Ledger(url, create=False) as led, led.engine.connect() as conn:
        return url, raw_rows(conn)


def test_its_fields_are_the_tables_columns_in_order():
    assert [f.name for f in fields(LedgerRow)] == FIELDS


def test_rows_of_0_2_0_read_and_give_back_what_entries_gave(tmp_path):
    url, stored = _stored(tmp_path)
    rows = [LedgerRow.from_mapping(r) for r in stored]
    before = [{**r, "detail": json.loads(r["detail"])} for r in stored]  # Ledger.entries until issue 41
    assert [r.as_mapping() for r in rows] == before
    assert all(list(r.as_mapping()) == FIELDS for r in rows)
    with Ledger(url, create=False) as led:
        assert led.entries() == before and led.rows() == rows
        assert led.releases() == listing(rows)
        assert {r.kind for r in rows} <= set(KINDS) and {r.status for r in rows} <= set(STATUSES)
        state, spent = led.state("fixture-2") or (None, [])
        assert state is not None and state.status == "released" and spent == ["marginals", "moments"]
        assert led.attempt("fixture-2") == {**state.as_mapping(), "spent": spent}


def test_a_public_row_is_the_row_without_its_previous_hash(tmp_path):
    _, stored = _stored(tmp_path)
    row = LedgerRow.from_mapping(stored[-1])
    assert public_row(row) == {k: v for k, v in row.as_mapping().items() if k != "prev_hash"}


def test_the_charges_read_rows_and_dicts_alike(tmp_path):
    """``spent_charge`` and ``repeated_refusal`` are given ``Ledger.entries``' dicts by the flows."""
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}") as led:
        record_release(led, "r1", plan=PURE_PLAN)
        rows, dicts = led.rows(release_id="r1"), led.entries(release_id="r1")
    assert spent_charge(rows) == spent_charge(dicts)
    assert repeated_refusal(rows, "r1") is repeated_refusal(dicts, "r1") is False


@pytest.mark.parametrize(
    ("key", "value"), [("kind", "transfer"), ("status", "paused"), ("accountant", "rdp")]
)
def test_an_unknown_kind_status_or_accountant_is_refused(tmp_path, key, value):
    _, stored = _stored(tmp_path)
    with pytest.raises(LedgerError, match=rf"ledger row {stored[0]['seq']} has {key} '{value}'"):
        LedgerRow.from_mapping({**stored[0], key: value})


def test_a_row_without_detail_reads_none():
    row = LedgerRow.from_mapping({"kind": "release", "status": "failed", "detail": "null"})
    assert row.detail is None and row.detail_of("host") is None and row.is_state
