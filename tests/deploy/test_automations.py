"""Issues 20 and 32: the automations' messages (``deploy/automations.py``).

Each automation's subject and body are rendered by Prefect's own server-side code
(``prefect.server.events.actions.SendNotification.render``, the sandboxed Jinja environment
the server uses when an automation fires) against realistic triggers: the events Prefect and
``flows/events.py`` emit for a reactive trigger, and no event at all for the proactive one.
A body with a slot left empty (the proactive automation's ``" at  for ; see …"`` of issue
20) fails, and so does a release's message that does not name its release, dataset and reason
(issue 32). The test marked ``deploy`` lets a real ``prefect server`` fire the proactive, the
published and the work-pool automations into a webhook."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import HTTPServer
from types import ModuleType
from uuid import uuid4

import pytest
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState, SendNotification
from prefect.events.schemas.automations import Posture

from tests.deploy.conftest import POOL, PREFECT, ROOT, Webhook, api, cli, prefect_server, stop

WINDOW = timedelta(hours=768)

# deploy/automations.py's body before issue 20: one template for every trigger
OLD_BODY = (
    "{{ event.event }} at {{ event.occurred }} for {{ event.resource.id }}; see the Prefect UI, "
    "`dprelease ledger show` and <out>/failures/ for details"
)
# what no rendered message may hold: a flow run's state message (the exception's text), the
# bundle's path and host
SECRET_STATE_MESSAGE = "row 17: age 131 is above the bound 120"
BUNDLE = "/srv/releases/adult-20261101t020000z"
# the ledger's reasons (public: budgets, release ids), which a refusal's message quotes
REFUSAL_MESSAGE = (
    "lifetime budget of dataset 'adult' (epsilon=3, delta=1e-05) would be exceeded: 2 earlier release(s) "
    "spent epsilon=2.5; this release needs epsilon=1, which would make 3.5 (zcdp). The next release "
    "can take epsilon <= 0.5"
)
RERUN_MESSAGE = (
    "release 'adult-20261101t020000z' already exists in the ledger (released at 2026-11-01T02:00:41); "
    "choose another release_id"
)
FAILURE_RECORD = {
    "failure_record": "/srv/releases/failures/adult-20261101t020000z-20261101t020041z",
    "failure_host": "worker-3",
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dprelease_automations", ROOT / "deploy" / "automations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


auto = _load()


def _event(name: str, resource: dict, related: list | None = None, payload: dict | None = None):
    from prefect.server.events.schemas.events import ReceivedEvent

    return ReceivedEvent(
        occurred=datetime(2026, 11, 1, 2, 0, 41, tzinfo=UTC),
        event=name,
        resource=resource,
        related=related or [],
        payload=payload or {},
        id=uuid4(),
    )


def _flow_run_event(state: str, message: str = f"Flow run encountered an exception: {SECRET_STATE_MESSAGE}"):
    """As prefect/server/models/events.py emits it for a deployment's run."""
    return _event(
        f"prefect.flow-run.{state}",
        {
            "prefect.resource.id": "prefect.flow-run.0f6b3c1e-5a4e-4a57-9a49-3c2f8e1d7b10",
            "prefect.resource.name": "adult-20261101t020000z",  # the flow names its runs by release id
            "prefect.run-count": "1",
            "prefect.state-message": message,
            "prefect.state-name": state,
            "prefect.state-timestamp": "2026-11-01T02:00:41+00:00",
            "prefect.state-type": state.upper(),
        },
        related=[
            {
                "prefect.resource.id": "prefect.flow.4e0b1b6c-1d8e-4d0e-9a59-2b1f6d3e9c21",
                "prefect.resource.role": "flow",
                "prefect.resource.name": "dp-release",
            },
            {
                "prefect.resource.id": "prefect.deployment.6a3f0c2d-8b7e-4f1a-9d2c-5e4b3a291807",
                "prefect.resource.role": "deployment",
                "prefect.resource.name": "adult-monthly",
            },
            {"prefect.resource.id": "prefect.tag.dp", "prefect.resource.role": "tag"},
            {
                "prefect.resource.id": "prefect.work-pool.2c1d0e9f-7a6b-4c5d-8e3f-1a2b3c4d5e6f",
                "prefect.resource.role": "work-pool",
                "prefect.resource.name": "dprelease-process",
            },
        ],
        payload={"validated_state": {"type": state.upper(), "message": SECRET_STATE_MESSAGE}},
    )


