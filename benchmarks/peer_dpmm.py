"""Fit and sample one dpmm 0.1.9 pipeline (AIM, MST or PrivBayes) on public-cell indices.

Runs in the PEER venv ``.venv-dpmm`` (dpmm pins numpy 1.26.4; ``benchmarks/peer_envs.sh`` makes
it), never in the project's: it imports only the standard library, numpy, pandas and dpmm.
``benchmarks/peer_run.py`` calls it as a subprocess::

    .venv-dpmm/bin/python benchmarks/peer_dpmm.py --algorithm aim --domain domain.json \\
        --train train_cells.csv --out syn_cells.csv --info info.json --epsilon 1 --delta 1e-6 \\
        --rho RHO --seed 0

Input: a CSV of cell indices (one column per schema column, integers 0..k-1) and a JSON
``{"columns": [...], "n_bins": [...]}`` of the public domain. Each column goes to dpmm as a
categorical column whose categories are declared (``domain={col: {"categories": [0..k-1]}}``),
so dpmm's ``TableBinner`` reads no category set from the data and bins nothing; the pipeline is
``{AIM,MST,PrivBayes}Pipeline(epsilon=ε, delta=δ, proc_epsilon=None, n_jobs=1)``: dpmm's
default ``proc_epsilon=0.1`` would be spent ON TOP of ε by its binner. AIM gets
``max_model_size=80`` (the AIM paper's setting; the pipeline's default is no limit), the other
settings are dpmm's defaults (AIM: 2-way workload of marginals of at most 10,000 cells, 16·d
rounds, 1,000 mirror-descent iterations per round; MST: 10,000; PrivBayes: degree 2, 5,000).

Asserted after the fit (exit 1 otherwise): no preprocessing ε spent by any column, no column
treated as numeric, dropped as constant or given a missing flag by the binner (each would be a
decision read from the data), the binner's cell counts the public ones, the generator's (ε, δ)
the ones given, and the ρ it spent within its own accounting: AIM's from its measurements (each
round spends 0.5/σ² measuring and, by its fixed 0.9/0.1 split, 1/9 of that selecting), MST's
three thirds, PrivBayes's measurement ρ for (ε/2, δ) beside its ε/2 pure-DP selection. Output:
the synthetic cells as CSV and a JSON with the times, the budget and the packages.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pandas as pd

AIM_MAX_MODEL_MB = 80
SELECT_SHARE_AIM = 0.1  # AIM's per-round split: 0.9 of a round's ρ measures, 0.1 selects


def pipeline(algorithm: str, eps: float, delta: float) -> Any:
    from dpmm.pipelines import AIMPipeline, MSTPipeline, PrivBayesPipeline

    cls = {"aim": AIMPipeline, "mst": MSTPipeline, "privbayes": PrivBayesPipeline}[algorithm]
    extra = {"max_model_size": AIM_MAX_MODEL_MB} if algorithm == "aim" else {}
    return cls(epsilon=eps, delta=delta, proc_epsilon=None, n_jobs=1, **extra)


def count_rounds(gen: Any, planned: int) -> None:
    """Print one ``round t/planned`` line per AIM round (read by the harness after a timeout)."""
    inner = gen.worst_approximated
    done = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        done[0] += 1
        print(f"round {done[0]}/{planned}", flush=True)
        return inner(*args, **kwargs)

    gen.worst_approximated = wrapped


def check_binner(proc: Any, columns: list[str], n_bins: list[int]) -> dict[str, Any]:
    """dpmm's binner made no data-derived decision and spent nothing; its spent ε per column."""
    spent = dict(proc.spent_epsilon)
    assert all(v in (None, 0, 0.0) for v in spent.values()), f"preprocessing ε spent: {spent}"
    assert not proc.num_cols, f"columns binned as numeric: {proc.num_cols}"
    assert not proc.static_columns, (
        f"columns dropped as constant (read from the data): {list(proc.static_columns)}"
    )
    assert not proc.nan_columns, f"missing flags added: {list(proc.nan_columns)}"
    assert proc.bin_domain == dict(zip(columns, n_bins, strict=True)), (
        "the binner's cells are not the public ones"
    )
    return {c: spent.get(c) for c in columns}


