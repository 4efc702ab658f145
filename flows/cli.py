"""``dprelease``: the command line of the release pipeline."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dprelease.flows.cli_records import audit_app, ledger_app
from dprelease.flows.cli_recovery import notify, recover, settle
from dprelease.flows.console import console, fail, shown
from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    from dprelease.spec import ReleaseSpec

DEMO_SPEC = Path(__file__).parent / "demo" / "adult.yaml"
_PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "GX_ANALYTICS_ENABLED": "false",
    # Each failed call to Prefect's API is retried with exponential back-off: 5 retries (Prefect's
    # default) wait about a minute per call when the server is down; 2 wait about 6 s. Once the
    # flow has published, Prefect's API no longer changes a release's outcome (flows/events.py).
    "PREFECT_CLIENT_MAX_RETRIES": "2",
}
_API_LOST: list[str] = []  # set when Prefect's API went away during the run (see main)

app = typer.Typer(
    help="Publish differentially private synthetic microdata with an audit trail.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Show Prefect's INFO logs (no data values are logged).")
]


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


def _run_release(
    spec: Path, out: Path, release_id: str | None, seed: int | None, ledger: str | None, verbose: bool
) -> None:
    for k, v in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from dprelease.bundle.staging import ReleaseIdTaken
    from dprelease.ledger import PASSWORD_ENV, BudgetRefused, ledger_url, split_password

    try:  # what can be checked without reading a value should not wait for Prefect to start
        if ledger is not None:  # Prefect stores flow parameters: the password travels in the environment
            ledger, password = split_password(ledger_url(ledger, out))
            if password is not None:
                os.environ[PASSWORD_ENV] = password
        _before_prefect(spec, out, release_id, ledger)
    except (ReleaseIdTaken, BudgetRefused) as e:
        fail(str(e), "see `dprelease ledger show` for what was spent; nothing was read or spent.", 4)
    except DPReleaseError as e:
        fail(str(e), "fix what the message names; nothing was read or spent.", 2)

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
            where = f"[{len(started)}/{len(STAGES)}] {STAGES[name]}"
            progress.update(bar, description=where if detail is None else f"{where}: {detail}")

        set_progress(on_stage)
        try:
            with prefect_api(meanwhile=import_the_flow):  # a temporary server that dies with the CLI
                from dprelease.flows.release import forget_outcome, release

                forget_outcome()  # what an earlier flow run in this process did is not this one's
                try:
                    path = release(
                        str(spec), str(out), release_id=release_id, insecure_seed=seed, ledger_url=ledger
                    )
                except Exception as e:
                    path = _what_the_flow_did(e)
        except BudgetRefused as e:
            progress.stop()
            fail(str(e), "see `dprelease ledger show` for what this dataset has spent; nothing was read.", 4)
        except ReleaseIdTaken as e:
            progress.stop()
            fail(str(e), "nothing was read or spent.", 4)
        except DPReleaseError as e:
            from dprelease.checks.gates import GateError  # imported by now (the flow imports it)
            from dprelease.engines.inputs import InputRefused

            progress.stop()
            if isinstance(e, InputRefused):  # Prefect was told only that and where; the steward sees why
                fail(
                    e.detail + (f"\n(failure record: {e.record})" if e.record else ""),
                    "fix the data or the spec's schema, or declare out_of_bounds: clip / unknown: other "
                    "for the columns named; nothing was published or spent.",
                    2,
                )
            if isinstance(e, GateError):
                fail(
                    str(e),
                    "read internal/report.html in the folder named above before deciding what to change.",
                    3,
                )
            fail(
                str(e),
                "fix what the message names and run again; nothing was published "
                f"(a failure record is in {out / 'failures'} if the run had started).",
                2,
            )
        finally:
            set_progress(None)
        progress.update(bar, completed=len(STAGES), description="release published")
    _summary(Path(path))
    _undelivered(out, Path(path).name)


def _what_the_flow_did(error: Exception) -> str:
    """``release`` raised ``error``. When Prefect raised it after the flow's body had ended
    (its API went away, so the run's end could not be reported), what the body did stands:
    its bundle is returned, or its own error raised. Otherwise ``error`` is raised again."""
    from dprelease.flows.release import run_outcome

    outcome = run_outcome()
    if outcome is None or outcome[1] is error:
        if outcome is None and _api_unreachable():
            _API_LOST.append(type(error).__name__)
            fail(
                f"Prefect's API could not be reached ({type(error).__name__}); the release did not start.",
                "start the Prefect server of PREFECT_API_URL (or unset it for a temporary one) and run "
                "again; nothing was read or spent.",
                1,
            )
        raise error
    if _api_unreachable():
        _API_LOST.append(type(error).__name__)
    console.print(
        f"[yellow]warning:[/yellow] Prefect could not record the end of this run "
        f"({shown(type(error).__name__)}: its API is unreachable); what the release did stands, and the "
        "ledger records it (`dprelease ledger show`)."
    )
    path, own = outcome
    if own is not None:
        raise own
    assert path is not None
    return path


def _api_unreachable() -> bool:
    """Prefect's API does not answer its health check within 3 s."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    try:
        return not url or httpx.get(f"{url}/health", timeout=3).status_code != 200
    except httpx.HTTPError:
        return True


def _undelivered(out: Path, release_id: str) -> None:
    """Say so when this release's artifacts and event are queued, not delivered."""
    from dprelease.flows.events import UNDELIVERED

    if any((out / UNDELIVERED).glob(f"{release_id}-*.json")):
        console.print(
            f"[yellow]Prefect's API was unreachable:[/yellow] this release's artifacts and event are queued "
            f"in {shown(str(out / UNDELIVERED))}; `dprelease notify --out {shown(str(out))}` sends them "
            "(every release into this folder also does)."
        )


def _before_prefect(spec: Path, out: Path, release_id: str | None, ledger_url: str | None) -> None:
    """The checks that read no data value, before Prefect starts (issue 18: in about 3 s,
    not after Prefect's start): the spec; the release id; the output folder (and
    the release's final folder, when its id is known now); the recovery of what dead runs
    left in ``out`` (``flows/recovery.py``); the ledger (reachable) and whether it would
    refuse the release (rerun rule, lifetime budget); last, the data file. A refusal is
    recorded as the flow records it: a ``refused`` ledger row (by ``Ledger.reserve``) and a
    failure record. The data file: it exists, is readable, has a supported format, and its
    header line (structure, not a record) holds the schema's columns."""
    from dprelease.bundle.staging import check_destination, check_out
    from dprelease.engines.header import check_columns, read_header
    from dprelease.engines.inputs import resolve_mechanism
    from dprelease.spec import RELEASE_ID, load_spec

    s = load_spec(spec)
    s.refuse_draft()
    s = _chosen(resolve_mechanism(s))
    rid = release_id or s.release_id
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(
            f"--release-id ({release_id!r}) must be lowercase letters, digits and '-', starting with a "
            "letter or digit, at most 80 characters"
        )
    if rid is None:
        check_out(out)
    else:
        check_destination(out, rid)
    _refused_by_the_ledger(s, out, rid, ledger_url)
    check_columns(  # last: a refused release never opens it
        read_header(s.data_path),
        s.public_schema(),
        quote=True,
        ignored=s.ignored_columns(),
        one_hot=s.one_hot(),
    )


def _chosen(s: ReleaseSpec) -> ReleaseSpec:
    """Say what ``mechanism: auto`` chose (on stderr) and why; the spec as it is."""
    if s.auto_choice is not None:
        console.print(f"mechanism auto chose [bold]{s.mechanism.name}[/bold]: {s.auto_choice.reason}")
    return s


def _refused_by_the_ledger(s: ReleaseSpec, out: Path, rid: str | None, ledger_url: str | None) -> None:
    """Recover what dead runs left in ``out``, then raise ``BudgetRefused`` if the ledger
    would refuse this release, recorded as the flow records it. A first release finds no
    ledger (it is opened, not created) and nothing to refuse."""
    from dprelease.ledger import Ledger, NoLedger, default_url
    from dprelease.mechanisms.accounting import plan_budget
    from dprelease.mechanisms.registry import MECHANISMS

    try:
        book = Ledger(ledger_url or default_url(out), create=False)
    except NoLedger:
        return
    with book:
        if any(out.glob(".staging-*")):
            from dprelease.flows.recovery import recover

            for r in recover(out, book):
                console.print(f"[yellow]recovered:[/yellow] {shown(r.describe())}")
        p = s.privacy
        plan = plan_budget(p.accountant, p.epsilon, p.delta, s.stage_weights())
        facts: dict[str, Any] = {
            "dataset": s.dataset.name,
            "plan": plan,
            "lifetime": p.lifetime,
            "not_dp": MECHANISMS[s.mechanism.name].defects(s.mechanism_params()),
        }
        if book.refusal(release_id=rid, **facts) is not None:
            from dprelease.bundle.write import write_failure_record
            from dprelease.ledger import BudgetRefused

            named = rid or s.resolved_release_id()
            try:  # records the refused row and raises, as the flow's allocate_budget does
                book.reserve(release_id=named, mechanism=s.mechanism.name, **facts)
            except BudgetRefused as e:
                write_failure_record(out, named, "allocate_budget", e, None)
                raise


def _summary(bundle: Path) -> None:
    import json

    doc = json.loads((bundle / "public" / "release.json").read_text())
    t = doc["privacy"]["ledger"]["totals"]
    table = Table(title=f"release {shown(doc['release_id'])}", show_header=True)
    for col in ("stage", "statistics", "spent", "allocated"):
        table.add_column(col)
    key = "rho" if doc["privacy"]["accountant"] == "zcdp" else "epsilon"
    for s in doc["privacy"]["ledger"]["stages"]:
        count = sum(r["stage"] == s["stage"] for r in doc["privacy"]["ledger"]["measurements"])
        table.add_row(
            s["stage"], str(count), f"{key}={s[key + '_spent']:.6g}", f"{key}={s[key + '_allocated']:.6g}"
        )
    console.print(table)
    for g in (doc.get("checks") or {}).get("gates", []):
        bound = " and ".join(f"{k} {g[k]:g}" for k in ("min", "max") if g[k] is not None)
        console.print(
            f"gate {g['gate']} ({bound}): noisy value {g['noisy_value']:.4g} "
            f"(noise s.d. {g['noise_sd']:.2g}), " + ("[green]passed" if g["passed"] else "[red]failed")
        )
    console.print(
        f"privacy: ({t['epsilon']:.6g}, {t['delta']:.3g})-DP, replace-one neighbours; "
        f"{doc['privacy']['synthetic_rows']} synthetic rows"
    )
    if not doc["randomness"]["fit_for_publication"]:
        console.print("[bold red]made with --insecure-seed: not fit for publication[/bold red]")
    _quality(bundle)
    print(f"bundle: {bundle}")


def quality_line(utility: dict) -> tuple[str, str]:
    """One line on how close the synthetic table is to the real one, from the advisory
    checks (``internal/utility.json``: exact values on the confidential table, for the
    steward only, never published), and a verdict: ``good``, ``fair`` or ``poor``.

    The verdict is the worst of: mean 1-way TVD (< 0.05 good, < 0.15 fair) and pMSE as a
    share of its worst value, where a classifier separates the tables perfectly (< 10 %
    good, < 40 % fair). TSTR, when a target is declared, is reported beside them."""
    levels = ("good", "fair", "poor")
    parts, grades = [], []
    tvd = (utility.get("tvd_1way") or {}).get("mean")
    if tvd is not None:
        parts.append(f"mean 1-way TVD {tvd:.3g}")
        grades.append(0 if tvd < 0.05 else 1 if tvd < 0.15 else 2)
    pm = utility.get("pmse") or {}
    if pm.get("pmse") is not None and pm.get("worst"):
        share = pm["pmse"] / pm["worst"]
        parts.append(
            f"pMSE {pm['pmse']:.3g} ({share:.0%} of the {pm['worst']:.3g} at which a classifier "
            "tells every row apart)"
        )
        grades.append(0 if share < 0.1 else 1 if share < 0.4 else 2)
    ts = utility.get("tstr") or {}
    if ts.get("tstr") is not None and ts.get("trtr") is not None:
        parts.append(
            f"{ts['target']} {ts['metric']} {ts['tstr']:.3g} trained on synthetic vs {ts['trtr']:.3g} on real"
        )
    verdict = levels[max(grades)] if grades else "unknown"
    return verdict, "; ".join(parts) or "no utility check could be computed"


def _quality(bundle: Path) -> None:
    """The quality line after a release, and where the report is (issue 18: a poor release
    was published without a word)."""
    import json

    report = bundle / "internal" / "report.html"
    path = bundle / "internal" / "utility.json"
    if not path.is_file():
        console.print(
            "quality: not checked (checks.enabled is false); nothing tells how close the synthetic data is"
        )
        return
    verdict, line = quality_line(json.loads(path.read_text()))
    colour = {"good": "green", "fair": "yellow", "poor": "bold red"}.get(verdict, "yellow")
    console.print(
        f"quality: [{colour}]{verdict}[/{colour}]: {shown(line)}. Exact values on the confidential data, "
        f"for you, not for publication; read {shown(str(report))} before sharing the release."
    )


@app.command()
def release(
    spec: SpecArg,
    out: OutOpt = Path("releases"),
    release_id: IdOpt = None,
    insecure_seed: SeedOpt = None,
    ledger: LedgerOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run a release: reserve the budget in the ledger, validate, synthesise, write the bundle.

    Exit codes:

    0  published

    2  bad spec or data, or an output folder that cannot be written: nothing published; nothing
    spent unless a step that had drawn noise failed (the message says so)

    3  a gate failed: budget spent, nothing published

    4  refused by the ledger (lifetime budget, or a release_id that already spent): nothing read or spent

    1  an unexpected error
    """
    _run_release(spec, out, release_id, insecure_seed, ledger, verbose)


@app.command()
def demo(
    out: OutOpt = Path("releases"),
    insecure_seed: SeedOpt = None,
    ledger: LedgerOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Release the embedded UCI Adult data (factor_gauss, epsilon = 1, delta = 1e-6)."""
    _run_release(DEMO_SPEC, out, None, insecure_seed, ledger, verbose)


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
) -> None:
    """Check the spec (and rehearse its release on a table drawn from the public schema
    alone, as a release does before it reserves any budget), then its data against the
    public schema. Spends no budget."""
    for k, v in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    from dprelease.bundle.files import write_json
    from dprelease.engines.inputs import check_rows, failing_rules, read_input, resolve_mechanism
    from dprelease.flows.rehearsal import rehearse
    from dprelease.spec import load_spec

    try:
        s = _chosen(resolve_mechanism(load_spec(spec)))
        schema = s.public_schema()
        rehearsal = rehearse(s)  # before any value is read, as the release flow does before its reserve
        df, changed = read_input(s)  # the release's policies (clip, other) apply here too
        from dprelease.expectations.suite import validate_table

        suite, records = validate_table(df, schema, "input")
    except DPReleaseError as e:
        fail(str(e), "fix what the message names and run `dprelease validate` again.", 2)
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
        warnings = check_rows(s, len(df))
    except DPReleaseError as e:
        fail(str(e), "fix what the message names and run `dprelease validate` again.", 2)
    report_out.print(
        f"rehearsal passed: the release ran on a {rehearsal.rows}-row table drawn from the public schema "
        f"alone in {rehearsal.seconds:.1f} s (no data read, no budget reserved)",
        soft_wrap=True,
    )
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


DRAFT_KINDS = ("continuous", "integer", "date", "datetime", "nominal")


def _parse_kinds(given: list[str], columns: list[str]) -> dict[str, tuple[str, str]]:
    out = {}
    for item in given:
        name, _, kind = item.partition("=")
        if name not in columns or kind not in DRAFT_KINDS:
            fail(
                f"--kind {item!r}: expected NAME=KIND with NAME a column of the file and KIND one of "
                f"{', '.join(DRAFT_KINDS)}.",
                "declare each column's kind from public knowledge (the codebook), e.g. --kind age=integer.",
                2,
            )
        out[name] = (kind, "--kind")
    return out


@app.command()
def init(
    data: Annotated[
        Path, typer.Argument(help="The data file (CSV, .csv.gz or Parquet) to write a draft spec for.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where to write the draft (default: <data name>.yaml beside the data)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="dataset.name in the draft (default: the file's stem).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file at --out.")] = False,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="NAME=KIND, repeatable: a column's kind from public knowledge (continuous, integer, date, "
            "datetime, nominal); overrides a Parquet type. A CSV's kinds are never guessed from its values.",
        ),
    ] = None,
    private_epsilon: Annotated[
        float | None,
        typer.Option(
            "--private-epsilon",
            help="Discover the bounds (private quantiles) of continuous/integer columns, their atoms with "
            "--atom-share, and the categories of nominal ones (partition selection) under DP, spending "
            "this epsilon of the dataset's budget: a release of its own in the ledger (stage 'schema') "
            "with a bundle `dprelease audit verify` checks. Without it nothing is read and every bound "
            "and category is FILL.",
        ),
    ] = None,
    private_delta: Annotated[
        float,
        typer.Option(
            "--private-delta",
            help="The delta of the partition selections of categories and atoms (a category or value held "
            "by one record is published with probability delta/2); split over the columns that run one "
            "(nominal ones; numeric ones with --atom-share), and 0 only when none does. Keep it a small "
            "part of the dataset's lifetime delta: later zCDP releases convert at what is left of it.",
        ),
    ] = 1e-7,
    atom_share: Annotated[
        float,
        typer.Option(
            "--atom-share",
            help="With --private-epsilon, also discover atoms: the exact values of a continuous/integer "
            "column that hold at least this share of the rows (between 0 and 1, e.g. 0.05), each a cell of "
            "its own (0 for a zero-inflated amount). They take a third of each numeric column's share, so "
            "its bounds need about 1.5x the epsilon for the same accuracy. Default 0: no atoms, the bounds "
            "take the whole share.",
        ),
    ] = 0.0,
    bundle_out: Annotated[
        Path,
        typer.Option(
            "--bundle-out",
            help="With --private-epsilon: the folder that receives <release_id>/public of the discovery "
            "(and, by default, the ledger OUT/ledger.db, as `dprelease release --out`).",
        ),
    ] = Path("releases"),
    ledger: LedgerOpt = None,
    lifetime_epsilon: Annotated[
        float | None,
        typer.Option(
            "--lifetime-epsilon",
            help="The dataset's lifetime epsilon, written into the draft as privacy.lifetime_epsilon; with "
            "--private-epsilon also declared to the ledger (fixed there when first declared).",
        ),
    ] = None,
    lifetime_delta: Annotated[
        float | None,
        typer.Option("--lifetime-delta", help="The dataset's lifetime delta (default: 1e-6)."),
    ] = None,
    insecure_seed: SeedOpt = None,
) -> None:
    """Write a draft release spec from the data file's header (and a Parquet file's declared
    column types, or --kind), without reading a value: every bound, category and level is
    FILL, to be supplied from public knowledge; every guess is listed under draft.confirm.
    With --private-epsilon, the bounds, atoms and categories of the columns whose kind is
    known are discovered under DP instead, charged to the dataset's ledger."""
    from dprelease.engines.header import declared_kinds, read_header
    from dprelease.spec.draft import draft_text

    try:
        columns = read_header(data)
        kinds = declared_kinds(data)
    except DPReleaseError as e:
        fail(str(e), "pass the path of a readable CSV or Parquet file.", 2)
    if kind:
        kinds = {**(kinds or {}), **_parse_kinds(kind, columns)}
    target = out or data.with_name(f"{data.name.split('.')[0]}.yaml")
    if target.exists() and not force:
        fail(f"'{target}' already exists.", "choose another --out or pass --force to overwrite it.", 2)
    try:
        rel = os.path.relpath(data.resolve(), target.resolve().parent)
    except ValueError:  # another drive (Windows): an absolute path
        rel = str(data.resolve())
    stem = name or data.name.split(".")[0]
    found, entries = None, None
    if private_epsilon is not None:
        found, entries = _discover(
            data,
            stem,
            kinds,
            private_epsilon,
            private_delta,
            bundle_out,
            ledger,
            lifetime_epsilon,
            lifetime_delta,
            insecure_seed,
            atom_share,
        )
    lifetime = None if lifetime_epsilon is None else (lifetime_epsilon, lifetime_delta or 1e-6)
    text = draft_text(stem, rel, columns, kinds, entries, found.release_id if found else None, lifetime)
    target.write_text(text, encoding="utf-8")
    unknown = len(columns) - len(kinds or {})
    filled = (
        f"{len(entries)} column(s) discovered under DP ({found.release_id}), " if found and entries else ""
    )
    console.print(
        f"wrote {shown(str(target))}: {len(columns)} column(s), "
        + (f"{unknown} of unknown kind, " if unknown else "")
        + (filled or "every bound and category FILL. ")
        + "Next: fill what is FILL from public knowledge, confirm draft.confirm, then "
        f"`dprelease validate {shown(str(target))}`.",
        soft_wrap=True,
    )


def _discover(
    data: Path,
    dataset: str,
    kinds: dict[str, tuple[str, str]] | None,
    epsilon: float,
    delta: float,
    out: Path,
    ledger: str | None,
    lifetime_epsilon: float | None,
    lifetime_delta: float | None,
    seed: int | None,
    atom_share: float,
):
    """``init --private-epsilon``: the DP discovery (``flows.discovery``) and its draft lines."""
    from dprelease.flows.discovery import DISCOVERABLE, discover, draft_entries
    from dprelease.ledger import BudgetRefused, ledger_url

    chosen = {c: k for c, (k, _) in (kinds or {}).items() if k in DISCOVERABLE}
    if not chosen:
        fail(
            "--private-epsilon: no column has a known continuous, integer or nominal kind, so there is "
            "nothing to discover (a CSV's kinds are never guessed from its values).",
            "declare kinds with --kind NAME=KIND (e.g. --kind age=integer --kind sex=nominal).",
            2,
        )
    lifetime = None if lifetime_epsilon is None else (lifetime_epsilon, lifetime_delta or 1e-6)
    try:
        found = discover(
            data,
            chosen,
            dataset=dataset,
            epsilon=epsilon,
            delta=delta,
            ledger_url=ledger_url(ledger, out),
            out=out,
            lifetime=lifetime,
            seed=seed,
            atom_share=atom_share,
        )
    except BudgetRefused as e:
        fail(str(e), "see `dprelease ledger show` for what this dataset has spent; no draft was written.", 4)
    except (DPReleaseError, ValueError) as e:
        fail(str(e), "fix the option or the data file named above; no draft was written.", 2)
    console.print(
        f"discovered under DP: {len(found.bounds)} column(s)' bounds{' and atoms' if found.atoms else ''} "
        f"and {len(found.categories)} column(s)' categories for epsilon={epsilon:g}, delta={found.delta:g}, "
        f"charged to dataset '{shown(dataset)}' as release {found.release_id}; its bundle is "
        f"{shown(str(found.bundle))} "
        f"(`dprelease audit verify {shown(str(found.bundle))}`).",
        soft_wrap=True,
    )
    return found, draft_entries(found, chosen)


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
app.command("notify")(notify)
ledger_app.command("settle")(settle)
app.add_typer(audit_app, name="audit")
app.add_typer(ledger_app, name="ledger")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted: nothing was published")
        sys.exit(130)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not _API_LOST:
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
