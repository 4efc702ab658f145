"""Which ledger ``audit verify`` cross-checks a bundle against, and where it found it.

A bundle names no ledger location in public (``release.json`` names the ledger by its chain
head); its ``internal/ledger.json`` holds the URL the release used, rebuilt with no secret
(``ledger.url.parse_url``), for the steward and the auditor who hold the bundle's internal part.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dprelease.bundle.ledger_record import LEDGER_RECORD, recorded_ledger
from dprelease.bundle.release_doc import ReleaseDocument

__all__ = ["LedgerChoice", "choose_ledger"]


@dataclass(frozen=True)
class LedgerChoice:
    """The ledger an audit cross-checks (None: none found) and where its URL came from."""

    url: str | None
    origin: str

    @property
    def shown(self) -> str | None:
        """``url`` as a message shows it (``shown_url``: no password, even one given)."""
        from dprelease.ledger import shown_url

        return None if self.url is None else shown_url(self.url)


def choose_ledger(bundle: Path, doc: ReleaseDocument, given: str | None) -> LedgerChoice:
    """The ledger to cross-check, and where it came from (always said: a copied bundle may
    name a ledger that is not the one the auditor means): ``given`` (``--ledger``); else the
    SQLite file the bundle's internal record names (``internal/ledger.json``; a bundle from
    before issue 38: ``release.json``'s ``ledger_record.url``), if it is here; else
    ``ledger.db`` beside the bundle (a release's default, ``<out>/ledger.db``). A recorded
    database of another kind is named, never opened unasked: the auditor's password would
    go to whatever host a bundle names."""
    from dprelease.ledger import LedgerError, parse_url, shown_url

    if given is not None:
        return LedgerChoice(given, "--ledger")
    recorded, source = _recorded(bundle, doc)
    said = ""
    if recorded is not None:
        shown = shown_url(recorded)  # an older bundle's URL may hold a key parse_url now refuses
        try:
            safe = parse_url(shown).safe
        except LedgerError:
            safe = None
        if safe is None or safe.get_backend_name() != "sqlite":
            return LedgerChoice(None, f"{source} names {shown}; pass --ledger URL to check it")
        if safe.database and Path(safe.database).is_file():
            return LedgerChoice(shown, f"named by {source}; pass --ledger to choose")
        said = f"{source} names {shown}, which is not a file here; "
    beside = bundle.resolve().parent / "ledger.db"
    if beside.is_file():
        return LedgerChoice(
            f"sqlite:///{beside}", f"{said}ledger.db beside the bundle; pass --ledger to choose"
        )
    return LedgerChoice(None, f"{said}no ledger.db beside the bundle; pass --ledger URL")


def _recorded(bundle: Path, doc: ReleaseDocument) -> tuple[str | None, str]:
    """The ledger URL the bundle records, and where: its internal record, else (a bundle
    from before issue 38) the URL its release.json published."""
    recorded = recorded_ledger(bundle)
    if recorded is not None:
        return recorded, f"the bundle's internal/{LEDGER_RECORD}"
    return doc.privacy.record.url, "the bundle's release.json"
