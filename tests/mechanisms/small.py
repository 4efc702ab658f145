"""A small mixed table for the mechanisms' four-stage tests (dpfm, pcappd, spectral): two
continuous columns (an integer one and a log-scaled one), an ordinal and two nominals;
``small_rows`` draws uniform rows of it, ``run`` runs a synthesizer's four steps on them
(``Synthesizer.fit``) and returns the rows, the measurements and the facts."""

from __future__ import annotations

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows, Synthesizer

__all__ = ["SMALL", "run", "small_rows"]

SMALL = Schema(
    (
        Continuous("age", 17.0, 90.0, integer=True),
        Continuous("income", 0.0, 1e5, transform="log"),
        Ordinal("edu", ("lo", "mid", "hi", "top")),
        Nominal("job", ("a", "b", "c")),
        Nominal("flag", ("no", "yes")),
    )
)


def small_rows(n: int, rng: np.random.Generator) -> MixedRows:
    age = rng.integers(17, 91, n).astype(float)
    income = rng.uniform(0, 1e5, n)
    bins = np.column_stack(
        [
            SMALL.columns[0].to_bins(age),
            SMALL.columns[1].to_bins(income),
            rng.integers(0, 4, n),
            rng.integers(0, 3, n),
            rng.integers(0, 2, n),
        ]
    ).astype(np.int32)
    unit = np.full(bins.shape, np.nan)
    unit[:, 0], unit[:, 1] = SMALL.columns[0].to_unit(age), SMALL.columns[1].to_unit(income)
    return MixedRows(bins, unit)


def run(
    synth: Synthesizer,
    rows: MixedRows,
    plan: BudgetPlan,
    params: object,
    rng: np.random.Generator,
    m: int | None = None,
    schema: Schema = SMALL,
) -> tuple[MixedRows, tuple[Measurement, ...], dict]:
    """The four steps with one generator (``Synthesizer.fit``); m defaults to len(rows)."""
    fit = synth.fit(rows, schema, plan, params, m=len(rows) if m is None else m, rng=rng)
    return fit.rows, fit.measurements, dict(fit.facts)
