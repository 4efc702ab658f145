"""What ``dprelease release`` prints after a release: what ``mechanism: auto`` chose, the
budget by stage, the gates' noisy values, the (ε, δ) statement and the quality verdict
(``checks.verdict``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.checks.verdict import quality_line
from dprelease.cli.console import console, shown

__all__ = ["print_summary"]


def print_summary(bundle: Path) -> None:
    """Print a published bundle's summary from its ``public/release.json`` (and the
    steward's quality line from ``internal/utility.json``); the bundle's path last, on stdout."""
    doc = ReleaseDocument.from_file(bundle / "public" / "release.json")
    chosen = doc.mechanism.chosen_by
    if chosen is not None:  # the flow chose after its ledger pre-check: the CLI hears it here
        name, reason = shown(chosen.mechanism), shown(chosen.reason)
        console.print(f"mechanism auto chose [bold]{name}[/bold]: {reason}")
    book = doc.privacy.ledger
    t = book.totals
    table = Table(title=f"release {shown(doc.release_id)}", show_header=True)
    for col in ("stage", "statistics", "spent", "allocated"):
        table.add_column(col)
    key = doc.privacy.unit
    for s in book.stages:
        count = sum(r.stage == s.stage for r in book.measurements)
        table.add_row(s.stage, str(count), f"{key}={s.spent(key):.6g}", f"{key}={s.allocated(key):.6g}")
    console.print(table)
    for g in doc.gates:
        bound = " and ".join(f"{k} {v:g}" for k, v in (("min", g.min), ("max", g.max)) if v is not None)
        console.print(
            f"gate {g.gate} ({bound}): noisy value {g.noisy_value:.4g} "
            f"(noise s.d. {g.noise_sd:.2g}), " + ("[green]passed" if g.passed else "[red]failed")
        )
    console.print(
        f"privacy: ({t.epsilon:.6g}, {t.delta:.3g})-DP, replace-one neighbours; "
        f"{doc.privacy.synthetic_rows} synthetic rows"
    )
    console.print(f"engine: {_engine(doc.engine or {'name': 'memory'})}")
    for advice in doc.advice or ():  # from the noisy tables: what the schema could declare
        console.print(f"[yellow]advice:[/yellow] {shown(advice.message)}", soft_wrap=True)
    if not doc.randomness.fit_for_publication:
        console.print("[bold red]made with --insecure-seed: not fit for publication[/bold red]")
    _quality(bundle)
    print(f"bundle: {bundle}")


def _engine(engine: Mapping[str, Any]) -> str:
    """The engine that ran (issue 42: a spec without ``engine:`` ran in memory, and nothing
    said so): its name, and for a streaming engine its chunks and workers.

    >>> _engine({"name": "dask", "chunk_rows": 250000, "workers": 2})
    'dask (250,000 rows a chunk, 2 workers)'
    """
    name = str(engine.get("name", "memory"))
    if name == "memory":
        return "memory (every row in memory; engine.name: local or dask streams larger inputs)"
    facts = [f"{engine['chunk_rows']:,} rows a chunk"] if "chunk_rows" in engine else []
    facts += [f"{engine['workers']} workers"] if engine.get("workers") else []
    return f"{shown(name)} ({', '.join(facts)})" if facts else shown(name)


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
