"""Will the machine hold the release? Peak memory and time of a release and of its
rehearsal, forecast from public facts only: the schema's declared cells, the public n (the
fitted rows, public under replace-one; None before it is counted), the synthetic rows m,
the mechanism and its parameters, the engine. Pure arithmetic: no data, no clock.

A phase's need is a fixed part plus a sum of ``Term``s, each driven by one thing the
steward controls (its ``field``, named in a refusal with what lowers it)::

    memory  = MEMORY_MARGIN  · (BASE_MEMORY  + Σ term.memory)
    seconds = SECONDS_MARGIN · (BASE_SECONDS + Σ term.seconds)

* ``rows``: the n input rows, n × (file columns) cells (read, binned, checked); under a
  streaming engine the memory holds one chunk of ``chunk_rows`` rows, the time all n.
* ``synthetic_rows``: m × (modelled columns) cells, drawn, decoded and written (a chunk at
  a time when streaming).
* the mechanism's own terms (``MECHANISM_TERMS``): the design matrix n × d and its d × d
  moments for the projection mechanisms (d the one-hot width, ``design``); the copula's
  p × p for ``factor_gauss`` and ``dpfm``; for ``mst`` and ``aim``, the candidate tables, the
  junction tree (aim: at most ``max_model_size``) and, per round, the junction trees its
  candidates would make (``graphical.model_size``) and the estimate.

* the query intervals' replicates, for a mechanism that builds them: K refits and the
  held-out draws (``_replicate_terms``).
* ``schema``: per modelled column, its expectations and the advisory checks' two-way
  tables (rows × p²).

The coefficients are upper envelopes of measurements on this project's machine kind (2
cores, Python 3.11; ``benchmarks/bench_resources.py``, the runs kept in
``benchmarks/resources_measured.json``), and the margins cover what a measurement misses
(another interpreter build, a busier machine): the forecast is meant as an upper bound, and
``tests/spec/test_resources.py`` checks that it bounds every measured run (CPU time by 1.45
to 3.9 times, peak memory by 1.23 to 1.96 times). Time is CPU time on one core.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BASE_MEMORY",
    "BASE_SECONDS",
    "GB",
    "MECHANISM_TERMS",
    "MEMORY_MARGIN",
    "PREFECT_MEMORY",
    "PREFECT_SECONDS",
    "SECONDS_MARGIN",
    "Need",
    "Shape",
    "Term",
    "need",
]

GB = float(2**30)
MEMORY_MARGIN = 1.25
SECONDS_MARGIN = 2.0
BASE_MEMORY = 0.6 * GB
"""The interpreter with the release's modules (pandas, pyarrow, GX, Prefect's client, the
mechanism's) and the suites: 0.45 GB measured for a 2,000-row release's steps, 0.66 GB for
the projection mechanisms' on 20,000 rows."""
BASE_SECONDS = 8.0
"""Imports, the GX suites and the steps at a tiny n: 6.9 s of CPU measured."""
PREFECT_MEMORY = 0.4 * GB
"""A release's Prefect: the flow run's client and task machinery, and the temporary
server's process (0.18 GB, BENCHMARKS.md §2); a rehearsal runs without Prefect."""
PREFECT_SECONDS = 25.0
"""A release's Prefect: the temporary server's start (12.6 s on a fresh home) and the task
runs' bookkeeping."""
COLUMN_SECONDS = 0.15  # per modelled column: its expectations (GX), its marginals in the checks
CHECK_PAIR_SECONDS = 5e-8  # per checked row and pair of columns (the checks' two-way tables)
ROW_CELL_BYTES = 120.0  # per input cell in memory (pandas' text columns, bins, the checks' copies)
ROW_CELL_SECONDS = 1.5e-6  # per input cell: parse, validate (GX), bin, check
SYNTHETIC_CELL_BYTES = 30.0  # per synthetic cell: the drawn codes, the decoded table, the writer
SYNTHETIC_CELL_SECONDS = 0.6e-6
DASK_WORKER_MEMORY = 0.4 * GB  # a LocalCluster's worker process, before its chunk
JAX_MEMORY = 0.8 * GB
"""JAX and mbi with their compiled programs, for ``mst`` and ``aim`` only (0.55 to 0.9 GB
measured above the steps' own)."""
JAX_SECONDS = 8.0
MAX_TABLE = 10_000  # cells of a candidate marginal, at most (``workload.MAX_PAIR_CELLS``)
GROUP_CELL_BYTES = 150.0  # per row × column of group codes (the codes, their keys, the CDF blocks)
GROUP_CELL_SECONDS = 3e-6
COMPILE_SECONDS = 0.6  # JAX compiles an estimate for each new set of cliques
ITERATION_SECONDS = 5e-4  # per mirror-descent iteration and maximal clique (at most p of them)
TREE_SECONDS = 3e-6  # per candidate junction tree and p² (mbi's greedy elimination order)
SCORE_SECONDS = 6e-9  # per candidate and scoring row (a count of rows drawn from the model)
SAMPLE_SECONDS = 2e-9  # per drawn row and cell of its column's conditional CDF (``graphical.sample``)
FLOAT = 8.0  # bytes of a float64 or int64
MATRIX_COPIES = 16.0  # floats per cell of the n × d design and of its d × d moments, at the peak
COPULA_COPIES = 4.0  # the same for factor_gauss's and dpfm's n × p latent scores
MATRIX_SECONDS = 4e-9  # per n·d² (the moments) and d³ (their eigendecomposition)
GREEDY_SECONDS = 3e-4  # lda_ppd's greedy synthesis: per synthetic row and column (a Python step)
CELL_SECONDS = 2.5e-3  # mst and aim: per declared cell (a wide column's one-way table in JAX)


