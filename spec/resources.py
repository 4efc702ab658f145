"""The resource forecast of a release spec (``mechanisms.resources``): the peak memory and
time its rehearsal and its release would need, from public facts only, and the refusal of
a spec forecast above the ceilings (``resources:``, the command line's ``--max-memory`` and
``--max-seconds``), before the rehearsal and before any budget is reserved.

The ceilings: ``DPRELEASE_MAX_MEMORY_GB`` / ``DPRELEASE_MAX_SECONDS`` (set by the command
line's options), else the spec's ``resources.max_memory_gb`` / ``max_seconds``, else the
defaults: the smaller of ``DEFAULT_MEMORY_GB`` and ¾ of this machine's memory, and
``DEFAULT_SECONDS``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from dprelease.mechanisms.errors import ResourceRefused
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.replicates import LOO_TABLES, REHEARSAL, REPLICATES
from dprelease.mechanisms.resources import GB, Need, Shape, need
from dprelease.mechanisms.schema import Nominal
from dprelease.spec.release import ReleaseSpec, SpecError

__all__ = [
    "DEFAULT_MEMORY_GB",
    "DEFAULT_SECONDS",
    "MEMORY_ENV",
    "REHEARSAL_CHECK_ROWS",
    "SECONDS_ENV",
    "Ceilings",
    "ResourceForecast",
    "ResourceRefused",
    "ceilings",
    "check_resources",
    "forecast_resources",
    "rehearsal_rows",
    "shape_of",
]

DEFAULT_MEMORY_GB = 8.0
DEFAULT_SECONDS = 3600.0
MEMORY_ENV = "DPRELEASE_MAX_MEMORY_GB"
SECONDS_ENV = "DPRELEASE_MAX_SECONDS"
REHEARSAL_CHECK_ROWS = 200
"""The rows of each table the advisory checks see in a rehearsal (every column, not every cell)."""
_MIN_REHEARSAL_ROWS = 32


@dataclass(frozen=True)
class Ceilings:
    """The most memory (bytes) and time (seconds) a phase may be forecast to need, and
    where each came from (``--max-memory``, ``resources.max_memory_gb``, the default)."""

    memory: float
    seconds: float
    memory_from: str
    seconds_from: str


@dataclass(frozen=True)
class ResourceForecast:
    """The rehearsal's and the release's forecast needs (``mechanisms.resources.Need``)."""

    rehearsal: Need
    release: Need

    def lines(self) -> list[str]:
        """One line per phase, as ``dprelease validate`` shows them."""
        out = []
        for name, phase in (("rehearsal", self.rehearsal), ("release", self.release)):
            unknown = "" if phase.n_known else " (without the input's rows: n not counted yet)"
            out.append(
                f"{name}: at most about {_gb(phase.memory)} of memory and {_duration(phase.seconds)}{unknown}"
            )
        return out

    def as_dict(self) -> dict:
        return {
            name: {"memory": phase.memory, "seconds": phase.seconds, "n_known": phase.n_known}
            for name, phase in (("rehearsal", self.rehearsal), ("release", self.release))
        }


def _machine_memory() -> float:
    """This machine's physical memory in bytes (POSIX ``sysconf``)."""
    return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _override(env: str) -> float | None:
    text = os.environ.get(env)
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"{env} ({text!r}) must be a number > 0")
    return value


def ceilings(spec: ReleaseSpec) -> Ceilings:
    """The ceilings for ``spec`` (module docstring: the environment, the spec, the defaults)."""
    r = spec.resources
    memory_gb, memory_from = _override(MEMORY_ENV), "--max-memory"
    if memory_gb is None and r.max_memory_gb is not None:
        memory_gb, memory_from = r.max_memory_gb, "resources.max_memory_gb"
    if memory_gb is None:
        memory_gb = min(DEFAULT_MEMORY_GB, 0.75 * _machine_memory() / GB)
        memory_from = f"the default, the smaller of {DEFAULT_MEMORY_GB:g} GB and 3/4 of this machine's memory"
    seconds, seconds_from = _override(SECONDS_ENV), "--max-seconds"
    if seconds is None and r.max_seconds is not None:
        seconds, seconds_from = r.max_seconds, "resources.max_seconds"
    if seconds is None:
        seconds, seconds_from = DEFAULT_SECONDS, "the default"
    return Ceilings(memory_gb * GB, seconds, memory_from, seconds_from)


def rehearsal_rows(spec: ReleaseSpec) -> int:
    """The rehearsal table's row count: every cell of the widest column plus the two bound
    rows, enough fitted rows for the mechanism (``min_rows``) and a non-empty holdout."""
    schema = spec.public_schema()
    need_rows = MECHANISMS[spec.mechanism.name].min_rows(schema, spec.mechanism_params())
    rows = max(max(schema.n_bins) + 2, 2 * need_rows + 2, _MIN_REHEARSAL_ROWS)
    fraction = spec.checks.holdout_fraction
    if fraction:
        rows = max(rows, math.ceil(2 / fraction))
    return rows


