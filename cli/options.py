"""The options and arguments the release commands share, and the steps they share before
the flow: the ceilings, the rehearsal's progress, what ``mechanism: auto`` chose."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dprelease.cli.console import console, shown

if TYPE_CHECKING:
    from dprelease.flows.rehearsal import Rehearsal
    from dprelease.spec import ReleaseSpec

__all__ = [
    "IdOpt",
    "LedgerOpt",
    "MemoryOpt",
    "NewDatasetOpt",
    "OutOpt",
    "SecondsOpt",
    "SeedOpt",
    "SpecArg",
    "VerboseOpt",
    "chosen",
    "rehearsing",
    "set_ceilings",
]

SpecArg = Annotated[
    Path, typer.Argument(help="Release spec (YAML): dataset, public schema, privacy budget, mechanism.")
]
OutOpt = Annotated[
    Path,
    typer.Option(
        "--out", help="Folder that receives <release_id>/public, <release_id>/internal and failures/."
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--insecure-seed",
        help="Fix the noise seed for a reproducible run (numpy's samplers instead of OpenDP's vetted "
        "ones). The bundle then says it is NOT fit for publication, and audit verify fails it.",
    ),
]
IdOpt = Annotated[
    str | None,
    typer.Option(
        "--release-id",
        help="Override the spec's release_id (lowercase letters, digits and '-'); "
        "default: the spec's, else <dataset>-<UTC timestamp>.",
    ),
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar="DPRELEASE_LEDGER",
        help="Budget ledger: a database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB), a "
        "SQLite ledger file, or a folder holding ledger.db "
        "(also read from DPRELEASE_LEDGER). Default: sqlite:///OUT/ledger.db. Give the database "
        "password in DPRELEASE_LEDGER_PASSWORD rather than in the URL; a password in the URL is "
        "moved there before Prefect starts, so it never reaches Prefect's database or logs.",
    ),
]
NewDatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--new-dataset",
        metavar="REASON",
        help="Declare this dataset new although another dataset name in the ledger has the same public "
        "schema (column names and kinds), and say why, e.g. 'the 2026 survey wave: a new sample'; the "
        "reason is recorded in the ledger. Without it such a release is refused (exit 4): a new name for "
        "the same data would start a fresh budget.",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Show Prefect's INFO logs (no data values are logged).")
]
MemoryOpt = Annotated[
    float | None,
    typer.Option(
        "--max-memory",
        envvar="DPRELEASE_MAX_MEMORY_GB",
        min=0.001,
        help="The most memory (GB) the rehearsal and the release may be forecast to need; overrides the "
        "spec's resources.max_memory_gb (default: the smaller of 8 GB and 3/4 of this machine's memory). "
        "A spec forecast above it is refused before anything is read or reserved.",
    ),
]
SecondsOpt = Annotated[
    float | None,
    typer.Option(
        "--max-seconds",
        envvar="DPRELEASE_MAX_SECONDS",
        min=0.001,
        help="The most time (seconds) the rehearsal and the release may each be forecast to need; "
        "overrides the spec's resources.max_seconds (default: 3600).",
    ),
]


def set_ceilings(memory: float | None, seconds: float | None) -> None:
    """The command line's ceilings, where the forecast reads them (``spec.resources``): the
    environment of this process, which the release flow runs in."""
    from dprelease.spec.resources import MEMORY_ENV, SECONDS_ENV

    for env, value in ((MEMORY_ENV, memory), (SECONDS_ENV, seconds)):
        if value is not None:
            os.environ[env] = repr(value)


def rehearsing(s: ReleaseSpec, rehearse: Callable[[ReleaseSpec], Rehearsal]) -> Rehearsal:
    """``rehearse(s)``, saying on the terminal (stderr) which step it is at, and every few
    seconds of a long step how long it has run."""
    from dprelease.flows.progress import set_progress

    def on_step(stage: str, detail: str | None) -> None:
        if detail is not None:
            console.print(f"[dim]rehearsal: {shown(detail)}[/dim]", soft_wrap=True)

    set_progress(on_step)
    try:
        return rehearse(s)
    finally:
        set_progress(None)


def chosen(s: ReleaseSpec) -> ReleaseSpec:
    """Say what ``mechanism: auto`` chose (on stderr) and why; the spec as it is."""
    if s.auto_choice is not None:
        console.print(f"mechanism auto chose [bold]{s.mechanism.name}[/bold]: {s.auto_choice.reason}")
        if s.engine.streaming and s.checks.holdout_fraction:
            console.print(
                "(on the memory engine's fitted count: a streaming release holds each row out by a coin and "
                "chooses on the rows it then fits, a few more or fewer)"
            )
    return s
