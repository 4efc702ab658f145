"""One release of a dataset at a time, across deployments (issue 20).

``concurrency_limit: 1`` in ``deploy/prefect.yaml`` is per deployment: two deployments of
the same dataset (a monthly one and an ad hoc one, or the same spec deployed twice) could
run at once, and only the budget ledger kept them apart. The flow holds a
:class:`DatasetSlot` from before it opens the ledger until its end: a slot of the Prefect
global concurrency limit ``dprelease-dataset-<dataset>`` (limit 1), created on first use. A
second release of the same dataset waits in its flow run (state Running; its log says for
what) until the first one has closed its account, then reserves its own budget; releases
of other datasets are not held up.

Where it applies (``DPRELEASE_DATASET_SLOT``):

* ``deployments`` (the default): in the runs of a deployment, which are the runs that
  share a server (a worker's, a ``flow.serve``'s). Not in the CLI's runs: each has a
  temporary server of its own, where the slot would guard nothing, and worse, that server
  keeps its leases in memory while the limit's count lives in ``$PREFECT_HOME/prefect.db``,
  shared by the next CLI run: a CLI killed (``kill -9``) while holding the slot would leave
  it taken for good, and every later CLI release of the dataset would wait forever
  (measured: ``tests/flows/test_fault_injection.py`` hangs);
* ``always``: in every flow run, e.g. a CLI run pointed at the production server with
  ``PREFECT_API_URL``, which then queues behind the deployments' runs of the dataset;
* ``never``: no slot (the ledger alone guards the budget, as before issue 20).

Outside a flow run (``release.fn(...)``) there is no API to ask, and no slot.

Failure modes:

* the limit cannot be created or read (the API refuses): the release fails before its
  reservation, so nothing is spent (``strict``);
* the slot's holder dies (``kill -9``): its lease (``LEASE_SECONDS``) is no longer renewed
  and the server frees the slot when it expires (its repossessor runs every 15 s). A
  server *restart* loses the leases it keeps in memory (Prefect's default lease storage)
  but not the count: run the server with
  ``PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE=prefect.server.concurrency.lease_storage.filesystem``
  (docs/operator/outage.md); this applies to the deployment's own ``concurrency_limit`` too;
* the server is unreachable while a release holds the slot: the lease renewal fails and
  giving the slot back fails, with warnings; the release goes on and its outcome stands
  (``raise_on_lease_renewal_failure=False``); the ledger still refuses any overlap that
  would overspend.

Operators see the limits with ``prefect gcl ls`` and ``prefect gcl inspect
dprelease-dataset-adult`` (its holder is the flow run). ``prefect gcl disable
dprelease-dataset-adult`` lets releases of the dataset overlap again (the ledger still
guards the budget); ``prefect gcl update dprelease-dataset-adult --limit 0`` makes them
fail at once, before the ledger (Prefect answers 422), until the limit is set back to 1.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from uuid import UUID

__all__ = [
    "LEASE_SECONDS",
    "LIMIT_PREFIX",
    "MODE_ENV",
    "DatasetSlot",
    "dataset_slot",
    "ensure_limit",
    "limit_name",
    "slot_wanted",
]

LIMIT_PREFIX = "dprelease-dataset-"
MODE_ENV = "DPRELEASE_DATASET_SLOT"
MODES = ("deployments", "always", "never")
LEASE_SECONDS = 300.0  # renewed every 225 s while the release runs; Prefect's minimum is 60 s
_DATASET = re.compile(r"[a-z0-9][a-z0-9-]*")  # spec.sections.DatasetSpec.name
_log = logging.getLogger("dprelease.concurrency")


def limit_name(dataset: str) -> str:
    """The global concurrency limit that admits one release of ``dataset`` at a time.

    >>> limit_name("adult")
    'dprelease-dataset-adult'
    >>> limit_name("Adult/2024")
    Traceback (most recent call last):
    ...
    ValueError: dataset name 'Adult/2024' must match [a-z0-9][a-z0-9-]*
    """
    if not isinstance(dataset, str) or not _DATASET.fullmatch(dataset):
        raise ValueError(f"dataset name {dataset!r} must match [a-z0-9][a-z0-9-]*")
    return LIMIT_PREFIX + dataset


def ensure_limit(name: str) -> bool:
    """Create the global concurrency limit ``name`` with one slot unless it exists (an
    operator's later change to it is kept). Returns whether this call created it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
            return False
        except ObjectNotFound:
            pass
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
            return True
        except ObjectAlreadyExists:  # another run created it in between
            return False


def slot_wanted(mode: str | None = None) -> bool:
    """Whether this process's flow run takes its dataset's slot: ``mode`` (default
    ``$DPRELEASE_DATASET_SLOT``, else ``deployments``) and the run (none: False).

    >>> slot_wanted("never")
    False
    >>> slot_wanted("always")  # not in a flow run
    False
    >>> slot_wanted("sometimes")
    Traceback (most recent call last):
    ...
    ValueError: DPRELEASE_DATASET_SLOT is 'sometimes'; use one of deployments, always, never
    """
    if mode is None:
        mode = os.environ.get(MODE_ENV) or "deployments"
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV} is {mode!r}; use one of {', '.join(MODES)}")
    run = _flow_run()
    if run is None or mode == "never":
        return False
    return mode == "always" or run.deployment_id is not None


