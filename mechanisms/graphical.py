"""Private-PGM for the marginal synthesizers (``mst``, ``aim``): noisy marginals in, a
graphical model out, fresh rows drawn from it. Everything here is post-processing of noisy
measurements: no function reads a confidential value.

The estimator is McKenna's maintained ``mbi`` package (2.x, on JAX): mirror descent over
the marginal polytope (McKenna, Sheldon, Miklau 2019, "Graphical-model based estimation and
inference for differential privacy", Alg. 1), each measurement weighted by the inverse of
its noise's standard deviation. One message pass then gives the count tables of the model's
junction-tree cliques, and everything after works on them in numpy: mbi compiles a new JAX
program for every marginal it is asked for outside its cliques, which made scoring AIM's
candidates (about a hundred per round) take minutes. mbi's own ``synthetic_data`` draws from
numpy's global generator; the rows here are drawn from the release's own generator instead
(``sample``), by ancestral sampling along the junction tree, so that a seeded run is
repeatable and two runs never share a global state.

A marginal's cells are the columns' public groups (``resolution.Cells``), flattened in
column order (the first column's index slowest), the same layout the tables are counted
in (``table_counts``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dprelease.mechanisms.primitives import Measurement

__all__ = [
    "ESTIMATION_ITERS",
    "SAMPLE_BLOCK",
    "SAMPLE_CELLS",
    "Marginal",
    "Model",
    "estimate",
    "marginal_of",
    "model_size",
    "sample",
    "table_counts",
]

ESTIMATION_ITERS = 1000
"""Mirror-descent iterations per estimate (mbi's default; a warm start needs fewer)."""
SAMPLE_BLOCK = 100_000
"""Rows drawn at once, at most."""
SAMPLE_CELLS = 1 << 22
"""Cells of the conditional CDFs a block of rows compares at once (rows × the column's
cells, 32 MB of float64): a column of 10,000 cells draws 419 rows at a time, not 100,000
(8 GB)."""


FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
"""XLA flags for mbi's programs: it compiles a few hundred small programs per fit, and
compiling them, not running them, was most of AIM's time. Without LLVM's optimisations the
same fits took a fifth to a third less CPU with the same figures (``benchmarks/aim_time.py``:
aim on Adult, 186 → 150 CPU s; ``tests/mechanisms/test_isolation.py``'s aim on 1,000 Adult
rows, 51 → 31 CPU s, the same synthetic table)."""


def _fast_compile() -> None:
    """Add ``FAST_COMPILE_FLAGS`` to ``XLA_FLAGS`` unless it sets them already (a user's
    choice wins). XLA reads the variable once, when JAX creates its CPU backend: a process
    that ran JAX before the first fit keeps its flags."""
    flags = os.environ.get("XLA_FLAGS", "")
    extra = [f for f in FAST_COMPILE_FLAGS if f.split("=")[0] not in flags]
    if extra:
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()


def _mbi() -> Any:
    """The ``mbi`` package, imported on first use (JAX is heavy), in float64: mbi warns that
    float32 can stall its estimation beyond 100k rows; XLA with ``FAST_COMPILE_FLAGS``."""
    _fast_compile()
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)  # mbi's advice: many small programs
    import mbi

    return mbi


@dataclass(frozen=True)
class Marginal:
    """A measured marginal: the columns it counts (indices, ascending) and its record."""

    columns: tuple[int, ...]
    measurement: Measurement

    @property
    def stddev(self) -> float:
        """The standard deviation of the noise on each cell: σ (Gaussian), √2·b (Laplace)."""
        m = self.measurement
        return m.scale if m.mechanism == "gaussian" else math.sqrt(2.0) * m.scale


def table_counts(
    groups: np.ndarray, tables: Sequence[tuple[int, ...]], sizes: Sequence[int]
) -> list[np.ndarray]:
    """The exact count table of each tuple of columns (ascending) over the columns' groups,
    flattened with the first column's group slowest: a sum over rows, so chunks can be
    counted apart and added."""
    out = []
    for columns in tables:
        shape = tuple(sizes[c] for c in columns)
        cells = np.ravel_multi_index(tuple(groups[:, c].astype(np.int64) for c in columns), shape)
        out.append(np.bincount(cells, minlength=math.prod(shape)))
    return out


@dataclass(frozen=True)
class Model:
    """A fitted graphical model: mbi's (for a warm start), the columns' sizes, and its
    junction tree's maximal cliques (column indices, ascending) with their count tables as
    numpy arrays, from which every marginal inside a clique and every sample is computed
    without another call to JAX; ``order`` is the order of ancestral sampling."""

    fitted: Any = field(repr=False)
    sizes: tuple[int, ...]
    cliques: tuple[tuple[int, ...], ...]
    tables: tuple[np.ndarray, ...] = field(repr=False)
    order: tuple[int, ...]

    def table(self, columns: Sequence[int]) -> np.ndarray | None:
        """The count table over ``columns`` (ascending) if one clique holds them, else None."""
        for clique, table in zip(self.cliques, self.tables, strict=True):
            if set(columns) <= set(clique):
                drop = tuple(k for k, c in enumerate(clique) if c not in columns)
                return table.sum(axis=drop) if drop else table
        return None


