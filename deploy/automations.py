"""Create (or replace) the automations that watch dprelease's releases on a Prefect server.

    PREFECT_API_URL=http://127.0.0.1:4200/api python deploy/automations.py \\
        --webhook-url https://alerts.example.org/dprelease --window-hours 768

Five automations, each notifying the same target:

* **failed or crashed**: any flow run of a deployment tagged ``dp`` enters Failed or Crashed
  (Prefect's own ``prefect.flow-run.*`` events);
* **refused or gated**: a ``dprelease.release.refused`` (lifetime budget or rerun rule) or
  ``dprelease.release.gated`` (a utility or linkage gate stopped the release) event;
* **published**: a ``dprelease.release.completed`` event: the release id, the dataset and
  what the release spent (ε, δ), all public;
* **no release in the window** (proactive): no ``dprelease.release.completed`` event within
  ``--window-hours`` (default 32 days, for a monthly schedule with slack);
* **work pool has no ready worker**: Prefect's ``prefect.work-pool.not-ready`` event for
  ``--work-pool`` (default ``dprelease-process``), which its server emits when no worker of
  the pool has sent a heartbeat for 3 heartbeat intervals (90 s by default).

The target is a ``CustomWebhookNotificationBlock`` named ``dprelease-alerts`` posting JSON
``{"subject": …, "body": …}`` to ``--webhook-url``, or an existing notification block
(Slack, e-mail, …) named by ``--notification-block``. The messages carry public facts only:
event names, times, run, deployment, pool, release and dataset names, and a published
release's ε, δ and public URL; never an exception message, a data value or a path.

The subjects are fixed strings (``SUBJECTS``); the bodies are Jinja templates that the Prefect server
renders when the automation fires. A reactive trigger fires on an event, so its body reads
``event``; a proactive trigger fires because an event did *not* come, so it has no event
(``event`` is empty, or a stale earlier one) and its body reads only ``automation`` and
``firing``. No template names one of Prefect's objects (``flow_run``, ``deployment``,
``work_pool``, …): the server would fetch it from its API for every message.
``tests/deploy/test_automations.py`` renders every body with Prefect's own renderer.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from uuid import UUID

from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.events.actions import SendNotification
from prefect.events.schemas.automations import EventTrigger, Posture

PREFIX = "dprelease: "
BLOCK = "dprelease-alerts"
WORK_POOL = "dprelease-process"  # deploy/prefect.yaml

FAILED = PREFIX + "release failed or crashed"
REFUSED = PREFIX + "release refused or gated"
PUBLISHED = PREFIX + "release published"
WINDOW = PREFIX + "no release in the window"
POOL = PREFIX + "work pool has no ready worker"
NAMES = (FAILED, REFUSED, PUBLISHED, WINDOW, POOL)
SUBJECTS = {
    FAILED: PREFIX + "a release run failed or crashed",
    REFUSED: PREFIX + "a release was refused or gated",
    PUBLISHED: PREFIX + "a release was published",
    WINDOW: PREFIX + "no release completed in the expected window",
    POOL: PREFIX + "the work pool has no ready worker",
}

_WHEN = "{{ event.occurred.strftime('%Y-%m-%d %H:%M:%S UTC') }}"
_RELEASE = (
    "release {{ event.resource.name }} of dataset {{ event.resource.get('dprelease.dataset', 'unknown') }}"
    "{% set run = event.resource_in_role.get('flow-run') %}{% if run %} (flow run {{ run.name }}){% endif %}"
)

# Reactive, on a flow run's Failed or Crashed event. Not its state message: it carries the
# exception's message, which may say which rule the data broke; that stays in the Prefect UI
# and the failure record.
FAILED_BODY = (
    "Flow run {{ event.resource.name }} ({{ event.resource.id | replace('prefect.flow-run.', '') }})"
    "{% set dep = event.resource_in_role.get('deployment') %}"
    "{% if dep %} of deployment {{ dep.name }}{% endif %}"
    " entered {{ event.event | replace('prefect.flow-run.', '') }} at " + _WHEN + ". "
    "Its error is in the Prefect UI, its failure record in <out_dir>/failures/, and "
    "`dprelease ledger show` says what it spent."
)
# Reactive, on dprelease.release.refused or .gated (flows/events.py).
REFUSED_BODY = (
    "The " + _RELEASE + " was {{ event.event | replace('dprelease.release.', '') }} at " + _WHEN + ": "
    "{% if event.event == 'dprelease.release.gated' %}"
    "a gate stopped it after its noise was drawn, so its budget is spent and nothing was published"
    "{% else %}"
    "the ledger refused it (lifetime budget or rerun rule) and nothing was published"
    "{% endif %}. `dprelease ledger show` says what it was charged; the run is in the Prefect UI."
)
# Reactive, on dprelease.release.completed: public facts only (the bundle states them too);
# the bundle's public URL when the run was given one (public_url), never its path or host.
PUBLISHED_BODY = (
    "The "
    + _RELEASE
    + " was published at "
    + _WHEN
    + "{% if event.payload.bundle_url %}: {{ event.payload.bundle_url }}{% endif %}. "
    "{% if event.payload.differentially_private is sameas false %}"
    "It is NOT differentially private (allow_non_dp): it spent no budget that guarantees anything."
    "{% elif event.payload.epsilon_spent is number %}"
    "It spent ε = {{ '%g' | format(event.payload.epsilon_spent) }}"
    "{% if event.payload.delta_spent is number %}, δ = {{ '%g' | format(event.payload.delta_spent) }}"
    "{% endif %}."
    "{% else %}"
    "Its charge is in `dprelease ledger show`."
    "{% endif %}"
)
# Proactive: there is no triggering event, only the automation and the firing.
WINDOW_BODY = (
    "No release completed (no dprelease.release.completed event) in the "
    "{{ '%g' | format(automation.trigger.within.total_seconds() / 3600) }} hours up to "
    "{{ firing.triggered.strftime('%Y-%m-%d %H:%M:%S UTC') }}. "
    "Look for Late, Failed or Crashed runs of the deployments tagged 'dp', for a work pool "
    "without a worker, and at `dprelease ledger show`."
)
# Reactive, on Prefect's prefect.work-pool.not-ready (prefect/server/services/foreman.py).
POOL_BODY = (
    "Work pool {{ event.resource.name }} has no ready worker since " + _WHEN + " (no worker "
    "heartbeat for 3 intervals). Scheduled releases wait as Late until one runs: "
    "`systemctl status prefect-worker`, or `prefect worker start --pool {{ event.resource.name }}`."
)


def build(block_id: UUID, window: timedelta, work_pool: str = WORK_POOL) -> list[Automation]:
    """The five automations, not yet created."""

    def notify(name: str, body: str) -> list[SendNotification]:
        return [SendNotification(block_document_id=block_id, subject=SUBJECTS[name], body=body)]

    releases = {"prefect.resource.id": "dprelease.release.*"}
    return [
        Automation(
            name=FAILED,
            description="A flow run of a deployment tagged 'dp' failed or crashed.",
            trigger=EventTrigger(
                expect={"prefect.flow-run.Failed", "prefect.flow-run.Crashed"},
                match_related={"prefect.resource.id": "prefect.tag.dp"},
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify(FAILED, FAILED_BODY),
        ),
        Automation(
            name=REFUSED,
            description="The ledger refused a release, or a gate stopped it (spent, nothing published).",
            trigger=EventTrigger(
                expect={"dprelease.release.refused", "dprelease.release.gated"},
                match=releases,
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify(REFUSED, REFUSED_BODY),
        ),
        Automation(
            name=PUBLISHED,
            description="A release was published: its id, dataset and charge (public facts).",
            trigger=EventTrigger(
                expect={"dprelease.release.completed"},
                match=releases,
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify(PUBLISHED, PUBLISHED_BODY),
        ),
        Automation(
            name=WINDOW,
            description=f"No dprelease.release.completed event within {window}.",
            trigger=EventTrigger(
                expect={"dprelease.release.completed"},
                match=releases,
                posture=Posture.Proactive,
                threshold=1,
                within=window,
            ),
            actions=notify(WINDOW, WINDOW_BODY),
        ),
        Automation(
            name=POOL,
            description=f"Work pool {work_pool!r} has no worker with a recent heartbeat.",
            trigger=EventTrigger(
                expect={"prefect.work-pool.not-ready"},
                match={"prefect.resource.id": "prefect.work-pool.*", "prefect.resource.name": work_pool},
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify(POOL, POOL_BODY),
        ),
    ]


def notification_block(webhook_url: str | None, block_name: str | None) -> UUID:
    """The id of the notification block: a webhook block saved as ``dprelease-alerts``, or
    the named existing block."""
    if block_name is not None:
        from prefect.blocks.core import Block

        return Block.load(block_name)._block_document_id
    block = CustomWebhookNotificationBlock(
        name=BLOCK, url=webhook_url, json_data={"subject": "{{subject}}", "body": "{{body}}"}
    )
    return block.save(BLOCK, overwrite=True)


def install(automations: list[Automation]) -> list[UUID]:
    """Create each automation, replacing any with the same name."""
    ids = []
    for a in automations:
        try:
            Automation.read(name=a.name).delete()
        except ValueError:  # not there yet
            pass
        ids.append(a.create().id)
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--webhook-url", help="POST alerts as JSON {subject, body} to this URL")
    target.add_argument(
        "--notification-block", help="name of an existing notification block, e.g. slack-webhook/ops"
    )
    parser.add_argument(
        "--window-hours",
        type=float,
        default=32 * 24,
        help="alert when no release completes within this many hours (default 768 = 32 days; "
        "Prefect's minimum is 10 s)",
    )
    parser.add_argument(
        "--work-pool",
        default=WORK_POOL,
        help=f"alert when this work pool has no ready worker (default {WORK_POOL})",
    )
    args = parser.parse_args(argv)
    block_id = notification_block(args.webhook_url, args.notification_block)
    automations = build(block_id, timedelta(hours=args.window_hours), args.work_pool)
    for a, i in zip(automations, install(automations), strict=True):
        print(f"{i}  {a.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
