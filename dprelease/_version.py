"""The version of dprelease, its one source (``pyproject.toml`` reads it at build time), and
the commit of the checkout it runs from."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["__version__", "commit"]

__version__ = "0.2.0"


def commit() -> str:
    """The git commit of the checkout this code runs from (``unknown`` for an installed
    wheel or without git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
