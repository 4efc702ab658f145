"""The four synthesis stages as Prefect tasks, for any registered mechanism.

Each task looks the mechanism up by name (``mechanisms.registry``) and runs its stage
(``mechanisms.synthesizer``). Policy for all four: ``cache_policy=NO_CACHE,
persist_result=False``: ``encode`` and ``estimate_private_moments`` take confidential
rows, the state handed between stages may hold them too, and every stage draws fresh
randomness for one release, so caching would be wrong. Logs carry only public facts
(counts of measurements and the public facts a stage returns).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.engines import road
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import MixedRows, Stage
from dprelease.tasks.scrub import scrub_errors

__all__ = [
    "TASKS",
    "decode",
    "encode",
    "estimate_private_moments",
    "place_on_value_grid",
    "project_and_sample",
]


def _log(stage: Stage[object], what: str) -> Stage[object]:
    get_run_logger().info("%s: %d measurement(s)", what, len(stage.measurements))
    return stage


@task(name="encode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def encode(
    mechanism: str,
    rows: MixedRows,
    schema: Schema,
    plan: BudgetPlan,
    params: object,
    rng: np.random.Generator,
) -> Stage[object]:
    """``engines.road.encode_step``: confidential rows → the mechanism's encoding."""
    return _log(road.encode_step(mechanism, rows, schema, plan, params, rng), "encode")


@task(name="estimate_private_moments", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def estimate_private_moments(
    mechanism: str, state: object, plan: BudgetPlan, params: object, rng: np.random.Generator
) -> Stage[object]:
    """``engines.road.estimate_step``: the private moments."""
    return _log(road.estimate_step(mechanism, state, plan, params, rng), "estimate_private_moments")


@task(name="project_and_sample", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def project_and_sample(
    mechanism: str, state: object, params: object, m: int, rng: np.random.Generator
) -> Stage[object]:
    """``engines.road.sample_step``: projection and sampling of m rows."""
    return _log(road.sample_step(mechanism, state, params, m, rng), "project_and_sample")


@task(name="decode", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def decode(
    mechanism: str, state: object, schema: Schema, params: object, rng: np.random.Generator
) -> pd.DataFrame:
    """``engines.road.decode_step``: synthetic rows → values of the schema's types."""
    return road.decode_step(mechanism, state, schema, params, rng)


@task(name="place_on_value_grid", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def place_on_value_grid(
    fitted: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, plan: BudgetPlan, rng: np.random.Generator
) -> tuple[Stage[object], pd.DataFrame]:
    """``engines.road.grid_step``: stage ``grid``, the synthetic values on the kept points."""
    stage, out = road.grid_step(fitted, synthetic, schema, plan, rng)
    get_run_logger().info("value grid: %d column(s)", len(stage.measurements))
    return stage, out


TASKS = {
    "encode": encode,
    "estimate_private_moments": estimate_private_moments,
    "project_and_sample": project_and_sample,
    "decode": decode,
    "place_on_value_grid": place_on_value_grid,
}
"""The Prefect task of each step of ``engines.road.synthesise``."""
