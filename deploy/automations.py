"""Create (or replace) the automations that watch dprelease's releases on a Prefect server.

    PREFECT_API_URL=http://127.0.0.1:4200/api python deploy/automations.py \\
        --webhook-url https://alerts.example.org/dprelease --window-hours 768

Three automations, each notifying the same target:

* **failed or crashed**: any flow run of a deployment tagged ``dp`` enters Failed or Crashed
  (Prefect's own ``prefect.flow-run.*`` events);
* **refused or gated**: a ``dprelease.release.refused`` (lifetime budget or rerun rule) or
  ``dprelease.release.gated`` (a utility or linkage gate stopped the release) event;
* **no release in the window** (proactive): no ``dprelease.release.completed`` event within
  ``--window-hours`` (default 32 days, for a monthly schedule with slack).

The target is a ``CustomWebhookNotificationBlock`` named ``dprelease-alerts`` posting JSON
``{"subject": …, "body": …}`` to ``--webhook-url``, or an existing notification block
(Slack, e-mail, …) named by ``--notification-block``. The messages carry the event's name,
time and resource only; never an exception message, never a data value.
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
# No payload: a flow run's Failed event carries the exception's message, which says which
# rule the data broke; that stays in the Prefect UI and the failure record, not in chat.
_BODY = (
    "{{ event.event }} at {{ event.occurred }} for {{ event.resource.id }}; see the Prefect UI, "
    "`dprelease ledger show` and <out>/failures/ for details"
)


def build(block_id: UUID, window: timedelta) -> list[Automation]:
    """The three automations, not yet created."""

    def notify(subject: str) -> list[SendNotification]:
        return [SendNotification(block_document_id=block_id, subject=subject, body=_BODY)]

    releases = {"prefect.resource.id": "dprelease.release.*"}
    return [
        Automation(
            name=PREFIX + "release failed or crashed",
            description="A flow run of a deployment tagged 'dp' failed or crashed.",
            trigger=EventTrigger(
                expect={"prefect.flow-run.Failed", "prefect.flow-run.Crashed"},
                match_related={"prefect.resource.id": "prefect.tag.dp"},
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify("dprelease: a release run failed or crashed"),
        ),
        Automation(
            name=PREFIX + "release refused or gated",
            description="The ledger refused a release, or a gate stopped it (spent, nothing published).",
            trigger=EventTrigger(
                expect={"dprelease.release.refused", "dprelease.release.gated"},
                match=releases,
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify("dprelease: a release was refused or gated"),
        ),
        Automation(
            name=PREFIX + "no release in the window",
            description=f"No dprelease.release.completed event within {window}.",
            trigger=EventTrigger(
                expect={"dprelease.release.completed"},
                match=releases,
                posture=Posture.Proactive,
                threshold=1,
                within=window,
            ),
            actions=notify("dprelease: no release completed in the expected window"),
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
        help="alert when no release completes within this many hours (default 768 = 32 days)",
    )
    args = parser.parse_args(argv)
    block_id = notification_block(args.webhook_url, args.notification_block)
    ids = install(build(block_id, timedelta(hours=args.window_hours)))
    for a, i in zip(build(block_id, timedelta(hours=args.window_hours)), ids, strict=True):
        print(f"{i}  {a.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
