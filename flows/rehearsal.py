"""The rehearsal before the reserve: the release path that needs no confidential value,
run on a table drawn from the public schema alone (``engines.rehearsal``), so that a spec
which would fail after the noise is drawn fails before any budget is reserved.

``rehearse(spec)`` writes that table in the dataset's own format, then runs the release's
own steps (``flows.pipeline.release_steps``) on it as plain functions: the reader and the
input's GX suite, the budget plan reserved in a throwaway ledger, encoding, the mechanism
on its measurements of the rehearsal table, sampling, decoding, the output's GX suite, the
gates, the release document (with its sensitivity checks), the advisory checks and the
report, the published layout (derived columns, fresh identifiers, one-hot indicators,
dates) and the writers, the manifests and the seal. Before that, each derived column's
formula is evaluated on every row of the table (the bounds included), and each id format
at the largest row number a release can have. Everything happens in a private temporary
folder that is removed afterwards; nothing reads the data, the dataset's ledger or
Prefect.

A failure there is a spec error (``RehearsalError``, exit 2): the message names the step
and, where the step belongs to one column, the column; the error's own text is shown,
since it can only quote the rehearsal's public values. The release flow and ``dprelease
validate`` both rehearse. The streaming engines rehearse on the ``local`` engine with
small chunks (a Dask cluster is not needed to run the same chunk functions).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.bundle.published import Derived, fresh_identifiers
from dprelease.bundle.staging import prepare_staging
from dprelease.engines.rehearsal import rehearsal_rows, write_rehearsal_file
from dprelease.flows.events import RunRecord
from dprelease.flows.pipeline import Run, release_steps
from dprelease.flows.progress import heartbeat
from dprelease.ledger import Ledger
from dprelease.mechanisms.errors import DPReleaseError, RehearsalError
from dprelease.mechanisms.primitives import release_streams
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import EngineSpec, ReleaseSpec

__all__ = ["MAX_ROW_NUMBER", "Rehearsal", "RehearsalError", "rehearse"]

MAX_ROW_NUMBER = 10**12
"""The largest synthetic row number an id format is tried at when ``synthetic_rows`` is not
set (the real count is the input's, unknown before it is read)."""

_WHAT_TO_FIX = {
    "validate_input": "the schema's column declarations (the reader or the input suite cannot take "
    "values the schema itself declares)",
    "allocate_budget": "privacy and allocation",
    "encode": "mechanism and its params, and the schema",
    "estimate_private_moments": "mechanism and its params, and the schema",
    "project_and_sample": "mechanism, synthetic_rows and the schema",
    "decode": "mechanism and the schema",
    "validate_output": "the schema (an internal error: the synthetic values break the declared schema)",
    "check_gates": "checks.gates",
    "release_document": "privacy, mechanism and checks (the release document's account of them)",
    "check_utility": "checks",
    "check_linkage": "checks",
    "write_report": "checks",
    "write_bundle": "the schema's derived and id columns, and output",
}


@dataclass(frozen=True)
class Rehearsal:
    """A rehearsal that passed: its table's rows, the time it took, and warnings (public
    facts about the spec, e.g. a derived column that is empty for some declared values)."""

    rows: int
    seconds: float
    warnings: tuple[str, ...]


def _failure(step: str, error: BaseException) -> RehearsalError:
    cause = getattr(error, "original", error)  # a task's scrubbed error carries the real one
    if isinstance(error, DPReleaseError):  # a refused input's detail is about the rehearsal's public table
        detail = getattr(error, "detail", None) or str(error)
    else:
        detail = f"{type(cause).__name__}: {cause}"
    if len(detail) > 600:
        detail = detail[:600] + " [...]"
    fix = _WHAT_TO_FIX.get(step, "the spec")
    return RehearsalError(
        f"the spec fails its rehearsal at step '{step}' ({detail}). The rehearsal runs the release on "
        "a table drawn from the public schema alone, before any budget is reserved, so the real release "
        f"would fail there after its noise was drawn. Nothing was read, reserved or spent; check {fix}"
    )


def _derived(spec: ReleaseSpec, model: pd.DataFrame) -> list[str]:
    """Each derived formula on every rehearsal row: refused when it raises or gives no
    finite value anywhere within the declared bounds; a warning when some declared values
    (an example named) give an empty cell."""
    warnings = []
    for name, d in spec.derived().items():
        formula = d.compiled()
        try:
            values = Derived(formula, d.integer, d.decimals).values(model).to_numpy(float, na_value=np.nan)
        except Exception as e:
            raise RehearsalError(
                f"column '{name}': formula {d.formula!r} cannot be computed on values the schema declares "
                f"({type(e).__name__}: {e}); nothing was read, reserved or spent"
            ) from None
        inputs = model[list(formula.names)].astype(float)
        complete = inputs.notna().all(axis=1).to_numpy()
        empty = complete & np.isnan(values)
        if complete.any() and empty.all(where=complete):
            raise RehearsalError(
                f"column '{name}': formula {d.formula!r} gives no finite value for any values within the "
                "declared bounds, so the column would be published empty; fix the formula or the bounds "
                "(nothing was read, reserved or spent)"
            )
        if empty.any():
            at = ", ".join(f"{k}={v:g}" for k, v in inputs[empty].iloc[0].items())
            warnings.append(
                f"column '{name}': formula {d.formula!r} gives no finite value for some values within the "
                f"declared bounds (e.g. {at}); those cells are published empty"
            )
    return warnings


def _identifiers(spec: ReleaseSpec) -> None:
    """Each id format at the first and the largest row number a release can have."""
    largest = spec.synthetic_rows or MAX_ROW_NUMBER
    for name, fmt in spec.identifiers().items():
        try:
            ids = fresh_identifiers(fmt, 0, 1) + fresh_identifiers(fmt, largest - 1, 1)
            for i in ids:
                i.encode("utf-8")
        except Exception as e:
            raise RehearsalError(
                f"column '{name}': format ({fmt!r}) cannot number row {largest} ({type(e).__name__}); "
                "nothing was read, reserved or spent"
            ) from None


def _rehearsal_spec(spec: ReleaseSpec, path: Path, rows: int) -> ReleaseSpec:
    """The spec over the rehearsal file: the ``dask`` engine as ``local`` (the same chunk
    functions), a streaming engine's chunks small enough to make several, ``synthetic_rows``
    at most the table's rows, and the mechanism's ``rehearsal_params`` (fewer rounds or
    iterations: the same code, sooner)."""
    engine = spec.engine
    if engine.streaming:  # model_copy does not validate: chunks below the spec's minimum are fine here
        engine = EngineSpec(name="local").model_copy(update={"chunk_rows": max(1, rows // 3)})
    synthetic = None if spec.synthetic_rows is None else min(spec.synthetic_rows, rows)
    cheap = MECHANISMS[spec.mechanism.name].rehearsal_params
    mechanism = spec.mechanism.model_copy(update={"params": {**spec.mechanism.params, **cheap}})
    return spec.model_copy(
        update={
            "dataset": spec.dataset.model_copy(update={"path": path}),
            "engine": engine,
            "synthetic_rows": synthetic,
            "mechanism": mechanism,
            "base_dir": path.parent,
        }
    )


def rehearse(
    spec: ReleaseSpec, release_id: str | None = None, *, insecure_seed: int | None = None
) -> Rehearsal:
    """Rehearse a release of ``spec`` (as ``release_id``, default the spec's); raises
    ``RehearsalError`` naming the step (and the column) where it fails. ``insecure_seed``:
    the release's, so the rehearsal draws noise as the release will (vetted or seeded).
    The progress display (``flows.progress``) is told each step, and the time a long one
    has run every ``HEARTBEAT_SECONDS``."""
    from prefect.logging import disable_run_logger

    started = time.monotonic()
    rid = release_id or spec.resolved_release_id()
    with (
        heartbeat("rehearse") as tell,
        tempfile.TemporaryDirectory(prefix="dprelease-rehearsal-") as tmp,
    ):
        folder = Path(tmp)
        rows = rehearsal_rows(spec)
        tell(f"writing a {rows}-row table drawn from the public schema")
        path, model = write_rehearsal_file(spec, folder)
        warnings = _derived(spec, model)
        _identifiers(spec)
        out = folder / "out"
        record = RunRecord(out, rid, spec.dataset.name)
        try:
            with disable_run_logger(), Ledger(f"sqlite:///{folder / 'ledger.db'}") as ledger:
                held = prepare_staging(out, rid)
                try:
                    rehearsed = _rehearsal_spec(spec, path, rows)
                    run = Run(rehearsed, ledger, rid, record, rehearsal=True, tell=tell)
                    release_steps(
                        run,
                        held.path,
                        held.dest,
                        release_streams(insecure_seed),
                        started=datetime.now(UTC),
                        insecure_seed=insecure_seed,
                    )
                finally:
                    held.unlock()
        except Exception as e:
            raise _failure(record.stage, e) from None
    return Rehearsal(rows, time.monotonic() - started, tuple(warnings))
