"""``dprelease audit`` and ``dprelease ledger``: the auditor's and the steward's views of
what was spent: a bundle's checks and arithmetic, and the ledger's releases and accounts."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.mechanisms.accuracy import describe
from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    from dprelease.bundle.parts import Part
    from dprelease.bundle.privacy_doc import Room
    from dprelease.bundle.release_doc import Discovered, ReleaseDocument
    from dprelease.ledger.summary import DatasetAccount
    from dprelease.mechanisms.lifetime import Headroom

__all__ = ["audit_app", "ledger_app"]

audit_app = typer.Typer(
    help="Check a release bundle: files, arithmetic, randomness and the ledger.",
    no_args_is_help=True,
    add_completion=False,
)
ledger_app = typer.Typer(
    help="Read the budget ledger, settle a dead release, migrate an older format.",
    no_args_is_help=True,
    add_completion=False,
)
BundleArg = Annotated[
    Path,
    typer.Argument(help="A release bundle folder, <out>/<release_id>, or a copy of its public/ folder."),
]
LedgerReadOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="The budget ledger: a database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB), "
        "a SQLite ledger file, or a release folder holding ledger.db. audit: default the SQLite ledger "
        "the bundle's internal/ledger.json names, else ledger.db beside the bundle; ledger show: "
        "OUT/ledger.db.",
    ),
]


@audit_app.command("verify")
def audit_verify(
    bundle: BundleArg,
    ledger: LedgerReadOpt = None,
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="Check only what was published (an analyst's copy of public/, under any name): every "
            "hash, the budget arithmetic, every sensitivity from public facts and the tables against the "
            "recorded noise; the ledger cross-check is reported as not checked.",
        ),
    ] = False,
) -> None:
    """Recompute every sha256, the budget arithmetic, the sensitivities, the published tables
    and the hash chain; cross-check the ledger. Exit 0 only if every check holds; 1 names
    what does not."""
    from dprelease.ledger import ledger_url
    from dprelease.records.audit import load_document, verify_bundle
    from dprelease.records.ledger_choice import choose_ledger

    try:
        given = None if ledger is None else ledger_url(ledger, bundle)
        checks = verify_bundle(bundle, given, public=public)
        chosen = None if public and given is None else choose_ledger(bundle, load_document(bundle)[0], given)
    except (FileNotFoundError, DPReleaseError) as e:
        fail(
            str(e),
            "pass the folder of a release bundle (and --ledger if it is not the bundle's).",
            exit_code(e),
        )
    table = Table(title=f"audit of {shown(str(bundle))}")
    for col in ("group", "check", "result", "detail"):
        table.add_column(col, overflow="fold")
    for c in checks:
        result = "[yellow]not checked" if not c.checked else "[green]ok" if c.ok else "[red]FAIL"
        table.add_row(c.group, shown(c.name), result, shown(c.detail))
    Console().print(table)
    if chosen is None:
        console.print("only what was published was checked (--public): no ledger", soft_wrap=True)
    else:
        said = f"checked against the ledger {chosen.shown}" if chosen.url else "no ledger was checked"
        console.print(f"{shown(said)} ({shown(chosen.origin)})", soft_wrap=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        fail(
            f"{len(failed)} of {len(checks)} checks failed: "
            + "; ".join(f"{c.group}: {c.name}" for c in failed[:8]),
            "do not accept this bundle until the operator explains each failed check.",
            1,
        )
    skipped = sum(not c.checked for c in checks)
    console.print(
        f"[green]all {len(checks) - skipped} checks hold.[/green]"
        + (f" {skipped} could not be made here (not checked)." if skipped else "")
    )


@audit_app.command("show")
def audit_show(
    bundle: BundleArg,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print JSON: the release's stages, measurements, their expected errors, totals, "
            "lifetime account and dataset guarantee, as public/release.json records them.",
        ),
    ] = False,
) -> None:
    """What the release spent, by stage and statistic (sensitivity, noise scale), and its
    totals against the dataset's lifetime budget."""
    from dprelease.records.audit import load_document

    try:
        doc, _ = load_document(bundle)
    except FileNotFoundError as e:
        fail(str(e), "pass the folder of a release bundle.", exit_code(e))
    if as_json:
        print(json.dumps(_shown(doc), indent=2))
        return
    out = Console()
    priv, book = doc.privacy, doc.privacy.ledger
    key = priv.unit
    out.print(  # the bundle is not trusted: every string from it is printed escaped
        f"[bold]release {shown(doc.release_id)}[/bold] of '{shown(doc.dataset)}': "
        f"{shown(doc.status)}, mechanism {shown(doc.mechanism.name)}, "
        f"{shown(priv.accountant)} accounting, replace-one neighbours, "
        f"n = {shown(str(priv.input_rows_n_public))} (public)"
    )
    if not doc.differentially_private:
        out.print("[bold red]NOT differentially private:[/bold red] " + shown("; ".join(book.defects)))
    if not doc.randomness.fit_for_publication:
        out.print("[bold red]made with --insecure-seed: not fit for publication[/bold red]")
    stages = Table(title="stages")
    for col in ("stage", "weight", f"{key} allocated", f"{key} spent"):
        stages.add_column(col, overflow="fold")
    for st in book.stages:
        stages.add_row(shown(st.stage), f"{st.weight:g}", f"{st.allocated(key):.6g}", f"{st.spent(key):.6g}")
    out.print(stages)
    if doc.discovered:
        _discovered(out, doc.discovered)
    accuracy = {a.statistic: a.as_mapping() for a in priv.accuracy or ()}
    for stage in dict.fromkeys(r.stage for r in book.measurements):
        rows = Table(title=f"measurements of stage '{shown(stage)}'", box=box.SIMPLE_HEAD, pad_edge=False)
        names = [r.statistic for r in book.measurements if r.stage == stage]
        rows.add_column("statistic", overflow="fold", min_width=max(map(len, names)))  # names whole
        rows.add_column("noise, scale (expected error)", overflow="fold", max_width=18)
        for col in ("sensitivity", key):
            rows.add_column(col, overflow="fold")
        rows.add_column("dim", no_wrap=True)
        for r in book.measurements:
            if r.stage == stage:
                rows.add_row(
                    shown(r.statistic),
                    f"{shown(r.mechanism)} {r.noise_scale:.6g} "
                    f"({shown(describe(accuracy.get(r.statistic)))})",
                    f"{r.sensitivity:.6g} {shown(r.sensitivity_norm)}",
                    f"{(r.share(key) or 0.0):.4g}",
                    shown(str(r.dimension)),
                )
        out.print(rows)
    out.print(
        "expected error: E|noise| per entry, and for a count table the total variation the noise "
        "alone moves it by (before post-processing); from the noise scale only, no data"
    )
    t = book.totals
    out.print(f"total: ({t.epsilon:.6g}, {t.delta:.3g})-DP; {shown(t.conversion)}")
    record = priv.record
    guarantee = record.dataset_guarantee
    void = guarantee.void_since if guarantee else None
    if guarantee and void:
        out.print(
            f"[bold red]dataset guarantee VOID since release '{shown(void.release_id)}' "
            f"({shown(void.time[:19])}):[/bold red] {shown(guarantee.statement)}"
        )
    life, period = record.lifetime, record.period
    if period:
        this, total = period.this_period, period.all_time
        out.print(
            f"period budget of '{shown(doc.dataset)}': epsilon {period.epsilon:g}, delta "
            f"{period.delta:g} per {shown(period.length)} (UTC calendar periods); in period "
            f"{shown(this.period)} spent with this release {this.spent_epsilon:.6g} over "
            f"{shown(str(this.releases_counted))} release(s) ({shown(this.rule)}); "
            + _room(this).replace("lifetime budget", "period budget")
            + f"; it resets at {shown(this.resets[:16])}Z. All time: epsilon "
            f"{total.spent_epsilon:.6g} over {shown(str(total.releases_counted))} release(s) in "
            f"{shown(str(total.periods))} period(s)"
            + (
                f"; periods declared disjoint, per person all time: epsilon "
                f"{total.per_person_epsilon:.6g} (the largest period's)"
                if period.disjoint
                else ""
            )
        )
    elif life:
        out.print(
            f"lifetime budget of '{shown(doc.dataset)}': epsilon {life.epsilon:g}, "
            f"delta {life.delta:g}; spent with this release {life.spent_epsilon:.6g} over "
            f"{shown(str(life.releases_counted))} release(s) ({shown(life.rule)}); " + _room(life)
        )
    else:
        out.print(f"no lifetime budget is set for '{shown(doc.dataset)}'")
    head = record.chain_head
    if head:  # bundles from before issue 38 name the ledger's URL instead
        out.print(
            f"ledger: chain head row {shown(str(head.seq))}, sha256 {shown(head.hash)} when the bundle "
            f"was sealed; {len(record.rows)} row(s) of this release (`audit verify` checks both)"
        )


