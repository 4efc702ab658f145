"""``dprelease``: the command line of the release pipeline."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from mechanisms.errors import DPReleaseError

DEMO_SPEC = Path(__file__).parent / "demo" / "adult.yaml"
_PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "GX_ANALYTICS_ENABLED": "false",
}

app = typer.Typer(
    help="Publish differentially private synthetic microdata with an audit trail.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)

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
        help="Budget ledger database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB "
        "(also read from DPRELEASE_LEDGER). Default: sqlite:///OUT/ledger.db. Give the database "
        "password in DPRELEASE_LEDGER_PASSWORD rather than in the URL; a password in the URL is "
        "moved there before Prefect starts, so it never reaches Prefect's database or logs.",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Show Prefect's INFO logs (no data values are logged).")
]


def _fail(message: str, hint: str, code: int) -> None:
    console.print(
        Panel(f"{message}\n\n[bold]Next:[/bold] {hint}", title="dprelease: error", border_style="red")
    )
    raise typer.Exit(code)


def _run_release(
    spec: Path, out: Path, release_id: str | None, seed: int | None, ledger: str | None, verbose: bool
) -> None:
    for k, v in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from flows.spec import load_spec

    try:  # a broken spec should not wait for Prefect to start
        load_spec(spec)
    except DPReleaseError as e:
        _fail(str(e), "fix the field the message names; nothing was read or spent.", 2)

    from flows.release import STAGES, release, set_progress
    from tasks.checks.gates import GateError
    from tasks.ledger_db import PASSWORD_ENV, BudgetRefused, split_password

    if ledger is not None:  # Prefect stores flow parameters: the password travels in the environment
        ledger, password = split_password(ledger)
        if password is not None:
            os.environ[PASSWORD_ENV] = password

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
            path = release(str(spec), str(out), release_id=release_id, insecure_seed=seed, ledger_url=ledger)
        except BudgetRefused as e:
            progress.stop()
            _fail(str(e), "see `dprelease ledger show` for what this dataset has spent; nothing was read.", 4)
        except GateError as e:
            progress.stop()
            _fail(
                str(e),
                "read internal/report.html in the folder named above before deciding what to change.",
                3,
            )
        except DPReleaseError as e:
            progress.stop()
            _fail(
                str(e),
                "fix what the message names and run again; nothing was published "
                f"(a failure record is in {out / 'failures'} if the run had started).",
                2,
            )
        finally:
            set_progress(None)
        progress.update(bar, completed=len(STAGES), description="release published")
    _summary(Path(path))


def _summary(bundle: Path) -> None:
    import json

    doc = json.loads((bundle / "public" / "release.json").read_text())
    t = doc["privacy"]["ledger"]["totals"]
    table = Table(title=f"release {doc['release_id']}", show_header=True)
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
    print(f"bundle: {bundle}")


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

    Exit codes: 0 published; 2 bad spec or data (nothing read or spent); 3 a gate failed
    (budget spent, nothing published); 4 refused by the ledger (lifetime budget, or a
    release_id that already spent); 1 an unexpected error.
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
    """Check the spec and its data against the public schema. Spends no budget."""
    for k, v in _PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    from flows.spec import load_spec
    from tasks.files import write_json
    from tasks.validate import check_rows, failing_rules, read_input

    try:
        s = load_spec(spec)
        schema = s.public_schema()
        df, changed = read_input(s)  # the release's policies (clip, other) apply here too
        from expectations.suite import validate_table

        suite, records = validate_table(df, schema, "input")
    except DPReleaseError as e:
        _fail(str(e), "fix what the message names and run `dprelease validate` again.", 2)
    if report is not None:
        write_json(report, {"suite": suite, "results": records, "rows": len(df), "policies": changed})
    table = Table(title=f"{spec}: {len(records)} expectations")
    for col in ("column", "rule", "result"):
        table.add_column(col)
    failures = failing_rules(records)
    for r in records:
        table.add_row(r["column"], r["rule"], "[green]pass" if r["success"] else "[red]FAIL")
    console.print(table)
    if failures:
        _fail(
            f"{len(failures)} column(s) break the schema.",
            "fix the data or the schema; --report FILE writes the affected-row counts.",
            2,
        )
    try:
        check_rows(s, len(df))
    except DPReleaseError as e:
        _fail(str(e), "fix what the message names and run `dprelease validate` again.", 2)
    console.print("[green]spec and data conform to the public schema; no budget was spent.")


@app.command()
def mechanisms() -> None:
    """List the mechanisms a spec can name, with their privacy notions and stages."""
    from mechanisms.registry import MECHANISMS

    table = Table(title="mechanisms")
    for col in ("name", "accountants", "params (defaults)", "rows", "what it does"):
        table.add_column(col)
    for m in MECHANISMS.values():
        defaults = m.params_type()
        table.add_row(
            m.name,
            ", ".join(m.notions),
            "\n".join(f"{f.name}={getattr(defaults, f.name)!r}" for f in dataclasses.fields(defaults)),
            "one per input row, in order" if m.keeps_row_order else "fresh draws",
            m.summary,
        )
    Console().print(table)


audit_app = typer.Typer(
    help="Check a release bundle: files, arithmetic, randomness and the ledger.",
    no_args_is_help=True,
    add_completion=False,
)
ledger_app = typer.Typer(help="Read the budget ledger.", no_args_is_help=True, add_completion=False)
app.add_typer(audit_app, name="audit")
app.add_typer(ledger_app, name="ledger")
BundleArg = Annotated[Path, typer.Argument(help="A release bundle folder: <out>/<release_id>.")]
LedgerReadOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB). "
        "audit: default the SQLite ledger named in the bundle; ledger show: sqlite:///releases/ledger.db.",
    ),
]


@audit_app.command("verify")
def audit_verify(bundle: BundleArg, ledger: LedgerReadOpt = None) -> None:
    """Recompute every sha256, the budget arithmetic and the hash chain; cross-check the
    ledger. Exit 0 only if every check holds; 1 names what does not."""
    from flows.audit import verify_bundle

    try:
        checks = verify_bundle(bundle, ledger)
    except (FileNotFoundError, DPReleaseError) as e:
        _fail(str(e), "pass the folder of a release bundle (and --ledger if it is not the bundle's).", 2)
    table = Table(title=f"audit of {bundle}")
    for col in ("group", "check", "result", "detail"):
        table.add_column(col, overflow="fold")
    for c in checks:
        table.add_row(c.group, escape(c.name), "[green]ok" if c.ok else "[red]FAIL", escape(c.detail))
    Console().print(table)
    failed = [c for c in checks if not c.ok]
    if failed:
        _fail(
            f"{len(failed)} of {len(checks)} checks failed: "
            + "; ".join(f"{c.group}: {c.name}" for c in failed[:8]),
            "do not accept this bundle until the operator explains each failed check.",
            1,
        )
    console.print(f"[green]all {len(checks)} checks hold.")


@audit_app.command("show")
def audit_show(bundle: BundleArg) -> None:
    """What the release spent, by stage and statistic (sensitivity, noise scale), and its
    totals against the dataset's lifetime budget."""
    from flows.audit import load_document

    try:
        doc, _ = load_document(bundle)
    except FileNotFoundError as e:
        _fail(str(e), "pass the folder of a release bundle.", 2)
    out = Console()
    priv, book = doc["privacy"], doc["privacy"]["ledger"]
    key = "rho" if priv["accountant"] == "zcdp" else "epsilon"
    out.print(
        f"[bold]release {doc['release_id']}[/bold] of '{doc['dataset']}': {doc['status']}, "
        f"mechanism {doc['mechanism']['name']}, {priv['accountant']} accounting, replace-one neighbours, "
        f"n = {priv['input_rows_n_public']} (public)"
    )
    if not doc["differentially_private"]:
        out.print("[bold red]NOT differentially private:[/bold red] " + "; ".join(book["defects"]))
    if not doc["randomness"]["fit_for_publication"]:
        out.print("[bold red]made with --insecure-seed: not fit for publication[/bold red]")
    stages = Table(title="stages")
    for col in ("stage", "weight", f"{key} allocated", f"{key} spent"):
        stages.add_column(col)
    for st in book["stages"]:
        stages.add_row(
            st["stage"], f"{st['weight']:g}", f"{st[key + '_allocated']:.6g}", f"{st[key + '_spent']:.6g}"
        )
    out.print(stages)
    rows = Table(title="measurements")
    for col in ("stage", "statistic", "mechanism", "sensitivity", "noise scale", key, "dim"):
        rows.add_column(col)
    for r in book["measurements"]:
        rows.add_row(
            r["stage"],
            escape(r["statistic"]),
            r["mechanism"],
            f"{r['sensitivity']:.6g} ({r['sensitivity_norm']})",
            f"{r['noise_scale']:.6g}",
            f"{(r[key] or 0.0):.6g}",
            str(r["dimension"]),
        )
    out.print(rows)
    t = book["totals"]
    out.print(f"total: ({t['epsilon']:.6g}, {t['delta']:.3g})-DP; {t['conversion']}")
    record = priv.get("ledger_record") or {}
    void = (record.get("dataset_guarantee") or {}).get("void_since")
    if void:
        out.print(
            f"[bold red]dataset guarantee VOID since release '{escape(void['release_id'])}' "
            f"({void['time'][:19]}):[/bold red] {escape(record['dataset_guarantee']['statement'])}"
        )
    life = record.get("lifetime")
    if life:
        out.print(
            f"lifetime budget of '{doc['dataset']}': epsilon {life['epsilon']:g}, delta {life['delta']:g}; "
            f"spent with this release {life['spent_epsilon']:.6g} over {life['releases_counted']} release(s) "
            f"({life['rule']}); left {life['left_epsilon']:.6g}"
        )
    else:
        out.print(f"no lifetime budget is set for '{doc['dataset']}'")