def rho_spent(algorithm: str, gen: Any, d: int) -> tuple[float, float]:
    """(ρ spent, ρ its accounting allows), from the fitted generator (module doc)."""
    from dpmm.models.base.mechanisms import cdp_rho

    if algorithm == "aim":
        sigmas = [m[2] for m in gen.measures]
        one_way, rounds = sigmas[:d], sigmas[d:]
        spent = sum(0.5 / s**2 for s in one_way)
        spent += sum(0.5 / s**2 for s in rounds) * (1 + SELECT_SHARE_AIM / (1 - SELECT_SHARE_AIM))
        return spent, gen.rho
    if algorithm == "mst":
        assert math.isclose(gen.sigma, math.sqrt(3 / (2 * gen.rho))), "MST's σ is not √(3/(2ρ))"
        assert len(gen.cliques) == 2 * d - 1, "MST measured more than the 1-way marginals and a tree"
        # 1-way and 2-way: unit-norm weights over the cliques, 1/(2σ²) each; selection: ρ/3 as coded.
        return 2 * 0.5 / gen.sigma**2 + gen.rho / 3, gen.rho
    limit = cdp_rho(gen.epsilon / 2, gen.delta)
    assert math.isclose(gen.rho, limit), "PrivBayes's measurement ρ is not cdp_rho(ε/2, δ)"
    return 0.5 / gen.sigma**2, limit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algorithm", choices=("aim", "mst", "privbayes"), required=True)
    parser.add_argument("--domain", type=Path, required=True, help='JSON {"columns": [...], "n_bins": [...]}')
    parser.add_argument("--train", type=Path, required=True, help="CSV of training cell indices")
    parser.add_argument("--out", type=Path, required=True, help="CSV of synthetic cell indices to write")
    parser.add_argument("--info", type=Path, required=True, help="JSON of times and budget to write")
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--rho", type=float, required=True, help="the project's ρ for (ε, δ), recorded")
    parser.add_argument("--seed", type=int, default=0, help="dpmm's RandomState (its noise is OpenDP's)")
    args = parser.parse_args(argv)

    t_import = time.perf_counter()
    from dpmm.models.base.mechanisms import cdp_rho

    pipe = pipeline(args.algorithm, args.epsilon, args.delta)
    import_s = time.perf_counter() - t_import
    domain = json.loads(args.domain.read_text())
    columns, n_bins = list(domain["columns"]), [int(k) for k in domain["n_bins"]]
    train = pd.read_csv(args.train, dtype="int64")
    if list(train.columns) != columns:
        raise SystemExit("the training CSV's header does not match the domain's columns")
    for c, k in zip(columns, n_bins, strict=True):
        if train[c].min() < 0 or train[c].max() >= k:
            raise SystemExit(f"column {c}: cell indices must lie in 0..{k - 1}")
    # Object columns of Python ints: categorical for dpmm, with the declared categories 0..k-1.
    df = pd.DataFrame({c: pd.Series(train[c].tolist(), dtype=object) for c in columns})
    public = {c: {"categories": list(range(k))} for c, k in zip(columns, n_bins, strict=True)}
    gen = pipe.gen.generator
    if args.algorithm == "aim":
        count_rounds(gen, 16 * len(columns))

    t0 = time.perf_counter()
    pipe.fit(df, domain=public, random_state=args.seed)
    fit_s = time.perf_counter() - t0
    preprocessing = check_binner(pipe.proc, columns, n_bins)
    assert (gen.epsilon, gen.delta) == (args.epsilon, args.delta), (
        "the generator's (ε, δ) is not the one given"
    )
    spent, limit = rho_spent(args.algorithm, gen, len(columns))
    t1 = time.perf_counter()
    sample = pipe.generate(n_records=len(train), random_state=args.seed + 1)
    sample_s = time.perf_counter() - t1

    out = sample[columns].astype("int64")
    if len(out) != len(train):
        raise SystemExit(f"dpmm returned {len(out)} rows, expected {len(train)}")
    for c, k in zip(columns, n_bins, strict=True):
        if out[c].min() < 0 or out[c].max() >= k:
            raise SystemExit(f"column {c}: dpmm returned a cell outside 0..{k - 1}")
    out.to_csv(args.out, index=False)
    info = {
        "algorithm": args.algorithm,
        "settings": {"max_model_size_mb": AIM_MAX_MODEL_MB} if args.algorithm == "aim" else {},
        "budget": {
            "epsilon": args.epsilon,
            "delta": args.delta,
            "proc_epsilon": pipe.proc.binner_settings.get("epsilon"),
            "preprocessing_epsilon": preprocessing,
            "rho_peer": float(cdp_rho(args.epsilon, args.delta)),
            "rho_limit": float(limit),
            "rho_spent": float(spent),
            "pure_epsilon_selection": args.epsilon / 2 if args.algorithm == "privbayes" else None,
            "rho_source": "dpmm.models.base.mechanisms.cdp_rho",
        },
        "cliques": [list(cl) for cl in gen.cliques],
        "seed": args.seed,
        "train_rows": len(train),
        "import_s": import_s,
        "fit_s": fit_s,
        "sample_s": sample_s,
        "total_s": fit_s + sample_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "python": sys.version.split()[0],
        "packages": {p: version(p) for p in ("dpmm", "opendp", "numpy", "pandas")},
    }
    args.info.write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
