"""The wiring harness (privacy-testing note §2, "test the wiring, not only the formulas").

A brute-force test of a sensitivity *helper* cannot see a stage that passes half of it to
the noise, or divides by 2n instead of n. This harness runs a stage's own code path (the
Prefect tasks' bodies the flow calls) with the noise switched off and reads, for every
noisy statistic, the exact value the stage handed to the noise and the Δ it recorded.

``Probe`` stands in for ``mechanisms.primitives._perturb``, the one function through
which every DP noise draw passes. On a table D it records each exact statistic and
returns it (plus an optional fixed perturbation, so later stages see realistic "noisy"
inputs) as the release. On a neighbour D' it *replays* D's releases, so every later
statistic of D' is computed from the same earlier releases as D's: the conditional
sensitivity that adaptive composition needs. ``compare`` then gives, per statistic, the
change between D and D' in the norm the stage calibrated to, beside the recorded Δ.

``Replay`` checks the other half, post-processing isolation: it keeps the real noise, and
on a table D' of the same n returns D's releases instead, so ``replayed`` can compare the
synthetic tables (``flow_synthesis``, decode included): equal unless a step after the
noise reads the data itself (e.g. an exact table beside its noisy release).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pandas as pd
from prefect.logging import disable_run_logger

from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms import primitives
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.primitives import Measurement, noise_rngs, release_streams
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import MixedRows
from dprelease.tasks.synthesis import decode, encode, estimate_private_moments, project_and_sample

__all__ = [
    "Change",
    "Probe",
    "Replay",
    "compare",
    "flow_stages",
    "flow_synthesis",
    "norm",
    "probing",
    "recorded",
    "replayed",
    "rows_of",
    "worst",
]

REL = 1e-9  # floating-point slack on a bound: the change is computed, not exact
_PERTURB = primitives._perturb  # the real noise, for ``Replay``
_SELECT = primitives._select  # the real selection, for ``Replay``


class Probe:
    """A stand-in for ``primitives._perturb``: records each exact statistic and the noise
    (kind, scale) it was handed; returns the statistic (+ ``jitter(shape)``) or, with
    ``replay``, the outputs of an earlier probe in order."""

    def __init__(
        self,
        replay: list[np.ndarray] | None = None,
        jitter: Callable[[tuple[int, ...]], np.ndarray] | None = None,
    ) -> None:
        self.exact: list[np.ndarray] = []
        self.outputs: list[np.ndarray] = []
        self.noise: list[tuple[str, float]] = []
        self.replay, self.jitter = replay, jitter

    def __call__(self, value, kind, scale, sensitivity, share, rng) -> tuple[np.ndarray, float]:
        i = len(self.exact)
        self.exact.append(np.array(value, dtype=float, copy=True))
        self.noise.append((kind, scale))
        if self.replay is not None:
            if i >= len(self.replay) or self.replay[i].shape != np.shape(value):
                raise AssertionError(f"draw {i}: the neighbour measured a different statistic than D")
            out = np.array(self.replay[i], copy=True)
        else:
            out = np.array(value, dtype=float, copy=True)
            if self.jitter is not None:
                out = out + self.jitter(out.shape)
        if np.issubdtype(np.asarray(value).dtype, np.integer):
            out = np.rint(out).astype(np.asarray(value).dtype)
        self.outputs.append(out)
        return out, scale

    def select(self, scores, scale, sensitivity, rho, rng) -> tuple[np.ndarray, float]:
        """A stand-in for ``primitives._select``: records the exact scores and chooses the
        best one without noise (D) or D's choice (replay), so the neighbour's later stages see
        the same earlier releases."""
        i = len(self.exact)
        self.exact.append(np.array(scores, dtype=float, copy=True))
        self.noise.append(("exponential", scale))
        if self.replay is not None:
            if i >= len(self.replay) or self.replay[i].shape != (1,):
                raise AssertionError(f"draw {i}: the neighbour made a selection where D measured")
            out = np.array(self.replay[i], copy=True)
        else:
            out = np.array([int(np.argmax(scores))])
        self.outputs.append(out)
        return out, scale

    def exact_of(self, m: Measurement) -> np.ndarray:
        """The exact statistic behind measurement ``m`` (matched by its value object)."""
        for out, exact in zip(self.outputs, self.exact, strict=True):
            if out is m.value:
                return exact
        raise AssertionError(f"measurement {m.name} did not pass through primitives._perturb")


@contextmanager
def probing(probe: Probe) -> Iterator[Probe]:
    with (
        mock.patch.object(primitives, "_perturb", probe),
        mock.patch.object(primitives, "_select", probe.select),
    ):
        yield probe


def norm(x: np.ndarray, which: str) -> float:
    x = np.asarray(x, dtype=float).ravel()
    if which == "linf":
        return float(np.abs(x).max(initial=0.0))
    return float(np.abs(x).sum()) if which == "l1" else float(np.sqrt(np.sum(x * x)))


@dataclass(frozen=True)
class Change:
    """One statistic on a neighbouring pair: the recorded Δ and the observed change."""

    name: str
    stage: str
    norm: str
    recorded: float
    observed: float

    @property
    def within(self) -> bool:
        return self.observed <= self.recorded * (1 + REL) + 1e-12

    @property
    def ratio(self) -> float:
        return self.observed / self.recorded if self.recorded > 0 else math.inf


def compare(
    run: Callable[[object], list[Measurement]],
    d: object,
    d_prime: object,
    jitter: Callable[[tuple[int, ...]], np.ndarray] | None = None,
) -> list[Change]:
    """``run(table)`` → the measurements of the stages under test (same seed inside on
    both calls). D first, recording its releases; then D' replaying them."""
    with probing(Probe(jitter=jitter)) as a:
        ma = run(d)
    with probing(Probe(replay=a.outputs)) as b:
        mb = run(d_prime)
    if [(m.stage, m.name) for m in ma] != [(m.stage, m.name) for m in mb]:
        raise AssertionError("D and D' measured different statistics")
    out = []
    for x, y in zip(ma, mb, strict=True):
        if x.sensitivity != y.sensitivity:
            raise AssertionError(f"{x.name}: the recorded Δ differs between neighbours (n is public)")
        diff = b.exact_of(y) - a.exact_of(x)
        out.append(Change(x.name, x.stage, x.norm, x.sensitivity, norm(diff, x.norm)))
    return out


