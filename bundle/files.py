"""Small file helpers shared by the tasks: JSON that handles numpy, sha256, and the
permission bits of what a release writes.

Who may read what (whatever the umask: ``mkdir`` and ``open`` modes are masked by it, so
each mode is set again on the new folder or open file): a staging folder, ``internal/``
and ``failures/`` hold confidential reports (exact utility and linkage statistics, the
report's real marginals, validation counts), so their folders are 0700 and their files
0600; a bundle's ``public/`` is for publishing, 0755 and 0644. A file takes the audience
of its folder (``write_text``), so the tasks writing into ``internal/`` need not know."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

__all__ = [
    "PRIVATE_DIR",
    "PUBLIC_DIR",
    "is_private",
    "json_text",
    "make_dir",
    "set_modes",
    "sha256",
    "write_json",
    "write_text",
]

PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
PUBLIC_DIR, PUBLIC_FILE = 0o755, 0o644


def make_dir(path: Path, mode: int, *, exist_ok: bool = False) -> Path:
    """Create the folder ``path`` (its parent must exist) with exactly ``mode``: made with
    ``mode`` (the umask can only take bits away, so it is never more open meanwhile), then
    set to it. With ``exist_ok`` an existing folder is left with the mode its owner gave it."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if exist_ok and path.is_dir():
            return path
        raise
    os.chmod(path, mode)
    return path


def is_private(folder: Path) -> bool:
    """No permission bit for group or others: only its owner may enter ``folder``."""
    return not folder.stat().st_mode & 0o077


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) into ``path``, created or replaced with the audience of its folder:
    0600 in a private folder (``is_private``), else 0644; the mode is set on the open file
    before a byte is written."""
    mode = PRIVATE_FILE if is_private(path.parent) else PUBLIC_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "w", encoding="utf-8") as f:
        os.fchmod(fd, mode)
        f.write(text)


def set_modes(folder: Path, *, private: bool) -> None:
    """``folder`` and everything under it private (folders 0700, files 0600) or public
    (0755, 0644): the last word on what other writers (pyarrow, an older version's
    staging folder) made. Symlinks are left alone (chmod would follow them)."""
    dirs, files = (PRIVATE_DIR, PRIVATE_FILE) if private else (PUBLIC_DIR, PUBLIC_FILE)
    os.chmod(folder, dirs)
    for p in folder.rglob("*"):
        if not p.is_symlink():
            os.chmod(p, dirs if p.is_dir() else files)


def _default(o: object) -> object:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def json_text(obj: object) -> str:
    """``obj`` as the bundle's JSON files hold it: indented by 2, keys in their order, numpy
    values as numbers, a final newline (``release.json``'s bytes: ``bundle.release_doc``)."""
    return json.dumps(obj, indent=2, sort_keys=False, default=_default) + "\n"


def write_json(path: Path, obj: object) -> None:
    """``obj`` as indented JSON (``json_text``) into ``path`` (``write_text``: the folder's
    audience); a missing folder is created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json_text(obj))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
