"""Is the release stack up? Checks the Prefect server, the work pool's workers and,
optionally, the scheduled deployment and a worker's own health endpoint; prints one line per
check and exits 0 when every check holds, 1 when one fails (with what to do), 2 on bad usage.

    python deploy/healthcheck.py --pool dprelease-process \\
        --deployment dp-release/adult-monthly --worker-health http://127.0.0.1:8080/health

It talks to the API the way the worker does: ``PREFECT_API_URL``, ``PREFECT_API_AUTH_STRING``
(the server's ``PREFECT_SERVER_API_AUTH_STRING``), ``PREFECT_API_SSL_CERT_FILE`` and
``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``, from the environment or the active Prefect profile.

* **server**: ``GET /health`` answers ``true`` (Prefect leaves it open without credentials),
  and an authenticated call (``GET /admin/version``) is accepted;
* **pool**: the work pool exists, is not paused, and has a *ready* worker: one the server
  holds ONLINE whose last heartbeat is at most ``--max-heartbeat-age`` seconds old (default:
  3 of its heartbeat intervals, the rule the server's own foreman applies);
* **deployment** (``--deployment FLOW/NAME``): it exists, runs this checkout's code (its
  pull step's directory is the one this script and the worker run from, not another
  version's), is not paused, has an active schedule, the scheduler has created an upcoming
  run, and no scheduled run is more than ``--late-after`` seconds overdue (a run no worker
  picked up);
* **worker** (``--worker-health URL``): ``prefect worker start --with-healthcheck`` answers 200
  and the server answers this host. The endpoint answers OK for 30 query intervals (5 min)
  after the worker's last poll, server or not; a worker on this host that cannot reach the
  server runs nothing, so the line fails then.

Nothing here reads a flow's parameters or results: only names, states, times and the
deployment's pull step.
"""

from __future__ import annotations

import argparse
import re
import ssl
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

