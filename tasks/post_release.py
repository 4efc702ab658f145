"""The post-release checks: ``check_gates`` (differentially private, decides
publication) and the advisory ``check_utility``, ``check_linkage`` and ``write_report``.

Policy: ``cache_policy=NO_CACHE, persist_result=False`` — all of them read confidential
rows or statistics of them.

The advisory checks never change what is published, the exit code or any event: their
results go to ``internal/`` only, and an error inside one is recorded there (by type)
instead of failing the release. Only ``check_gates`` can stop a release, and it decides on
noisy metrics (``mechanisms.gates``), charged to the ``gates`` stage of the plan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.files import write_json, write_text
from dprelease.checks.gates import gate_metrics
from dprelease.checks.html import render_report
from dprelease.checks.reports import linkage_report, utility_report
from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.gates import GateResult, decide, measure_gates
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.schema import Schema
from dprelease.tasks.scrub import scrub_errors

__all__ = ["Binned", "advisory", "check_gates", "check_linkage", "check_utility", "write_report"]

Binned = tuple[pd.DataFrame, np.ndarray]  # a table and its public-bin indices


def advisory(fn: Callable[..., dict]) -> Callable[..., dict]:
    """An advisory check's body: an exception becomes ``{"error": <type>}`` in its
    report, so that a check can never decide whether (or how) a release ends."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> dict:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            return {"error": f"{fn.__name__} could not be computed ({type(e).__name__})"}

    return wrapper


@task(name="check_gates", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def check_gates(
    real: Binned,
    synthetic: Binned,
    schema: Schema,
    bounds: Mapping[str, Mapping[str, float | None]],
    budget: StageBudget,
    rng: np.random.Generator,
) -> tuple[list[Measurement], list[GateResult]]:
    """The gates as a DP mechanism: each gated metric on the k = len(real) compared rows
    (``gate_metrics``), plus noise of Δ = 1/k (``mechanisms.gates.measure_gates``), and
    the decision on the noisy values. Returns the measurements (ledger rows) and the
    results (public)."""
    values = gate_metrics(*real, *synthetic, schema, list(bounds), rng)
    measurements = measure_gates(values, len(real[0]), budget, rng=rng)
    return measurements, decide(measurements, bounds)


@task(name="check_utility", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def check_utility(
    real: Binned,
    synthetic: Binned,
    schema: Schema,
    target: str | None,
    holdout: Binned | None,
    internal_dir: Path,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Marginal and pairwise TVD, association difference, Wasserstein, pMSE, TSTR (advisory);
    ``progress`` is told each step."""
    report = advisory(utility_report)(
        *real,
        *synthetic,
        schema,
        target=target,
        real_test=None if holdout is None else holdout[0],
        rng=rng,
        **({} if progress is None else {"progress": progress}),
    )
    write_json(internal_dir / "utility.json", report)
    get_run_logger().info("utility report written to internal/utility.json")
    return report


@task(name="check_linkage", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def check_linkage(
    real: Binned,
    synthetic: Binned,
    schema: Schema,
    keeps_row_order: bool,
    holdout: Binned | None,
    internal_dir: Path,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """DCR, exact and unique exact matches, correct links, membership share (advisory);
    ``progress`` is told each step."""
    report = advisory(linkage_report)(
        *real,
        *synthetic,
        schema,
        keeps_row_order=keeps_row_order,
        holdout=holdout,
        rng=rng,
        **({} if progress is None else {"progress": progress}),
    )
    write_json(internal_dir / "linkage.json", report)
    get_run_logger().info("linkage report written to internal/linkage.json")
    return report


@task(name="write_report", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def write_report(
    real: Binned,
    synthetic: Binned,
    schema: Schema,
    utility: dict,
    linkage: dict,
    gates: list[dict],
    document: dict,
    internal_dir: Path,
) -> Path:
    """``internal/report.html``: one self-contained page with embedded pictures (advisory:
    a section that cannot be drawn says so)."""
    path = internal_dir / "report.html"
    write_text(path, render_report(real[1], synthetic[1], schema, utility, linkage, gates, document))
    return path
