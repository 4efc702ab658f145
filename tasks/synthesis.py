"""The four synthesis stages as Prefect tasks, for any registered mechanism.

Each task looks the mechanism up by name (``mechanisms.registry``) and runs its stage
(``mechanisms.synthesizer``). Policy for all four: ``cache_policy=NO_CACHE,
persist_result=False``: ``encode`` and ``estimate_private_moments`` take confidential
rows, the state handed between stages may hold them too, and every stage draws fresh
randomness for one release, so caching would be wrong. Logs carry only public facts
(counts of measurements and the public facts a stage returns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.engines.tables import rows_to_table
from dprelease.engines.value_grid import value_grid
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import MixedRows, Stage
from dprelease.mechanisms.value_grid import GRID_STAGE
from dprelease.tasks.scrub import scrub_errors

__all__ = ["decode", "encode", "estimate_private_moments", "place_on_value_grid", "project_and_sample"]


def _log(stage: Stage, what: str) -> Stage:
    get_run_logger().info("%s: %d measurement(s)", what, len(stage.measurements))
    return stage


@task(name="encode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def encode(
    mechanism: str, rows: MixedRows, schema: Schema, plan: BudgetPlan, params: Any, rng: np.random.Generator
) -> Stage:
    """Confidential rows → the mechanism's encoding (may measure, e.g. marginals)."""
    return _log(MECHANISMS[mechanism].encode(rows, schema, plan, params, rng), "encode")


@task(name="estimate_private_moments", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def estimate_private_moments(
    mechanism: str, state: Any, plan: BudgetPlan, params: Any, rng: np.random.Generator
) -> Stage:
    """The private moments (second moments, loadings, means)."""
    return _log(MECHANISMS[mechanism].estimate(state, plan, params, rng), "estimate_private_moments")


@task(name="project_and_sample", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def project_and_sample(mechanism: str, state: Any, params: Any, m: int, rng: np.random.Generator) -> Stage:
    """Projection and sampling of m rows (post-processing, or a last measurement)."""
    return _log(MECHANISMS[mechanism].sample(state, params, m, rng), "project_and_sample")


@task(name="decode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def decode(mechanism: str, state: Any, schema: Schema, params: Any, rng: np.random.Generator) -> pd.DataFrame:
    """Synthetic rows → values of the schema's types (post-processing)."""
    return rows_to_table(MECHANISMS[mechanism].decode(state, schema, params, rng), schema, rng=rng)


@task(name="place_on_value_grid", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def place_on_value_grid(
    fitted: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, plan: BudgetPlan, rng: np.random.Generator
) -> tuple[Stage, pd.DataFrame]:
    """Stage ``grid`` (``engines.value_grid``): the fitted rows' noisy grid counts, and the
    synthetic values moved onto the kept points inside their cells (post-processing)."""
    stage, out = value_grid(fitted, synthetic, schema, plan.stage(GRID_STAGE), rng)
    get_run_logger().info("value grid: %d column(s)", len(stage.measurements))
    return stage, out