def _release_event(kind: str, release_id="adult-20261101t020000z", dataset="adult", **facts):
    """As flows/events.py's release_event emits it in a deployment's flow run."""
    rid = release_id or "flow-run-witty-fox"
    resource = {"prefect.resource.id": f"dprelease.release.{rid}", "prefect.resource.name": rid}
    if dataset is not None:
        resource["dprelease.dataset"] = dataset
    return _event(
        f"dprelease.release.{kind}",
        resource,
        related=[
            {
                "prefect.resource.id": "prefect.flow-run.0f6b3c1e-5a4e-4a57-9a49-3c2f8e1d7b10",
                "prefect.resource.role": "flow-run",
                "prefect.resource.name": "witty-fox",
            },
            {
                "prefect.resource.id": "prefect.flow.4e0b1b6c-1d8e-4d0e-9a59-2b1f6d3e9c21",
                "prefect.resource.role": "flow",
            },
            {"prefect.resource.id": "prefect.tag.dp", "prefect.resource.role": "tag"},
        ],
        payload={"release_id": release_id, "dataset": dataset, "status": kind, **facts},
    )


LIFETIME = {
    "epsilon": 3.0,
    "delta": 1e-5,
    "epsilon_spent": 1.0,
    "next_epsilon_max": 0.49999999999999994,
    "next_epsilon_at_delta": 1e-5,
    "used_up": False,
}
DP_FACTS = {
    "epsilon_spent": 0.9999999999999998,
    "delta_spent": 1e-6,
    "differentially_private": True,
    "dataset_guarantee_void_since": None,
    "lifetime": LIFETIME,
    "bundle": BUNDLE,
    "bundle_host": "release-host-7",
}
PUBLIC_URL = "https://data.example.org/releases/adult-20261101t020000z/public/"
POOL_NOT_READY = _event(
    "prefect.work-pool.not-ready",
    {
        "prefect.resource.id": "prefect.work-pool.2c1d0e9f-7a6b-4c5d-8e3f-1a2b3c4d5e6f",
        "prefect.resource.name": "dprelease-process",
        "prefect.work-pool.type": "process",
    },
)

