"""``dprelease mechanisms``: the mechanisms a spec can name."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["mechanisms"]


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
        "dropped), a spec's allocation overrides it, declared gates add a 'gates' stage and "
        "mechanism.value_grid a 'grid' stage."
    )
