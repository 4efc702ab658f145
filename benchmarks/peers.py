"""Item 5: ``factor_gauss`` beside smartnoise-synth's MST and AIM at ε = 1 on Adult.

An optional extra, not a runtime dependency. smartnoise-synth needs pandas < 3 (and
torch), so it lives in its own venv, created once with::

    python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.13.0 smartnoise-synth

(installing torch first takes the CPU wheel; a plain ``pip install smartnoise-synth``
pulls gigabytes of CUDA). Then, from the repository root::

    .venv/bin/python benchmarks/run.py --only peers

with ``--peer-python PATH`` if the peer venv is elsewhere. It stores the figures under
``results.json["peers"]`` and rewrites BENCHMARKS.md (``render/peers.py`` writes the section);
the other items keep their figures.

What runs, in this (the project's) venv: the fixed 80/20 split of ``common``, the
training rows as public-bin indices (``table_to_bins``); ``factor_gauss.SYNTHESIZER.fit`` in-process;
``benchmarks/peer_smartnoise.py`` under the peer venv's python for MST and AIM (same bins
as a CSV, the public domain as JSON; it returns synthetic bins and its own timings; AIM
is killed after ``--aim-timeout`` seconds). Every method's bins are then decoded with the
same ``bins_to_table`` and scored with the project's own checks
(``checks.reports``): real = the training 80 %, holdout/test = the 20 %.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from common import MEAN_RANGE, REPO, Adult, summary, timed
from threadpoolctl import threadpool_limits

from checks.reports import flat_metrics, linkage_report, utility_report
from engines.tables import bins_to_table, table_to_bins
from mechanisms import factor_gauss
from mechanisms.accounting import plan_budget
from mechanisms.factor_gauss import FactorGaussParams
from mechanisms.synthesizer import MixedRows

EPSILON = 1.0
DELTA = 1e-6
TARGET = "income"
DEFAULT_PEER_PYTHON = REPO / ".venv-peers" / "bin" / "python"
HELPER = Path(__file__).resolve().with_name("peer_smartnoise.py")
DEFAULT_SEEDS = 3
AIM_SEEDS = 1
DEFAULT_AIM_TIMEOUT_S = 1800.0
# Per-seed generators shared by every method, so that decoding and the checks' subsamples
# differ between methods only through the synthetic bins.
DECODE_SEED = 10_000
CHECK_SEED = 20_000
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
    "mst": "smartnoise-synth MST",
    "aim": "smartnoise-synth AIM",
    "resample": "reference: iid resample of the real 80 % (no privacy)",
}


def score(adult: Adult, syn_bins: np.ndarray, seed: int) -> dict[str, float | None]:
    """Decode the synthetic bins to values and compute the project's flat metrics.

    Single-threaded: the scores are the same, and on a shared machine OpenMP's spinning
    threads made the gradient-boosting checks several times slower (not timed anyway)."""
    with threadpool_limits(1):
        return _score(adult, syn_bins, seed)


def _score(adult: Adult, syn_bins: np.ndarray, seed: int) -> dict[str, float | None]:
    schema = adult.schema
    train, test = adult.split()
    train_bins, test_bins = table_to_bins(train, schema), table_to_bins(test, schema)
    synthetic = bins_to_table(syn_bins, schema, rng=np.random.default_rng(DECODE_SEED + seed))
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


def run_factor_gauss(adult: Adult, train_bins: np.ndarray, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """In-process fit; ``fit`` already samples m fresh rows of bins (no separate sample)."""
    params = FactorGaussParams()
    plan = plan_budget("zcdp", EPSILON, DELTA, factor_gauss.STAGE_WEIGHTS)
    rng = np.random.default_rng(seed)
    fitted, fit_s = timed(
        lambda: factor_gauss.SYNTHESIZER.fit(
            MixedRows(train_bins), adult.schema, plan, params, m=len(train_bins), rng=rng
        )
    )
    return fitted.rows.bins, {
        "status": "ok",
        "fit_s": fit_s,
        "sample_s": 0.0,
        "total_s": fit_s,
        "rho": plan.rho,
    }


def _aim_progress(log: str) -> dict[str, Any]:
    """From AIM's verbose log: rounds completed and the share of ρ used when it was killed."""
    rounds = [ln for ln in log.splitlines() if ln.startswith("Selected ")]
    used = None
    if rounds and "Budget Used" in rounds[-1]:
        used = float(rounds[-1].rsplit("Budget Used", 1)[1].split()[0])
    return {"rounds_done": len(rounds), "budget_used_share": used}


