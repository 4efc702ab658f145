"""MST (McKenna, Miklau, Sheldon 2021: the NIST 2018 synthetic-data challenge winner, generalised)
on mbi 2.0, Private-PGM on JAX, fitted and sampled on public-cell indices.

Our own code, written after the reference ``mechanisms/mst.py`` of the ``ryan112358/mbi``
repository (mbi ships no mechanisms): the same algorithm and constants, with mbi 2.0's API
(``Domain.attributes``, ``Dataset.compress``/``decompress``, ``LinearMeasurement.compress``).
Runs in the PEER venv ``.venv-mbi`` (``benchmarks/peer_envs.sh``), never in the project's; it
imports only the standard library, numpy, pandas, scipy and mbi. ``benchmarks/peer_run.py``
calls it as a subprocess::

    .venv-mbi/bin/python benchmarks/peer_mbi.py --algorithm mst --domain domain.json \\
        --train train_cells.csv --out syn_cells.csv --info info.json --epsilon 1 --delta 1e-6 \\
        --rho RHO --seed 0

The ρ is the one given (the project's ``zcdp_rho(ε, δ)``: mbi ships no (ε, δ) → ρ conversion;
the reference's ``cdp2adp.cdp_rho`` is the one dpmm vendors, and dpmm's runs record that it
gives the same ρ). With σ = √(3 / (2ρ)) the three stages spend ρ/3 each:

1. every 1-way marginal measured with Gaussian noise, the d marginals sharing the stage
   equally (noise σ·√d each: d · 1/(2σ²d) = ρ/3);
2. cells whose noisy 1-way count is below 3 times its noise merged into one cell per column
   (post-processing), then a spanning tree of 2-way marginals chosen by d − 1 exponential
   mechanisms (each ε = √(8 (ρ/3) / (d − 1)), ε²/8-zCDP, so ρ/3 together) scoring each pair by
   the L1 distance between its counts and a Private-PGM model of the 1-way measurements
   (sensitivity 1 under add/remove-one, as in the reference);
3. the d − 1 tree marginals measured as in 1 (noise σ·√(d − 1) each), Private-PGM
   (``MirrorDescent``, 10,000 iterations) fitted to all measurements, n rows drawn from it,
   merged cells split again uniformly.

Noise and the selections draw from ``numpy.random.default_rng(seed)``; mbi's sampling draws
from numpy's global generator, seeded too. Output: the synthetic cells as CSV and a JSON with
the times, the budget and the packages.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import resource
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import DisjointSet
from scipy.special import logsumexp

SELECT_ITERS = 2500
FINAL_ITERS = 10_000
MERGE_BELOW_SD = 3.0


def measure(data: Any, cliques: list[tuple[str, ...]], sigma: float, rng: np.random.Generator) -> list[Any]:
    """Each clique's counts plus N(0, (σ√k)²) noise: k cliques share 1/(2σ²) of ρ."""
    from mbi import LinearMeasurement

    sd = sigma * math.sqrt(len(cliques))
    out = []
    for cl in cliques:
        x = np.asarray(data.project(cl).datavector(), dtype=float)
        out.append(LinearMeasurement(x + rng.normal(0.0, sd, x.size), cl, sd))
    return out


def merge_rare(data: Any, one_way: list[Any]) -> tuple[Any, list[Any], dict[str, np.ndarray]]:
    """Per column, the cells with a noisy count below ``MERGE_BELOW_SD`` noise sds merged into
    one (from the noisy counts only): the data, the measurements re-expressed, the mapping."""
    mapping = {}
    for m in one_way:
        keep = np.asarray(m.noisy_measurement) >= MERGE_BELOW_SD * m.stddev
        if not keep.all():
            mapping[m.clique[0]] = np.where(keep, np.cumsum(keep) - 1, keep.sum()).astype(np.int64)
    merged = [m.compress(mapping, data.domain) for m in one_way]
    return data.compress(mapping), merged, mapping


def exponential(scores: np.ndarray, eps: float, rng: np.random.Generator) -> int:
    """Index drawn with probability ∝ exp(ε·score / (2·Δ)), Δ = 1."""
    logits = 0.5 * eps * (scores - scores.max())
    return int(rng.choice(scores.size, p=np.exp(logits - logsumexp(logits))))


def select_tree(data: Any, rho: float, one_way: list[Any], rng: np.random.Generator) -> list[tuple[str, str]]:
    """d − 1 pairs forming a spanning tree, each by the exponential mechanism on the L1 error of
    a model of the 1-way measurements; the d − 1 choices spend ``rho`` together."""
    from mbi import estimation

    model = estimation.MirrorDescent().estimate(data.domain, one_way, iters=SELECT_ITERS)
    attrs = list(data.domain.attributes)
    pairs = list(itertools.combinations(attrs, 2))
    error = {
        p: float(np.abs(data.project(p).datavector() - np.asarray(model.project(p).datavector())).sum())
        for p in pairs
    }
    eps = math.sqrt(8 * rho / (len(attrs) - 1))
    tree, components = [], DisjointSet(attrs)
    for _ in range(len(attrs) - 1):
        open_pairs = [p for p in pairs if not components.connected(*p)]
        a, b = open_pairs[exponential(np.array([error[p] for p in open_pairs]), eps, rng)]
        components.merge(a, b)
        tree.append((a, b))
    return tree


