"""Item 5: ``factor_gauss`` beside the maintained peers at ε = 1 on Adult: dpmm's AIM, MST and
PrivBayes and an MST on mbi 2.0 after the reference ``mst.py`` (``peer_run.py``).

An optional extra, not a runtime dependency: the peers live in their own venvs (dpmm pins
numpy 1.26), created once with::

    bash benchmarks/peer_envs.sh

Then, from the repository root::

    .venv/bin/python benchmarks/run.py --only peers [--peer-seeds N] [--aim-timeout S]

It stores the figures under ``results.json["peers"]`` and rewrites BENCHMARKS.md
(``render/peers.py`` writes the section); the other items keep their figures.

What runs, in this (the project's) venv: the fixed 80/20 split of ``common``;
``factor_gauss.FactorGauss().fit`` in-process on the demo spec's public bins (default params,
decoded by ``bins_to_table``); each peer through ``peer_run.run_peer`` in its venv on the
peers' public cells of the same spec (``peer_run.peer_schema``: 32 equal-width intervals or one
cell per integer, the declared atoms), its budget checked, its cells decoded by
``peer_run.decode``; dpmm AIM (``AIM_SEEDS`` seed) killed after ``--aim-timeout`` seconds.
Every synthetic table is then scored with the project's own checks (``checks.reports``):
real = the training 80 %, holdout/test = the 20 %; the reference resamples the real training
rows (sampling noise, no privacy).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from common import MEAN_RANGE, Adult, summary, timed
from peer_run import PEERS, TIMED_OUT, decode, peer_schema, require_venvs, run_peer, write_inputs
from threadpoolctl import threadpool_limits

from dprelease.checks.reports import flat_metrics, linkage_report, utility_report
from dprelease.engines.tables import bins_to_table, table_to_bins
from dprelease.mechanisms import factor_gauss
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.factor_gauss import FactorGaussParams
from dprelease.mechanisms.synthesizer import MixedRows

EPSILON = 1.0
DELTA = 1e-6
TARGET = "income"
DEFAULT_SEEDS = 2
AIM_SEEDS = 1
DEFAULT_AIM_TIMEOUT_S = 1800.0
# Per-seed generators shared by every method, so that decoding and the checks' subsamples
# differ between methods only through the synthetic rows.
DECODE_SEED = 10_000
CHECK_SEED = 20_000
PEER_SEED = 5_000
METRICS = (
    "tvd_1way",
    "tvd_2way",
    "corr_diff",
    "pmse",
    "tstr_auc",
    "trtr_auc",
    "exact_match_rate",
    "unique_exact_match_rate",
    "dcr_q05",
    "membership_share",
)
LABELS = {
    "factor_gauss": "dprelease factor_gauss (default params)",
    **{key: peer.label for key, peer in PEERS.items()},
    "resample": "reference: iid resample of the real 80 % (no privacy)",
}


def score(adult: Adult, synthetic: pd.DataFrame, seed: int) -> dict[str, float | None]:
    """The project's flat metrics of one decoded synthetic table.

    Single-threaded: the scores are the same, and on a shared machine OpenMP's spinning
    threads made the gradient-boosting checks several times slower (not timed anyway)."""
    with threadpool_limits(1):
        schema = adult.schema
        train, test = adult.split()
        train_bins, test_bins = table_to_bins(train, schema), table_to_bins(test, schema)
        # The released values seen through the public bins, as the release flow scores them.
        syn_rebinned = table_to_bins(synthetic, schema)
        rng = np.random.default_rng(CHECK_SEED + seed)
        utility = utility_report(
            train, train_bins, synthetic, syn_rebinned, schema, target=TARGET, real_test=test, rng=rng
        )
        linkage = linkage_report(
            train,
            train_bins,
            synthetic,
            syn_rebinned,
            schema,
            keeps_row_order=False,
            holdout=(test, test_bins),
            rng=rng,
        )
    flat = flat_metrics(utility, linkage)
    out = {k: flat.get(k) for k in METRICS if k != "trtr_auc"}
    out["trtr_auc"] = utility.get("tstr", {}).get("trtr")
    return out


def run_factor_gauss(adult: Adult, train_bins: np.ndarray, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """In-process fit (``fit`` already samples m fresh rows of bins), decoded by ``bins_to_table``."""
    params = FactorGaussParams()
    plan = plan_budget("zcdp", EPSILON, DELTA, factor_gauss.STAGE_WEIGHTS)
    rng = np.random.default_rng(seed)
    fitted, fit_s = timed(
        lambda: factor_gauss.FactorGauss().fit(
            MixedRows(train_bins), adult.schema, plan, params, m=len(train_bins), rng=rng
        )
    )
    synthetic = bins_to_table(fitted.rows.bins, adult.schema, rng=np.random.default_rng(DECODE_SEED + seed))
    return synthetic, {"status": "ok", "fit_s": fit_s, "sample_s": 0.0, "total_s": fit_s, "rho": plan.rho}


def run_resample(train: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The reference: n training rows drawn with replacement (sampling noise, no privacy)."""
    idx = np.random.default_rng(seed).integers(0, len(train), len(train))
    return train.iloc[idx].reset_index(drop=True), {"status": "ok", "total_s": None}


