"""The replicates and the leave-one-out check of a release's model, as a Prefect task
(``mechanisms.replicates``): post-processing of the published synthetic rows and of the
noisy measurements, with public seeds; no budget. The estimate step's state it takes may
carry the mechanism's working state, so nothing is cached or persisted."""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.replicates import HeldOut, bootstrap, held_out
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.tables import NoisyTable
from dprelease.tasks.scrub import scrub_errors

__all__ = ["build_replicates"]


@task(name="build_replicates", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def build_replicates(
    mechanism: str,
    cells: np.ndarray,
    state: Any,
    tables: list[NoisyTable],
    schema: Schema,
    plan: BudgetPlan,
    params: Any,
    n: int,
    seed: int,
    replicates: int,
    most: int,
) -> tuple[np.ndarray, list[HeldOut]]:
    """K replicates of the mechanism on n rows of the synthetic ``cells`` (declared cells),
    and the held-out checks of its model (``state``: the estimate step's)."""
    synth = MECHANISMS[mechanism]
    reps = bootstrap(synth, cells, schema, plan, params, n, replicates, seed)
    checks = held_out(synth, state, schema, params, tables, n, seed, most=most)
    get_run_logger().info("replicates: %d, held-out checks: %d", replicates, len(checks))
    return reps, checks
