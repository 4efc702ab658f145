"""Throughput of the noise samplers: numpy's textbook samplers (seeded runs) against OpenDP's
vetted ones (``VettedRNG``, the default for a release), in one process.

* Draws per second through the primitives a mechanism calls (``laplace_mechanism``,
  ``gaussian_mechanism``, ``discrete_laplace_noise``) at vector sizes 10, 1,000 and
  100,000, so OpenDP's per-call cost (building the measurement, checking its privacy map,
  converting the vector) is included. Each cell is the median per-call time over calls
  repeated until ``MIN_S`` seconds and ``MIN_CALLS`` calls; numpy and OpenDP of a cell are
  timed back to back.
* Raw OpenDP calls at a coarser noise lattice 2^k (not used by the product; for the reader
  weighing the option).
* A full ``factor_gauss.FactorGauss().fit`` on the embedded Adult training split (ε = 1, δ = 1e-6, zCDP,
  default weights) with each sampler: the cost in a real release.

``run(quick)`` returns the JSON-serialisable figures; ``render/sampler.py`` writes the section.
``.venv/bin/python benchmarks/bench_sampler.py [--quick]`` runs it and prints the section.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import numpy as np
from common import load_adult, load_avg, run_command

from dprelease.engines.tables import table_to_bins
from dprelease.mechanisms import factor_gauss
from dprelease.mechanisms import primitives as p
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.synthesizer import MixedRows

SIZES = (10, 1_000, 100_000)
KINDS = ("laplace", "gaussian", "discrete_laplace")
MIN_S = {False: 1.0, True: 0.3}
"""Seconds of calls per cell (at least)."""
MIN_CALLS = {False: 3, True: 1}
FIT_REPEATS = {False: 7, True: 3}
COARSE_K = -60
COARSE_SIZE = 1_000
EPSILON, DELTA = 1.0, 1e-6
SCALE = 2.0
"""Noise scale of the throughput cells: Laplace b (Δ₁ = 1, ε = 1/2), Gaussian σ (Δ₂ = 1,
ρ = 1/8), discrete Laplace σ."""


def _draw(kind: str, size: int, rng: np.random.Generator) -> Callable[[], Any]:
    x = np.zeros(size)
    if kind == "laplace":
        return lambda: p.laplace_mechanism(
            x, l1_sensitivity=1.0, epsilon=1 / SCALE, rng=rng, name="b", stage="b"
        )
    if kind == "gaussian":
        return lambda: p.gaussian_mechanism(
            x, l2_sensitivity=1.0, rho=1 / (2 * SCALE**2), rng=rng, name="b", stage="b"
        )
    return lambda: p.discrete_laplace_noise(SCALE, size, rng)


def _per_call(fn: Callable[[], Any], min_s: float, min_calls: int) -> dict[str, Any]:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "calls": len(times)}


def _coarse(kind: str, k: int, size: int, min_s: float, min_calls: int) -> dict[str, Any]:
    dp = p.opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    if kind == "laplace":
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=float), SCALE, k=k)
        fine = dp.m.make_laplace(domain, dp.l1_distance(T=float), SCALE)
    else:
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), SCALE, k=k)
        fine = dp.m.make_gaussian(domain, dp.l2_distance(T=float), SCALE)
    x = [0.0] * size
    out = {"kind": kind, "k": k, "size": size}
    for name, m in (("default", fine), ("coarse", meas)):
        r = _per_call(lambda m=m: m(x), min_s, min_calls)
        out[name] = {**r, "rate": size / r["median_s"]}
    # What the coarse lattice costs in privacy: OpenDP's map at Δ = 1 (rounding widens it).
    out["map_default"], out["map_coarse"] = fine.map(1.0), meas.map(1.0)
    return out


def _fits(quick: bool) -> dict[str, Any]:
    adult = load_adult()
    train, _ = adult.split()
    bins = table_to_bins(train, adult.schema)
    plan = plan_budget("zcdp", EPSILON, DELTA, adult.spec.stage_weights())
    params = adult.spec.mechanism_params()

    def fit(rng: np.random.Generator) -> tuple[float, int]:
        t0 = time.perf_counter()
        rel = factor_gauss.FactorGauss().fit(
            MixedRows(bins), adult.schema, plan, params, m=len(bins), rng=rng
        )
        return time.perf_counter() - t0, sum(int(np.size(m.value)) for m in rel.measurements)

    fit(np.random.default_rng(10_000))  # warm-up (OpenDP is already loaded by then)
    fit(p.noise_rngs(None, 1)[0])
    out: dict[str, Any] = {"rows": len(bins), "numpy": [], "opendp": []}
    for seed in range(FIT_REPEATS[quick]):  # alternate, so load drift hits both alike
        s, values = fit(np.random.default_rng(seed))
        out["numpy"].append(s)
        s, _ = fit(p.noise_rngs(None, 1)[0])
        out["opendp"].append(s)
    out["noisy_values"] = values
    return out


def run(quick: bool = False) -> dict[str, Any]:
    t_start = time.perf_counter()
    load_start = load_avg()
    t0 = time.perf_counter()
    p.opendp()
    import_s = time.perf_counter() - t0
    min_s, min_calls = MIN_S[quick], MIN_CALLS[quick]
    cells = []
    for kind in KINDS:
        for size in SIZES:
            cell: dict[str, Any] = {"kind": kind, "size": size}
            for name, rng in (("numpy", np.random.default_rng(0)), ("opendp", p.noise_rngs(None, 1)[0])):
                r = _per_call(_draw(kind, size, rng), min_s, min_calls)
                cell[name] = {**r, "rate": size / r["median_s"]}
            cell["ratio"] = cell["numpy"]["rate"] / cell["opendp"]["rate"]
            print(
                f"  {kind} {size:>7,}: numpy {cell['numpy']['rate']:.3g}/s, "
                f"OpenDP {cell['opendp']['rate']:.3g}/s",
                flush=True,
            )
            cells.append(cell)
    coarse = [_coarse(kind, COARSE_K, COARSE_SIZE, min_s, min_calls) for kind in ("laplace", "gaussian")]
    fits = _fits(quick)
    return {
        "command": run_command("sampler", quick),
        "quick": quick,
        "opendp": version("opendp"),
        "numpy": version("numpy"),
        "scale": SCALE,
        "import_s": import_s,
        "cells": cells,
        "coarse": coarse,
        "fits": fits,
        "load_avg_1m": {"start": load_start, "end": load_avg()},
        "wall_s": time.perf_counter() - t_start,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("sampler", run))
