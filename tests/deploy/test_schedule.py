"""Issue 20: the server itself schedules the release. A real ``prefect server start`` (SQLite,
then PostgreSQL), the process work pool, ``deploy/prefect.yaml`` deployed with its cron
replaced by a schedule that fires in about 20 s, and a worker started as in production
(polling, not ``--run-once``). Nothing triggers the run by hand: the test passes only if the
server's scheduler creates the run and the worker runs it to a bundle, within 150 s of the
deploy.

Prefect 3.8.8 with SQLAlchemy 2.1 fails here: every scheduler pass logs
``InvalidRequestError: Can't evaluate bulk DML statement`` and creates no run (pyproject.toml
pins ``sqlalchemy<2.1`` for that); ``prefect deployment run``, which test_deployment.py uses,
works either way.

Timing (defaults in brackets): the scheduler's recent-deployments pass runs every 5 s and
schedules a deployment updated in the last 6 s; its main pass runs every
PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS, lowered to 10 (60) so that a deployment the
recent pass missed is scheduled within 10 s; the worker polls every
PREFECT_WORKER_QUERY_SECONDS, lowered to 2 (10), for runs due within
PREFECT_WORKER_PREFETCH_SECONDS (10), so it starts the run up to 10 s before its slot."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from dprelease.ledger import Ledger
from tests.deploy.conftest import (
    DEPLOYMENT,
    POOL,
    PREFECT,
    ROOT,
    api,
    cli,
    prefect_server,
    server_errors,
    stop,
)
from tests.helpers import adult_rows, write_spec

pytestmark = pytest.mark.deploy

# An interval schedule, not a cron: its anchor puts the first slot LEAD s after the deploy
# starts (a cron "* * * * *" fires 0-60 s after it, at random), and if a slow deploy makes
# the scheduler miss that slot, the next comes INTERVAL s later, still within WAIT.
INTERVAL = 60
LEAD = 20
CREATED_WITHIN = 30  # s after the deploy: the scheduler has created the run
WAIT = 150  # s after the deploy: the run is final
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@pytest.fixture(params=["sqlite", "postgresql"])
def scheduling_server(request, tmp_path_factory):
    """A server with a fresh database: SQLite in its PREFECT_HOME, or a new database on the
    test PostgreSQL (``postgres_database``; skipped without DPRELEASE_TEST_POSTGRES_URL)."""
    extra = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "10"}
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_database")
        extra["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = "postgresql+asyncpg://" + url.split("://", 1)[1]
    with prefect_server(tmp_path_factory.mktemp(f"prefect-home-{request.param}"), **extra) as env:
        yield env


def _deployment_file(tmp_path: Path, spec: Path, out: Path, anchor: datetime) -> Path:
    """deploy/prefect.yaml with this spec and output folder as parameters and the interval
    schedule in place of the monthly cron; everything else as it is."""
    doc = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    (dep,) = doc["deployments"]
    assert dep["schedules"][0]["cron"] and dep["concurrency_limit"] == 1
    dep["parameters"] = {**dep["parameters"], "spec_path": str(spec), "out_dir": str(out)}
    dep["schedules"] = [
        {"interval": INTERVAL, "anchor_date": anchor.isoformat(), "timezone": "UTC", "active": True}
    ]
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _runs(env, deployment_id: str) -> list[dict]:
    body = {"deployments": {"id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC", "limit": 10}
    return api(env, "POST", "/flow_runs/filter", json=body)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_server_schedules_the_release_and_the_worker_runs_it(scheduling_server, tmp_path):
    env = {**scheduling_server, "PREFECT_WORKER_QUERY_SECONDS": "2"}
    period = {"length": "P1D", "epsilon": 5.0}  # a deployment's run needs a budget policy (issue 32)
    privacy = {"epsilon": 1.0, "delta": 1e-6, "period": period}
    spec = write_spec(tmp_path, adult_rows(400), checks={"enabled": False}, privacy=privacy)
    out = tmp_path / "out"
    cli(env, PREFECT, "work-pool", "create", POOL, "--type", "process")
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", POOL],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            anchor = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD)
            prefect_file = _deployment_file(tmp_path, spec, out, anchor)
            cli(env, PREFECT, "--no-prompt", "deploy", "--all", "--prefect-file", str(prefect_file))
            deployed = time.monotonic()
            dep = api(env, "GET", "/deployments/name/" + DEPLOYMENT)
            (schedule,) = dep["schedules"]
            assert schedule["active"] and schedule["schedule"]["interval"] == INTERVAL

            while not (runs := _runs(env, dep["id"])):
                assert time.monotonic() - deployed < CREATED_WITHIN, (
                    f"the server created no scheduled run within {CREATED_WITHIN} s of the deploy;"
                    f" its log:\n{server_errors(env)}"
                )
                time.sleep(1)
            run_id = runs[0]["id"]  # the earliest slot
            while (run := api(env, "GET", f"/flow_runs/{run_id}"))["state"]["type"] not in FINAL:
                assert time.monotonic() - deployed < WAIT, (
                    f"the scheduled run is still {run['state']['type']} {WAIT} s after the deploy;"
                    f" worker log:\n{(tmp_path / 'worker.log').read_text()[-3000:]}"
                )
                time.sleep(1)
            took = time.monotonic() - deployed
        finally:
            stop(worker)

    assert run["state"]["type"] == "COMPLETED", (run["state"], (tmp_path / "worker.log").read_text()[-3000:])
    # created by the server's scheduler from this deployment's schedule, not by a person
    assert run["auto_scheduled"] is True and "auto-scheduled" in run["tags"]
    assert run["created_by"]["type"] == "SCHEDULE" and run["created_by"]["id"] == schedule["id"]
    assert run["idempotency_key"].startswith("scheduled ")
    slot = _when(run["expected_start_time"])
    assert slot >= anchor and (slot - anchor).total_seconds() % INTERVAL == 0
    history = api(env, "GET", "/flow_run_states/", params={"flow_run_id": run_id})
    kinds = [s["type"] for s in sorted(history, key=lambda s: s["timestamp"])]
    assert kinds[0] == "SCHEDULED" and "RUNNING" in kinds and kinds[-1] == "COMPLETED", kinds
    assert all(r["auto_scheduled"] for r in _runs(env, dep["id"]))  # no run was made by hand

    # the bundle of that slot: release_id <dataset>-<scheduled time, UTC>
    release_id = f"adult-{slot:%Y%m%dt%H%M%Sz}"
    assert (out / release_id / "public" / "synthetic.csv").is_file(), sorted(p.name for p in out.iterdir())
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        released = {r["release_id"]: r["status"] for r in led.releases()}
    assert released[release_id] == "released"
    print(f"slot {slot:%H:%M:%S}, anchor {anchor:%H:%M:%S}: completed {took:.0f} s after the deploy")
