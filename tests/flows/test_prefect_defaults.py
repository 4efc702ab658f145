"""Issue 38, "one entry into Prefect": the project's Prefect defaults (``flows/defaults.py``)
hold whichever of dprelease and Prefect a process imports first, and a temporary server that
does not start in time is reported as such, recorded, stopped and not reused.

Before issue 38, ``dprelease.release`` imported Prefect before it set the defaults, so its
temporary server had Prefect's 20 s to start; on a busy machine every release failed with
``UnexpectedFailure (RuntimeError)``, no failure record, and the server left running."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.flows.defaults import PREFECT_DEFAULTS, apply_defaults
from tests.deploy.test_stack import env_example
from tests.properties import property_settings

ROOT = Path(__file__).resolve().parents[2]
KEYS = sorted(PREFECT_DEFAULTS)
VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=5)


@pytest.mark.property
@property_settings(60)
@given(
    environ=st.dictionaries(st.sampled_from([*KEYS, "PREFECT_API_URL", "HOME"]), VALUE, max_size=4),
    profile=st.dictionaries(st.sampled_from(KEYS), VALUE, max_size=3),
    active=st.sampled_from(["file", "variable", "missing"]),
)
def test_a_default_never_replaces_the_user_s_value(tmp_path_factory, environ, profile, active):
    """``apply_defaults`` only fills what neither the environment nor the active Prefect
    profile sets, and fills all of that with the project's values."""
    home = tmp_path_factory.mktemp("prefect-home")
    lines = [f'active = "{"mine" if active == "file" else "other"}"', "[profiles.mine]"]
    lines += [f'{k} = "{v}"' for k, v in profile.items()] + ["[profiles.other]"]
    (home / "profiles.toml").write_text("\n".join(lines) + "\n")
    env = {**environ, "PREFECT_HOME": str(home)}
    if active == "variable":
        env["PREFECT_PROFILE"] = "mine"
    before = dict(env)
    chosen = profile if active != "missing" else {}
    added = apply_defaults(env)
    assert {k: env[k] for k in before} == before  # nothing of the user's is replaced
    assert added == {k: PREFECT_DEFAULTS[k] for k in KEYS if k not in before and k not in chosen}
    assert set(env) == set(before) | set(added)


def test_the_worker_s_environment_file_holds_the_same_defaults():
    """A worker imports Prefect before the flow's module: its flow runs take the defaults
    from ``dprelease.env.example``, which must say what ``flows/defaults.py`` says."""
    example = env_example()
    assert {k: example.get(k) for k in PREFECT_DEFAULTS} == PREFECT_DEFAULTS


# Inside dprelease.release, where its temporary server starts: the time-out it is given and
# Prefect's settings there; then the server is stopped and the call ends (before_prefect, the
# checks on the spec, is not what this is about: skipped).
INSIDE = """
import json, os, subprocess, sys
if sys.argv[1] == "prefect-first":
    import prefect
import dprelease
import dprelease.flows.run as run
run.before_prefect = lambda *args, **kwargs: None
from dprelease.flows import prefect_server
seen = {}

def spy(self, *args):
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
    seen["timeout"] = args[0] if args else PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    seen["setting"] = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
    seen["retries"] = PREFECT_CLIENT_MAX_RETRIES.value()
    self.stop()
    raise KeyboardInterrupt

prefect_server.TemporaryServer.ready = spy
try:
    dprelease.release(dprelease.Spec.demo(), out=sys.argv[2])
except KeyboardInterrupt:
    pass
print(json.dumps(seen))
"""