# (automation, triggering event or None, what the body must say)
NEXT = "The next release of dataset adult can take ε ≤ 0.5 (at δ = 1e-05) under its lifetime budget."
PERIOD = {  # ledger/facts.py's account of a period budget (lifetime None)
    "length": "P1M",
    "period": "2026-11",
    "resets": "2026-12-01T00:00:00+00:00",
    "epsilon": 1.0,
    "delta": 1e-6,
    "epsilon_spent": 1.0,
    "next_epsilon_max": 0.0,
    "next_epsilon_at_delta": 1e-6,
    "used_up": True,
}
CASES = [
    (
        auto.FAILED,
        _release_event(
            "failed", error="UnexpectedError", stage="estimate_private_moments", **DP_FACTS, **FAILURE_RECORD
        ),
        [
            "The release adult-20261101t020000z of dataset adult (flow run witty-fox) failed at "
            "2026-11-01 02:00:41 UTC in stage estimate_private_moments with UnexpectedError.",
            "It was charged ε = 1, δ = 1e-06. " + NEXT,
            f"is in {FAILURE_RECORD['failure_record']} on host worker-3;",
        ],
    ),
    (  # a failure event without the ledger's facts
        auto.FAILED,
        _release_event("failed", error="SpecError", stage="load_spec"),
        ["failed at", "in stage load_spec with SpecError.", "failures/ folder of the run's out_dir"],
    ),
    (  # a worker ran the crash hook of a killed run that had spent its four stages (issue 38)
        auto.FAILED,
        _release_event(
            "failed",
            error="ProcessDied",
            crashed=True,
            ledger_status="reserved",
            stages_spent=["encode", "estimate", "gates", "sample"],
            stages_planned=["encode", "estimate", "sample", "gates"],
            **DP_FACTS,
            **FAILURE_RECORD,
        ),
        [
            "The release adult-20261101t020000z of dataset adult (flow run witty-fox) crashed at "
            "2026-11-01 02:00:41 UTC: its process died or was interrupted (ProcessDied).",
            "It was charged ε = 1, δ = 1e-06 (all 4 stages spent; the attempt stays reserved, charged its "
            "whole plan, until `dprelease ledger settle adult-20261101t020000z` closes it at what it spent).",
            f"is in {FAILURE_RECORD['failure_record']} on host worker-3;",
        ],
    ),
    (  # ... killed after one of three stages
        auto.FAILED,
        _release_event(
            "failed",
            error="ProcessDied",
            crashed=True,
            ledger_status="reserved",
            stages_spent=["encode"],
            stages_planned=["encode", "estimate", "sample"],
            epsilon_spent=1.0,
        ),
        ["It was charged ε = 1 (1 of 3 stages spent; the attempt stays reserved"],
    ),
    (  # ... before its reservation
        auto.FAILED,
        _release_event("failed", error="ProcessDied", crashed=True, ledger_status=None, epsilon_spent=0.0),
        ["crashed at", "Nothing was reserved or spent: the ledger has no attempt of this release."],
    ),
    (  # ... when the ledger could not be read
        auto.FAILED,
        _release_event("failed", error="ProcessDied", crashed=True),
        ["crashed at", "What it was charged: `dprelease ledger show` (the ledger could not be read)."],
    ),
    (  # the body closed the attempt at what it spent
        auto.FAILED,
        _release_event(
            "failed",
            error="UnexpectedError",
            stage="project_and_sample",
            ledger_status="failed",
            stages_spent=["encode", "estimate"],
            stages_planned=["encode", "estimate", "sample"],
            epsilon_spent=0.5,
        ),
        [
            "It was charged ε = 0.5 (2 of 3 stages spent; the ledger closed it as failed, charged those "
            "stages)."
        ],
    ),
    (  # a run refused before its body named the release: nothing is made up
        auto.FAILED,
        _release_event("failed", release_id=None, dataset=None, error="DPReleaseError", stage="load_spec"),
        ["The release run that had no release id yet (its spec or its release_id was refused) (flow run"],
    ),
    (  # the release is named, its spec did not load
        auto.FAILED,
        _release_event("failed", dataset=None, error="SpecError", stage="load_spec"),
        ["adult-20261101t020000z (its dataset is not known: its spec did not load)"],
    ),
    (
        auto.REFUSED,
        _release_event(
            "refused",
            error="BudgetRefused",
            stage="allocate_budget",
            message=REFUSAL_MESSAGE,
            lifetime=LIFETIME,
        ),
        [
            "adult-20261101t020000z of dataset adult (flow run witty-fox) was refused at",
            f"The ledger's reason: {REFUSAL_MESSAGE}. Nothing was read or published. Runs refused again "
            "for this very reason are not paged (their event is dprelease.release.refused-again); the next "
            f"message comes when something changes. {NEXT}",
        ],
    ),
    (  # the ledger's reason says that nothing was read: the body does not say it twice
        auto.REFUSED,
        _release_event(
            "refused", error="BudgetRefused", message="period budget used up; nothing was read or spent"
        ),
        ["reason: period budget used up; nothing was read or spent. Runs refused again"],
    ),
    (
        auto.REFUSED,
        _release_event("refused", error="BudgetRefused", message=RERUN_MESSAGE, lifetime=None),
        [f"reason: {RERUN_MESSAGE}.", "Dataset adult has no budget policy."],
    ),
    (
        auto.REFUSED,
        _release_event("refused", error="BudgetRefused", lifetime={**LIFETIME, "used_up": True}),
        ["reason: see `dprelease ledger show`.", "lifetime budget is used up: no further release"],
    ),
    (
        auto.REFUSED,
        _release_event("refused", error="BudgetRefused", message="period budget exceeded", period=PERIOD),
        ["reason: period budget exceeded.", "Its period budget (period 2026-11, which resets at 2026-12-01"],
    ),
    (
        auto.REFUSED,
        _release_event("gated", error="GateError", stage="check_gates", **DP_FACTS, **FAILURE_RECORD),
        ["adult-20261101t020000z", "dataset adult", "gated", "budget is spent", "ε = 1,", "on host worker-3"],
    ),
    (
        auto.PUBLISHED,
        _release_event("completed", **DP_FACTS),
        ["adult-20261101t020000z of dataset adult (flow run witty-fox) was published", "ε = 1,", "δ = 1e-06"],
    ),
    (
        auto.PUBLISHED,
        _release_event("completed", **DP_FACTS, bundle_url=PUBLIC_URL),
        [f"02:00:41 UTC: {PUBLIC_URL}. It spent ε = 1, δ = 1e-06."],
    ),
    (
        auto.PUBLISHED,
        _release_event("completed", epsilon_spent=None, delta_spent=None, differentially_private=False),
        ["adult-20261101t020000z", "NOT differentially private"],
    ),
    (auto.PUBLISHED, _release_event("completed"), ["adult-20261101t020000z", "dprelease ledger show"]),
    (auto.PUBLISHED, _release_event("completed", **DP_FACTS), [NEXT]),
    (auto.WINDOW, None, ["768 hours", "2026-11-01 02:00:41"]),
    # a proactive trigger's "event" may be a stale one (the bucket's last event): ignored
    (auto.WINDOW, _release_event("completed", **DP_FACTS), ["768 hours", "2026-11-01 02:00:41"]),
    (
        auto.POOL,
        POOL_NOT_READY,
        ["dprelease-process", "2026-11-01 02:00:41", "prefect worker start", "grace window of 120 s"],
    ),
    (  # nothing carried out a cancellation: Prefect's server marked the run Cancelled
        auto.SILENT,
        _flow_run_event("Cancelled", auto.CANCEL_TIMEOUT_MESSAGE),
        [
            "The release adult-20261101t020000z (deployment adult-monthly) was being cancelled, and nothing "
            "carried the cancellation out, so Prefect marked its run Cancelled at 2026-11-01 02:00:41 UTC",
            "`dprelease ledger settle adult-20261101t020000z --reason …`",
        ],
    ),
    (  # the heartbeat automation marked the run Crashed
        auto.SILENT,
        _flow_run_event("Crashed", auto.ZOMBIE_MESSAGE),
        [
            "The release adult-20261101t020000z (deployment adult-monthly) sent Prefect no heartbeat for "
            "600 s, so Prefect marked its run Crashed at 2026-11-01 02:00:41 UTC",
            "`dprelease ledger settle adult-20261101t020000z --reason …`",
            "stays charged",
        ],
    ),
]


