"""The synthesis stages of ``factor_gauss`` as Prefect tasks.

Policy for all four: ``cache_policy=NO_CACHE, persist_result=False``. ``encode`` and
``estimate_private_moments`` take confidential rows; ``project_and_sample`` and
``decode`` take only private outputs, but each draws fresh randomness for one release,
so caching them would be wrong too. Nothing here logs a value computed from the data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mechanisms import factor_gauss as fg
from mechanisms.accounting import BudgetPlan
from mechanisms.latent import LatentCode, from_latent
from mechanisms.primitives import Measurement
from mechanisms.schema import Schema
from tasks.tables import bins_to_table

__all__ = ["decode", "encode", "estimate_private_moments", "project_and_sample"]


@task(name="encode", cache_policy=NO_CACHE, persist_result=False)
def encode(
    bins: np.ndarray,
    schema: Schema,
    plan: BudgetPlan,
    params: fg.FactorGaussParams,
    rng: np.random.Generator,
) -> fg.Encoded:
    """Public bins → private marginals (stage ``marginals``) → bounded latent scores."""
    encoded = fg.encode(bins, schema, plan.stage("marginals"), params, rng=rng)
    get_run_logger().info("measured %d private marginals", len(encoded.marginals))
    return encoded


@task(name="estimate_private_moments", cache_policy=NO_CACHE, persist_result=False)
def estimate_private_moments(encoded: fg.Encoded, plan: BudgetPlan, rng: np.random.Generator) -> Measurement:
    """The noisy latent second moment (stage ``moments``)."""
    return fg.measure_moments(encoded.z, encoded.bound, plan.stage("moments"), rng=rng)


@task(name="project_and_sample", cache_policy=NO_CACHE, persist_result=False)
def project_and_sample(
    moments: Measurement,
    code: LatentCode,
    params: fg.FactorGaussParams,
    m: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """Factor model from the noisy moments, then m fresh latent rows (post-processing)."""
    corr, r = fg.latent_model(moments, code, params)
    get_run_logger().info("factor model with r=%d of p=%d factors", r, len(code.cdfs))
    return fg.sample_latent(corr, m, rng=rng), r


@task(name="decode", cache_policy=NO_CACHE, persist_result=False)
def decode(z: np.ndarray, code: LatentCode, schema: Schema, rng: np.random.Generator) -> pd.DataFrame:
    """Latent rows → bins through the private CDFs → values of the schema's types."""
    return bins_to_table(from_latent(z, code), schema, rng=rng)
