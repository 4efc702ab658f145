"""``dprelease recover``, ``dprelease notify`` and ``dprelease ledger settle``: clearing what
dead releases left (``records/recovery.py`` has the rules) and sending what releases could not
tell Prefect (``flows/events.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.mechanisms.errors import DPReleaseError

__all__ = ["notify", "recover", "settle"]

OutDir = Annotated[
    Path,
    typer.Option("--out", help="The folder the releases went to (as given to `dprelease release --out`)."),
]
LedgerUrl = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="DPRELEASE_LEDGER",
        help="The budget ledger: a database URL, a SQLite ledger file or a folder holding ledger.db (also "
        "read from DPRELEASE_LEDGER); default OUT/ledger.db. "
        "The password, if any, in DPRELEASE_LEDGER_PASSWORD.",
    ),
]


def _open(out: Path, ledger: str | None):
    from dprelease.ledger import Ledger, ledger_url, split_password

    url, password = split_password(ledger_url(ledger, out))
    return Ledger(url, password=password, create=False)


def recover(out: OutDir = Path("releases"), ledger: LedgerUrl = None) -> None:
    """Clear what dead releases (killed, crashed) left in --out; every release into --out does
    this first. A staging folder whose release the ledger shows sealed is moved into place; any
    other becomes a failure record under failures/, the only place its confidential reports are
    kept. A release still running (its staging folder locked) is left alone."""
    from dprelease.records.recovery import recover as recover_out

    if not out.is_dir():
        fail(f"'{out}' is not a folder", "pass --out with the folder your releases go to.", 2)
    try:
        with _open(out, ledger) as book:
            found = recover_out(out, book)
    except DPReleaseError as e:
        fail(str(e), "check --ledger (or DPRELEASE_LEDGER) and --out.", exit_code(e))
    for r in found:
        console.print(shown(r.describe()))
    console.print(f"{len(found)} stale staging folder(s) cleared in '{shown(str(out))}'")


def notify(out: OutDir = Path("releases")) -> None:
    """Send the Prefect artifacts and events that releases into --out could not deliver
    because Prefect's API was unreachable (queued in --out/.undelivered/), to the server of
    PREFECT_API_URL; a published release's flow run is also marked Completed if Prefect still
    shows it otherwise. Every release into --out does this first. Exit codes: 0 nothing left
    queued; 1 some could not be sent (the server is still unreachable); 2 no PREFECT_API_URL."""
    from dprelease.flows.delivery import UNDELIVERED, send_undelivered

    queued = sorted((out / UNDELIVERED).glob("*.json"))
    if not queued:
        console.print(f"nothing queued in '{shown(str(out / UNDELIVERED))}'")
        return
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        fail(
            "PREFECT_API_URL is not set: the queued notices must go to the Prefect server the releases used.",
            "set PREFECT_API_URL (or a Prefect profile) to that server and run again.",
            2,
        )
    for r in send_undelivered(out):
        what = "sent" if r.sent else f"NOT sent ({shown(r.reason or '?')}; still queued: {shown(r.left)})"
        console.print(f"release '{shown(r.release_id)}', {shown(r.kind)} notice: {what}")
    left = sorted((out / UNDELIVERED).glob("*.json"))
    if left:
        fail(
            f"{len(left)} notice(s) are still queued in '{out / UNDELIVERED}'.",
            "check that the Prefect server of PREFECT_API_URL is up, then run `dprelease notify` again.",
            1,
        )
    console.print(f"all {len(queued)} queued notice(s) sent")


def settle(
    release_id: Annotated[str, typer.Argument(help="The release_id of the dead attempt.")],
    reason: Annotated[
        str,
        typer.Option("--reason", help="Why you settle it (written into the ledger row, for the auditor)."),
    ],
    out: OutDir = Path("releases"),
    ledger: LedgerUrl = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who settles it (default: your user name @ this host).")
    ] = None,
    stale_after: Annotated[
        float,
        typer.Option(
            "--stale-after",
            help="For an attempt that ran on another host (whose process this machine cannot ask): "
            "settle only when its last ledger row is at least this many hours old.",
        ),
    ] = 24.0,
) -> None:
    """Close a dead attempt the ledger still holds as reserved (charged its whole plan) at what
    its spent stage rows show, with a row saying who settled it, why and on what evidence.

    Refused while the attempt may be alive: its staging folder in --out is locked, or its pid
    lives on this host. Exit codes: 0 settled; 2 refused (nothing written)."""
    from dprelease.records.recovery import settle as settle_attempt

    try:
        with _open(out, ledger) as book:
            row = settle_attempt(book, release_id, out, reason=reason, by=by, stale_after=stale_after)
    except DPReleaseError as e:
        fail(str(e), "nothing was written to the ledger.", exit_code(e))
    charged = (
        f"epsilon={row['epsilon']:.6g}, delta={row['delta']:.3g}" if row["epsilon"] is not None else "void"
    )
    console.print(
        f"release '{shown(release_id)}' settled as failed, charged {charged} "
        f"(ledger row {row['seq']}); evidence: {shown(row['detail']['settled']['evidence'])}"
    )
