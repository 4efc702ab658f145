"""Fit and sample one smartnoise-synth synthesizer on public-bin indices (item 5's helper).

Runs in the PEER venv (smartnoise-synth needs pandas < 3), never in the project's: it
imports only the standard library, numpy, pandas and snsynth. ``benchmarks/peers.py``
calls it as a subprocess::

    .venv-peers/bin/python benchmarks/peer_smartnoise.py --synth mst --domain domain.json \\
        --train train_bins.csv --out syn_bins.csv --info info.json --seed 0

Input: a CSV of bin indices (one column per schema column, integers 0..k-1) and a JSON
``{"columns": [...], "n_bins": [...]}`` of the public domain. The synthesizer gets a
``TableTransformer`` of ``LabelTransformer(nullable=False)`` fitted on a frame built from
that public domain alone (every category 0..k-1 of every column), so snsynth never reads
a category set from the data; ``preprocessor_eps=0`` (nothing is spent on preprocessing,
the transformer is already fitted). Output: the synthetic bins as CSV and a JSON with the
fit and sample times and what was given to the synthesizer.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def public_transformer(columns: list[str], n_bins: list[int]) -> Any:
    """A fitted ``TableTransformer`` whose category sets are exactly 0..k-1 per column,
    learnt from a frame that holds only public information (no data row)."""
    from snsynth.transform import LabelTransformer, TableTransformer

    rows = max(n_bins)
    public = pd.DataFrame({c: np.arange(rows) % k for c, k in zip(columns, n_bins, strict=True)})
    tt = TableTransformer([LabelTransformer(nullable=False) for _ in columns])
    tt.fit(public, epsilon=0.0)
    for t, k in zip(tt.transformers, n_bins, strict=True):
        # LabelTransformer sorts integer labels: category i must map to code i.
        if list(t.categories) != list(range(k)) or any(t.labels[i] != i for i in range(k)):
            raise RuntimeError("the public LabelTransformer is not the identity on 0..k-1")
    if tt.cardinality != list(n_bins) or not tt.fit_complete:
        raise RuntimeError("the public TableTransformer does not have the public cardinalities")
    return tt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--synth", choices=("mst", "aim"), required=True)
    parser.add_argument("--domain", type=Path, required=True, help='JSON {"columns": [...], "n_bins": [...]}')
    parser.add_argument("--train", type=Path, required=True, help="CSV of training bin indices")
    parser.add_argument("--out", type=Path, required=True, help="CSV of synthetic bin indices to write")
    parser.add_argument("--info", type=Path, required=True, help="JSON of timings to write")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0, help="seeds numpy's global generator")
    parser.add_argument("--rows", type=int, default=None, help="rows to sample (default: as many as --train)")
    args = parser.parse_args(argv)

    t_import = time.perf_counter()
    from snsynth import Synthesizer
    from snsynth.utils import cdp_rho

    import_s = time.perf_counter() - t_import
    domain = json.loads(args.domain.read_text())
    columns, n_bins = list(domain["columns"]), [int(k) for k in domain["n_bins"]]
    train = pd.read_csv(args.train, dtype="int64")
    if list(train.columns) != columns:
        raise SystemExit("the training CSV's header does not match the domain's columns")
    for c, k in zip(columns, n_bins, strict=True):
        if train[c].min() < 0 or train[c].max() >= k:
            raise SystemExit(f"column {c}: bin indices must lie in 0..{k - 1}")
    rows = len(train) if args.rows is None else args.rows
    transformer = public_transformer(columns, n_bins)

    # smartnoise draws its Gaussian noise through OpenDP (an unseedable CSPRNG); numpy's
    # global generator drives selection, domain compression and sampling.
    np.random.seed(args.seed)  # noqa: NPY002 (snsynth and mbi draw from the global generator)
    # verbose only prints progress (AIM: one line per round, which peers.py reads after a timeout).
    synth = Synthesizer.create(args.synth, epsilon=args.epsilon, delta=args.delta, verbose=True)
    t0 = time.perf_counter()
    synth.fit(train, transformer=transformer, preprocessor_eps=0.0)
    fit_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    sample = synth.sample(rows)
    sample_s = time.perf_counter() - t1

    out = pd.DataFrame(sample, columns=columns).astype("int64")
    if len(out) != rows:
        raise SystemExit(f"the synthesizer returned {len(out)} rows, expected {rows}")
    for c, k in zip(columns, n_bins, strict=True):
        if out[c].min() < 0 or out[c].max() >= k:
            raise SystemExit(f"column {c}: the synthesizer returned a bin outside 0..{k - 1}")
    out.to_csv(args.out, index=False)
    info = {
        "synth": args.synth,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "rho": float(cdp_rho(args.epsilon, args.delta)),
        "epsilon_left_for_training": float(synth.epsilon),  # unchanged: nothing spent on preprocessing
        "seed": args.seed,
        "train_rows": len(train),
        "rows": rows,
        "import_s": import_s,
        "fit_s": fit_s,
        "sample_s": sample_s,
        "total_s": fit_s + sample_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "python": sys.version.split()[0],
        "packages": {p: version(p) for p in ("smartnoise-synth", "mbi", "jax", "opendp", "numpy", "pandas")},
    }
    args.info.write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
