"""The interface every synthesizer offers the release flow: four stages, one record.

A mechanism is one subclass of ``Synthesizer[P, E, M, D]`` (``P`` its frozen parameters,
``E``, ``M``, ``D`` the named states its steps hand on) plus one line in
``mechanisms.registry``, its instance; ``docs/mechanisms/write-a-mechanism.md`` walks through
one. The flow runs the four steps as separate Prefect tasks, ``Synthesizer.fit`` in one call
(the only in-process road: ``dprelease.synthesize``, the rehearsal, the benchmarks), both
from the same ``BudgetPlan``::

    encode(rows, schema, plan, params, rng)      -> Stage[E]  (may measure, e.g. marginals)
    estimate(state: E, plan, params, rng)        -> Stage[M]  (the private moments)
    sample(state: M, params, m, rng)             -> Stage[D]  (projection and sampling)
    decode(state: D, schema, params, rng)        -> MixedRows

A synthesizer whose statistics are sums over rows also offers ``Streaming[P, M]``: the
same steps from sums computed chunk by chunk (the ``local`` and ``dask`` engines); its encode
step hands on a ``ChunkStatistic[P, M]``, the per-chunk statistic and the estimate step on
its sum, whatever state (e.g. a private code) they share.

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
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Literal, Protocol, TypeVar, get_args, get_origin

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.schema import Schema

__all__ = [
    "ChunkStatistic",
    "Draws",
    "Facts",
    "Fit",
    "HistogramNoise",
    "MixedRows",
    "Sensitivity",
    "Stage",
    "Step",
    "Streaming",
    "Synthesizer",
    "fact_names",
]

P = TypeVar("P")
E = TypeVar("E")
M = TypeVar("M")
D = TypeVar("D")
S_co = TypeVar("S_co", covariant=True)

Step = Literal["encode", "estimate", "sample"]
Notion = Literal["zcdp", "pure"]
Facts = Mapping[str, object]
"""Public facts of a stage, for ``release.json``: JSON values (numbers, strings, lists)."""


def fact_names(facts: Facts | None, key: str) -> list[list[str]]:
    """``facts[key]`` as lists of column names (a tree's edges, a round's columns); [] when
    absent. TypeError when the fact is not of that shape (a stage wrote something else)."""
    value = (facts or {}).get(key, [])
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, list | tuple) and all(isinstance(c, str) for c in v) for v in value
    ):
        raise TypeError(f"fact {key!r} is not a list of column-name lists: {value!r}")
    return [list(v) for v in value]


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
class Stage(Generic[S_co]):
    """What one stage hands on: ``state`` (possibly confidential), its measurements and
    public facts."""

    state: S_co = field(repr=False)
    measurements: tuple[Measurement, ...] = ()
    facts: Facts = field(default_factory=dict)


@dataclass(frozen=True)
class Fit:
    """``Synthesizer.fit``'s result: the synthetic rows, every measurement in order, the
    stages' public facts, and the three stages (their states, for diagnostics: they may
    hold confidential rows)."""

    rows: MixedRows
    measurements: tuple[Measurement, ...]
    facts: Facts
    stages: tuple[Stage[object], ...] = field(repr=False)


class Draws(Protocol):
    """A fitted model that draws fresh rows, chunk by chunk (post-processing only)."""

    def draw(self, m: int, rng: np.random.Generator) -> MixedRows:
        """m fresh synthetic rows."""
        ...


class ChunkStatistic(ABC, Generic[P, M]):
    """The streaming encode step's state (``Streaming.encode``): the statistic pass 2 sums
    over the chunks and the estimate step on that sum, with what both need (e.g. the private
    code); pickled to Dask workers."""

    @abstractmethod
    def chunk_sum(self, bins: np.ndarray, dither: np.ndarray, params: P) -> np.ndarray:
        """The exact statistic of one chunk (``dither``: the rows' positional uniforms,
        ``rowkeys``)."""

    @abstractmethod
    def estimate(
        self, total: np.ndarray, n: int, plan: BudgetPlan, params: P, rng: np.random.Generator
    ) -> Stage[M]:
        """The estimate step from the chunks' summed statistic (n fitted rows)."""


class Streaming(ABC, Generic[P, M]):
    """The steps of a synthesizer whose statistics are sums over rows, so that the data
    can stream past in chunks; the noise is drawn once, on the sums. Pass 1 sums the
    fitted rows' one-way histograms (``counts``), pass 2 ``chunk_sum`` per chunk."""

    @abstractmethod
    def encode(
        self,
        counts: Sequence[np.ndarray],
        n: int,
        schema: Schema,
        plan: BudgetPlan,
        params: P,
        rng: np.random.Generator,
    ) -> Stage[ChunkStatistic[P, M]]:
        """The encode step from the one-way histograms of the n fitted rows."""

    def chunk_sum(
        self, bins: np.ndarray, dither: np.ndarray, state: ChunkStatistic[P, M], params: P
    ) -> np.ndarray:
        """The exact statistic of one chunk: ``state.chunk_sum``; pickled to Dask workers."""
        return state.chunk_sum(bins, dither, params)

    def estimate(
        self,
        total: np.ndarray,
        n: int,
        state: ChunkStatistic[P, M],
        plan: BudgetPlan,
        params: P,
        rng: np.random.Generator,
    ) -> Stage[M]:
        """The estimate step from the chunks' summed statistic: ``state.estimate``."""
        return state.estimate(total, n, plan, params, rng)

    @abstractmethod
    def sample(self, state: M, params: P) -> Stage[Draws]:
        """Post-processing before the chunked draw: the model that draws."""


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