def shape_of(spec: ReleaseSpec, n: int | None, *, rehearsal: bool) -> Shape:
    """The public facts of the release of ``spec`` on n fitted rows, or of its rehearsal
    (``flows.rehearsal``: its own table, the mechanism's ``rehearsal_params``, a streaming
    engine's chunks a third of the table, the checks on ``REHEARSAL_CHECK_ROWS`` rows)."""
    schema = spec.public_schema()
    synth = MECHANISMS[spec.mechanism.name]
    given = dict(spec.mechanism.params)
    m = spec.synthetic_rows
    chunk = spec.engine.chunk_rows
    check_rows = None if spec.checks.enabled else 0
    if rehearsal:
        n = rehearsal_rows(spec)
        given = {**given, **synth.rehearsal_params}
        m = None if m is None else min(m, n)
        chunk = max(1, n // 3)
        check_rows = min(n, REHEARSAL_CHECK_ROWS) if spec.checks.enabled else 0
    target = getattr(spec.mechanism_params(), "target", None)
    builds_none = not synth.leaves_out or spec.engine.streaming  # as ``flows.pipeline._replicates``
    return Shape(
        mechanism=synth.name,
        params=synth.params_type(**given),
        cells=tuple(schema.n_bins),
        nominal=tuple(isinstance(c, Nominal) for c in schema.columns),
        file_columns=len(spec.columns) + sum(len(c) - 1 for c, _ in spec.one_hot().values()),
        n=n,
        m=m,
        streaming=spec.engine.streaming,
        chunk_rows=chunk,
        check_rows=check_rows,
        target=None if target is None else schema.names.index(target),
        workers=(spec.engine.workers or 2)  # a LocalCluster's default (``engines.runners``)
        if spec.engine.name == "dask" and spec.engine.scheduler is None and not rehearsal
        else 0,
        replicates=0 if builds_none else (REHEARSAL[0] if rehearsal else REPLICATES),
        held_out=0 if builds_none else (REHEARSAL[1] if rehearsal else LOO_TABLES),
    )


def forecast_resources(spec: ReleaseSpec, n: int | None) -> ResourceForecast:
    """The forecast for ``spec`` (its mechanism named, not ``auto``) and n fitted rows (None:
    not counted yet; the release's terms in n are then left out and counted again once it is)."""
    return ResourceForecast(
        need(shape_of(spec, None, rehearsal=True), prefect=False),
        need(shape_of(spec, n, rehearsal=False), prefect=True),
    )


def check_resources(spec: ReleaseSpec, n: int | None = None) -> ResourceForecast:
    """Raise ``ResourceRefused`` when the rehearsal or the release is forecast above the
    ceilings (``ceilings``), naming the field that needs the most and what to do; else the
    forecast. ``n``: the fitted rows; None: the public count ``mechanism: auto`` chose on,
    if any (a count without parsing values, ``engines.inputs``, can be passed here)."""
    if n is None and spec.auto_choice is not None:
        n = spec.auto_choice.n_fitted
    ahead = forecast_resources(spec, n)
    limit = ceilings(spec)
    for name, phase in (("its rehearsal", ahead.rehearsal), ("the release", ahead.release)):
        if phase.memory > limit.memory:
            got, ceiling = _gb(phase.memory), _gb(limit.memory)
            _refuse(name, phase, "memory", got, ceiling, limit.memory_from, "max_memory_gb")
        if phase.seconds > limit.seconds:
            _refuse(
                name,
                phase,
                "seconds",
                _duration(phase.seconds),
                _duration(limit.seconds),
                limit.seconds_from,
                "max_seconds",
            )
    return ahead


def _refuse(name: str, phase: Need, what: str, got: str, ceiling: str, source: str, option: str) -> None:
    term = phase.driver(what)
    kind = "of memory" if what == "memory" else "of time"
    raise ResourceRefused(
        f"{term.field}: {name} would need about {got} {kind} (forecast, from public facts), above the "
        f"ceiling {ceiling} ({source}); {term.hint}, or raise resources.{option} (--max-"
        f"{'memory' if what == 'memory' else 'seconds'}) if this machine can give it. Nothing was read, "
        "reserved or spent"
    )


def _gb(b: float) -> str:
    for unit, size in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b / 2**20:.2g} MB"


def _duration(s: float) -> str:
    if s >= 86400:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 120:
        return f"{s / 60:.3g} min"
    return f"{s:.3g} s"