def estimate(
    names: Sequence[str],
    sizes: Sequence[int],
    marginals: Sequence[Marginal],
    n: int,
    *,
    warm_start: Model | None = None,
    iters: int = ESTIMATION_ITERS,
    last: bool = False,
) -> Model:
    """The graphical model that best fits the noisy ``marginals`` (mbi's ``MirrorDescent``),
    for the public total n; ``warm_start`` a previous model (its potentials are extended to
    the new cliques). Its junction tree's clique tables come from one message pass. ``last``:
    the fit's final model, after which JAX's compiled programs are dropped
    (``_free_jax_programs``). Post-processing."""
    mbi = _mbi()
    domain = mbi.Domain(tuple(names), tuple(int(k) for k in sizes))
    measurements = [
        mbi.LinearMeasurement(
            np.asarray(m.measurement.value, dtype=float),
            tuple(names[c] for c in m.columns),
            stddev=m.stddev,
        )
        for m in marginals
    ]
    estimator = mbi.estimation.MirrorDescent()
    fitted = estimator.estimate(
        domain,
        measurements,
        known_total=float(n),
        iters=iters,
        warm_start=None if warm_start is None else warm_start.fitted,
    )
    tree, order = mbi.junction_tree.make_junction_tree(domain, [tuple(c) for c in fitted.cliques])
    maximal = [tuple(c) for c in mbi.junction_tree.maximal_cliques(tree)]
    beliefs = mbi.marginal_oracles.message_passing_stable(fitted.potentials.expand(maximal), float(n))
    if last:
        _free_jax_programs()
    index = {a: j for j, a in enumerate(names)}
    cliques, tables = [], []
    for clique in maximal:
        columns = tuple(sorted(index[a] for a in clique))
        attrs = tuple(names[c] for c in columns)
        cliques.append(columns)
        tables.append(np.maximum(np.asarray(beliefs[clique].transpose(attrs).values, dtype=float), 0.0))
    return Model(
        fitted,
        tuple(int(k) for k in sizes),
        tuple(cliques),
        tuple(tables),
        tuple(index[a] for a in order[::-1]),
    )


def _free_jax_programs() -> None:
    """Drop JAX's compiled programs at the end of a fit. mbi compiles programs per set of
    cliques; kept across fits they filled XLA's code memory after a few fits in one process
    ("LLVM ERROR: Unable to allocate section memory", five AIM and MST fits in a row in
    ``benchmarks/quality.py``). Not after every round: a round reuses some of the programs
    of the one before, and dropping them doubled AIM's time."""
    import jax

    jax.clear_caches()


def marginal_of(
    model: Model, columns: Sequence[int], sample_rows: np.ndarray | None = None, n: int = 0
) -> np.ndarray:
    """The model's count table over ``columns`` (ascending), flattened as ``table_counts``:
    exact when one clique holds them, else counted in ``sample_rows`` (rows drawn from the
    model, ``sample``) and scaled to n. Post-processing."""
    exact = model.table(columns)
    if exact is not None:
        return exact.ravel()
    if sample_rows is None:
        raise ValueError(f"columns {tuple(columns)} are in no clique of the model: pass rows drawn from it")
    shape = [model.sizes[c] for c in columns]
    flat = np.ravel_multi_index(tuple(sample_rows[:, c] for c in columns), shape)
    return np.bincount(flat, minlength=math.prod(shape)) * (n / len(sample_rows))


def model_size(sizes: Sequence[int], cliques: Sequence[tuple[int, ...]]) -> float:
    """The size in MB of the junction tree a model over ``cliques`` (column indices) needs:
    8 bytes per cell of its maximal cliques (mbi's ``hypothetical_model_size``). Public:
    the groups' sizes and the chosen cliques."""
    mbi = _mbi()
    domain = mbi.Domain(tuple(str(j) for j in range(len(sizes))), tuple(int(k) for k in sizes))
    return float(
        mbi.junction_tree.hypothetical_model_size(domain, [tuple(str(c) for c in cl) for cl in cliques])
    )


def sample(model: Model, m: int, rng: np.random.Generator) -> np.ndarray:
    """m fresh rows of group indices (m, p) from the model: ancestral sampling along its
    junction tree (mbi's elimination order, reversed: each column given the columns drawn
    before it in a clique that holds it), from the clique tables, each row drawn from the
    release's generator, in blocks of at most ``SAMPLE_BLOCK`` rows and ``SAMPLE_CELLS``
    compared cells (the uniforms are drawn in order, so the block size changes no row)."""
    p = len(model.order)
    out = np.zeros((m, p), dtype=np.int64)
    drawn: list[int] = []
    for col in model.order:
        parents = tuple(sorted({c for clique in model.cliques if col in clique for c in clique} & set(drawn)))
        columns = tuple(sorted((*parents, col)))
        table = model.table(columns)
        assert table is not None  # the elimination order puts a column and its drawn neighbours in one clique
        table = np.moveaxis(table, columns.index(col), -1)  # parents first, in ascending order
        k = table.shape[-1]
        flat = table.reshape(-1, k)
        totals = flat.sum(axis=1, keepdims=True)
        cond = np.divide(flat, totals, out=np.full_like(flat, 1.0 / k), where=totals > 0)
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0
        keys = (
            np.ravel_multi_index(tuple(out[:, c] for c in parents), table.shape[:-1])
            if parents
            else np.zeros(m, dtype=np.int64)
        )
        rows = max(1, min(SAMPLE_BLOCK, SAMPLE_CELLS // k))
        for start in range(0, m, rows):
            block = slice(start, min(start + rows, m))
            u = rng.random(block.stop - block.start)
            out[block, col] = np.minimum((cdf[keys[block]] < u[:, None]).sum(axis=1), k - 1)
        drawn.append(col)
    return out
