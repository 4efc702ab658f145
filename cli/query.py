"""``dprelease query``: the analyst's count with its interval, from published files only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dprelease.cli.console import console, fail, shown

__all__ = ["query"]


def query(
    bundle: Annotated[
        Path,
        typer.Argument(help="A release bundle folder or a copy of its public/ folder (only these are read)."),
    ],
    where: Annotated[
        list[str],
        typer.Option(
            "--where",
            help="A condition COLUMN=VALUE: a category, a number, or an inclusive range LOW..HIGH (either "
            "end may be left out; ISO dates on a date column). Repeat it: conditions on different columns "
            "are ANDed, two on one column mean either value.",
        ),
    ],
    level: Annotated[float, typer.Option("--level", help="The interval's level, between 0 and 1.")] = 0.9,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """How many of the fitted rows meet the conditions, with an interval at --level and the
    method that made it (analytic, bracket or bounds), from the release's published noisy
    tables: no confidential data is read and no budget is spent."""
    from dprelease.records.query import QueryError, parse_where, run_query

    try:
        result = run_query(bundle, parse_where(where), level)
    except QueryError as e:
        fail(str(e), "fix the --where condition (columns and categories are in release.json's spec).", 2)
    except FileNotFoundError as e:
        fail(str(e), "pass a release bundle folder or a copy of its public/ folder.", 2)
    if as_json:
        print(json.dumps(result.as_dict(), indent=2))
        return
    console.print(shown(str(result)), soft_wrap=True)
    console.print(shown(f"tables used: {', '.join(result.tables)}"), soft_wrap=True)
    console.print(
        shown(f"the synthetic rows say {result.synthetic_count:,.0f}; counted among {result.target}"),
        soft_wrap=True,
    )
