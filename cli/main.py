"""``dprelease``: the command line of the release pipeline."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.cli.deploy import deploy_app
from dprelease.cli.draft import discover, init
from dprelease.cli.listing import mechanisms
from dprelease.cli.options import (
    IdOpt,
    LedgerOpt,
    MemoryOpt,
    NewDatasetOpt,
    OutOpt,
    SecondsOpt,
    SeedOpt,
    SpecArg,
    VerboseOpt,
    set_ceilings,
)
from dprelease.cli.query import query
from dprelease.cli.records import audit_app, ledger_app
from dprelease.cli.recovery import notify, recover, settle
from dprelease.cli.summary import print_summary
from dprelease.cli.validate import validate
from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    pass

from dprelease.flows import DEMO_SPEC

app = typer.Typer(
    help="Publish differentially private synthetic microdata with an audit trail.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(given: bool) -> None:
    if given:
        from dprelease._version import __version__, commit

        typer.echo(f"dprelease {__version__} (commit {commit()})")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and the commit this code runs from, and exit.",
        ),
    ] = False,
) -> None:
    """Publish differentially private synthetic microdata with an audit trail."""


class _QuietRunErrors(logging.Filter):
    """Without ``--verbose`` the terminal ends a failed release with its error panel only.
    Prefect logs the failed task and flow run at ERROR with their tracebacks (84–91 lines for
    a data error); this filter keeps those records off the terminal's handler. They still
    reach the run's log in Prefect (its API handler), and the failure record holds the
    error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or not record.name.startswith(
            ("prefect.flow_runs", "prefect.task_runs")
        )


def _quiet_run_errors() -> None:
    """Put ``_QuietRunErrors`` on Prefect's terminal handlers (the root logger's, set up by
    ``import prefect``; Prefect's later logging set-ups are incremental and keep it)."""
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            isinstance(f, _QuietRunErrors) for f in handler.filters
        ):
            handler.addFilter(_QuietRunErrors())


def _say(text: str) -> None:
    console.print(shown(text), soft_wrap=True)


def _warn(text: str) -> None:
    console.print(f"[yellow]warning:[/yellow] {shown(text)}")


def _run_release(
    spec: Path,
    out: Path,
    release_id: str | None,
    seed: int | None,
    ledger: str | None,
    verbose: bool,
    new_dataset: str | None = None,
    ceilings: tuple[float | None, float | None] = (None, None),
) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from dprelease.flows import run

    run.prefect_logging(verbose)
    set_ceilings(*ceilings)
    try:  # what can be checked without reading a value should not wait for Prefect to start
        url = run.flow_ledger(ledger, out)
        run.before_prefect(spec, out, release_id, url, say=_say, new_dataset=new_dataset)
    except DPReleaseError as e:
        code = exit_code(e)
        fail(
            str(e),
            "see `dprelease ledger show` for what was spent; nothing was read or spent."
            if code == 4
            else "fix what the message names; nothing was read or spent.",
            code,
        )

    from dprelease.flows.prefect_server import prefect_api
    from dprelease.flows.progress import STAGES, set_progress

    def import_the_flow() -> None:  # while Prefect's temporary server starts
        import dprelease.expectations.suite
        import dprelease.flows.release  # noqa: F401

        if not verbose:
            _quiet_run_errors()

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task("starting Prefect", total=len(STAGES))
        started: list[str] = []

        def on_stage(name: str, detail: str | None) -> None:
            if detail is None:
                if started:
                    progress.advance(bar)
                started.append(name)
            # a display never fails a run: a step it does not know is shown by its name
            where = f"[{len(started)}/{len(STAGES)}] {STAGES.get(name, name)}"
            progress.update(bar, description=where if detail is None else f"{where}: {detail}")

        set_progress(on_stage)
        try:  # a temporary server that dies with the CLI
            path = run.run_flow(
                spec,
                out,
                release_id,
                seed,
                url,
                api=prefect_api,
                warn=_warn,
                meanwhile=import_the_flow,
                new_dataset=new_dataset,
            )
        except DPReleaseError as e:
            progress.stop()
            _failed(e, out)
        finally:
            set_progress(None)
        progress.update(bar, completed=len(STAGES), description="release published")
    print_summary(path)
    _undelivered(out, path.name)


