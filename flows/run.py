"""One road from a release spec to a published bundle, shared by ``dprelease release`` and
``dprelease demo`` (``cli/main.py``) and the Python API (``dprelease.release``).

1. :func:`flow_ledger`: the ledger URL the flow is given; a password in it is moved to the
   environment, because Prefect stores flow parameters.
2. :func:`before_prefect`: what can be refused without reading a data value, before
   Prefect starts: the spec, the release id, the output folder, what dead runs left there,
   the ledger's refusal (recorded as the flow records it: :func:`refuse_first`, which the
   flow also calls before ``mechanism: auto`` counts the rows), and last the data file's
   header. A refusal raises a ``DPReleaseError``; nothing was read or spent.
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

from dprelease.mechanisms.auto import AUTO
from dprelease.mechanisms.errors import (
    DPReleaseError,
    PrefectNotStarted,
    PrefectUnreachable,
    UnexpectedFailure,
)

if TYPE_CHECKING:
    from dprelease.ledger import Ledger
    from dprelease.spec import ReleaseSpec

__all__ = [
    "API_LOST",
    "PrefectNotStarted",
    "PrefectUnreachable",
    "UnexpectedFailure",
    "before_prefect",
    "flow_ledger",
    "prefect_logging",
    "record_not_started",
    "refuse_first",
    "run_flow",
]

API_LOST: list[str] = []  # set when Prefect's API went away during a run (the CLI's exit reads it)

Say = Callable[[str], None]
ApiBlock = Callable[..., AbstractContextManager[Any]]


def prefect_logging(verbose: bool) -> None:
    """Prefect's log level for a release, where the environment sets none: INFO with
    ``verbose``, else WARNING. It takes effect only before Prefect is imported; the other
    defaults were set by ``import dprelease`` (``flows/defaults.py``)."""
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


def before_prefect(
    spec: Path,
    out: Path,
    release_id: str | None,
    ledger_url: str | None,
    say: Say,
    new_dataset: str | None = None,
) -> None:
    """The checks that read no data value, before Prefect starts (issue 18: in about 3 s,
    not after Prefect's start): the spec; the release id; ``new_dataset`` (a reason, when
    given); the output folder (and the release's final folder, when its id is known now);
    the recovery of what dead runs left in ``out`` (``records/recovery.py``); the ledger
    (reachable) and whether it would refuse the release (rerun rule, the schema's binding
    to the dataset name, budget policy); last, the data file. A refusal is
    recorded as the flow records it: a ``refused`` ledger row (by ``Ledger.reserve``) and a
    failure record. The data file: it exists, is readable, has a supported format, and its
    header line (structure, not a record) holds the schema's columns. Nothing else of it is
    read: ``mechanism: auto`` is resolved by the flow, after its own pre-check. After the
    spec, a named mechanism's resource forecast: a release forecast to need more memory or
    time than the ceilings is refused (``spec.resources``; under ``auto`` the flow forecasts
    once it has chosen, before its rehearsal)."""
    from dprelease.bundle.staging import check_destination, check_out
    from dprelease.engines.header import check_columns, read_header
    from dprelease.ledger.identity import checked_reason
    from dprelease.spec import RELEASE_ID, load_spec
    from dprelease.spec.resources import check_resources

    s = load_spec(spec)
    s.refuse_draft()
    if s.mechanism.name != AUTO:
        check_resources(s)  # the memory and time it would need, against the ceilings
    rid = release_id or s.release_id
    if release_id is not None and not RELEASE_ID.fullmatch(release_id):
        raise DPReleaseError(
            f"--release-id ({release_id!r}) must be lowercase letters, digits and '-', starting with a "
            "letter or digit, at most 80 characters"
        )
    new_dataset = checked_reason(new_dataset)
    if rid is None:
        check_out(out)
    else:
        check_destination(out, rid)
    _refused_by_the_ledger(s, out, rid, ledger_url, say, new_dataset)
    check_columns(  # last: a refused release never opens it
        read_header(s.data_path),
        s.public_schema(),
        quote=True,
        ignored=s.ignored_columns(),
        one_hot=s.one_hot(),
    )


def _refused_by_the_ledger(
    s: ReleaseSpec, out: Path, rid: str | None, ledger_url: str | None, say: Say, new_dataset: str | None
) -> None:
    """Recover what dead runs left in ``out``, then raise ``BudgetRefused`` if the ledger
    would refuse this release (``refuse_first``), with a failure record. A first release
    finds no ledger (it is opened, not created) and nothing to refuse."""
    from dprelease.ledger import BudgetRefused, Ledger, NoLedger, default_url

    try:
        book = Ledger(ledger_url or default_url(out), create=False)
    except NoLedger:
        return
    with book:
        book.check_writable()  # an older ledger's format: migrate first, before anything is read
        if any(out.glob(".staging-*")):
            from dprelease.records.recovery import recover

            for r in recover(out, book):
                say(f"recovered: {r.describe()}")
        named = rid or s.resolved_release_id()
        try:
            refuse_first(book, s, rid, named, new_dataset)
        except BudgetRefused as e:
            from dprelease.bundle.write import write_failure_record

            write_failure_record(out, named, "allocate_budget", e, None)
            raise


def refuse_first(
    book: Ledger, s: ReleaseSpec, rid: str | None, named: str, new_dataset: str | None = None
) -> None:
    """Raise ``BudgetRefused`` if the ledger would refuse this release now (the rerun rule,
    when its id ``rid`` is known, the schema's binding to the dataset name (``new_dataset``:
    the steward's reason to declare it new), then the budget policy), recording the refusal as the
    flow's reserve records it: a ``refused`` row for ``named``. Neither rule depends on the
    mechanism ``auto`` will choose: the rerun rule ignores it, and the budget policy judges
    ``ReleaseSpec.ledger_plan`` (the candidates' largest charge), so under ``auto`` this
    comes before the rows are counted and the row names the mechanism ``auto``."""
    p = s.privacy
    facts: dict[str, Any] = {
        "dataset": s.dataset.name,
        "plan": s.ledger_plan(),
        "lifetime": p.lifetime,
        "period": p.period_budget,
        "not_dp": s.mechanism_defects(),
        "schema": s.public_schema().fingerprint,
        "new_dataset": new_dataset,
    }
    if book.refusal(release_id=rid, **facts) is not None:  # records the refused row and raises
        book.reserve(release_id=named, mechanism=s.mechanism.name, **facts)


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
    new_dataset: str | None = None,
) -> Path:
    """Run the release flow on ``spec`` into ``out`` inside ``api(meanwhile=meanwhile)`` (a
    Prefect API block: ``prefect_server.prefect_api`` or ``process_api``); the bundle's path.
    ``new_dataset``: the steward's reason for a new dataset (the flow's parameter).

    Raises what the flow's body raised (a ``DPReleaseError``: ``BudgetRefused``,
    ``InputRefused``, ``GateError``, ...); ``PrefectUnreachable`` when Prefect's API was
    gone before the release started, ``PrefectNotStarted`` when its temporary server did not
    start (recorded in ``<out>/failures/``: nothing read or spent); ``UnexpectedFailure`` for a
    step's unexpected error (scrubbed: its message names the step and the exception's type
    only). An error of Prefect's own, outside the flow's body, is raised as it is."""
    from dprelease.tasks.scrub import UnexpectedError

    try:
        with api(meanwhile=meanwhile):
            from dprelease.flows import release as flow

            flow.forget_outcome()  # what an earlier flow run in this process did is not this one's
            try:
                path = flow.release(
                    str(spec),
                    str(out),
                    release_id=release_id,
                    insecure_seed=seed,
                    ledger_url=ledger_url,
                    new_dataset=new_dataset,
                )
            except Exception as e:
                path = _what_the_flow_did(e, warn)
    except UnexpectedError as e:  # scrubbed: its message names the stage and the type only
        raise UnexpectedFailure(str(e)) from e
    except PrefectNotStarted as e:  # before the flow: nothing was read or spent
        record = record_not_started(e, spec, out, release_id, "start_prefect")
        raise PrefectNotStarted(f"{e} (failure record: {record})") from e
    return Path(path)


def record_not_started(
    error: BaseException, spec: Path, out: Path, release_id: str | None, stage: str
) -> Path:
    """The failure record (``<out>/failures/``) of a release that failed before its flow
    started (Prefect's server, or Prefect itself): its id is the one the release would have
    had, and it says that nothing was read or spent."""
    from dprelease.bundle.write import write_failure_record
    from dprelease.spec import load_spec

    named = release_id or load_spec(spec).resolved_release_id()  # checked by before_prefect
    facts = {"data_read": False, "budget_spent": False}
    return write_failure_record(out, named, stage, error, None, facts)


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
