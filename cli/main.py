"""``dprelease``: the command line of the release pipeline."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.cli.draft import discover, init
from dprelease.cli.query import query
from dprelease.cli.records import audit_app, ledger_app
from dprelease.cli.recovery import notify, recover, settle
from dprelease.cli.summary import print_summary
from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    from dprelease.flows.rehearsal import Rehearsal
    from dprelease.spec import ReleaseSpec

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


def _ceilings(memory: float | None, seconds: float | None) -> None:
    """The command line's ceilings, where the forecast reads them (``spec.resources``): the
    environment of this process, which the release flow runs in."""
    from dprelease.spec.resources import MEMORY_ENV, SECONDS_ENV

    for env, value in ((MEMORY_ENV, memory), (SECONDS_ENV, seconds)):
        if value is not None:
            os.environ[env] = repr(value)


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
    _ceilings(*ceilings)
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


def _rehearsing(s: ReleaseSpec, rehearse: Callable[[ReleaseSpec], Rehearsal]) -> Rehearsal:
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


def _chosen(s: ReleaseSpec) -> ReleaseSpec:
    """Say what ``mechanism: auto`` chose (on stderr) and why; the spec as it is."""
    if s.auto_choice is not None:
        console.print(f"mechanism auto chose [bold]{s.mechanism.name}[/bold]: {s.auto_choice.reason}")
        if s.engine.streaming and s.checks.holdout_fraction:
            console.print(
                "(on the memory engine's fitted count: a streaming release holds each row out by a coin and "
                "chooses on the rows it then fits, a few more or fewer)"
            )
    return s


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


@app.command()
def validate(
    spec: SpecArg,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write the full validation report, with affected-row counts "
            "(confidential), to this JSON file.",
        ),
    ] = None,
    max_memory: MemoryOpt = None,
    max_seconds: SecondsOpt = None,
) -> None:
    """Check the spec and forecast the memory and time its rehearsal and its release would
    need (refused above the ceilings), rehearse its release on a table drawn from the public
    schema alone (as a release does before it reserves any budget), then check its data
    against the public schema. Spends no budget."""
    _ceilings(max_memory, max_seconds)
    from dprelease.bundle.files import write_json
    from dprelease.engines.inputs import check_rows, failing_rules, fitted_rows, read_input, resolve_mechanism
    from dprelease.flows.rehearsal import rehearse
    from dprelease.spec import load_spec
    from dprelease.spec.forecast import gate_forecasts
    from dprelease.spec.resources import check_resources, forecast_resources

    try:
        s = _chosen(resolve_mechanism(load_spec(spec)))
        schema = s.public_schema()
        for line in check_resources(s).lines():  # before the rehearsal, as the release flow does
            console.print(f"forecast: {shown(line)}", soft_wrap=True)
        rehearsal = _rehearsing(s, rehearse)  # before any value is read, as the release flow does
        df, changed = read_input(s)  # the release's policies (clip, other) apply here too
        from dprelease.expectations.suite import validate_table

        suite, records = validate_table(df, schema, "input")
    except DPReleaseError as e:
        fail(str(e), "fix what the message names and run `dprelease validate` again.", exit_code(e))
    if report is not None:
        write_json(report, {"suite": suite, "results": records, "rows": len(df), "policies": changed})
    failures = {f["column"]: f["rule"] for f in failing_rules(records)}  # the first failing rule of each
    columns = list(dict.fromkeys(r["column"] for r in records))
    table = Table()
    for col in ("column", "result"):
        table.add_column(col)
    for name in columns:  # one line per column: pass, or its first failing rule
        table.add_row(
            shown(name), f"[red]FAIL: {shown(failures[name])}" if name in failures else "[green]pass"
        )
    report_out = Console()  # the report goes to stdout (redirectable); warnings and errors to stderr
    report_out.print(
        f"{shown(str(spec))}: {len(records)} expectations on {len(columns)} columns", soft_wrap=True
    )
    report_out.print(table)
    if failures:
        fail(
            f"{len(failures)} column(s) break the schema:\n"
            + "\n".join(f"  column '{name}': {rule}" for name, rule in failures.items()),
            "fix the data or the schema; --report FILE writes every rule's result and the affected-row "
            "counts.",
            2,
        )
    try:
        warnings = check_rows(s, len(df))  # refuses too few rows, noise ≥ n, and the resources with n
    except DPReleaseError as e:
        fail(str(e), "fix what the message names and run `dprelease validate` again.", exit_code(e))
    report_out.print(
        f"rehearsal passed: the release ran on a {rehearsal.rows}-row table drawn from the public schema "
        f"alone in {rehearsal.seconds:.1f} s (no data read, no budget reserved)",
        soft_wrap=True,
    )
    fitted = fitted_rows(s, len(df))
    need = forecast_resources(s, fitted).lines()[-1]
    report_out.print(f"forecast for the input's {fitted:,} fitted rows: {shown(need)}", soft_wrap=True)
    for gate in gate_forecasts(s, fitted):  # public facts: the plan, n, the histograms' noise
        report_out.print(f"forecast: {shown(gate.line())}", soft_wrap=True)
    for w in [*rehearsal.warnings, *warnings]:
        console.print(f"[yellow]warning:[/yellow] {shown(w)}")
    if s.draft is not None:
        report_out.print(
            f"draft written by {shown(s.draft.written_by)} from {shown(s.draft.source)}; to confirm:"
        )
        for item in s.draft.confirm:
            report_out.print(f"  - {shown(item)}", soft_wrap=True)
        fail(
            f"the spec is a draft: {len(s.draft.confirm)} item(s) to confirm.",
            "check each against public knowledge, then delete the draft: section and validate again.",
            2,
        )
    report_out.print("[green]spec and data conform to the public schema; no budget was spent.")


app.command("init")(init)
app.command("discover")(discover)


@app.command()
def mechanisms(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print JSON: one object per mechanism, its stage weights under 'stage_weights'."
        ),
    ] = False,
) -> None:
    """List the mechanisms a spec can name: accountants, parameters, stage weights, rows.
    Stage weights are the default split at the default parameters for a schema with a
    column of every kind."""
    import json

    from rich.panel import Panel

    from dprelease.mechanisms.registry import MECHANISMS
    from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

    every_kind = Schema((Continuous("x", 0.0, 1.0), Ordinal("o", ("lo", "hi")), Nominal("c", ("a", "b"))))
    defaults = {name: m.params_type() for name, m in MECHANISMS.items()}
    weights = {name: m.stage_weights(every_kind, defaults[name]) for name, m in MECHANISMS.items()}
    rows = {
        name: "one per input row, in order" if m.keeps_row_order else "fresh draws"
        for name, m in MECHANISMS.items()
    }
    if as_json:
        listing = [
            {
                "name": name,
                "accountants": list(m.notions),
                "params": dataclasses.asdict(defaults[name]),
                "stage_weights": weights[name],
                "rows": rows[name],
                "description": m.summary,
            }
            for name, m in MECHANISMS.items()
        ]
        print(json.dumps(listing, indent=2))
        return
    out = Console()
    for name, m in MECHANISMS.items():
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        params = dataclasses.asdict(defaults[name])
        split = "\n".join(f"{stage}: {w:.4g}" for stage, w in weights[name].items())
        grid.add_row("accountants", escape(", ".join(m.notions)))
        grid.add_row("params", escape("\n".join(f"{k} = {v!r}" for k, v in params.items())))
        grid.add_row("stage weights", escape(split or "none (measures nothing, spends no budget)"))
        grid.add_row("rows", rows[name])
        grid.add_row("what it does", escape(m.summary))
        out.print(Panel(grid, title=f"[bold]{escape(name)}[/bold]", title_align="left"))
    from dprelease.mechanisms.auto import rule_text

    out.print(
        Panel(
            escape(
                f"{rule_text()}, decided on the input's row count before anything is reserved; "
                "params: target only (aim runs with batch 4); release.json says what was chosen and why"
            ),
            title="[bold]auto[/bold]",
            title_align="left",
        )
    )
    out.print(
        "Stage weights: the default split at the default params, for a schema with a column of "
        "every kind; params and the schema can change it (stages a schema does not need are "
        "dropped), a spec's allocation overrides it, and declared gates add a 'gates' stage."
    )


app.command("recover")(recover)
app.command("query")(query)
app.command("notify")(notify)
ledger_app.command("settle")(settle)
app.add_typer(audit_app, name="audit")
app.add_typer(ledger_app, name="ledger")


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
