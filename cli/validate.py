"""``dprelease validate``: the spec, the forecast, the rehearsal and the data against the
public schema, spending nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.cli.options import MemoryOpt, SecondsOpt, SpecArg, chosen, rehearsing, set_ceilings
from dprelease.mechanisms.errors import DPReleaseError

__all__ = ["validate"]


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
    set_ceilings(max_memory, max_seconds)
    from dprelease.bundle.files import write_json
    from dprelease.engines.inputs import check_rows, failing_rules, fitted_rows, read_input, resolve_mechanism
    from dprelease.flows.rehearsal import rehearse
    from dprelease.spec import load_spec
    from dprelease.spec.forecast import gate_forecasts
    from dprelease.spec.resources import check_resources, forecast_resources

    try:
        s = chosen(resolve_mechanism(load_spec(spec)))
        schema = s.public_schema()
        for line in check_resources(s).lines():  # before the rehearsal, as the release flow does
            console.print(f"forecast: {shown(line)}", soft_wrap=True)
        rehearsal = rehearsing(s, rehearse)  # before any value is read, as the release flow does
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