class Synthesizer(ABC, Generic[P, E, M, D]):
    """A mechanism the spec can name: one subclass per mechanism, its steps as methods.

    Class attributes: ``name`` (the spec's ``mechanism.name``), the privacy ``notions`` it
    offers; ``summary`` (one line for ``dprelease mechanisms``) is the class docstring's first
    paragraph and ``params_type`` (the frozen parameters) the ``P`` of its
    ``Synthesizer[P, E, M, D]`` base, unless the class sets them (``__init_subclass__``).
    ``spends`` names, per step, the plan stages whose noise that step may draw: the flow
    records those stages as spent in the ledger *before* running the step (fail closed), and
    refuses a step that measured a stage it did not declare. ``keeps_row_order``: the
    output has exactly one row per fitted input row, in order. ``models_missing``: the steps
    work on cells only (never on ``MixedRows.unit``), so a continuous column's missing cell
    is modelled like any other; the spec refuses ``missing: allowed`` for a synthesizer
    without it.
    ``rehearsal_params``: parameters that make the rehearsal before the reserve
    (``flows/rehearsal.py``) cheap without changing which code runs, merged over the spec's.
    ``streaming``: the steps from sums over chunks, for a synthesizer whose statistics allow
    it. ``leaves_out``: ``without`` is offered (the leave-one-out check of a release's model
    error, ``replicates``).
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    notions: ClassVar[tuple[Notion, ...]]
    params_type: type[P]
    spends: ClassVar[Mapping[Step, tuple[str, ...]]]
    keeps_row_order: ClassVar[bool] = False
    models_missing: ClassVar[bool] = False
    rehearsal_params: ClassVar[Mapping[str, int]] = {}
    streaming: Streaming[P, M] | None = None
    leaves_out: ClassVar[bool] = False

    def __init_subclass__(cls) -> None:
        """What a subclass does not restate: ``summary`` from its docstring's first paragraph
        (white space folded), ``params_type`` from its ``Synthesizer[P, E, M, D]`` base."""
        super().__init_subclass__()
        if "summary" not in vars(cls) and cls.__doc__:
            cls.summary = " ".join(re.split(r"\n\s*\n", cls.__doc__.strip())[0].split())
        if "params_type" not in vars(cls):
            for base in vars(cls).get("__orig_bases__", ()):
                if get_origin(base) is Synthesizer and isinstance(get_args(base)[0], type):
                    cls.params_type = get_args(base)[0]

    @abstractmethod
    def stage_weights(self, schema: Schema, params: P) -> dict[str, float]:
        """The default budget split; stages a schema does not need are absent (no budget)."""

    @abstractmethod
    def encode(
        self, rows: MixedRows, schema: Schema, plan: BudgetPlan, params: P, rng: np.random.Generator
    ) -> Stage[E]:
        """Encode the fitted rows (may measure, e.g. the one-way marginals)."""

    @abstractmethod
    def estimate(self, state: E, plan: BudgetPlan, params: P, rng: np.random.Generator) -> Stage[M]:
        """The private moments."""

    @abstractmethod
    def sample(self, state: M, params: P, m: int, rng: np.random.Generator) -> Stage[D]:
        """Projection and sampling of m rows (post-processing)."""

    @abstractmethod
    def decode(self, state: D, schema: Schema, params: P, rng: np.random.Generator) -> MixedRows:
        """The sampled rows in the schema's public view (post-processing)."""

    @abstractmethod
    def sensitivities(self, schema: Schema, params: P, n: int, facts: Facts | None) -> dict[str, Sensitivity]:
        """Every noisy statistic the steps measure for these public facts (``n`` the fitted
        rows, ``facts`` the stages' public facts) with its ``Sensitivity``, computed by the
        same functions the steps pass to the noise: ``audit verify`` re-derives each recorded
        Δ from it, and the wiring tests check it against what the steps really measure."""

    def defects(self, params: P) -> list[str]:
        """Why a parameter choice is *not* differentially private (empty for a DP one)."""
        return []

    def check(self, schema: Schema, params: P) -> None:
        """ValueError (naming the parameter) when the parameters do not fit the schema,
        before any data is read."""

    def min_rows(self, schema: Schema, params: P) -> int:
        """The fewest fitted rows the four steps need; the flow refuses a smaller table
        before any noise is drawn. 2: one row has no spread to model."""
        return 2

    def histograms(self, schema: Schema, params: P, plan: BudgetPlan, n: int | None) -> list[HistogramNoise]:
        """The noise on each count histogram over public cells the steps publish for n
        fitted rows (None: not counted yet), from public facts only, computed by the
        calibration the steps use; empty for a synthesizer that publishes none."""
        return []

    def without(self, state: M, name: str) -> M:
        """The estimate step's state with the measured table ``name`` left out (never any
        exact count), so that ``sample`` and ``decode`` from it show what the model says of
        that table when it has not seen it; only when ``leaves_out``."""
        raise NotImplementedError(f"{self.name} offers no leave-one-out check (leaves_out is False)")

    def fit(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: P,
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
        stages: tuple[Stage[object], ...] = (encoded, estimated, sampled)
        return Fit(
            self.decode(sampled.state, schema, params, rng),
            tuple(mm for st in stages for mm in st.measurements),
            {k: v for st in stages for k, v in st.facts.items()},
            stages,
        )