def _flow_run() -> Any:
    """This thread's flow run (Prefect's run context, no API call), or None."""
    from prefect.context import FlowRunContext

    return getattr(FlowRunContext.get(), "flow_run", None)


def _logger() -> Any:
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return _log


@contextmanager
def _held(
    name: str, dataset: str, flow_run_id: Any, timeout_seconds: float | None, lease_seconds: float
) -> Iterator[float]:
    """Prefect's ``concurrency`` on the limit ``name``, created if missing; yields the
    seconds spent waiting for the slot."""
    from prefect.client.schemas.objects import ConcurrencyLeaseHolder
    from prefect.concurrency.sync import concurrency

    ensure_limit(name)
    log = _logger()
    log.info("Waiting for the slot of dataset %r (global concurrency limit %r)", dataset, name)
    asked = time.monotonic()
    with concurrency(
        name,
        occupy=1,
        timeout_seconds=timeout_seconds,
        lease_duration=lease_seconds,
        strict=True,
        holder=ConcurrencyLeaseHolder(type="flow_run", id=UUID(str(flow_run_id))),
        raise_on_lease_renewal_failure=False,
    ):
        waited = time.monotonic() - asked
        log.info("Holding the slot of dataset %r (waited %.1f s)", dataset, waited)
        yield waited


class DatasetSlot:
    """The slot of one dataset: :meth:`acquire` waits for it (if another release of the
    dataset holds it) and holds it, :meth:`release` gives it back (idempotent, and a no-op
    if it was never taken). Also a context manager. It takes nothing where
    :func:`slot_wanted` says no (by default: outside a deployment's run).

    ``timeout_seconds``: give up waiting (``TimeoutError``) after this long; ``None`` waits
    for as long as the other release runs. ``lease_seconds``: how long the server keeps the
    slot of a holder that stopped renewing it (died); Prefect's minimum is 60."""

    def __init__(
        self,
        dataset: str,
        *,
        timeout_seconds: float | None = None,
        lease_seconds: float = LEASE_SECONDS,
        mode: str | None = None,
    ) -> None:
        self.dataset, self.name = dataset, limit_name(dataset)
        self.timeout_seconds, self.lease_seconds, self.mode = timeout_seconds, lease_seconds, mode
        self.waited: float | None = None  # seconds spent waiting; None: no slot taken
        self._stack = ExitStack()
        self._holding = False

    def acquire(self) -> float | None:
        """Wait for the slot and hold it; the seconds waited, or None when no slot is taken."""
        if self._holding or not slot_wanted(self.mode):  # a second acquire must not wait for itself
            return self.waited
        self.waited = self._stack.enter_context(
            _held(self.name, self.dataset, _flow_run().id, self.timeout_seconds, self.lease_seconds)
        )
        self._holding = True
        return self.waited

    def release(self) -> None:
        """Give the slot back (the next queued release of the dataset may start). Never
        raises: a release that ran stands even if the server cannot hear of its end; the
        server then frees the slot when its lease expires."""
        self._holding = False
        try:
            self._stack.close()
        except Exception as e:
            _logger().warning(
                "Could not give back the slot of dataset %r (%s); the Prefect server frees it when its "
                "lease expires (%g s)",
                self.dataset,
                type(e).__name__,
                self.lease_seconds,
            )

    def __enter__(self) -> float | None:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def dataset_slot(dataset: str, **options: Any) -> DatasetSlot:
    """Hold the dataset's slot while a ``with`` block runs (waiting for it first); the block
    gets the seconds spent waiting, or ``None`` when no slot is taken. ``options``: those
    of :class:`DatasetSlot`."""
    return DatasetSlot(dataset, **options)
