"""The interface every synthesizer offers the release flow: four stages, one record.

The flow runs them as separate Prefect tasks, and ``Synthesizer.fit`` runs them in one
call (benchmarks, tests, the papers' reproductions), both from the same ``BudgetPlan``::

    encode(rows, schema, plan, params, rng)      -> Stage   (may measure, e.g. marginals)
    estimate(state, plan, params, rng)           -> Stage   (the private moments)
    sample(state, params, m, rng)                -> Stage   (projection and sampling)
    decode(state, schema, params, rng)           -> MixedRows

A synthesizer whose statistics are sums over rows also declares ``Streaming``: the same
steps from sums computed chunk by chunk (the ``local`` and ``dask`` engines).

Each ``Stage`` carries the state the next stage needs (it may hold confidential rows and
never leaves the flow), the ``Measurement`` records made in it (the ledger's rows), and
public ``facts`` for ``release.json`` (public parameters or post-processing of
measurements, e.g. the number of factors chosen from noisy eigenvalues).

Rows travel in the schema's public numeric view, ``MixedRows``: bin indices for every
column (the category index for ordinal and nominal columns) and, for continuous
columns, the position in [0, 1] of the value on the public working scale
(``Continuous.to_unit``). Neither view uses anything but the declared schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.schema import Schema

__all__ = ["Fit", "HistogramNoise", "MixedRows", "Sensitivity", "Stage", "Streaming", "Synthesizer"]


@dataclass(frozen=True)
class MixedRows:
    """``bins``: (n, p) int bin / category indices. ``unit``: (n, p) float, a continuous
    column's value on [0, 1] of its public working scale, NaN in other columns; ``None``
    when a synthesizer works on bins only (values are then drawn inside each bin)."""

    bins: np.ndarray = field(repr=False)
    unit: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.bins.shape[0])

    def require_unit(self) -> np.ndarray:
        """``unit``, for a step that needs the continuous values; ValueError without them."""
        if self.unit is None:
            raise ValueError("the rows have no continuous values (MixedRows.unit)")
        return self.unit


@dataclass(frozen=True)
class Stage:
    """What one stage hands on: ``state`` (possibly confidential), its measurements and
    public facts."""

    state: Any = field(repr=False)
    measurements: tuple[Measurement, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fit:
    """``Synthesizer.fit``'s result: the synthetic rows, every measurement in order, the
    stages' public facts, and the three stages (their states, for diagnostics: they may
    hold confidential rows)."""

    rows: MixedRows
    measurements: tuple[Measurement, ...]
    facts: Mapping[str, Any]
    stages: tuple[Stage, ...] = field(repr=False)


@dataclass(frozen=True)
class Streaming:
    """The steps of a synthesizer whose statistics are sums over rows, so that the data
    can stream past in chunks; the noise is drawn once, on the sums.

    ``encode(counts, n, schema, plan, params, rng)``: the encode step from the fitted
    rows' one-way histograms (summed by pass 1); ``chunk_sum(bins, dither, state,
    params)``: the exact per-chunk statistic of pass 2 (``dither``: the rows' positional
    uniforms, ``rowkeys``); ``estimate(total, n, state, plan, params, rng)``: the estimate
    step from its sum; ``sample(state, params)``: post-processing before drawing;
    ``draw(state, m, rng)``: m fresh synthetic rows (drawn chunk by chunk)."""

    encode: Callable[..., Stage]
    chunk_sum: Callable[..., np.ndarray]
    estimate: Callable[..., Stage]
    sample: Callable[..., Stage]
    draw: Callable[..., MixedRows]


@dataclass(frozen=True)
class Sensitivity:
    """What one noisy statistic may change by when one record is replaced: its ledger
    ``stage`` and Δ₁, Δ₂ (``None`` for a norm the mechanism never calibrates to), derived
    from public facts only (schema, parameters, the public n, and the stages' public
    facts). ``tight`` says some pair of neighbouring tables attains it; ``linf`` is the
    sensitivity of a private selection's scores (``primitives.exponential_mechanism``)."""

    stage: str
    l1: float | None
    l2: float | None
    tight: bool = False
    linf: float | None = None

    def bound(self, norm: str) -> float | None:
        """Δ in ``norm``: l1, l2, or linf (a selection's scores, each moving at most Δ∞)."""
        return {"l1": self.l1, "l2": self.l2, "linf": self.linf}.get(norm)


@dataclass(frozen=True)
class HistogramNoise:
    """The noise on one count histogram over a column's public bins that a step publishes
    (e.g. factor_gauss's marginals), from public facts only: its plan ``stage``, the
    ``column``, its number of ``bins`` and the noise on each count, Gaussian of s.d.
    ``scale`` or Laplace of scale ``scale`` (``primitives.stage_noise``); ``declared``: the
    column's declared cells when the step merges them into fewer ``bins``."""

    stage: str
    column: str
    bins: int
    mechanism: Literal["gaussian", "laplace"]
    scale: float
    declared: int | None = None

    @property
    def sd(self) -> float:
        """Standard deviation per count: σ (Gaussian), √2·b (Laplace)."""
        return self.scale if self.mechanism == "gaussian" else math.sqrt(2.0) * self.scale

    @property
    def mean_abs(self) -> float:
        """E|noise| per count: σ·√(2/π) (Gaussian), b (Laplace)."""
        return self.scale * math.sqrt(2.0 / math.pi) if self.mechanism == "gaussian" else self.scale


