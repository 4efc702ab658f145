"""``internal/ledger.json``: where the ledger that recorded a release is, for the steward
and the auditor who hold the bundle's internal part; never in ``public/``.

A file path, or a database's host, port, role and name, is the steward's topology, so
``release.json`` names the ledger by its chain head instead (``ledger.facts``). The URL
recorded here is the one ``ledger.url.parse_url`` rebuilt: it holds no secret.
"""

from __future__ import annotations

import json
from pathlib import Path

from dprelease.bundle.files import write_json

__all__ = ["LEDGER_RECORD", "recorded_ledger", "write_ledger_record"]

LEDGER_RECORD = "ledger.json"


def write_ledger_record(internal: Path, url: str) -> None:
    """``<internal>/ledger.json``: ``{"url": url}``, ``url`` as ``parse_url`` rebuilt it."""
    write_json(internal / LEDGER_RECORD, {"url": url})


def recorded_ledger(bundle: Path) -> str | None:
    """The ledger URL ``<bundle>/internal/ledger.json`` records; None without one (a bundle
    from before issue 38, or a copy of its ``public/`` part alone)."""
    path = bundle / "internal" / LEDGER_RECORD
    return json.loads(path.read_text()).get("url") if path.is_file() else None
