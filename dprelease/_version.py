"""The version of dprelease, its one source (``pyproject.toml`` reads it at build time), and
the commit of the checkout it runs from."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["__version__", "commit"]

__version__ = "0.3.0"


def commit(where: Path | None = None) -> str:
    """The git commit of the checkout this code runs from: ``where`` (default this file's
    folder) must be ``dprelease/`` at the top of a git work tree, else ``unknown`` (an
    installed wheel, no git, or a virtual environment inside some other repository, whose
    commit is not this code's)."""
    package = (where or Path(__file__)).resolve().parent

    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=package, capture_output=True, text=True, timeout=5, check=True
        )
        return out.stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != package.parent:
            return "unknown"
        return git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