@dataclass(frozen=True)
class Synthesizer:
    """A mechanism the spec can name.

    ``stage_weights(schema, params)`` gives the default budget split (stages a schema
    does not need are absent, so no budget is allocated to them); ``defects(params)``
    lists why a parameter choice is *not* differentially private (empty for a DP one);
    ``spends`` names, per step (``encode``, ``estimate``, ``sample``), the plan stages whose
    noise that step may draw: the flow records those stages as spent in the ledger
    *before* running the step (fail closed), and refuses a step that measured a stage
    it did not declare. ``sensitivities(schema, params, n, facts)`` names every noisy
    statistic the steps measure for these public facts (``n`` the fitted rows, ``facts``
    the stages' public facts) with its ``Sensitivity``, computed by the same functions the
    steps pass to the noise: ``audit verify`` re-derives each recorded Δ from it, and the
    wiring tests check it against what the steps really measure. ``keeps_row_order``
    means the output has exactly one row per fitted input row, in order;
    ``check(schema, params)`` raises ``ValueError`` (naming the parameter) when the
    parameters do not fit the schema, before any data is read. ``min_rows(schema,
    params)`` is the fewest fitted rows the four steps need; the flow refuses a smaller
    table before any noise is drawn (``tasks.validate.check_rows``). The default, 2:
    one row has no spread to model (its centred covariance is zero). ``streaming``: the
    steps from sums over chunks, for a synthesizer whose statistics allow it.
    ``histograms(schema, params, plan, n)``: the noise on each count histogram over public
    cells the steps publish for n fitted rows (None: not counted yet; ``HistogramNoise``),
    from public facts only, computed by the calibration the steps use; empty for a
    synthesizer that publishes none (the default). ``models_missing``: the steps work on
    cells only (never on ``MixedRows.unit``), so a continuous column's missing cell
    (``missing: allowed``) is modelled like any other; the spec refuses that field for a
    synthesizer without it. ``rehearsal_params``: parameters that make the rehearsal before
    the reserve (``flows/rehearsal.py``) cheap without changing which code runs (e.g. fewer
    rounds or iterations of an estimator), merged over the spec's. ``without(state, name)``:
    the estimate step's state with the measured table ``name`` left out (never any exact
    count), so that ``sample`` and ``decode`` from it show what the model says of that table
    when it has not seen it: the leave-one-out check of a release's model error
    (``replicates``); None for a synthesizer that offers none.
    """

    name: str
    summary: str
    notions: tuple[str, ...]
    params_type: type
    stage_weights: Callable[[Schema, Any], dict[str, float]]
    defects: Callable[[Any], list[str]]
    keeps_row_order: bool
    spends: Mapping[str, tuple[str, ...]]
    encode: Callable[[MixedRows, Schema, BudgetPlan, Any, np.random.Generator], Stage]
    estimate: Callable[[Any, BudgetPlan, Any, np.random.Generator], Stage]
    sample: Callable[[Any, Any, int, np.random.Generator], Stage]
    decode: Callable[[Any, Schema, Any, np.random.Generator], MixedRows]
    sensitivities: Callable[[Schema, Any, int, Mapping[str, Any]], dict[str, Sensitivity]]
    check: Callable[[Schema, Any], None] = lambda schema, params: None
    min_rows: Callable[[Schema, Any], int] = lambda schema, params: 2
    streaming: Streaming | None = None
    histograms: Callable[[Schema, Any, BudgetPlan, int | None], list[HistogramNoise]] = (
        lambda schema, params, plan, n: []
    )
    models_missing: bool = False
    rehearsal_params: Mapping[str, Any] = field(default_factory=dict)
    without: Callable[[Any, str], Any] | None = None

    def fit(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: Any,
        *,
        m: int,
        rng: np.random.Generator,
    ) -> Fit:
        """The four steps in one call, with one generator: what the flow's tasks do, without
        the ledger around them. ``plan`` comes from ``accounting.plan_budget`` with this
        synthesizer's ``stage_weights``, as the flow's does."""
        encoded = self.encode(rows, schema, plan, params, rng)
        estimated = self.estimate(encoded.state, plan, params, rng)
        sampled = self.sample(estimated.state, params, m, rng)
        stages = (encoded, estimated, sampled)
        return Fit(
            self.decode(sampled.state, schema, params, rng),
            tuple(mm for st in stages for mm in st.measurements),
            {k: v for st in stages for k, v in st.facts.items()},
            stages,
        )