@ledger_app.command("show")
def ledger_show(
    dataset: Annotated[str | None, typer.Option("--dataset", help="Only this dataset's releases.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: one object per release, stage rows under 'stages'.")
    ] = False,
    ledger: LedgerReadOpt = None,
) -> None:
    """The releases in the ledger, what each is charged, and each dataset's lifetime account.
    Exits 1 when the hash chain is broken."""
    import json
    import math

    from tasks.ledger_db import Ledger, default_url

    try:
        with Ledger(ledger or default_url("releases"), create=False) as led:
            releases = led.releases(dataset)
            problems = led.verify_chain()
            head = led.head()
            accounts = {}
            for name in dict.fromkeys(r["dataset"] for r in releases):
                life = led.lifetime(name)
                # no lifetime: compose at the releases' summed δ, where basic composition holds
                deltas = [r["delta"] for r in releases if r["dataset"] == name and r["delta"] is not None]
                delta = life[1] if life else math.fsum(deltas)
                accounts[name] = (life, led.spend_so_far(name, delta), led.void_since(name))
    except DPReleaseError as e:
        _fail(str(e), "pass --ledger with the database URL the releases used.", 2)
    if as_json:
        print(json.dumps(releases, indent=2))
        if problems:
            console.print("[red]hash chain broken: " + escape("; ".join(problems)))
            raise typer.Exit(1)
        return
    table = Table(title="releases")
    for col in ("dataset", "release_id", "status", "epsilon", "delta", "stages spent", "started"):
        table.add_column(col, overflow="fold")
    for r in releases:
        void = not r["differentially_private"]
        table.add_row(
            r["dataset"],
            r["release_id"],
            r["status"],
            "[red]unbounded (not DP)[/red]" if void else f"{r['epsilon']:.6g}",
            "-" if void else f"{r['delta']:.3g}",
            str(sum(s["status"] == "spent" for s in r["stages"])),
            r["started"][:19],
        )
    out = Console()
    out.print(table)
    for name, (life, spend, void) in accounts.items():
        if void is not None:
            out.print(
                f"[bold red]{escape(name)}: guarantee VOID since release '{escape(void['release_id'])}' "
                f"({void['time'][:19]}), which was not differentially private:[/bold red] no composed "
                "(epsilon, delta) statement holds for this dataset, and a lifetime budget on it is refused"
            )
            continue
        budget = "no lifetime budget"
        if life is not None:
            left = max(0.0, life[0] - spend.epsilon)
            budget = f"lifetime epsilon {life[0]:g} (delta {life[1]:g}), left {left:.6g}"
        out.print(
            f"{name}: spent epsilon {spend.epsilon:.6g} at delta {spend.delta:g} ({spend.rule}); {budget}"
        )
    out.print(
        "[green]hash chain intact"
        if not problems
        else "[red]hash chain broken: " + escape("; ".join(problems))
    )
    out.print(f"chain head: row {head[0]}, sha256 {head[1]}")
    if problems:
        _fail(
            f"the ledger's hash chain is broken in {len(problems)} place(s); its charges cannot be trusted.",
            "restore the ledger from a backup whose chain head matches the one you anchored; new releases "
            "are refused until then.",
            1,
        )


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted: nothing was published")
        sys.exit(130)


if __name__ == "__main__":
    main()