def _server_automation(automation):
    """The automation as the server holds it once created."""
    from prefect.server.events.schemas.automations import Automation

    return Automation.model_validate({**automation.model_dump(mode="json"), "id": str(uuid4())})


def _render(automation, event, body: str | None = None) -> tuple[str, str]:
    """Subject and body as the Prefect server renders them when ``automation`` fires on
    ``event`` (None: proactively, with no event)."""
    from prefect.server.events.schemas.automations import Firing, TriggeredAction, TriggerState

    server = _server_automation(automation)
    action = server.actions[0]
    if body is not None:
        action = action.model_copy(update={"body": body})
    fired = datetime(2026, 11, 1, 2, 0, 41, tzinfo=UTC)
    firing = Firing(
        trigger=server.trigger,
        trigger_states={TriggerState.Triggered},
        triggered=fired,
        triggering_event=event,
    )
    triggered = TriggeredAction(
        automation=server,
        firing=firing,
        triggered=fired,
        triggering_labels={},
        triggering_event=event,
        action=action,
    )
    subject, rendered = asyncio.run(action.render(triggered))
    return subject, rendered


_EMPTY_SLOT = re.compile(
    r"\s{2}|\s[.,;:)]|\(\s*\)|\bat\s*(?:for|;|$)|\bof (?:deployment|dataset)\s*(?:was|entered|$)"
)