def _method(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["status"] == "ok"]
    block: dict[str, Any] = {"runs": runs, "seeds": [r["seed"] for r in runs], "completed": len(ok)}
    if ok:
        timed_runs = ok[0]["total_s"] is not None  # the resample reference has no time
        block["total_s"] = summary([r["total_s"] for r in ok], MEAN_RANGE) if timed_runs else None
        block["metrics"] = {
            k: summary([r["metrics"][k] for r in ok], MEAN_RANGE)
            if all(r["metrics"][k] is not None for r in ok)
            else None
            for k in METRICS
        }
    return block


def peers(adult: Adult, seeds: int, aim_timeout_s: float) -> dict[str, Any]:
    """Item 5's figures: per method, per seed, the fit + sample time, the budget and the flat metrics."""
    require_venvs(list(PEERS))
    schema = adult.schema
    train, test = adult.split()
    train_bins = table_to_bins(train, schema)
    cells, snaps = peer_schema(schema)
    methods: dict[str, list[dict[str, Any]]] = {k: [] for k in LABELS}
    peer_env: dict[str, Any] = {}
    plan: list[tuple[str, int]] = [("factor_gauss", s) for s in range(seeds)]
    plan += [(k, s) for k in PEERS for s in range(min(seeds, AIM_SEEDS) if k in TIMED_OUT else seeds)]
    plan += [("resample", s) for s in range(seeds)]
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-peers-") as tmp:
        work = Path(tmp)
        write_inputs(work, train, cells)
        for name, seed in plan:
            print(f"  {name} seed {seed} ...", flush=True)
            syn: pd.DataFrame | None
            if name == "factor_gauss":
                syn, info = run_factor_gauss(adult, train_bins, seed)
            elif name == "resample":
                syn, info = run_resample(train, seed)
            else:
                timeout = aim_timeout_s if name in TIMED_OUT else None
                out, info = run_peer(name, work, EPSILON, DELTA, PEER_SEED + seed, timeout)
                syn = (
                    None
                    if out is None
                    else decode(out, cells, snaps, np.random.default_rng(DECODE_SEED + seed))
                )
                if "packages" in info:
                    peer_env[PEERS[name].venv] = {
                        "python": info.pop("python"),
                        "packages": info.pop("packages"),
                    }
            run = {**info, "seed": seed, "peer_seed": info.get("seed")}  # info["seed"]: the peer's own
            if syn is not None:
                run["metrics"], run["score_s"] = timed(lambda syn=syn, seed=seed: score(adult, syn, seed))
                took = "" if run["total_s"] is None else f"fit + sample {run['total_s']:.1f} s; "
                print(
                    f"    {took}"
                    + ", ".join(f"{k} {v:.4f}" for k, v in run["metrics"].items() if v is not None),
                    flush=True,
                )
            else:
                print(f"    {info['status']} after {info['wall_s']:.0f} s", flush=True)
            methods[name].append(run)
    return {
        "epsilon": EPSILON,
        "delta": DELTA,
        "train_rows": len(train),
        "test_rows": len(test),
        "n_bins": dict(zip(schema.names, schema.n_bins, strict=True)),
        "peer_cells": dict(zip(cells.names, cells.n_bins, strict=True)),
        "seeds": seeds,
        "aim_timeout_s": aim_timeout_s,
        "peer_env": peer_env,
        "methods": {k: {"label": LABELS[k], **_method(v)} for k, v in methods.items()},
    }
