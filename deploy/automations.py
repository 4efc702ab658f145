"""Create (or replace) the automations that watch dprelease's releases on a Prefect server.

    PREFECT_API_URL=http://127.0.0.1:4200/api python deploy/automations.py \\
        --webhook-url https://alerts.example.org/dprelease --window-hours 768

Seven automations; six notify the same target:

* **failed or crashed**: a ``dprelease.release.failed`` event (the flow's body or its
  ``on_failure`` / ``on_crashed`` hook, ``flows/hooks.py``; a worker runs the latter when a
  run's process is killed): the release id, dataset, error type, stage, what the release
  was charged and what the ledger holds of it (still reserved until ``dprelease ledger
  settle``, or closed), and where its failure record is;
* **refused or gated**: a ``dprelease.release.refused`` (the ledger's reason: the budget
  policy or the rerun rule) or ``dprelease.release.gated`` (a utility or linkage gate stopped
  the release) event, with the budget the dataset's next release can take. A refusal the
  ledger already gave the dataset for the very same reason (nothing changed: a schedule
  whose period budget is spent, slot after slot) is ``dprelease.release.refused-again``,
  which no automation watches: one message per period, not one per slot;
* **published**: a ``dprelease.release.completed`` event: the release id, the dataset and
  what the release spent (ε, δ), all public;
* **no release in the window** (proactive): no ``dprelease.release.completed`` event within
  ``--window-hours`` (default 32 days, for a monthly schedule with slack);
* **work pool has no ready worker** (proactive, with a grace window): Prefect's
  ``prefect.work-pool.not-ready`` event for ``--work-pool`` (default ``dprelease-process``),
  which its server emits when no worker of the pool has sent a heartbeat for 3 heartbeat
  intervals (90 s by default), *not followed* by ``prefect.work-pool.ready`` within
  ``--worker-grace-seconds`` (default 120). A server restarted after an outage of more than
  90 s marks the pool not ready as it starts, and the live worker's next heartbeat (at most
  one interval, 30 s, later; 14-16 s measured) makes it ready again: no message;
* **mark a silent release run crashed** (no message; Prefect's "zombie flow run" pattern): a
  run of the ``dp-release`` flow sends a ``prefect.flow-run.heartbeat`` event every
  ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` s (180 by default); one *not followed* by another
  heartbeat or a final state within ``--heartbeat-window-seconds`` (default 600: three
  missed beats and a minute) is set Crashed, with the message ``ZOMBIE_MESSAGE``. Its process
  died with its worker or its machine, so no hook ran: it would show Running for ever. A run
  cancelled meanwhile (``prefect flow-run cancel``) cannot be set Crashed (Prefect allows a
  Cancelling run only Cancelled): with no worker to carry the cancellation out, Prefect's
  server marks it Cancelled after its cancellation time-out (300 s,
  ``PREFECT_SERVER_SERVICES_CANCELLATION_CLEANUP_CANCELLING_TIMEOUT_SECONDS``; Prefect 3.9),
  with the message ``CANCEL_TIMEOUT_MESSAGE``;
* **release run stopped responding**: the ``prefect.flow-run.Crashed`` event of the first, or
  the ``prefect.flow-run.Cancelled`` event of the second: the release (the run is named by its
  release id), its deployment, and what to do (its reservation stays charged until
  ``dprelease recover`` and ``dprelease ledger settle``).

The release automations watch the release events themselves, whoever ran the release: a
deployment's run or a CLI or Python run against the server. Each event kind raises one alert:
a failed or gated run of a deployment also enters Prefect's Failed state, which no
automation watches (it would alert twice); a refused run ends in a Completed state named
``Refused`` (an expected outcome: one log line, no traceback, no retry). A run whose
process was killed before its hooks ran sends no event of its own: under a worker that lives
on (``kill -9``, out of memory) the worker runs the crash hook, which sends ``.failed``; when
the worker or the machine died too, the heartbeat automations report it.

The target is a ``CustomWebhookNotificationBlock`` named ``dprelease-alerts`` posting JSON
``{"subject": …, "body": …}`` to ``--webhook-url``, or an existing notification block
(Slack, e-mail, …) named by ``--notification-block``. The messages carry public facts only:
event names, times, run, deployment, pool, release and dataset names, what a release was
charged (ε, δ rounded to 6 digits) and what the dataset's budget policy still admits, a
published release's public URL, a refusal's reason from the ledger (budgets and release ids),
a failure's error type and stage and where its failure record is (the operator's
``out_dir``); never an exception message, a data value or a count from the data.

The subjects are fixed strings (``SUBJECTS``); the bodies are Jinja templates that the Prefect server
renders when the automation fires. A reactive trigger fires on an event, so its body reads
``event``. A proactive trigger fires because an event did *not* come: the no-release window
has no event (``event`` is empty, or a stale earlier one), so its body reads only
``automation`` and ``firing``; the work pool's has one, the ``prefect.work-pool.not-ready``
event that opened its grace window (``for_each``), so its body reads that event and the
window (``automation.trigger.within``). No template names one of Prefect's objects
(``flow_run``, ``deployment``, ``work_pool``, …): the server would fetch it from its API for
every message.
``tests/deploy/test_automations.py`` renders every body with Prefect's own renderer.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from uuid import UUID

from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState, SendNotification
from prefect.events.schemas.automations import EventTrigger, Posture

PREFIX = "dprelease: "
BLOCK = "dprelease-alerts"
WORK_POOL = "dprelease-process"  # deploy/prefect.yaml
# How long a pool may stay not ready before anyone is told: covers a server restart (the
# worker's next heartbeat, at most its 30 s interval after the server is back).
WORKER_GRACE = timedelta(seconds=120)
FLOW = "dp-release"  # flows/release.py
# How long a release run may send no heartbeat (Prefect's PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
# 180 s by default) before it is marked Crashed: three missed beats and a minute.
HEARTBEAT_WINDOW = timedelta(seconds=600)
# The state message of a run marked Crashed for want of heartbeats: fixed, so that the alert
# on that Crashed state (and not on a crash the worker or the hook already reported) finds it.
ZOMBIE_MESSAGE = (
    "dprelease: no heartbeat from this flow run within the automation's window; its process, its "
    "worker or its machine is gone (deploy/automations.py)"
)
# Prefect's own message when no one carried out a cancellation in time
# (prefect/server/services/cancellation_cleanup.py; tests/deploy/test_automations.py keeps it equal).
CANCEL_TIMEOUT_MESSAGE = "Flow run cancellation timed out; marked this flow run as Cancelled."

FAILED = PREFIX + "release failed or crashed"
REFUSED = PREFIX + "release refused or gated"
PUBLISHED = PREFIX + "release published"
WINDOW = PREFIX + "no release in the window"
POOL = PREFIX + "work pool has no ready worker"
ZOMBIE = PREFIX + "mark a silent release run crashed"
SILENT = PREFIX + "release run stopped responding"
NAMES = (FAILED, REFUSED, PUBLISHED, WINDOW, POOL, ZOMBIE, SILENT)
SUBJECTS = {  # every automation but ZOMBIE, which changes a state and notifies no one
    FAILED: PREFIX + "a release run failed or crashed",
    REFUSED: PREFIX + "a release was refused or gated",
    PUBLISHED: PREFIX + "a release was published",
    WINDOW: PREFIX + "no release completed in the expected window",
    POOL: PREFIX + "the work pool has no ready worker",
    SILENT: PREFIX + "a release run stopped responding",
}

_WHEN = "{{ event.occurred.strftime('%Y-%m-%d %H:%M:%S UTC') }}"
_RELEASE = (
    "{% if event.payload.release_id is none %}release run that had no release id yet (its spec or its "
    "release_id was refused){% else %}release {{ event.resource.name }}"
    "{% if event.resource.get('dprelease.dataset') %} of dataset {{ event.resource['dprelease.dataset'] }}"
    "{% else %} (its dataset is not known: its spec did not load){% endif %}{% endif %}"
    "{% set run = event.resource_in_role.get('flow-run') %}{% if run %} (flow run {{ run.name }}){% endif %}"
)
# The ledger's state of a failed attempt (flows/events.py: attempt_facts): still reserved
# (a crash: charged its whole plan until it is settled), or closed at the stages it spent.
_ATTEMPT = (
    "{% set p = event.payload %}{% set n = p.stages_planned | length %}"
    "{% set spent = 'all %d stages spent' % n if p.stages_spent | length == n else "
    "'%d of %d stages spent' % (p.stages_spent | length, n) %}"
    "{% if p.ledger_status == 'reserved' %} ({{ spent }}; the attempt stays reserved, charged its whole "
    "plan, until `dprelease ledger settle {{ p.release_id }}` closes it at what it spent)"
    "{% elif p.ledger_status == 'failed' %} ({{ spent }}; the ledger closed it as failed, charged "
    "those stages){% endif %}"
)
_CHARGED = (
    "{% if 'ledger_status' in event.payload and event.payload.ledger_status is none %} Nothing was "
    "reserved or spent: the ledger has no attempt of this release."
    "{% elif event.payload.epsilon_spent is number %} It was charged "
    "ε = {{ '%.6g' | format(event.payload.epsilon_spent) }}"
    "{% if event.payload.delta_spent is number %}, δ = {{ '%.6g' | format(event.payload.delta_spent) }}"
    "{% endif %}" + _ATTEMPT + ".{% elif event.payload.crashed %} What it was charged: "
    "`dprelease ledger show` (the ledger could not be read).{% endif %}"
)
# What the dataset's budget policy still admits (ledger/facts.py: budget_facts; a period budget's
# account is that of the period the release fell in): public ledger facts.
_NEXT = (
    "{% set account = event.payload.period or event.payload.lifetime %}"
    "{% set policy = 'period budget (period ' ~ account.period ~ ', which resets at ' ~ account.resets ~ ')'"
    " if event.payload.period else 'lifetime budget' %}"
    "{% if account and account.used_up %} Its {{ policy }} is used up: no further release of dataset "
    "{{ event.payload.dataset }} fits in it."
    "{% elif account and account.next_epsilon_max is number %} The next release of dataset "
    "{{ event.payload.dataset }} can take ε ≤ {{ '%.6g' | format(account.next_epsilon_max) }}"
    "{% if account.next_epsilon_at_delta is number %} (at δ = "
    "{{ '%.6g' | format(account.next_epsilon_at_delta) }}){% endif %} under its {{ policy }}."
    "{% elif 'lifetime' in event.payload and not account %} Dataset {{ event.payload.dataset }} "
    "has no budget policy.{% endif %}"
)
_RECORD = (
    "{% if event.payload.failure_record %}{{ event.payload.failure_record }} on host "
    "{{ event.payload.failure_host }}{% else %}the failures/ folder of the run's out_dir{% endif %}"
)

# Reactive, on dprelease.release.failed: the error's type and stage, never its message (even
# our rule-naming messages say that some record broke a rule: that stays in the failure
# record and the Prefect UI).
FAILED_BODY = (
    "The " + _RELEASE + "{% if event.payload.crashed %} crashed at " + _WHEN + ": its process died or was "
    "interrupted ({{ event.payload.error or 'no error recorded' }})"
    "{% if event.payload.stage %} in stage {{ event.payload.stage }}{% endif %}."
    "{% else %} failed at " + _WHEN + " in stage {{ event.payload.stage or 'unknown' }} with "
    "{{ event.payload.error or 'an error' }}.{% endif %}" + _CHARGED + _NEXT + " Its failure record (the "
    "error's message, the stage, internal reports) is in " + _RECORD + "; the run is in the Prefect UI and "
    "`dprelease ledger show` says what it spent."
)
# Reactive, on dprelease.release.refused or .gated (flows/events.py). A refusal's reason is the
# ledger's own message (the rule, the budgets, the release ids), so a new rule needs no template.
REFUSED_BODY = (
    "The " + _RELEASE + " was {{ event.event | replace('dprelease.release.', '') }} at " + _WHEN + ". "
    "{% if event.event == 'dprelease.release.gated' %}"
    "A gate stopped it after its noise was drawn, so its budget is spent and nothing was published."
    + _CHARGED
    + " The gates' table is in the Prefect UI, its failure record in "
    + _RECORD
    + " and its internal reports in the bundle's internal/ folder."
    "{% else %}"
    "{% set reason = (event.payload.message or 'see `dprelease ledger show`') | trim %}"
    "The ledger's reason: {{ reason }}{% if not reason.endswith('.') %}.{% endif %}"
    "{% if 'othing was read' not in reason %} Nothing was read or published.{% endif %}"
    " Runs refused again for this very reason are not paged (their event is "
    "dprelease.release.refused-again); the next message comes when something changes."
    "{% endif %}" + _NEXT + " `dprelease ledger show` says what each release was charged."
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
    "It spent ε = {{ '%.6g' | format(event.payload.epsilon_spent) }}"
    "{% if event.payload.delta_spent is number %}, δ = {{ '%.6g' | format(event.payload.delta_spent) }}"
    "{% endif %}." + _NEXT + "{% else %}"
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
# Proactive, but its bucket was opened by Prefect's prefect.work-pool.not-ready
# (prefect/server/services/foreman.py), which the server passes as `event` when it fires.
POOL_BODY = (
    "Work pool {{ event.resource.name }} has no ready worker since " + _WHEN + " (no worker "
    "heartbeat for 3 intervals), and none came back within the grace window of "
    "{{ '%g' | format(automation.trigger.within.total_seconds()) }} s (--worker-grace-seconds, "
    "longer than a server restart takes). Scheduled releases wait as Late until one runs: "
    "`systemctl status prefect-worker`, or `prefect worker start --pool {{ event.resource.name }}`."
)


def silent_body(heartbeat_window: timedelta) -> str:
    """The alert on a run the heartbeat automation marked Crashed (its ``prefect.flow-run.Crashed``
    event, which names the run: the flow names each run by its release id)."""
    return (
        "The release {{ event.resource.name }}{% set dep = event.resource_in_role.get('deployment') %}"
        "{% if dep %} (deployment {{ dep.name }}){% endif %}"
        "{% if event.event == 'prefect.flow-run.Cancelled' %} was being cancelled, and nothing carried "
        "the cancellation out, so Prefect marked its run Cancelled at " + _WHEN + " (its cancellation "
        "time-out)"
        "{% else %} sent Prefect no heartbeat for "
        f"{heartbeat_window.total_seconds():g} s, so Prefect marked its run Crashed at "
        + _WHEN
        + "{% endif %}"
        ": its process died with its worker or its machine (a worker stopped during the release, a host "
        "lost), and nothing recorded the crash. Whatever it reserved in the ledger stays charged, its "
        "whole plan (fail closed): `dprelease ledger show` says what it reserved and spent. On the "
        "host that ran it, `dprelease recover --out OUT_DIR` turns its staging folder into a failure "
        "record, then `dprelease ledger settle {{ event.resource.name }} --reason …` closes the "
        "reservation at the stages it spent (docs/operator/recovery.md)."
    )


def build(
    block_id: UUID,
    window: timedelta,
    work_pool: str = WORK_POOL,
    grace: timedelta = WORKER_GRACE,
    heartbeat_window: timedelta = HEARTBEAT_WINDOW,
) -> list[Automation]:
    """The seven automations, not yet created."""

    def notify(name: str, body: str) -> list[SendNotification]:
        return [SendNotification(block_document_id=block_id, subject=SUBJECTS[name], body=body)]

    releases = {"prefect.resource.id": "dprelease.release.*"}
    return [
        Automation(
            name=FAILED,
            description="A release failed or crashed (a deployment's run or a CLI run against this server).",
            trigger=EventTrigger(
                expect={"dprelease.release.failed"},
                match=releases,
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
            description=f"Work pool {work_pool!r} has had no worker with a recent heartbeat for {grace}.",
            # Proactive: each not-ready event opens a bucket (one per pool: for_each) that a
            # ready event within the grace window closes; without for_each a proactive trigger
            # would open a bucket every window and fire with no not-ready event at all.
            trigger=EventTrigger(
                after={"prefect.work-pool.not-ready"},
                expect={"prefect.work-pool.ready"},
                match={"prefect.resource.id": "prefect.work-pool.*", "prefect.resource.name": work_pool},
                for_each={"prefect.resource.id"},
                posture=Posture.Proactive,
                threshold=1,
                within=grace,
            ),
            actions=notify(POOL, POOL_BODY),
        ),
        Automation(
            name=ZOMBIE,
            description=(
                f"A run of {FLOW} that sent no heartbeat for {heartbeat_window} (and did not end) is Crashed."
            ),
            # Prefect's documented pattern (docs: "Detect zombie flows"), for this flow's runs:
            # each heartbeat opens a window (one per run: for_each) that the next heartbeat or a
            # final state closes. Not "Cancelling": a run cancelled after its worker died has
            # no one left to cancel it, and is Crashed too.
            trigger=EventTrigger(
                after={"prefect.flow-run.heartbeat"},
                expect={
                    "prefect.flow-run.heartbeat",
                    "prefect.flow-run.Completed",
                    "prefect.flow-run.Failed",
                    "prefect.flow-run.TimedOut",
                    "prefect.flow-run.Crashed",
                    "prefect.flow-run.Cancelled",
                },
                match={"prefect.resource.id": "prefect.flow-run.*"},
                match_related={"prefect.resource.role": "flow", "prefect.resource.name": FLOW},
                for_each={"prefect.resource.id"},
                posture=Posture.Proactive,
                threshold=1,
                within=heartbeat_window,
            ),
            actions=[ChangeFlowRunState(state=StateType.CRASHED, message=ZOMBIE_MESSAGE)],
        ),
        Automation(
            name=SILENT,
            description=(
                "A release run was marked Crashed for want of heartbeats, or Cancelled because nothing "
                "carried its cancellation out: no process recorded its end."
            ),
            trigger=EventTrigger(
                expect={"prefect.flow-run.Crashed", "prefect.flow-run.Cancelled"},
                match={
                    "prefect.resource.id": "prefect.flow-run.*",
                    "prefect.state-message": [ZOMBIE_MESSAGE, CANCEL_TIMEOUT_MESSAGE],
                },
                match_related={"prefect.resource.role": "flow", "prefect.resource.name": FLOW},
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=notify(SILENT, silent_body(heartbeat_window)),
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
    parser.add_argument(
        "--worker-grace-seconds",
        type=float,
        default=WORKER_GRACE.total_seconds(),
        help="alert only when the pool stays without a ready worker this long (default "
        f"{WORKER_GRACE.total_seconds():g}: a server restart; Prefect's minimum is 10 s)",
    )
    parser.add_argument(
        "--heartbeat-window-seconds",
        type=float,
        default=HEARTBEAT_WINDOW.total_seconds(),
        help="mark a release run Crashed, and alert, when it sent no heartbeat for this long (default "
        f"{HEARTBEAT_WINDOW.total_seconds():g}: three of Prefect's 180 s heartbeats and a minute; keep it "
        "above 3 x PREFECT_FLOWS_HEARTBEAT_FREQUENCY of the worker)",
    )
    args = parser.parse_args(argv)
    block_id = notification_block(args.webhook_url, args.notification_block)
    automations = build(
        block_id,
        timedelta(hours=args.window_hours),
        args.work_pool,
        timedelta(seconds=args.worker_grace_seconds),
        timedelta(seconds=args.heartbeat_window_seconds),
    )
    for a, i in zip(automations, install(automations), strict=True):
        print(f"{i}  {a.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
