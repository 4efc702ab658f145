"""One road from a release spec to a published bundle, shared by ``dprelease release`` and
``dprelease demo`` (``cli/main.py``) and the Python API (``dprelease.release``).

1. :func:`flow_ledger`: the ledger URL the flow is given; a password in it is moved to the
   environment, because Prefect stores flow parameters.
2. :func:`before_prefect`: what can be refused without reading a data value, before
   Prefect starts: the spec, the release id, the output folder, what dead runs left there,
   the ledger's refusal (recorded as the flow records it), and last the data file's header.
   A refusal raises a ``DPReleaseError``; nothing was read or spent.
3. :func:`run_flow`: the flow (``flows/release.py``) against a Prefect API (the caller says
   which: one temporary server per CLI run, one per Python process for the API), and what
   its body did when Prefect's API went away after it ended (``run_outcome``).

Nothing here prints: messages go to the caller's ``say`` (a line the steward should read)
and ``warn`` (a line about Prefect, not about the release's outcome).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    from dprelease.spec import ReleaseSpec

__all__ = [
    "API_LOST",
    "PREFECT_DEFAULTS",
    "PrefectUnreachable",
    "UnexpectedFailure",
    "before_prefect",
    "flow_ledger",
    "prefect_defaults",
    "run_flow",
]

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "GX_ANALYTICS_ENABLED": "false",
    # Each failed call to Prefect's API is retried with exponential back-off: 5 retries (Prefect's
    # default) wait about a minute per call when the server is down; 2 wait about 6 s. Once the
    # flow has published, Prefect's API no longer changes a release's outcome (flows/events.py).
    "PREFECT_CLIENT_MAX_RETRIES": "2",
}
API_LOST: list[str] = []  # set when Prefect's API went away during a run (the CLI's exit reads it)

Say = Callable[[str], None]
ApiBlock = Callable[..., AbstractContextManager[Any]]


class PrefectUnreachable(DPReleaseError):
    """Prefect's API could not be reached, so the release did not start (nothing read or spent)."""


class UnexpectedFailure(DPReleaseError):
    """The release failed unexpectedly (a bug, or Prefect itself): nothing was published. The
    message names the stage and the exception's type only; the failure record in
    ``<out>/failures/`` holds the traceback."""


def prefect_defaults(verbose: bool) -> None:
    """Set Prefect's defaults for a release (each only where the environment has none)."""
    for k, v in PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")


def flow_ledger(ledger: str | None, out: Path) -> str | None:
    """The ledger URL the flow is given (None: the flow's default, ``OUT/ledger.db``). A
    password in it is moved to ``DPRELEASE_LEDGER_PASSWORD``: Prefect stores flow parameters."""
    from dprelease.ledger import PASSWORD_ENV, ledger_url, split_password

    if ledger is None:
        return None
    url, password = split_password(ledger_url(ledger, out))
    if password is not None:
        os.environ[PASSWORD_ENV] = password
    return url


def before_prefect(spec: Path, out: Path, release_id: str | None, ledger_url: str | None, say: Say) -> None:
    """The checks that read no data value, before Prefect starts (issue 18: in about 3 s,
    not after Prefect's start): the spec; the release id; the output folder (and
    the release's final folder, when its id is known now); the recovery of what dead runs
    left in ``out`` (``records/recovery.py``); the ledger (reachable) and whether it would
    refuse the release (rerun rule, budget policy); last, the data file. A refusal is
    recorded as the flow records it: a ``refused`` ledger row (by ``Ledger.reserve``) and a
    failure record. The data file: it exists, is readable, has a supported format, and its
    header line (structure, not a record) holds the schema's columns."""
    from dprelease.bundle.staging import check_destination, check_out
    from dprelease.engines.header import check_columns, read_header
    from dprelease.engines.inputs import resolve_mechanism
    from dprelease.spec import RELEASE_ID, load_spec

    s = load_spec(spec)
    s.refuse_draft()
    s = resolve_mechanism(s)
    if s.auto_choice is not None:
        say(f"mechanism auto chose {s.mechanism.name}: {s.auto_choice.reason}")
    rid = release_id or s.release_id
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(
            f"--release-id ({release_id!r}) must be lowercase letters, digits and '-', starting with a "
            "letter or digit, at most 80 characters"
        )
    if rid is None:
        check_out(out)
    else:
        check_destination(out, rid)
    _refused_by_the_ledger(s, out, rid, ledger_url, say)
    check_columns(  # last: a refused release never opens it
        read_header(s.data_path),
        s.public_schema(),
        quote=True,
        ignored=s.ignored_columns(),
        one_hot=s.one_hot(),
    )


