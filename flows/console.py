"""The CLI's terminal: one console on stderr (the bundle path goes to stdout), and the
error panel every refusal ends with: what happened, what to do next, the exit code."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.panel import Panel

__all__ = ["console", "fail"]

console = Console(stderr=True)


def fail(message: str, hint: str, code: int) -> None:
    console.print(
        Panel(f"{message}\n\n[bold]Next:[/bold] {hint}", title="dprelease: error", border_style="red")
    )
    raise typer.Exit(code)
