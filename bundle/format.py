"""The release bundle's format: stated in ``release.json`` (``bundle_format``) so that an
audit knows what it is checking, and refuses what it cannot check.

* **Format 1**, written by dprelease 0.1.0 and 0.2.0: no ``bundle_format`` key.
* **Format 2** (this version): format 1 plus ``bundle_format``; the ledger rows it is
  cross-checked against name the software that wrote them (``ledger.format``).

``dprelease audit verify`` checks every format up to ``BUNDLE_FORMAT`` and names the one it
found; a newer bundle is refused, naming the version that made it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dprelease.mechanisms.errors import BundleFormatError

if TYPE_CHECKING:
    from dprelease.bundle.release_doc import ReleaseDocument

__all__ = ["BUNDLE_FORMAT", "BUNDLE_FORMATS", "BundleFormatError", "bundle_format", "check_bundle_format"]

BUNDLE_FORMAT = 2
"""The format this code writes and the newest it checks."""

BUNDLE_FORMATS = {
    1: "dprelease 0.1.0 and 0.2.0 (no bundle_format in release.json)",
    2: "dprelease 0.3.0 (bundle_format in release.json)",
}


def bundle_format(doc: ReleaseDocument) -> int:
    """The format a ``release.json`` states (1 when it states none; 0 when what it states
    is not a format number)."""
    found = 1 if doc.bundle_format is None else doc.bundle_format
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


def check_bundle_format(doc: ReleaseDocument, where: str) -> int:
    """The bundle's format, or ``BundleFormatError`` when it is newer than this code checks
    (or not a format number at all)."""
    from dprelease._version import __version__

    found = bundle_format(doc)
    if not 1 <= found <= BUNDLE_FORMAT:
        made_by = doc.made_by or "an unknown version"
        raise BundleFormatError(
            f"the bundle {where} states bundle_format {doc.bundle_format!r} (made by dprelease "
            f"{made_by}); this dprelease {__version__} checks formats 1 to {BUNDLE_FORMAT} and cannot tell "
            f"what it would be accepting. Nothing was checked: audit it with dprelease {made_by} or later"
        )
    return found