def run_smartnoise(
    peer_python: Path, synth: str, work: Path, seed: int, timeout_s: float | None
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """One fit + sample in the peer venv. Returns (bins or None, info); a run past
    ``timeout_s`` is killed (its whole process group) and reported as "timeout"."""
    out, info, log = (work / f"{synth}_{seed}{s}" for s in (".csv", ".json", ".log"))
    cmd = [
        str(peer_python),
        str(HELPER),
        "--synth",
        synth,
        "--domain",
        str(work / "domain.json"),
        "--train",
        str(work / "train_bins.csv"),
        "--out",
        str(out),
        "--info",
        str(info),
        "--epsilon",
        str(EPSILON),
        "--delta",
        str(DELTA),
        "--seed",
        str(seed),
    ]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    with log.open("w") as log_f:
        proc = subprocess.Popen(cmd, stdout=log_f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the helper's own process group (start_new_session)
            proc.wait()
            return None, {
                "status": "timeout",
                "timeout_s": timeout_s,
                "wall_s": time.perf_counter() - t0,
                **_aim_progress(log.read_text(errors="replace")),
            }
    wall_s = time.perf_counter() - t0
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        print(f"  {synth} seed {seed} failed (exit {rc}):\n    " + "\n    ".join(tail), flush=True)
        return None, {"status": "error", "exit_code": rc, "log_tail": tail, "wall_s": wall_s}
    result = json.loads(info.read_text())
    result.update(status="ok", wall_s=wall_s)
    bins = pd.read_csv(out, dtype="int64").to_numpy(dtype=np.int32)
    return bins, result


def run_resample(train_bins: np.ndarray, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The reference: n training rows drawn with replacement (sampling noise, no privacy)."""
    idx = np.random.default_rng(seed).integers(0, len(train_bins), len(train_bins))
    return train_bins[idx], {"status": "ok", "total_s": None}


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


def peers(adult: Adult, peer_python: Path, seeds: int, aim_timeout_s: float) -> dict[str, Any]:
    """Item 5's figures: per method, per seed, the fit + sample time and the flat metrics."""
    if not peer_python.is_file():
        raise SystemExit(
            f"peer python '{peer_python}' not found; create the peer venv with\n"
            "  python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.13.0 smartnoise-synth\n"
            "or pass --peer-python PATH"
        )
    schema = adult.schema
    train, test = adult.split()
    train_bins = table_to_bins(train, schema)
    methods: dict[str, list[dict[str, Any]]] = {k: [] for k in LABELS}
    peer_env: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-peers-") as tmp:
        work = Path(tmp)
        pd.DataFrame(train_bins, columns=schema.names).to_csv(work / "train_bins.csv", index=False)
        (work / "domain.json").write_text(json.dumps({"columns": schema.names, "n_bins": schema.n_bins}))
        plan: list[tuple[str, int, float | None]] = [("factor_gauss", s, None) for s in range(seeds)]
        plan += [("mst", s, None) for s in range(seeds)]
        plan += [("aim", s, aim_timeout_s) for s in range(min(seeds, AIM_SEEDS))]
        plan += [("resample", s, None) for s in range(seeds)]
        for name, seed, timeout_s in plan:
            print(f"  {name} seed {seed} ...", flush=True)
            if name == "factor_gauss":
                bins, info = run_factor_gauss(adult, train_bins, seed)
            elif name == "resample":
                bins, info = run_resample(train_bins, seed)
            else:
                bins, info = run_smartnoise(peer_python, name, work, seed, timeout_s)
                if info["status"] == "ok":
                    peer_env = {"python": info["python"], "packages": info["packages"]}
            run = {"seed": seed, **{k: v for k, v in info.items() if k not in ("python", "packages")}}
            if bins is not None:
                run["metrics"], run["score_s"] = timed(lambda bins=bins, seed=seed: score(adult, bins, seed))
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
        "seeds": seeds,
        "aim_timeout_s": aim_timeout_s,
        "peer_python": str(peer_python).replace(str(REPO) + "/", ""),
        "peer_env": peer_env,
        "methods": {k: {"label": LABELS[k], **_method(v)} for k, v in methods.items()},
    }
