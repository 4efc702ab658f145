"""``dprelease deploy check``: each deployment of the release flow checked before its first
slot (``flows/deployments.py``): the code it runs, its spec's budget policy, its ledger's
format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dprelease.cli.console import console, fail, shown

__all__ = ["deploy_app"]

deploy_app = typer.Typer(
    help="Check the release flow's Prefect deployments.", no_args_is_help=True, add_completion=False
)


@deploy_app.command("check")
def deploy_check(
    prefect_file: Annotated[
        Path | None,
        typer.Option(
            "--prefect-file",
            help="Check the deployments this prefect.yaml declares, as `prefect deploy` would register them "
            "from this shell, instead of those registered on the Prefect server (PREFECT_API_URL).",
        ),
    ] = None,
) -> None:
    """Check every deployment of the release flow before its first slot: its pull step runs
    this checkout's code, its spec declares a budget policy, and its ledger is in this
    version's format. Reads no data, writes nothing. Exit 0 when all hold, 1 names what does
    not; run it after every `prefect deploy` and every upgrade."""
    import dprelease._version as _version
    from dprelease.flows.deployments import check, from_prefect_file, from_server

    here = Path(_version.__file__).resolve().parent.parent  # the folder holding dprelease/
    try:
        planned = from_prefect_file(prefect_file) if prefect_file is not None else from_server()
    except OSError as e:
        fail(f"{prefect_file} cannot be read ({type(e).__name__})", "pass the path of a prefect.yaml.", 2)
    except Exception as e:  # the Prefect client's connection errors have no common base
        fail(
            f"the Prefect server cannot be asked for deployments ({type(e).__name__})",
            "check PREFECT_API_URL (and PREFECT_API_AUTH_STRING), or pass --prefect-file.",
            1,
        )
    if not planned:
        fail(
            "no deployment of the release flow (dp-release) was found",
            "deploy one, or pass --prefect-file.",
            1,
        )
    findings = check(planned, here)
    table = Table(title="deployments of dp-release")
    for col in ("deployment", "check", "result", "detail"):
        table.add_column(col, overflow="fold")
    for f in findings:
        result = "[yellow]not checked" if f.ok is None else "[green]ok" if f.ok else "[red]FAIL"
        table.add_row(shown(f.deployment), f.check, result, shown(f.detail))
    Console().print(table)
    failed = [f for f in findings if f.ok is False]
    if failed:
        fail(
            f"{len(failed)} check(s) failed: " + "; ".join(f"{f.deployment}: {f.check}" for f in failed),
            "fix each, deploy again and check again; until then those runs will fail or be refused.",
            1,
        )
    console.print(f"[green]{len(planned)} deployment(s) checked: every check holds.[/green]")
