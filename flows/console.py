"""The CLI's terminal: one console on stderr (the bundle path goes to stdout), and the
error panel every refusal ends with: what happened, what to do next, the exit code.

Rich reads ``[...]`` in a printed string as markup, so text the user supplied (paths,
spec values, release ids, the patterns they must match) is printed through ``escape``:
``fail`` escapes its message and hint itself."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

__all__ = ["console", "fail"]

console = Console(stderr=True)


def fail(message: str, hint: str, code: int) -> None:
    """Print the error panel, ``message`` and ``hint`` as plain text (never markup), and
    exit with ``code``."""
    console.print(
        Panel(
            f"{escape(message)}\n\n[bold]Next:[/bold] {escape(hint)}",
            title="dprelease: error",
            border_style="red",
        )
    )
    raise typer.Exit(code)