def _discovered(out: Console, discovered: Mapping[str, Discovered]) -> None:
    """A ``schema`` discovery's published values (``discovery.schema``)."""
    table = Table(title="published: discovered under DP")
    for col in ("column", "values", "rule"):
        table.add_column(col, overflow="fold")
    for name, found in discovered.items():
        if found.kind == "bounds":
            lower, upper = found.bounds or (math.nan, math.nan)
            level = math.nan if found.quantile_level is None else found.quantile_level
            values = f"bounds [{lower:g}, {upper:g}]"
            rule = f"private quantiles {level:.3g} and {1 - level:.3g}"
        else:
            values = ", ".join(found.categories or ()) or "(none passed the threshold)"
            if found.withheld:
                values += f" ({found.withheld} more withheld: a spec cannot declare them)"
            rule = (
                f"partition selection, threshold {found.threshold or 0.0:.4g}, delta {found.delta or 0.0:.3g}"
            )
        table.add_row(shown(name), shown(values), shown(rule))
    out.print(table)


def _part(value: Part | None) -> dict | None:
    return None if value is None else value.as_mapping()


def _shown(doc: ReleaseDocument) -> dict:
    """What ``audit show --json`` prints, as ``public/release.json`` records it."""
    priv, book = doc.privacy, doc.privacy.ledger
    record = priv.record
    return {
        "release_id": doc.release_id,
        "dataset": doc.dataset,
        "status": doc.status,
        "mechanism": doc.mechanism.name,
        "accountant": priv.accountant,
        "input_rows_n_public": priv.input_rows_n_public,
        "differentially_private": doc.differentially_private,
        "defects": list(book.defects),
        "fit_for_publication": doc.randomness.fit_for_publication,
        "stages": [s.as_mapping() for s in book.stages],
        "measurements": [r.as_mapping() for r in book.measurements],
        "accuracy": None if priv.accuracy is None else [a.as_mapping() for a in priv.accuracy],
        "totals": book.totals.as_mapping(),
        "lifetime": _part(record.lifetime),
        "dataset_guarantee": _part(record.dataset_guarantee),
        "chain_head": _part(record.chain_head),
        **({"discovered": {k: v.as_mapping() for k, v in doc.discovered.items()}} if doc.discovered else {}),
    }


