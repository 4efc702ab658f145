"""The CLI's terminal: one console on stderr (the bundle path goes to stdout), and the
error panel every refusal ends with: what happened, what to do next, the exit code.

Text the user or a file supplied (paths, spec values, column names, release ids, the
patterns they must match, a bundle's or a ledger's strings) is printed through ``shown``:
Rich reads ``[...]`` in a printed string as markup, and a terminal runs the control
characters of an escape sequence (a window title, colours, a cursor move), so ``shown``
escapes both. ``fail`` shows its message and hint itself."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

__all__ = ["console", "exit_code", "exit_codes", "fail", "shown"]

console = Console(stderr=True)

_VISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if c != ord("\n")}
"""Control characters (C0 but the newline, DEL, C1) → their Python escapes, e.g. ``\\x1b``."""


def shown(text: str) -> str:
    """``text`` to print literally: markup escaped, control characters (an ESC, a BEL, a
    carriage return; not the newline) written as visible escapes such as ``\\x1b``."""
    return escape(text.translate(_VISIBLE))


def fail(message: str, hint: str, code: int) -> None:
    """Print the error panel, ``message`` and ``hint`` as plain text (never markup, never
    a terminal's control sequence), and exit with ``code``."""
    console.print(
        Panel(
            f"{shown(message)}\n\n[bold]Next:[/bold] {shown(hint)}",
            title="dprelease: error",
            border_style="red",
        )
    )
    raise typer.Exit(code)


def exit_codes() -> tuple[tuple[type[BaseException], int], ...]:
    """The CLI's one table from an exception class to its exit code, most specific first:
    the first class an error is an instance of gives the code (``exit_code``). Generated from
    the error tree (each class's ``exit_code``, ``mechanisms.errors``), as the table in
    ``docs/reference/errors.md`` is: 3 a gate stopped the release (budget spent, nothing
    published); 4 refused by the ledger (nothing read or spent); 1 unexpected, or Prefect
    unreachable; 2 a bad spec, data file, option or output folder."""
    from dprelease.mechanisms.errors import error_classes
    from dprelease.tasks.scrub import UnexpectedError

    tree = [(cls, cls.exit_code) for cls in reversed(error_classes())]  # children before parents
    return (*tree, (UnexpectedError, 1), (FileNotFoundError, 2))


def exit_code(error: BaseException) -> int:
    """The exit code of ``error`` from ``exit_codes`` (1 for a class the table does not name)."""
    return next((code for kind, code in exit_codes() if isinstance(error, kind)), 1)