def _failed(e: DPReleaseError, out: Path) -> None:
    """The error panel of a release that started: the message, what to do next, and the exit
    code of ``e``'s class (``console.exit_codes``)."""
    from dprelease.engines.inputs import InputRefused
    from dprelease.flows.run import PrefectNotStarted, PrefectUnreachable, UnexpectedFailure
    from dprelease.ledger import BudgetRefused

    code = exit_code(e)
    if isinstance(e, InputRefused):  # Prefect was told only that and where; the steward sees why
        message = e.detail + (f"\n(failure record: {e.record})" if e.record else "")
        hint = (
            "fix the data or the spec's schema, or declare out_of_bounds: clip / unknown: other "
            "for the columns named; nothing was published or spent."
        )
    elif isinstance(e, PrefectNotStarted):
        message = str(e)
        hint = (
            "export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300 (or more), or set PREFECT_API_URL "
            "to a running Prefect server, and run again; nothing was read or spent."
        )
    elif isinstance(e, PrefectUnreachable):
        message = str(e)
        hint = (
            "start the Prefect server of PREFECT_API_URL (or unset it for a temporary one) and run "
            "again; nothing was read or spent."
        )
    elif code == 4:
        message = str(e)
        hint = (
            "see `dprelease ledger show` for what this dataset has spent; nothing was read."
            if isinstance(e, BudgetRefused)
            else "nothing was read or spent."
        )
    elif code == 3:
        message = str(e)
        hint = "read internal/report.html in the folder named above before deciding what to change."
    elif isinstance(e, UnexpectedFailure):
        message = str(e)
        hint = f"nothing was published; the failure record in {out / 'failures'} holds the traceback."
    else:
        message = str(e)
        hint = (
            "fix what the message names and run again; nothing was published "
            f"(a failure record is in {out / 'failures'} if the run had started)."
        )
    fail(message, hint, code)


def _undelivered(out: Path, release_id: str) -> None:
    """Say so when this release's artifacts and event are queued, not delivered."""
    from dprelease.flows.delivery import UNDELIVERED

    if any((out / UNDELIVERED).glob(f"{release_id}-*.json")):
        console.print(
            f"[yellow]Prefect's API was unreachable:[/yellow] this release's artifacts and event are queued "
            f"in {shown(str(out / UNDELIVERED))}; `dprelease notify --out {shown(str(out))}` sends them "
            "(every release into this folder also does)."
        )


@app.command()
def release(
    spec: SpecArg,
    out: OutOpt = Path("releases"),
    release_id: IdOpt = None,
    insecure_seed: SeedOpt = None,
    ledger: LedgerOpt = None,
    verbose: VerboseOpt = False,
    new_dataset: NewDatasetOpt = None,
    max_memory: MemoryOpt = None,
    max_seconds: SecondsOpt = None,
) -> None:
    """Run a release: reserve the budget in the ledger, validate, synthesise, write the bundle.

    Exit codes:

    0  published

    2  bad spec or data, or an output folder that cannot be written: nothing published; nothing
    spent unless a step that had drawn noise failed (the message says so)

    3  a gate failed: budget spent, nothing published

    4  refused by the ledger (budget policy, a release_id that already spent, or another dataset
    name with the same schema): nothing read or spent

    1  an unexpected error
    """
    _run_release(
        spec, out, release_id, insecure_seed, ledger, verbose, new_dataset, (max_memory, max_seconds)
    )


@app.command()
def demo(
    out: OutOpt = Path("releases"),
    insecure_seed: SeedOpt = None,
    ledger: LedgerOpt = None,
    verbose: VerboseOpt = False,
    new_dataset: NewDatasetOpt = None,
    max_memory: MemoryOpt = None,
    max_seconds: SecondsOpt = None,
) -> None:
    """Release the embedded UCI Adult data (factor_gauss, epsilon = 1, delta = 1e-6), as
    dataset 'adult'."""
    _run_release(DEMO_SPEC, out, None, insecure_seed, ledger, verbose, new_dataset, (max_memory, max_seconds))


app.command("validate")(validate)
app.command("init")(init)
app.command("discover")(discover)


app.command("mechanisms")(mechanisms)
app.command("recover")(recover)
app.command("query")(query)
app.command("notify")(notify)
ledger_app.command("settle")(settle)
app.add_typer(audit_app, name="audit")
app.add_typer(ledger_app, name="ledger")
app.add_typer(deploy_app, name="deploy")


def main() -> None:
    from dprelease.flows.run import API_LOST

    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted: nothing was published")
        sys.exit(130)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not API_LOST:
            server = sys.modules.get("dprelease.flows.prefect_server")  # imported only by release and demo
            if server is not None and server.prefect_drained():
                # The run's logs and events are sent (any temporary server stopped): Prefect's
                # remaining teardown (thread pools, its event loop, drains of nothing) is skipped
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
            raise
        # Prefect's own records of the run (task states, logs) wait in its queues for an API
        # that is gone, about 7 s each at exit; they cannot be sent, so do not wait for them.
        console.print(
            "[dim]Prefect's API is unreachable: its own records of this run (task states, logs) "
            "are dropped instead of waited for.[/dim]"
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