__all__ = ["Check", "check_deployment", "check_pool", "check_server", "check_worker", "main"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


def _ago(when: datetime, now: datetime) -> str:
    s = max(0.0, (now - when).total_seconds())
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _refused(r: httpx.Response) -> str | None:
    if r.status_code in (401, 403):
        return (
            f"the server refused this client's credentials (HTTP {r.status_code}); set "
            "PREFECT_API_AUTH_STRING to the server's PREFECT_SERVER_API_AUTH_STRING"
        )
    return None


def check_server(api: httpx.Client, url: str) -> Check:
    """The API answers ``/health`` and accepts this client's credentials."""
    try:
        r = api.get("/health")
    except httpx.HTTPError as e:
        return Check(
            "server", False, f"{url} does not answer ({type(e).__name__}); is prefect-server running?"
        )
    if r.status_code != 200 or r.json() is not True:
        return Check(
            "server", False, f"{url}/health answered HTTP {r.status_code}: the server is not healthy"
        )
    try:
        v = api.get("/admin/version")
    except httpx.HTTPError as e:
        return Check("server", False, f"{url} stopped answering ({type(e).__name__})")
    if refused := _refused(v):
        return Check("server", False, refused)
    if v.status_code != 200:
        return Check("server", False, f"{url}/admin/version answered HTTP {v.status_code}")
    return Check("server", True, f"{url} is healthy (Prefect {v.json()})")


def check_pool(api: httpx.Client, pool: str, max_age: float | None, now: datetime) -> Check:
    """The pool exists, is not paused and has a worker ONLINE with a recent heartbeat."""
    name = f"work pool '{pool}'"
    try:
        r = api.get(f"/work_pools/{pool}")
        if r.status_code == 404:
            return Check(
                "pool", False, f"{name} does not exist (prefect work-pool create {pool} --type process)"
            )
        if refused := _refused(r):
            return Check("pool", False, refused)
        r.raise_for_status()
        if r.json().get("status") == "PAUSED" or r.json().get("is_paused"):
            return Check("pool", False, f"{name} is paused: no run starts (prefect work-pool resume {pool})")
        w = api.post(f"/work_pools/{pool}/workers/filter", json={"limit": 50})
        w.raise_for_status()
    except httpx.HTTPError as e:
        return Check("pool", False, f"reading {name} failed ({type(e).__name__})")
    ready: list[str] = []
    seen: list[str] = []
    for worker in w.json():
        beat = _time(worker.get("last_heartbeat_time"))
        limit = max_age if max_age is not None else 3 * (worker.get("heartbeat_interval_seconds") or 30)
        fresh = beat is not None and (now - beat).total_seconds() <= limit
        (ready if fresh and worker.get("status") == "ONLINE" else seen).append(
            f"{worker['name']} (last heartbeat {_ago(beat, now) if beat else 'never'})"
        )
    if ready:
        return Check("pool", True, f"{name} has {len(ready)} ready worker(s): {', '.join(ready)}")
    known = f"known workers, none ready: {', '.join(seen)}" if seen else "no worker has ever polled it"
    return Check(
        "pool",
        False,
        f"{name} has no ready worker ({known}); start one: systemctl start prefect-worker",
    )


def check_deployment(api: httpx.Client, deployment: str, late_after: float, now: datetime) -> Check:
    """The deployment is active and scheduled, and no scheduled run is overdue."""
    name = f"deployment '{deployment}'"
    try:
        r = api.get(f"/deployments/name/{deployment}")
        if r.status_code == 404:
            return Check(
                "deployment", False, f"{name} does not exist (prefect deploy --all, deploy/README.md)"
            )
        if refused := _refused(r):
            return Check("deployment", False, refused)
        r.raise_for_status()
        dep = r.json()
        if dep.get("paused"):
            return Check("deployment", False, f"{name} is paused (prefect deployment resume '{deployment}')")
        if (other := _other_code(dep, name)) is not None:
            return Check("deployment", False, other)
        if not any(s.get("active") for s in dep.get("schedules") or []):
            return Check("deployment", False, f"{name} has no active schedule: nothing will run by itself")
        runs = api.post(
            "/flow_runs/filter",
            json={
                "deployments": {"id": {"any_": [dep["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
                "sort": "EXPECTED_START_TIME_ASC",
                "limit": 50,
            },
        )
        runs.raise_for_status()
    except httpx.HTTPError as e:
        return Check("deployment", False, f"reading {name} failed ({type(e).__name__})")
    times = sorted(t for t in (_time(f.get("expected_start_time")) for f in runs.json()) if t is not None)
    late = [t for t in times if t < now - timedelta(seconds=late_after)]
    if late:
        return Check(
            "deployment",
            False,
            f"{len(late)} scheduled run(s) of {name} overdue, the oldest due {_ago(late[0], now)}: no worker "
            "picked them up (see the pool check; is the pool's worker running?)",
        )
    upcoming = [t for t in times if t >= now]
    if not upcoming:
        return Check(
            "deployment",
            False,
            f"{name} has an active schedule but no upcoming scheduled run: the server's scheduler created "
            "none (check the server's log for scheduler errors; deploy/README.md, 'Scheduling')",
        )
    return Check(
        "deployment",
        True,
        f"{name}: {len(upcoming)} upcoming run(s), the next at {upcoming[0].isoformat(timespec='minutes')}",
    )


HERE = Path(__file__).resolve().parents[1]
"""The checkout this script runs from: the units run it and the worker from the same one."""


def _version_at(folder: Path) -> str:
    try:
        text = (folder / "dprelease" / "_version.py").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    found = re.search(r'__version__ = "([^"]+)"', text)
    return found[1] if found else "unknown"


def _other_code(dep: dict, name: str) -> str | None:
    """Why the deployment's runs would not run this checkout's code (the worker's), or None:
    its pull step's directory is unset (deployed without ``DPRELEASE_HOME``) or another
    checkout, whose version is named. A deployment without that pull step runs in the
    worker's own folder."""
    for step in dep.get("pull_steps") or []:
        chdir = step.get("prefect.deployments.steps.set_working_directory")
        if chdir is None:
            continue
        directory = str(chdir.get("directory") or "")
        if not directory or "{{" in directory:
            return f"{name}'s pull step has no directory: deployed with DPRELEASE_HOME unset, every run fails"
        if Path(directory).resolve() != HERE:
            return (
                f"{name} runs the code in {directory} (dprelease {_version_at(Path(directory))}), not the "
                f"worker's {HERE} (dprelease {_version_at(HERE)}): deploy again from {HERE} "
                "(dprelease deploy check says what each deployment runs)"
            )
    return None


def check_worker(url: str, timeout: float, server: Check | None = None) -> Check:
    """``prefect worker start --with-healthcheck``'s endpoint answers 200, and ``server``
    (the server check from this host, which the worker shares) holds."""
    try:
        r = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as e:
        return Check(
            "worker", False, f"{url} does not answer ({type(e).__name__}); is prefect-worker running?"
        )
    if r.status_code != 200:
        return Check("worker", False, f"{url} answered HTTP {r.status_code}: the worker has stopped polling")
    if server is not None and not server.ok:
        return Check(
            "worker",
            False,
            f"{url} answers OK, but the worker cannot reach the server either (see the server line): "
            "it starts no run until it can",
        )
    return Check("worker", True, f"{url} answers OK")


def _client(url: str | None, timeout: float) -> tuple[httpx.Client, str]:
    from prefect.settings import get_current_settings

    api = get_current_settings().api
    base = (url or api.url or "").rstrip("/")
    if not base:
        raise SystemExit("healthcheck: set PREFECT_API_URL (or pass --api-url)")
    auth = None
    if api.auth_string is not None:
        user, _, password = api.auth_string.get_secret_value().partition(":")
        auth = httpx.BasicAuth(user, password)
    verify: bool | ssl.SSLContext = False
    if not api.tls_insecure_skip_verify:
        verify = ssl.create_default_context(cafile=api.ssl_cert_file or None)
    return httpx.Client(base_url=base, auth=auth, verify=verify, timeout=timeout), base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-url", help="the Prefect API (default PREFECT_API_URL)")
    parser.add_argument("--pool", default="dprelease-process", help="work pool (default dprelease-process)")
    parser.add_argument("--deployment", help="also check this deployment, e.g. dp-release/adult-monthly")
    parser.add_argument("--worker-health", metavar="URL", help="a worker's --with-healthcheck endpoint")
    parser.add_argument(
        "--max-heartbeat-age",
        type=float,
        help="seconds after which a worker is not ready (default: 3 of its heartbeat intervals)",
    )
    parser.add_argument(
        "--late-after",
        type=float,
        default=900,
        help="seconds after its scheduled time a run counts as overdue (default 900)",
    )
    parser.add_argument("--timeout", type=float, default=10, help="seconds per request (default 10)")
    args = parser.parse_args(argv)
    api, url = _client(args.api_url, args.timeout)
    now = datetime.now(UTC)
    with api:
        checks = [check_server(api, url)]
        if checks[0].ok:
            checks.append(check_pool(api, args.pool, args.max_heartbeat_age, now))
            if args.deployment:
                checks.append(check_deployment(api, args.deployment, args.late_after, now))
    if args.worker_health:
        checks.append(check_worker(args.worker_health, args.timeout, checks[0]))
    for c in checks:
        print(c.line())
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
