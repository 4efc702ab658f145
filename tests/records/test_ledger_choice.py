"""Issue 38: which ledger ``audit verify`` checks without ``--ledger``, now that
``release.json`` names none (only its chain head): the SQLite file the bundle's
``internal/ledger.json`` names, else (a bundle from before) the URL its ``release.json``
published, else ``ledger.db`` beside the bundle; a PostgreSQL ledger is named, never opened
unasked; what it says holds no password, even one an older bundle published."""

from __future__ import annotations

from pathlib import Path

import pytest

from dprelease.bundle.ledger_record import write_ledger_record
from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.ledger import Ledger
from dprelease.records.ledger_choice import choose_ledger

MARK = "PW-MARKER-7f3a"


def _bundle(
    tmp_path: Path, internal: str | None = None, published: str | None = None
) -> tuple[Path, ReleaseDocument]:
    """``<tmp>/out/r`` with an internal record naming ``internal``, and the release.json
    ``privacy.ledger_record`` of a bundle that published ``published`` (before issue 38)."""
    bundle = tmp_path / "out" / "r"
    (bundle / "internal").mkdir(parents=True)
    if internal is not None:
        write_ledger_record(bundle / "internal", internal)
    record = {"rows": []} if published is None else {"url": published, "rows": []}
    return bundle, ReleaseDocument.from_json({"privacy": {"ledger_record": record}})


def _ledger(path: Path) -> str:
    Ledger(f"sqlite:///{path}").close()
    return f"sqlite:///{path}"


def test_the_internal_record_names_the_ledger(tmp_path):
    url = _ledger(tmp_path / "elsewhere.db")
    _ledger(tmp_path / "out" / "ledger.db")  # beside the bundle, but not the one it used
    chosen = choose_ledger(*_bundle(tmp_path, internal=url), None)
    assert chosen.url == url
    assert chosen.origin == "named by the bundle's internal/ledger.json; pass --ledger to choose"


def test_without_a_record_the_ledger_beside_the_bundle_is_taken(tmp_path):
    url = _ledger(tmp_path / "out" / "ledger.db")
    chosen = choose_ledger(*_bundle(tmp_path), None)
    assert (chosen.url, chosen.origin) == (url, "ledger.db beside the bundle; pass --ledger to choose")


def test_a_postgresql_ledger_is_named_and_never_opened_unasked(tmp_path):
    _ledger(tmp_path / "out" / "ledger.db")
    chosen = choose_ledger(*_bundle(tmp_path, internal="postgresql+psycopg://reader@db.example/ledger"), None)
    assert chosen.url is None
    assert chosen.origin == (
        "the bundle's internal/ledger.json names postgresql+psycopg://reader@db.example/ledger; "
        "pass --ledger URL to check it"
    )


@pytest.mark.parametrize("query", ["", f"?password%20={MARK}", f"?password={MARK}"])
def test_an_older_bundle_still_names_its_ledger_without_its_password(tmp_path, query):
    """Before issue 38 ``release.json`` published the URL, with a password under a key libpq
    reads as ``password`` (``?password+=``) as given: the audit opens the file it names and
    shows the URL rebuilt, never that password."""
    db = tmp_path / "ledger.db"
    _ledger(db)
    chosen = choose_ledger(*_bundle(tmp_path, published=f"sqlite:///{db}{query}"), None)
    assert chosen.url == f"sqlite:///{db}" and MARK not in chosen.origin
    assert chosen.origin == "named by the bundle's release.json; pass --ledger to choose"


def test_a_given_ledger_is_shown_without_its_password(tmp_path):
    chosen = choose_ledger(*_bundle(tmp_path), f"postgresql+psycopg://reader:{MARK}@db.example/ledger")
    assert chosen.origin == "--ledger" and chosen.shown == "postgresql+psycopg://reader@db.example/ledger"


def test_nothing_found_says_what_was_looked_for(tmp_path):
    bundle, doc = _bundle(tmp_path, internal=f"sqlite:///{tmp_path / 'gone.db'}")
    chosen = choose_ledger(bundle, doc, None)
    assert chosen.url is None
    assert chosen.origin == (
        f"the bundle's internal/ledger.json names sqlite:///{tmp_path / 'gone.db'}, which is not a file "
        "here; no ledger.db beside the bundle; pass --ledger URL"
    )