def _empty_slots(text: str) -> list[str]:
    """Places where a template field rendered empty (two spaces, a space before a
    punctuation mark, empty brackets, 'at' or 'of dataset' with nothing after)."""
    return [m.group(0) for m in _EMPTY_SLOT.finditer(text)]


@pytest.fixture(scope="module")
def automations():
    return {a.name: a for a in auto.build(uuid4(), WINDOW)}


def _notifying(automations) -> dict:
    return {n: a for n, a in automations.items() if isinstance(a.actions[0], SendNotification)}


def test_seven_automations_six_with_distinct_subjects(automations):
    assert tuple(automations) == auto.NAMES and len(auto.NAMES) == 7
    assert all(name.startswith(auto.PREFIX) for name in automations)
    assert {n: a.actions[0].subject for n, a in _notifying(automations).items()} == auto.SUBJECTS
    assert set(automations) - set(auto.SUBJECTS) == {auto.ZOMBIE}  # it changes a state only
    assert len(set(auto.SUBJECTS.values())) == 6
    # tests/deploy/test_deployment.py waits for these two
    assert auto.SUBJECTS[auto.FAILED] == "dprelease: a release run failed or crashed"
    assert auto.SUBJECTS[auto.REFUSED] == "dprelease: a release was refused or gated"


@pytest.mark.parametrize(
    ("name", "event", "says"), CASES, ids=[f"{c[0][11:]}-{i}" for i, c in enumerate(CASES)]
)
def test_each_message_renders_its_facts(automations, name, event, says):
    subject, body = _render(automations[name], event)
    assert subject == automations[name].actions[0].subject
    assert not _empty_slots(body), (body, _empty_slots(body))
    for fact in says:
        assert fact in body, (fact, body)
    for secret in (SECRET_STATE_MESSAGE, BUNDLE, "release-host-7", "131"):
        assert secret not in body
    if name in (auto.FAILED, auto.REFUSED, auto.PUBLISHED) and event.payload.get("release_id"):
        # every release alert: release, dataset, reason
        kind = event.payload["status"]
        reason = {
            "failed": f"({event.payload.get('error')})" if event.payload.get("crashed") else "with",
            "refused": f"reason: {event.payload.get('message', 'see `dprelease ledger show`')}",
            "gated": "A gate stopped it",
            "completed": "was published at",
        }[kind]
        dataset = "of dataset adult" if event.payload.get("dataset") else "(its dataset is not known"
        assert f"release {event.resource.name} {dataset}" in body and reason in body


def test_only_release_events_raise_release_alerts(automations):
    """One alert per outcome, whoever ran the release (a deployment or a CLI run against the
    server): the release automations watch the release events, not Prefect's run states (a
    refused deployment run also enters Failed, which alerted a second time)."""
    reactive = [_server_automation(a) for a in automations.values() if a.trigger.posture == Posture.Reactive]

    def alerts(event) -> list[str]:
        return [a.name for a in reactive if a.trigger.covers(event)]

    assert alerts(_release_event("failed")) == [auto.FAILED]
    assert alerts(_release_event("refused")) == alerts(_release_event("gated")) == [auto.REFUSED]
    assert alerts(_release_event("completed")) == [auto.PUBLISHED]
    cli_run = _release_event("failed").model_copy(update={"related": []})  # no deployment, no tag
    assert alerts(cli_run) == [auto.FAILED]
    assert alerts(_flow_run_event("Failed")) == alerts(_flow_run_event("Crashed")) == []
    # a run the heartbeat automation marked Crashed: no process reported it, so this alert does
    assert alerts(_flow_run_event("Crashed", auto.ZOMBIE_MESSAGE)) == [auto.SILENT]
    worker_crash = (
        "Process exited with status code: -9. This indicates that the process exited due to a SIGKILL"
    )
    assert alerts(_flow_run_event("Crashed", worker_crash)) == []  # its crash hook sends .failed
    # a cancellation no worker carried out (its worker was gone): Prefect's server ends it
    assert alerts(_flow_run_event("Cancelled", auto.CANCEL_TIMEOUT_MESSAGE)) == [auto.SILENT]
    assert alerts(_flow_run_event("Cancelled", "Cancelled by the worker")) == []