def worst(changes: list[list[Change]]) -> dict[str, Change]:
    """Per statistic, the change with the largest observed/recorded ratio over many pairs."""
    best: dict[str, Change] = {}
    for pair in changes:
        for c in pair:
            if c.name not in best or c.ratio > best[c.name].ratio:
                best[c.name] = c
    return best


def rows_of(table: pd.DataFrame, schema: Schema) -> MixedRows:
    """A validated table → the public numeric view the stages take (as the flow builds it)."""
    return table_to_rows(table, table_to_bins(table, schema), schema)


def flow_stages(
    mechanism: str, schema: Schema, plan: BudgetPlan, params: object, *, m: int | None = None, seed: int = 0
) -> Callable[[MixedRows], list[Measurement]]:
    """``run(rows)``: encode → estimate_private_moments → project_and_sample, the flow's
    own tasks (their bodies, without a Prefect server), with the flow's separate seeded
    streams; returns every measurement in order."""

    def run(rows: MixedRows) -> list[Measurement]:
        rngs = noise_rngs(seed, 7)
        with disable_run_logger():
            enc = encode.fn(mechanism, rows, schema, plan, params, rngs[0])
            est = estimate_private_moments.fn(mechanism, enc.state, plan, params, rngs[1])
            smp = project_and_sample.fn(mechanism, est.state, params, m or len(rows), rngs[2])
        return [*enc.measurements, *est.measurements, *smp.measurements]

    return run


# ---- post-processing isolation: the output is a function of the releases only ---------


class Replay:
    """A stand-in for ``primitives._perturb`` that draws the real noise (same ``rng``, so
    every generator advances exactly as without it) and records each release; with
    ``replay``, it still draws, but returns the i-th release of an earlier run instead.

    On D it records; on another table D' of the same n it replays D's releases. The noise
    drawn depends on the generator's state, the kind, the scale and the shape only, never
    on the value, so D' consumes the same random numbers as D: if every later step uses
    only the releases (post-processing), D' ends with D's output, bit for bit."""

    def __init__(self, replay: list[np.ndarray] | None = None) -> None:
        self.outputs: list[np.ndarray] = []
        self.replay = replay

    def select(self, scores, scale, sensitivity, rho, rng) -> tuple[np.ndarray, float]:
        """A stand-in for ``primitives._select``: the real selection (same draws), or, on D',
        D's choice in its place."""
        return self._replayed(*_SELECT(scores, scale, sensitivity, rho, rng))

    def __call__(self, value, kind, scale, sensitivity, share, rng) -> tuple[np.ndarray, float]:
        return self._replayed(*_PERTURB(value, kind, scale, sensitivity, share, rng))

    def _replayed(self, out: np.ndarray, used: float) -> tuple[np.ndarray, float]:
        if self.replay is not None:
            i = len(self.outputs)
            if i >= len(self.replay) or self.replay[i].shape != np.shape(out):
                raise AssertionError(
                    f"draw {i}: the run measured a different statistic than the replayed one"
                )
            out = np.array(self.replay[i], copy=True)
        self.outputs.append(out)
        return out, used


def recorded(
    run: Callable[[object], pd.DataFrame], table: object, replay: list[np.ndarray] | None = None
) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """``run(table)`` under a ``Replay`` (recording, or replaying ``replay``): its output
    and the releases it returned, in the order they were drawn."""
    probe = Replay(replay)
    with (
        mock.patch.object(primitives, "_perturb", probe),
        mock.patch.object(primitives, "_select", probe.select),
    ):
        out = run(table)
    if replay is not None and len(probe.outputs) != len(replay):
        raise AssertionError("the run measured a different number of statistics than the replayed one")
    return out, probe.outputs


def replayed(run: Callable[[object], pd.DataFrame], d: object, d_prime: object) -> tuple[pd.DataFrame, ...]:
    """``run(d)`` recording its releases, then ``run(d_prime)`` replaying them (the same
    seeds inside on both calls): the two outputs, equal iff the output of D' was computed
    from D's releases and public facts only. Refuses a run that released nothing."""
    out, releases = recorded(run, d)
    if not releases:
        raise AssertionError("the run released nothing: there is nothing to replay")
    out_prime, _ = recorded(run, d_prime, releases)
    return out, out_prime


def flow_synthesis(
    mechanism: str, schema: Schema, plan: BudgetPlan, params: object, *, m: int | None = None, seed: int = 0
) -> Callable[[MixedRows], pd.DataFrame]:
    """``run(rows)``: encode → estimate_private_moments → project_and_sample → decode, the
    flow's own tasks (their bodies, without a Prefect server), on the flow's named seeded
    streams (``release_streams``); returns the synthetic table."""

    def run(rows: MixedRows) -> pd.DataFrame:
        streams = release_streams(seed)
        with disable_run_logger():
            enc = encode.fn(mechanism, rows, schema, plan, params, streams.encode)
            est = estimate_private_moments.fn(mechanism, enc.state, plan, params, streams.estimate)
            smp = project_and_sample.fn(mechanism, est.state, params, m or len(rows), streams.sample)
            return decode.fn(mechanism, smp.state, schema, params, streams.decode)

    return run
