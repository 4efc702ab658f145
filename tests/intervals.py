"""The coverage of ``dprelease query``'s intervals against a known truth, through the
product's own code: a mechanism fitted in-process on a table whose counts we know, its
noisy tables (``mechanisms.tables``), replicates and model checks
(``mechanisms.replicates``), and ``records.query.answer_where`` on random queries of one to
three conditions (a category set or an integer/real range each). Shared by
``tests/flows/test_interval_coverage.py`` and ``benchmarks/bench_intervals.py``.

``generated_table`` is the second table with a known joint distribution: a chain
region → sector → income band with an age-dependent hours column and an independent flag.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dprelease.engines.tables import rows_to_table, table_to_bins, table_to_rows
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.replicates import LOO_TABLES, REPLICATES, bootstrap, held_out
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.tables import noisy_tables
from dprelease.records.query import Published, answer_where

__all__ = ["GENERATED", "Coverage", "evaluate", "generated_table"]

GENERATED = Schema(
    (
        Continuous("age", 18, 80, integer=True),
        Nominal("region", ("north", "south", "east", "west")),
        Nominal("sector", ("public", "private", "self", "none")),
        Ordinal("band", ("low", "mid", "high")),
        Continuous("hours", 0.0, 80.0, intervals=16),
        Nominal("flag", ("no", "yes")),
    )
)


def generated_table(n: int, seed: int) -> pd.DataFrame:
    """n rows of ``GENERATED``'s known joint distribution."""
    rng = np.random.default_rng(seed)
    region = rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1])
    sector = (region + rng.choice(4, n, p=[0.55, 0.25, 0.15, 0.05])) % 4
    band = np.clip(np.where(sector == 1, 1, 0) + rng.binomial(1, 0.35, n) + (sector == 2), 0, 2)
    age = rng.integers(18, 81, n)
    hours = np.clip(rng.normal(20 + 0.4 * age, 8, n), 0, 80).round(1)
    flag = rng.random(n) < 0.3
    return pd.DataFrame(
        {
            "age": age,
            "region": np.array(GENERATED["region"].values)[region],
            "sector": np.array(GENERATED["sector"].values)[sector],
            "band": np.array(GENERATED["band"].values)[band],
            "hours": hours,
            "flag": np.array(["no", "yes"])[flag.astype(int)],
        }
    )


@dataclass(frozen=True)
class Coverage:
    """One mechanism on one table: the share of intervals that held the true count, the
    median half-width, the median |synthetic count − truth|, their ratio, per method the
    queries, the share held, the median half-width and synthetic error, the seconds to
    fit, to build the replicates and checks, and per query, and the largest standardised gap
    between a noisy table's total and n (the queries' analytic route assumes it is noise)."""

    mechanism: str
    queries: int
    coverage: float
    median_half_width: float
    median_synthetic_error: float
    by_method: dict[str, tuple[int, float, float, float]]
    fit_seconds: float
    replicates_seconds: float
    query_seconds: float
    total_z: float = 0.0  # the largest |Σ table − n| / its sd: every table counts every fitted row

    @property
    def ratio(self) -> float:
        return self.median_half_width / max(self.median_synthetic_error, 1e-9)


def _where(schema: Schema, table: pd.DataFrame, rng: np.random.Generator) -> tuple[dict, np.ndarray]:
    """A random query of one to three conditions and the rows of ``table`` meeting it."""
    mask = np.ones(len(table), dtype=bool)
    where: dict = {}
    for j in sorted(rng.choice(len(schema.columns), rng.integers(1, 4), replace=False)):
        c = schema.columns[j]
        v = table[c.name]
        if isinstance(c, Continuous):
            lo, hi = sorted(rng.uniform(c.lower, c.upper, 2))
            if c.integer:
                lo, hi = math.ceil(lo), max(math.ceil(lo), math.floor(hi))
            where[c.name] = (lo, hi)
            mask &= (v >= lo).to_numpy() & (v <= hi).to_numpy()
        else:
            k = int(rng.integers(1, min(3, len(c.values)) + 1))
            values = [str(x) for x in rng.choice(c.values, k, replace=False)]
            where[c.name] = values
            mask &= v.astype(str).isin(values).to_numpy()
    return where, mask


def _by_method(
    found: list[tuple[bool, float, float, str]], methods: list[str]
) -> dict[str, tuple[int, float, float, float]]:
    """Per method: queries, the share held, the median half-width and synthetic error."""
    out = {}
    for m in methods:
        mine = [f for f in found if f[3] == m]
        out[m] = (
            len(mine),
            float(np.mean([f[0] for f in mine])),
            float(np.median([f[1] for f in mine])),
            float(np.median([f[2] for f in mine])),
        )
    return out


def evaluate(
    mechanism: str,
    params: object,
    table: pd.DataFrame,
    schema: Schema,
    plan: BudgetPlan,
    *,
    queries: int,
    seed: int,
    replicates: int = REPLICATES,
    loo: int = LOO_TABLES,
    level: float = 0.9,
) -> Coverage:
    """Fit, publish in memory, and answer ``queries`` random queries (see the module doc)."""
    synth = MECHANISMS[mechanism]
    n = len(table)
    rows = table_to_rows(table, table_to_bins(table, schema), schema)
    started = time.perf_counter()
    fit = synth.fit(rows, schema, plan, params, m=n, rng=np.random.default_rng(seed))
    synthetic = rows_to_table(fit.rows, schema, rng=np.random.default_rng(seed + 1))
    fitted = time.perf_counter()
    tables = noisy_tables(fit.measurements)
    pub = Published(schema, tables, n, "the fitted rows", synthetic)
    if synth.leaves_out:  # as the release flow: replicates only where the model can be checked
        reps = bootstrap(synth, table_to_bins(synthetic, schema), schema, plan, params, n, replicates, seed)
        checks = held_out(synth, fit.stages[1].state, schema, params, tables, n, seed, most=loo)
        pub = replace(pub, replicate_cells=reps, replicate_names=tuple(schema.names), checks=tuple(checks))
    built = time.perf_counter()
    rng = np.random.default_rng(seed + 2)
    found: list[tuple[bool, float, float, str]] = []
    for _ in range(queries):
        where, mask = _where(schema, table, rng)
        truth = int(mask.sum())
        got = answer_where(pub, where, level)
        found.append(
            (
                got.count_lower <= truth <= got.count_upper,
                (got.count_upper - got.count_lower) / 2,
                abs(got.synthetic_count - truth),
                got.method,
            )
        )
    done = time.perf_counter()
    methods = sorted({f[3] for f in found})
    total_z = max(abs(float(t.values.sum()) - n) / (t.cell_sd * math.sqrt(t.values.size)) for t in tables)
    return Coverage(
        mechanism,
        queries,
        float(np.mean([f[0] for f in found])),
        float(np.median([f[1] for f in found])),
        float(np.median([f[2] for f in found])),
        _by_method(found, methods),
        fitted - started,
        built - fitted,
        (done - built) / queries,
        total_z,
    )