def test_prefect_s_cancellation_time_out_message_is_the_one_watched():
    from prefect.server.services.cancellation_cleanup import CANCELLING_TIMEOUT_CANCELLED_MESSAGE

    assert auto.CANCEL_TIMEOUT_MESSAGE == CANCELLING_TIMEOUT_CANCELLED_MESSAGE


def test_a_silent_release_run_is_marked_crashed():
    """Prefect's zombie flow run pattern, for the release flow's runs: after a heartbeat, the
    next heartbeat or a final state within the window, per run; a run being cancelled is no
    final state (with its worker gone, nothing would end it)."""
    (zombie,) = [
        a
        for a in auto.build(uuid4(), WINDOW, heartbeat_window=timedelta(seconds=45))
        if a.name == auto.ZOMBIE
    ]
    trigger = zombie.trigger
    assert trigger.posture == Posture.Proactive and trigger.within == timedelta(seconds=45)
    assert trigger.after == {"prefect.flow-run.heartbeat"} and trigger.for_each == {"prefect.resource.id"}
    assert "prefect.flow-run.heartbeat" in trigger.expect
    assert {"Completed", "Failed", "Crashed", "Cancelled"} <= {e.rsplit(".", 1)[1] for e in trigger.expect}
    assert "prefect.flow-run.Cancelling" not in trigger.expect
    (action,) = zombie.actions
    assert isinstance(action, ChangeFlowRunState) and action.state == StateType.CRASHED
    assert action.message == auto.ZOMBIE_MESSAGE
    server = _server_automation(zombie).trigger
    heartbeat = _flow_run_event("heartbeat")
    assert server.starts_after(heartbeat.event) and server.covers(heartbeat)
    other_flow = heartbeat.model_copy(
        update={
            "related": [
                {
                    "prefect.resource.id": "prefect.flow.x",
                    "prefect.resource.role": "flow",
                    "prefect.resource.name": "another-flow",
                }
            ]
        }
    )
    assert not server.covers(other_flow)  # only dp-release runs


def test_proactive_messages_read_no_event(automations):
    """A proactive trigger fires because events did not come: its templates may read only
    the automation and the firing (Prefect's own template scan). One with ``after`` (the work
    pool's grace window) fires with the event that opened its window, which its body reads."""
    from prefect.server.events.schemas.automations import Posture
    from prefect.server.utilities.user_templates import matching_types_in_templates

    proactive = [
        a for a in automations.values() if a.trigger.posture == Posture.Proactive and not a.trigger.after
    ]
    assert [a.name for a in proactive] == [auto.WINDOW]
    for a in proactive:
        action = a.actions[0]
        assert matching_types_in_templates([action.subject, action.body], {"event", "events", "labels"}) == []


def test_no_message_makes_the_server_fetch_objects(automations):
    """A template naming flow_run, deployment, work_pool, … makes the server fetch that
    object from its API to render it (JinjaTemplateAction._relevant_native_objects)."""
    from prefect.server.utilities.user_templates import matching_types_in_templates

    native = {"deployment", "flow", "flow_run", "task_run", "work_pool", "work_queue", "concurrency_limit"}
    for a in _notifying(automations).values():
        action = a.actions[0]
        assert matching_types_in_templates([action.subject, action.body], native | {"variables"}) == []


def test_the_old_body_is_caught(automations):
    """The check above fails on the template of issue 20: it rendered ' at  for ; see …'."""
    _, body = _render(automations[auto.WINDOW], None, body=OLD_BODY)
    assert body.startswith(" at  for ;")
    assert _empty_slots(body)