def mst(data: Any, rho: float, rows: int, rng: np.random.Generator) -> tuple[Any, dict[str, Any]]:
    """The synthetic dataset (``rows`` rows) and what each stage spent (module doc)."""
    from mbi import estimation

    sigma = math.sqrt(3 / (2 * rho))
    d = len(data.domain)
    one_way = measure(data, [(a,) for a in data.domain.attributes], sigma, rng)
    merged_data, one_way, mapping = merge_rare(data, one_way)
    tree = select_tree(merged_data, rho / 3, one_way, rng)
    two_way = measure(merged_data, tree, sigma, rng)
    model = estimation.MirrorDescent().estimate(merged_data.domain, one_way + two_way, iters=FINAL_ITERS)
    synth = model.synthetic_data(rows=rows).decompress(mapping)
    eps_select = math.sqrt(8 * (rho / 3) / (d - 1))
    spent = {
        "one_way": d * 0.5 / (sigma * math.sqrt(d)) ** 2,
        "select": (d - 1) * eps_select**2 / 8,
        "two_way": (d - 1) * 0.5 / (sigma * math.sqrt(d - 1)) ** 2,
    }
    return synth, {"spent": spent, "tree": [list(e) for e in tree], "merged_columns": sorted(mapping)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algorithm", choices=("mst",), default="mst")
    parser.add_argument("--domain", type=Path, required=True, help='JSON {"columns": [...], "n_bins": [...]}')
    parser.add_argument("--train", type=Path, required=True, help="CSV of training cell indices")
    parser.add_argument("--out", type=Path, required=True, help="CSV of synthetic cell indices to write")
    parser.add_argument("--info", type=Path, required=True, help="JSON of times and budget to write")
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--rho", type=float, required=True, help="ρ for (ε, δ) (the project's zcdp_rho)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    t_import = time.perf_counter()
    from mbi import Dataset, Domain

    import_s = time.perf_counter() - t_import
    domain = json.loads(args.domain.read_text())
    columns, n_bins = list(domain["columns"]), [int(k) for k in domain["n_bins"]]
    train = pd.read_csv(args.train, dtype="int64")
    if list(train.columns) != columns:
        raise SystemExit("the training CSV's header does not match the domain's columns")
    for c, k in zip(columns, n_bins, strict=True):
        if train[c].min() < 0 or train[c].max() >= k:
            raise SystemExit(f"column {c}: cell indices must lie in 0..{k - 1}")
    data = Dataset({c: train[c].to_numpy() for c in columns}, Domain(columns, n_bins))
    np.random.seed(args.seed)  # noqa: NPY002 (mbi's sampling draws from the global generator)
    t0 = time.perf_counter()
    synth, fitted = mst(data, args.rho, len(train), np.random.default_rng(args.seed))
    total_s = time.perf_counter() - t0

    out = pd.DataFrame({c: np.asarray(synth.data[c], dtype=np.int64) for c in columns})
    if len(out) != len(train):
        raise SystemExit(f"mbi returned {len(out)} rows, expected {len(train)}")
    for c, k in zip(columns, n_bins, strict=True):
        if out[c].min() < 0 or out[c].max() >= k:
            raise SystemExit(f"column {c}: mbi returned a cell outside 0..{k - 1}")
    out.to_csv(args.out, index=False)
    spent = fitted.pop("spent")
    info = {
        "algorithm": "mst",
        "settings": {
            "select_iters": SELECT_ITERS,
            "final_iters": FINAL_ITERS,
            "merge_below_sd": MERGE_BELOW_SD,
        },
        "budget": {
            "epsilon": args.epsilon,
            "delta": args.delta,
            "proc_epsilon": None,
            "preprocessing_epsilon": {c: None for c in columns},
            "rho_peer": args.rho,
            "rho_limit": args.rho,
            "rho_spent": math.fsum(spent.values()),
            "rho_by_stage": spent,
            "pure_epsilon_selection": None,
            "rho_source": "given (the project's zcdp_rho): mbi ships no conversion",
        },
        **fitted,
        "seed": args.seed,
        "train_rows": len(train),
        "import_s": import_s,
        "fit_s": total_s,
        "sample_s": 0.0,
        "total_s": total_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "python": sys.version.split()[0],
        "packages": {p: version(p) for p in ("mbi", "jax", "numpy", "pandas")},
    }
    args.info.write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
