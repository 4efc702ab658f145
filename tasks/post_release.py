"""``check_utility``, ``check_linkage`` and ``write_report``: the post-release checks.

Policy: ``cache_policy=NO_CACHE, persist_result=False`` — all three read confidential
rows or statistics of them. Their results go to ``internal/`` only; the flow's only
artifact about them says pass/fail per gate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mechanisms.schema import Schema
from tasks.checks.report import render_report
from tasks.checks.reports import linkage_report, utility_report
from tasks.files import write_json
from tasks.scrub import scrub_errors

__all__ = ["Binned", "check_linkage", "check_utility", "write_report"]

Binned = tuple[pd.DataFrame, np.ndarray]  # a table and its public-bin indices


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
) -> dict:
    """Marginal and pairwise TVD, association difference, Wasserstein, pMSE, TSTR."""
    report = utility_report(
        *real, *synthetic, schema, target=target, real_test=None if holdout is None else holdout[0], rng=rng
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
) -> dict:
    """DCR, exact and unique exact matches, correct links, membership share."""
    report = linkage_report(
        *real, *synthetic, schema, keeps_row_order=keeps_row_order, holdout=holdout, rng=rng
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
    """``internal/report.html``: one self-contained page with embedded pictures."""
    path = internal_dir / "report.html"
    path.write_text(render_report(real[1], synthetic[1], schema, utility, linkage, gates, document))
    return path