def test_the_work_pool_automation_watches_the_named_pool():
    assert auto.WORK_POOL == POOL  # deploy/prefect.yaml's pool
    (pool,) = [a for a in auto.build(uuid4(), WINDOW, "other-pool") if a.name == auto.POOL]
    assert pool.trigger.after == {"prefect.work-pool.not-ready"}
    assert pool.trigger.expect == {"prefect.work-pool.ready"}  # within the grace window
    assert pool.trigger.match.model_dump()["prefect.resource.name"] == "other-pool"


# --- a real server --------------------------------------------------------------------


@pytest.fixture
def fast_server(tmp_path):
    """``prefect server start`` whose foreman checks the workers every second (default 15 s)
    and which schedules nothing; yields its env."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    with prefect_server(
        home,
        PREFECT_SERVER_SERVICES_FOREMAN_LOOP_SECONDS="1",
        PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="false",
    ) as env:
        yield env


def _until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.5)
    pytest.fail(f"waited {timeout:g} s for {what}")


EMIT_COMPLETED = """
from prefect.events import emit_event
from prefect.events.worker import EventsWorker
emit_event(
    event="dprelease.release.completed",
    resource={"prefect.resource.id": "dprelease.release.adult-e2e", "prefect.resource.name": "adult-e2e",
              "dprelease.dataset": "adult"},
    payload={"release_id": "adult-e2e", "dataset": "adult", "status": "completed", "epsilon_spent": 0.5,
             "delta_spent": 1e-06, "differentially_private": True, "bundle": "/srv/releases/adult-e2e"},
)
EventsWorker.drain_all()
"""


@pytest.mark.deploy
def test_a_real_server_sends_the_window_published_and_work_pool_messages(fast_server, tmp_path):
    env = fast_server
    hook = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    Webhook.received.clear()

    def message(subject: str):
        return next((m for m in Webhook.received if m["subject"] == subject), None)

    try:
        cli(env, PREFECT, "work-pool", "create", auto.WORK_POOL, "--type", "process")
        listed = cli(
            env,
            sys.executable,
            "deploy/automations.py",
            "--webhook-url",
            f"http://127.0.0.1:{hook.server_address[1]}/hook",
            "--window-hours",
            "0.004",  # 14.4 s: Prefect's minimum for a proactive trigger is 10 s
            "--worker-grace-seconds",
            "10",
        )
        assert listed.count(auto.PREFIX) == len(auto.NAMES) == 7

        # a worker that beats every second, then stops: its pool is not ready 3 beats later
        worker_log = (tmp_path / "worker.log").open("w")
        worker = subprocess.Popen(
            [PREFECT, "worker", "start", "--pool", auto.WORK_POOL],
            env={**env, "PREFECT_WORKER_HEARTBEAT_SECONDS": "1"},
            cwd=tmp_path,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            pool_path = f"/work_pools/{auto.WORK_POOL}"
            _until(lambda: api(env, "GET", pool_path)["status"] == "READY", 60, "the pool to be READY")
        finally:
            stop(worker)
            worker_log.close()

        pool = _until(lambda: message(auto.SUBJECTS[auto.POOL]), 60, "the work pool message")
        assert "Work pool dprelease-process has no ready worker since" in pool["body"]
        assert not _empty_slots(pool["body"]), pool["body"]

        window = _until(lambda: message(auto.SUBJECTS[auto.WINDOW]), 60, "the window message")
        assert "in the 0.004 hours up to" in window["body"] and not _empty_slots(window["body"])

        cli(env, sys.executable, "-c", EMIT_COMPLETED)
        published = _until(lambda: message(auto.SUBJECTS[auto.PUBLISHED]), 60, "the published message")
        assert "The release adult-e2e of dataset adult was published at" in published["body"]
        assert "ε = 0.5, δ = 1e-06" in published["body"] and "/srv/releases" not in published["body"]
    finally:
        hook.shutdown()
        (tmp_path / "messages.json").write_text(json.dumps(Webhook.received, indent=1, ensure_ascii=False))