def _inside(order: str, tmp: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in PREFECT_DEFAULTS and k != "PREFECT_API_URL"}
    home = tmp / "prefect-home"
    home.mkdir()
    full = {**base, "PREFECT_HOME": str(home), **env}
    if "PROFILE_TIMEOUT" in env:
        set_it = [str(Path(sys.executable).parent / "prefect"), "config", "set"]
        subprocess.run(
            [*set_it, f"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS={env['PROFILE_TIMEOUT']}"],
            env=full,
            check=True,
            capture_output=True,
            timeout=120,
        )
    out = subprocess.run(
        [sys.executable, "-c", INSIDE, order, str(tmp / "out")],
        env=full,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("order", "env", "timeout", "retries"),
    [
        ("dprelease-first", {}, 90, 2),  # a notebook: import dprelease, then dprelease.release(...)
        ("prefect-first", {}, 90, 2),  # Prefect read its settings without the project's defaults
        ("prefect-first", {"PROFILE_TIMEOUT": "45", "PREFECT_CLIENT_MAX_RETRIES": "4"}, 45, 4),  # the user's
    ],
    ids=["dprelease-first", "prefect-first", "prefect-first-user-values"],
)
def test_the_release_s_temporary_server_waits_the_project_s_time_or_the_user_s(
    tmp_path, order, env, timeout, retries
):
    seen = _inside(order, tmp_path, **env)
    assert seen == {"timeout": timeout, "setting": timeout, "retries": retries}


def _servers_of(home: Path) -> list[psutil.Process]:
    """Prefect's temporary servers (uvicorn) started with PREFECT_HOME ``home``, still alive."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if "uvicorn" in " ".join(p.info["cmdline"] or []) and p.environ().get("PREFECT_HOME") == str(
                home
            ):
                found.append(p)
    return found


# The API on a machine too slow for the time-out (1 s: a fresh server runs its migrations
# for seconds), then again with the project's: a fresh server, a published release.
SLOW_THEN_FINE = """
import json, sys
import psutil
import dprelease
from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings
out, seen = sys.argv[1], {}
with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 1}):
    try:
        dprelease.release(dprelease.Spec.demo(), out=out, insecure_seed=1)
    except dprelease.errors.PrefectNotStarted as e:
        seen["error"] = str(e)
children = psutil.Process().children(recursive=True)
seen["servers"] = [p.pid for p in children if "uvicorn" in " ".join(p.cmdline())]
seen["published"] = dprelease.release(dprelease.Spec.demo(), out=out, insecure_seed=1).release_id
print(json.dumps(seen))
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in PREFECT_DEFAULTS and k != "PREFECT_API_URL"}
    home = tmp / "prefect-home"
    home.mkdir(exist_ok=True)
    return {**base, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **extra}


def _record_says_nothing_was_read_or_spent(out: Path) -> None:
    (record,) = (out / "failures").iterdir()
    failure = json.loads((record / "failure.json").read_text())
    assert failure["stage"] == "start_prefect" and failure["error"] == "PrefectNotStarted"
    assert failure["data_read"] is False and failure["budget_spent"] is False
    assert "nothing was read or spent" in failure["message"]


@pytest.mark.deploy
def test_the_api_reports_a_server_too_slow_to_start_and_the_next_call_starts_a_fresh_one(tmp_path):
    env = _env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", SLOW_THEN_FINE, str(tmp_path / "out")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["error"].startswith(
        "Prefect's temporary server did not answer within 1 s "
        "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); the machine may be busy: raise it, or set "
        "PREFECT_API_URL to a running Prefect server."
    )
    assert "(failure record: " in seen["error"]
    assert seen["servers"] == []  # the server that did not answer was stopped, not kept
    _record_says_nothing_was_read_or_spent(tmp_path / "out")
    assert (tmp_path / "out" / seen["published"] / "public" / "release.json").is_file()
    assert _servers_of(Path(env["PREFECT_HOME"])) == []  # and the fresh one stopped at exit


@pytest.mark.e2e
def test_the_cli_reports_a_server_too_slow_to_start(tmp_path):
    env = _env(tmp_path, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1")
    out = tmp_path / "out"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dprelease"), "demo", "--out", str(out)],
        env={**env, "COLUMNS": "300"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, said[-3000:]  # console.exit_codes: PrefectUnreachable
    assert "did not answer within 1 s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)" in said, said[
        -3000:
    ]
    assert "export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300" in said
    _record_says_nothing_was_read_or_spent(out)
    assert not (out / "ledger.db").exists()
    assert _servers_of(Path(env["PREFECT_HOME"])) == []