@dataclass(frozen=True)
class Shape:
    """The public facts a forecast needs. ``cells``: each modelled column's declared cells;
    ``nominal``: whether each is nominal (one-hot in a design matrix); ``n``: fitted rows
    (None: not counted yet, so the terms in n are left out); ``m``: synthetic rows (None:
    as many as n); ``check_rows``: rows the advisory checks see (None: all; 0: no checks);
    ``workers``: a Dask LocalCluster's worker processes (0: none); ``replicates`` and
    ``held_out``: the query intervals' refits and held-out draws (``mechanisms.replicates``;
    0: the release builds none)."""

    mechanism: str
    params: Any
    cells: tuple[int, ...]
    nominal: tuple[bool, ...]
    file_columns: int
    n: int | None
    m: int | None
    streaming: bool = False
    chunk_rows: int = 250_000
    check_rows: int | None = None
    target: int | None = None
    workers: int = 0
    replicates: int = 0
    held_out: int = 0

    @property
    def p(self) -> int:
        return len(self.cells)

    @property
    def rows(self) -> int:
        """n, or 0 when not counted yet."""
        return self.n or 0

    @property
    def synthetic(self) -> int:
        return self.rows if self.m is None else self.m

    @property
    def width(self) -> int:
        """The design matrix's width d: a nominal column's categories, one per other column
        (``mechanisms.design``)."""
        return sum(k if nom else 1 for k, nom in zip(self.cells, self.nominal, strict=True))

    @property
    def checked_rows(self) -> int:
        """Rows of each table the advisory checks see."""
        return self.rows if self.check_rows is None else min(self.rows, self.check_rows)

    @property
    def resident_rows(self) -> int:
        """Input rows held in memory at once: all of them, or a streaming chunk."""
        return min(self.rows, self.chunk_rows) if self.streaming else self.rows


@dataclass(frozen=True)
class Term:
    """One part of a need: the spec ``field`` that drives it, its ``memory`` (bytes) and
    ``seconds``, and ``hint``, what lowers it."""

    field: str
    memory: float
    seconds: float
    hint: str


@dataclass(frozen=True)
class Need:
    """A phase's forecast: its terms and whether Prefect runs it (a release) or not (a
    rehearsal); ``memory`` and ``seconds`` include the margins."""

    terms: tuple[Term, ...]
    prefect: bool
    n_known: bool = True
    fixed: tuple[float, float] = field(default=(0.0, 0.0))

    @property
    def memory(self) -> float:
        return MEMORY_MARGIN * (self.fixed[0] + math.fsum(t.memory for t in self.terms))

    @property
    def seconds(self) -> float:
        return SECONDS_MARGIN * (self.fixed[1] + math.fsum(t.seconds for t in self.terms))

    def driver(self, what: str) -> Term:
        """The term that needs the most ``memory`` or ``seconds``."""
        return max(self.terms, key=lambda t: t.memory if what == "memory" else t.seconds)