def _room(life: Room) -> str:
    """What the lifetime budget still admits, as a steward can act on it."""
    if life.used_up:  # bundles from before issue 30 lack it
        return "the lifetime budget is used up: no further release of this dataset fits in it"
    if life.used_up is False and life.next_epsilon_max <= 0 < life.next_epsilon_at_delta:
        return (
            f"no release at delta {life.next_epsilon_at_delta:g} fits any more, but the lifetime budget "
            "is not used up: a pure-DP release, or one at a smaller delta, can still fit"
        )
    rho = "" if life.rho_left is None else f", rho left {life.rho_left:.6g}"
    at = life.next_epsilon_at_delta
    return f"the next release can take epsilon up to {life.next_epsilon_max:.6g}" + (
        f" at delta {at:g}{rho}" if at > 0 else " (pure DP)"
    )


def _room_of(room: Headroom) -> Room:
    """The ledger's headroom as a bundle states it."""
    from dprelease.bundle.privacy_doc import Room

    return Room(
        next_epsilon_max=room.epsilon,
        next_epsilon_at_delta=room.delta,
        rho_left=room.rho,
        used_up=room.used_up,
    )


@ledger_app.command("show")
def ledger_show(
    dataset: Annotated[str | None, typer.Option("--dataset", help="Only this dataset's releases.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: one object per release, stage rows under 'stages'.")
    ] = False,
    ledger: LedgerReadOpt = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="The folder the releases went to (`dprelease release --out`); its "
            "ledger.db is read unless --ledger names another.",
        ),
    ] = Path("releases"),
) -> None:
    """The releases in the ledger, what each is charged, and each dataset's account under its
    budget policy (lifetime; or period: each period's and the all-time totals). Exits 1 when
    the hash chain is broken."""
    from dprelease.ledger import FORMAT, show

    try:
        summary = show(ledger, out=out, dataset=dataset)
    except DPReleaseError as e:
        fail(
            str(e),
            "pass --out with the folder the releases went to, or --ledger with their database.",
            exit_code(e),
        )
    releases, problems, head = summary.releases, summary.chain_problems, summary.head
    if as_json:
        print(json.dumps(releases, indent=2))
        if problems:
            console.print("[red]hash chain broken: " + shown("; ".join(problems)))
            raise typer.Exit(1)
        return
    table = Table(title="releases")
    for col in ("dataset", "release_id", "status", "epsilon", "delta", "stages spent", "started"):
        table.add_column(col, overflow="fold")
    for r in releases:
        not_dp = not r["differentially_private"]
        table.add_row(
            shown(r["dataset"]),
            shown(r["release_id"]),
            shown(r["status"]),
            "[red]unbounded (not DP)[/red]" if not_dp else f"{r['epsilon']:.6g}",
            "-" if not_dp else f"{r['delta']:.3g}",
            str(sum(s["status"] == "spent" for s in r["stages"])),
            shown(r["started"][:19]),
        )
    screen = Console()
    screen.print(table)
    for name, account in summary.accounts.items():
        life, spend, void, room = account.lifetime, account.spent, account.void_since, account.headroom
        _print_schema(screen, name, account.schema)
        if void is not None:
            screen.print(
                f"[bold red]{shown(name)}: guarantee VOID since release '{shown(void['release_id'])}' "
                f"({shown(void['time'][:19])}), which was not differentially private:[/bold red] no "
                "composed (epsilon, delta) statement holds for this dataset, and a lifetime budget on it is "
                "refused"
            )
            continue
        if account.period is not None and room is not None:
            _print_periods(screen, name, account, room)
            continue
        budget = "no budget policy (no lifetime or period budget)"
        if life is not None and room is not None:
            budget = f"lifetime epsilon {life[0]:g} (delta {life[1]:g}); " + _room(_room_of(room))
        screen.print(
            f"{shown(name)}: spent epsilon {spend.epsilon:.6g} at delta {spend.delta:g} "
            f"({shown(spend.rule)}); {budget}"
        )
    screen.print(
        "[green]hash chain intact"
        if not problems
        else "[red]hash chain broken: " + shown("; ".join(problems))
    )
    screen.print(f"chain head: row {head[0]}, sha256 {shown(head[1])}")
    if summary.format < FORMAT:
        screen.print(
            f"[yellow]ledger format {summary.format}, older than this version's ({FORMAT}): releases are "
            "refused until `dprelease ledger migrate` has run (back the ledger up first)[/yellow]"
        )
    if problems:
        fail(
            f"the ledger's hash chain is broken in {len(problems)} place(s); its charges cannot be trusted.",
            "restore the ledger from a backup whose chain head matches the one you anchored; new releases "
            "are refused until then.",
            1,
        )


