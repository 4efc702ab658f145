"""The project's Prefect (and Great Expectations) defaults, in one place.

Prefect reads its settings once, when it is first imported, so these must be in the process
environment before anything imports Prefect. ``import dprelease`` applies them
(``dprelease/__init__.py``), and every entry goes through it first: the command line, the
Python API, and the flow's module when a worker loads it. Each is only a default: a variable
already in the environment, or a setting of the active Prefect profile (``prefect config
set``), is the user's choice and is left alone.

When Prefect was imported before dprelease (a notebook that imported ``prefect`` first), it
read its settings without them: the release's Prefect block then adds them as Prefect's own
defaults (``temporary_settings(set_defaults=...)``, which every source of Prefect's settings
overrides), and the temporary server's start is given its time-out explicitly from them
(``flows/prefect_server.py``). A worker imports Prefect before the flow's module: its
environment file holds the same values (``deploy/systemd/dprelease.env.example``; a test
keeps them equal).

Only the standard library is imported here (0.1 s for ``import dprelease`` in all): this
module runs before anything else.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import MutableMapping
from pathlib import Path

__all__ = ["PREFECT_DEFAULTS", "apply_defaults", "profile_settings"]

PREFECT_DEFAULTS: dict[str, str] = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # A temporary server runs its migrations before it answers: 12.6 s on a fresh PREFECT_HOME
    # on an idle 2-core machine, close to Prefect's 20 s; a busy machine takes longer.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "GX_ANALYTICS_ENABLED": "false",
    # Each failed call to Prefect's API is retried with exponential back-off: 5 retries (Prefect's
    # default) wait about a minute per call when the server is down; 2 wait about 6 s. Once the
    # flow has published, Prefect's API no longer changes a release's outcome (flows/events.py).
    "PREFECT_CLIENT_MAX_RETRIES": "2",
}


def profile_settings(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """The settings of the active Prefect profile, found as Prefect finds it: the file
    ``PREFECT_PROFILES_PATH`` (default ``$PREFECT_HOME/profiles.toml``, ``~/.prefect``), the
    profile ``PREFECT_PROFILE`` or the file's ``active`` one. Empty when there is none or it
    cannot be read (Prefect then says why when it starts)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(env.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    active = env.get("PREFECT_PROFILE") or data.get("active")
    chosen = data.get("profiles", {}).get(active, {}) if isinstance(active, str) else {}
    return {str(k): str(v) for k, v in chosen.items()} if isinstance(chosen, dict) else {}


def apply_defaults(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put each of ``PREFECT_DEFAULTS`` in ``environ`` (the process environment) unless it is
    there already or the active Prefect profile sets it; returns what was set."""
    env = os.environ if environ is None else environ
    chosen = profile_settings(env)
    added = {k: v for k, v in PREFECT_DEFAULTS.items() if k not in env and k not in chosen}
    env.update(added)
    return added