def _io_terms(s: Shape) -> list[Term]:
    """The input's rows, the synthetic rows, and the schema's columns (their expectations and
    the checks' two-way tables)."""
    synthetic = min(s.synthetic, s.chunk_rows) if s.streaming else s.synthetic
    workers = s.workers * (DASK_WORKER_MEMORY + s.chunk_rows * s.file_columns * ROW_CELL_BYTES)
    return [
        Term(
            "the input's rows (n)",
            s.resident_rows * s.file_columns * ROW_CELL_BYTES + workers,
            s.rows * s.file_columns * ROW_CELL_SECONDS,
            "lower engine.chunk_rows, or use fewer columns"
            if s.streaming
            else "use a streaming engine (engine.name: local), or fewer columns",
        ),
        Term(
            "synthetic_rows",
            synthetic * s.p * SYNTHETIC_CELL_BYTES,
            s.synthetic * s.p * SYNTHETIC_CELL_SECONDS,
            "lower synthetic_rows",
        ),
        Term(
            "schema",
            0.0,
            s.p * COLUMN_SECONDS + s.checked_rows * s.p * s.p * CHECK_PAIR_SECONDS,
            "use fewer columns (type: drop those the release need not model), or sample the checks "
            "(checks.sample_rows under a streaming engine, or checks.enabled: false)",
        ),
    ]


def _matrix_terms(design: bool, hint: str, row_by_row: bool = False) -> Callable[[Shape], list[Term]]:
    """A mechanism on an n × d matrix (d: the design width, one-hot nominal columns, for
    ``design``; else one coordinate per column): its copies (``MATRIX_COPIES`` floats a
    cell, ``COPULA_COPIES`` for a copula's scores), its d × d moments and their
    eigendecomposition (d³). ``row_by_row``: lda_ppd's greedy synthesis, a Python step per
    synthetic row and column (``lda_ppd.synthesize``)."""

    def terms(s: Shape) -> list[Term]:
        d = s.width if design else s.p
        copies = MATRIX_COPIES if design else COPULA_COPIES
        out = [
            Term(
                "schema" if design else "the input's rows (n)",
                copies * FLOAT * (s.resident_rows * d + d * d),
                MATRIX_SECONDS * (s.rows * d * d + d**3),
                hint,
            )
        ]
        if row_by_row:
            out.append(
                Term(
                    "synthetic_rows",
                    0.0,
                    s.synthetic * (GREEDY_SECONDS * s.p + MATRIX_SECONDS * 10 * d * d),
                    "lower synthetic_rows (lda_ppd draws each row by a greedy pass over its columns)",
                )
            )
        return out

    return terms


_DESIGN_HINT = (
    "the schema's nominal columns are one-hot coordinates of the design matrix: merge rare "
    "categories, or declare a wide column type: drop"
)
_COPULA_HINT = "use a streaming engine (engine.name: local), or fewer columns"


def _candidate_tables(s: Shape) -> list[int]:
    """The cells of each table a marginal mechanism may count (``workload``): every pair
    (and with aim's target, every triple with it), each at most ``MAX_TABLE`` cells. A pair
    over the cap is no candidate, but counting it keeps the bound monotone: a wider column
    never lowers the forecast."""
    p, cells = s.p, s.cells
    tables = [min(cells[i] * cells[j], MAX_TABLE) for i in range(p) for j in range(i + 1, p)]
    t = s.target
    if s.mechanism == "aim" and t is not None and getattr(s.params, "triples", True):
        others = [c for c in range(p) if c != t]
        tables += [
            min(cells[t] * cells[i] * cells[j], MAX_TABLE)
            for a, i in enumerate(others)
            for j in others[a + 1 :]
        ]
    return tables