def _print_schema(screen: Console, name: str, events: tuple[dict, ...]) -> None:
    """A dataset's declarations as a new dataset (another name had its schema) and the
    changes of its schema, each with its release and time."""
    for e in events:
        where = f"release '{shown(e['release_id'])}' ({shown(e['time'][:19])})"
        if "new_dataset" in e:
            screen.print(
                f"{shown(name)}: declared a new dataset at {where} although another dataset name has its "
                f"schema; reason: {shown(e['new_dataset'])}"
            )
        if "schema_before" in e:
            screen.print(
                f"{shown(name)}: its public schema changed at {where} (column names or kinds; fingerprint "
                f"{shown(e['schema_before'][:12])} -> {shown(e['schema'][:12])})"
            )


def _print_periods(screen: Console, name: str, account: DatasetAccount, room: Headroom) -> None:
    """A period budget's account: each period's composed total, the current period's room
    and the all-time composed total."""
    budget, spend = account.period, account.spent
    assert budget is not None
    screen.print(
        f"{shown(name)}: period budget epsilon {budget.epsilon:g} (delta {budget.delta:g}) per "
        f"{budget.length} (UTC calendar periods)"
    )
    for p in account.periods:
        screen.print(
            f"  period {p.period}: {p.releases} release(s), spent epsilon {p.spent.epsilon:.6g} at delta "
            f"{budget.delta:g} ({shown(p.spent.rule)})"
        )
    now = "" if any(p.period == account.current for p in account.periods) else ": nothing spent yet"
    room_text = _room(_room_of(room)).replace("lifetime budget", "period budget")
    screen.print(f"  current period {account.current}{now}; {room_text}")
    total = f"  all time: spent epsilon {spend.epsilon:.6g} at delta {spend.delta:g} ({shown(spend.rule)})"
    if budget.disjoint and account.per_person is not None:
        screen.print(
            f"{total} in total; periods declared disjoint (the steward's declaration that no person is in "
            f"two periods' tables), so per person all time: epsilon {account.per_person.epsilon:.6g} at "
            f"delta {account.per_person.delta:g}, the largest period's (parallel composition; if the "
            "declaration is false, the total applies)"
        )
        return
    screen.print(
        f"{total}; a person in k periods' tables is covered by the composition of k period budgets, "
        "not by one"
    )


@ledger_app.command("migrate")
def ledger_migrate(
    ledger: LedgerReadOpt = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="The folder the releases went to; its ledger.db unless --ledger names another."
        ),
    ] = Path("releases"),
) -> None:
    """Bring a ledger written by an older dprelease to this version's format, once, after a
    backup: no row changes; the format is stamped and the step is a row of the hash chain.
    A release refuses an older ledger until this has run (docs/operator/upgrade.md)."""
    from dprelease.ledger import FORMAT, LedgerRow, migrate

    try:
        migrated = migrate(ledger, out=out)
    except DPReleaseError as e:
        fail(str(e), "pass --ledger with the releases' database, or --out with their folder.", exit_code(e))
    if migrated is None:
        console.print(f"the ledger is in format {FORMAT} already: nothing to do")
        return
    row = LedgerRow.from_mapping(migrated)
    d = row.detail or {}
    console.print(
        f"migrated the ledger from format {d['from_format']} to {d['to_format']}: no row changed; the step "
        f"is row {row.seq} of the hash chain (dprelease {d['software']['dprelease']}). Anchor the new "
        "chain head (`dprelease ledger show`) where you keep the old one",
        soft_wrap=True,
    )