def _refused_by_the_ledger(
    s: ReleaseSpec, out: Path, rid: str | None, ledger_url: str | None, say: Say
) -> None:
    """Recover what dead runs left in ``out``, then raise ``BudgetRefused`` if the ledger
    would refuse this release, recorded as the flow records it. A first release finds no
    ledger (it is opened, not created) and nothing to refuse."""
    from dprelease.ledger import Ledger, NoLedger, default_url
    from dprelease.mechanisms.registry import MECHANISMS

    try:
        book = Ledger(ledger_url or default_url(out), create=False)
    except NoLedger:
        return
    with book:
        if any(out.glob(".staging-*")):
            from dprelease.records.recovery import recover

            for r in recover(out, book):
                say(f"recovered: {r.describe()}")
        p = s.privacy
        plan = s.budget_plan()
        facts: dict[str, Any] = {
            "dataset": s.dataset.name,
            "plan": plan,
            "lifetime": p.lifetime,
            "period": p.period_budget,
            "not_dp": MECHANISMS[s.mechanism.name].defects(s.mechanism_params()),
        }
        if book.refusal(release_id=rid, **facts) is not None:
            from dprelease.bundle.write import write_failure_record
            from dprelease.ledger import BudgetRefused

            named = rid or s.resolved_release_id()
            try:  # records the refused row and raises, as the flow's allocate_budget does
                book.reserve(release_id=named, mechanism=s.mechanism.name, **facts)
            except BudgetRefused as e:
                write_failure_record(out, named, "allocate_budget", e, None)
                raise


def run_flow(
    spec: Path,
    out: Path,
    release_id: str | None,
    seed: int | None,
    ledger_url: str | None,
    *,
    api: ApiBlock,
    warn: Say,
    meanwhile: Callable[[], object] | None = None,
) -> Path:
    """Run the release flow on ``spec`` into ``out`` inside ``api(meanwhile=meanwhile)`` (a
    Prefect API block: ``prefect_server.prefect_api`` or ``process_api``); the bundle's path.

    Raises what the flow's body raised (a ``DPReleaseError``: ``BudgetRefused``,
    ``InputRefused``, ``GateError``, ...); ``PrefectUnreachable`` when Prefect's API was
    gone before the release started; ``UnexpectedFailure`` for a step's unexpected error
    (scrubbed: its message names the step and the exception's type only). An error of
    Prefect's own, outside the flow's body, is raised as it is."""
    from dprelease.tasks.scrub import UnexpectedError

    try:
        with api(meanwhile=meanwhile):
            from dprelease.flows import release as flow

            flow.forget_outcome()  # what an earlier flow run in this process did is not this one's
            try:
                path = flow.release(
                    str(spec), str(out), release_id=release_id, insecure_seed=seed, ledger_url=ledger_url
                )
            except Exception as e:
                path = _what_the_flow_did(e, warn)
    except UnexpectedError as e:  # scrubbed: its message names the stage and the type only
        raise UnexpectedFailure(str(e)) from e
    return Path(path)


def _what_the_flow_did(error: Exception, warn: Say) -> str:
    """``release`` raised ``error``. When Prefect raised it after the flow's body had ended
    (its API went away, so the run's end could not be reported), what the body did stands:
    its bundle is returned, or its own error raised. Otherwise ``error`` is raised again."""
    from dprelease.flows.release import run_outcome

    outcome = run_outcome()
    if outcome is None or outcome[1] is error:
        if outcome is None and _api_unreachable():
            API_LOST.append(type(error).__name__)
            raise PrefectUnreachable(
                f"Prefect's API could not be reached ({type(error).__name__}); the release did not start."
            ) from error
        raise error
    if _api_unreachable():
        API_LOST.append(type(error).__name__)
    warn(
        f"Prefect could not record the end of this run ({type(error).__name__}: its API is unreachable); "
        "what the release did stands, and the ledger records it (`dprelease ledger show`)."
    )
    path, own = outcome
    if own is not None:
        raise own
    assert path is not None
    return path


def _api_unreachable() -> bool:
    """Prefect's API does not answer its health check within 3 s."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    try:
        return not url or httpx.get(f"{url}/health", timeout=3).status_code != 200
    except httpx.HTTPError:
        return True