def _marginal_terms(s: Shape) -> list[Term]:
    """``mst`` and ``aim`` on Private-PGM: JAX and mbi; the candidates' exact tables; rows
    as group codes (the n fitted rows, the m drawn, aim's ``SCORE_ROWS``·n scoring rows);
    the estimates, each iteration about ``ITERATION_SECONDS`` per maximal clique of the
    junction tree (at most p of them); for aim, every round weighs each candidate's
    junction tree (``graphical.model_size``, about ``TREE_SECONDS``·p² each), compiles an
    estimate and scores the candidates on rows drawn from the model, for at most
    ``rounds`` rounds (annealing often ends them sooner)."""
    p = s.p
    tables = _candidate_tables(s)
    counted = FLOAT * math.fsum(tables)
    synthetic = min(s.synthetic, s.chunk_rows) if s.streaming else s.synthetic
    coded = (s.resident_rows + synthetic) * p
    out = [
        Term(
            "mechanism",
            JAX_MEMORY + 2 * counted + GROUP_CELL_BYTES * coded,
            JAX_SECONDS
            + CELL_SECONDS * sum(s.cells)
            + SCORE_SECONDS * s.rows * len(tables)
            + GROUP_CELL_SECONDS * (s.rows + s.synthetic) * p,
            "use mechanism factor_gauss, or fewer columns",
        )
    ]
    if s.mechanism == "mst":
        iters = int(getattr(s.params, "iters", 1000))
        out.append(
            Term(
                "mechanism.params.iters",
                FLOAT * 4 * min(math.fsum(tables), p * MAX_TABLE),
                2 * COMPILE_SECONDS + iters * ITERATION_SECONDS * p + SCORE_SECONDS * p * math.fsum(tables),
                "lower mechanism.params.iters, or use fewer columns",
            )
        )
        return out
    rounds = int(getattr(s.params, "rounds", None) or 16 * p)
    batch = int(getattr(s.params, "batch", 1))
    round_iters = int(getattr(s.params, "round_iters", 100))
    iterations = math.ceil(rounds / batch) * round_iters + int(getattr(s.params, "iters", 1000))
    limit = float(getattr(s.params, "max_model_size", 80.0)) * 2**20
    model = min(limit, FLOAT * (sum(s.cells) + rounds * max(tables, default=0)))
    candidates = p + len(tables)
    scoring = min(10 * s.rows, 1_000_000)  # aim's SCORE_ROWS·n rows, drawn after each estimate
    estimates = math.ceil(rounds / batch)
    out.append(
        Term(
            "mechanism.params.rounds",
            4 * model + 3 * FLOAT * scoring * p,
            rounds * (candidates * TREE_SECONDS * p * p + COMPILE_SECONDS)
            + iterations * ITERATION_SECONDS * p
            + estimates * scoring * (SAMPLE_SECONDS * sum(s.cells) + GROUP_CELL_SECONDS / 10 * p)
            + rounds * scoring * candidates * SCORE_SECONDS,
            f"aim runs up to {rounds} rounds (16 per column unless params.rounds is set), each weighing "
            f"{candidates} candidate marginals: use fewer columns, set mechanism.params.rounds lower, or "
            "use mechanism mst or factor_gauss",
        )
    )
    return out


MECHANISM_TERMS: dict[str, Callable[[Shape], list[Term]]] = {
    "factor_gauss": _matrix_terms(False, _COPULA_HINT),
    "dpfm": _matrix_terms(False, _COPULA_HINT),
    "ron_gauss": _matrix_terms(True, _DESIGN_HINT),
    "private_pca": _matrix_terms(True, _DESIGN_HINT),
    "pcappd": _matrix_terms(True, _DESIGN_HINT),
    "lda_ppd": _matrix_terms(True, _DESIGN_HINT, row_by_row=True),
    "spectral_anonymization": _matrix_terms(True, _DESIGN_HINT),
    "mst": _marginal_terms,
    "aim": _marginal_terms,
}
"""Each mechanism's own terms (the names of ``mechanisms.registry.MECHANISMS``)."""


def _replicate_terms(s: Shape, mechanism: list[Term]) -> list[Term]:
    """The query intervals' replicates (``mechanisms.replicates``): ``replicates`` refits of
    the mechanism on n synthetic rows, one after another (its time each, its memory once),
    their declared cells kept (K × n × p, at most 2 bytes a cell), and ``held_out`` draws of
    n rows from the model without one table (each about a synthetic table's time: 12.2 s
    measured for the demo's 10 refits and 42 draws, 17 s counted). The flow builds none past
    ``MAX_CELLS`` cells; the term is counted there too, so that the bound never falls as n
    grows (it is then high by this term)."""
    if not s.replicates:
        return []
    cells = s.rows * s.p
    return [
        Term(
            "the query intervals' replicates",
            2.0 * s.replicates * cells + cells * SYNTHETIC_CELL_BYTES,
            s.replicates * math.fsum(t.seconds for t in mechanism)
            + (s.replicates + s.held_out) * cells * SYNTHETIC_CELL_SECONDS,
            "use fewer columns, or a streaming engine (engine.name: local: it builds no replicates, "
            "and its releases' queries that no table holds get bounds)",
        )
    ]


def need(shape: Shape, *, prefect: bool) -> Need:
    """The forecast of one phase: a release (``prefect``: under Prefect) or its rehearsal."""
    fixed = (
        BASE_MEMORY + (PREFECT_MEMORY if prefect else 0.0),
        BASE_SECONDS + (PREFECT_SECONDS if prefect else 0.0),
    )
    mechanism = MECHANISM_TERMS[shape.mechanism](shape)
    terms = _io_terms(shape) + mechanism + _replicate_terms(shape, mechanism)
    return Need(tuple(terms), prefect, shape.n is not None, fixed)
