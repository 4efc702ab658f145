"""Writing a release bundle: the synthetic tables (CSV through pyarrow, Parquet), the
sha256 manifests, the atomic rename of the staging folder into place, and the failure
record a failed run leaves instead; OS errors become messages that name the folder and
say what to do.

Layout of ``<out>/<release_id>/``:

* ``public/``: ``synthetic.csv`` and/or ``synthetic.parquet``, ``budget_plan.json``,
  ``release.json``, ``README.txt``, ``tables/`` (the noisy tables, ``bundle.tables``),
  ``report.html`` (built from those files only, ``bundle.public_report``),
  ``manifest.json`` (sha256 of every other public file);
* ``internal/``: validation reports (with counts), the checks, ``ledger.json`` (where the
  ledger that recorded the release is, ``bundle.ledger_record``), ``manifest.json`` — for
  the steward and the auditor only.

Only ``public/`` may be served: ``<release_id>/`` and ``public/`` are 0755 with 0644 files,
``internal/`` and ``failures/`` 0700 with 0600 files (``bundle.files``), whatever the umask.

Everything is written into ``<out>/.staging-<release_id>-<uuid>`` (``bundle/staging.py``),
renamed to ``<out>/<release_id>`` as the very last step, so a failed run never leaves a
half-written release.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import os
import shutil
import traceback
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dprelease.bundle.document import readme
from dprelease.bundle.files import (
    PRIVATE_DIR,
    PUBLIC_DIR,
    make_dir,
    set_modes,
    sha256,
    write_json,
    write_text,
)
from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.mechanisms.errors import DPReleaseError

__all__ = [
    "csv_header",
    "io_error",
    "write_bundle_files",
    "write_csv",
    "write_failure_record",
    "write_parquet",
]

_IO_HINTS = {
    errno.ENOSPC: "free space on that device or choose --out on another one",
    errno.EDQUOT: "free space within your quota or choose --out on another device",
    errno.EACCES: "make the folder writable or choose --out with a folder you can write to",
    errno.EPERM: "make the folder writable or choose --out with a folder you can write to",
    errno.EROFS: "the file system is read-only: choose --out on a writable one",
}


def io_error(what: str, folder: Path, e: OSError, after: str = "") -> DPReleaseError:
    """An OSError while writing, as a message that names the folder, the reason and its
    errno code, and says what to do (never a data value: OS messages name paths only)."""
    code = errno.errorcode.get(e.errno) if e.errno else None
    reason = os.strerror(e.errno).lower() if e.errno else (e.strerror or type(e).__name__)
    hint = _IO_HINTS.get(e.errno or 0, "check the folder and its device, or choose another --out")
    return DPReleaseError(
        f"{what} into '{folder}' failed: {reason}{f' ({code})' if code else ''}; nothing was published"
        f"{after}; {hint}"
    )


def csv_header(columns: list[str]) -> bytes:
    """The header line as the csv module writes it (quoted only where needed)."""
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(columns)
    return line.getvalue().encode()


def write_parquet(table: pd.DataFrame, path: Path) -> None:
    """Parquet through pyarrow; a write that fails part way removes the partial file."""
    try:
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path)
    except OSError:
        path.unlink(missing_ok=True)
        raise


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """CSV through pyarrow (≈10× faster than pandas on 1M rows). Its ``quoting_style="needed"``
    decides by type: every text cell is quoted, a number never, so tokens that are plain
    numbers are published as numbers (``bundle.published.Layout.numbers``). A write that
    fails part way removes the partial file."""
    try:
        with pa.OSFile(str(path), "wb") as sink:
            sink.write(csv_header(list(table.columns)))
            pa_csv.write_csv(
                pa.Table.from_pandas(table, preserve_index=False),
                sink,
                pa_csv.WriteOptions(include_header=False, quoting_style="needed"),
            )
    except OSError:
        path.unlink(missing_ok=True)
        raise


def _manifest(folder: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json")
    write_json(
        folder / "manifest.json",
        {"algorithm": "sha256", "files": {str(p.relative_to(folder)): sha256(p) for p in files}},
    )


def write_bundle_files(
    staging: Path,
    dest: Path,
    synthetic: pd.DataFrame | None,
    document: ReleaseDocument | Mapping[str, Any],
    *,
    publish: bool = True,
    seal: Callable[[str | None, str], None] | None = None,
) -> Path:
    """Write the public files and manifests into ``staging``, then rename it to ``dest``.
    With ``publish=False`` (a gate failed) there is no ``public/``: the record of what was
    spent goes to ``internal/release.json`` beside the budget plan and the reports.
    ``synthetic`` None: a streaming engine has already written the synthetic files into
    ``public/``, chunk by chunk (they are removed with it when a gate failed).
    ``seal`` gets the sha256 of both manifests (public: None when gated) just before
    the rename: the flow writes it into the ledger's closing row. Before the seal the
    modes are set: ``public/`` world-readable, ``internal/`` its owner's only, the folder
    itself 0755 (so that ``public/`` can be served).
    An OSError (disk full, not writable) becomes a ``DPReleaseError`` naming the folder and
    the reason; the partial ``public/`` is removed, and the flow's failure record takes
    ``internal/`` and removes the staging folder.
    ``document`` (``release.json``) is written through ``ReleaseDocument.to_json``: the
    bytes ``write_json`` gives the mapping ``release_document`` built."""
    public, internal = staging / "public", staging / "internal"
    doc = ReleaseDocument.from_json(document) if isinstance(document, Mapping) else document
    try:
        if publish:
            if synthetic is not None:
                writers = {"csv": write_csv, "parquet": write_parquet}
                for name, out in doc.outputs.items():
                    writers[out.format](synthetic, public / name)
            doc.write(public / "release.json")
            write_text(public / "README.txt", readme(doc))
            if doc.tables:
                from dprelease.bundle.public_report import REPORT, render_public_report  # it reads tables/

                write_text(public / REPORT, render_public_report(public))
            _manifest(public)
            set_modes(public, private=False)
        else:
            os.replace(public / "budget_plan.json", internal / "budget_plan.json")
            shutil.rmtree(public)
            doc.write(internal / "release.json")
        _manifest(internal)
        set_modes(internal, private=True)
        os.chmod(staging, PUBLIC_DIR)  # before the seal: a recovery may move it into place as it is
        if seal is not None:
            seal(sha256(public / "manifest.json") if publish else None, sha256(internal / "manifest.json"))
        if os.path.lexists(dest):
            raise DPReleaseError(f"release folder '{dest}' appeared during the run; nothing published")
        os.replace(staging, dest)
    except OSError as e:
        shutil.rmtree(public, ignore_errors=True)
        spent = " (any budget this run spent stays spent: its noise was drawn)"
        raise io_error("writing the release bundle", dest.parent, e, spent) from None
    return dest


def write_failure_record(
    out_dir: Path,
    release_id: str,
    stage: str,
    error: BaseException,
    staging: Path | None,
    facts: dict | None = None,
) -> Path:
    """``<out>/failures/<release_id>-<utc>/``: failure.json (with ``facts``, e.g. how a
    dead run was recovered) plus whatever ``internal/`` reports the run had made (for the
    steward, moved: a rename needs no space on a full disk); the staging folder is removed.
    The record is its owner's only (folders 0700, files 0600), and so is ``failures/``
    when this creates it (an existing one keeps the mode its owner gave it).
    If the record itself cannot be written, it is removed too and a ``DPReleaseError`` says
    why, and what the run had failed with."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    record = out_dir / "failures" / f"{release_id}-{stamp}"
    if isinstance(error, DPReleaseError):  # our messages name rules, never values
        message = getattr(error, "detail", None) or str(error)  # a refused input's column and rule
    else:  # an unexpected message may quote data: keep it with the internal reports
        message = "unexpected error; the traceback is in internal/traceback.txt"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        make_dir(make_dir(record.parent, PRIVATE_DIR, exist_ok=True) / record.name, PRIVATE_DIR)
        if staging is not None and (staging / "internal").is_dir():
            os.replace(staging / "internal", record / "internal")
        if not isinstance(error, DPReleaseError):
            make_dir(record / "internal", PRIVATE_DIR, exist_ok=True)
            cause = getattr(error, "original", error)  # a scrubbed error carries the real one
            write_text(record / "internal" / "traceback.txt", "".join(traceback.format_exception(cause)))
        write_json(
            record / "failure.json",
            {
                "release_id": release_id,
                "stage": stage,
                "error": type(getattr(error, "original", error)).__name__,
                "message": message,
                "published": False,
                "time": datetime.now(UTC).isoformat(),
                **(facts or {}),
            },
        )
        with contextlib.suppress(PermissionError):  # another user's files: the 0700 record closes them
            set_modes(record, private=True)  # what the run had made in internal/, whoever wrote it
    except OSError as e:
        shutil.rmtree(record, ignore_errors=True)
        after = f" (the run had failed at stage '{stage}': {message})"
        raise io_error("writing the failure record", record.parent, e, after) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return record
