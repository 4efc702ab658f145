"""aim's CPU time on Adult with XLA's default compiler options against the product's
``graphical.FAST_COMPILE_FLAGS`` (issue 40), each in a fresh process (XLA reads its flags once).

    .venv/bin/python benchmarks/aim_time.py [--epsilon 1] [--seed 0]

Prints, per setting, the CPU seconds of the fit + sample (``time.process_time`` around
``quality.fit_mechanism``: aim with the demo spec's target and ``batch: 4``, as ``mechanism:
auto`` runs it) and the judge's six figures (``benchmarks/quality.py``), then the ratio of the
CPU times. Run the two one after the other on the same machine: a ratio, not the seconds,
carries over to another machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
XLA_DEFAULTS = "--xla_backend_optimization_level=3 --xla_llvm_disable_expensive_passes=false"
"""XLA's own defaults (``DefaultDebugOptionsIgnoringFlags``), given explicitly so that the
product's flags, which yield to a user's, are not added."""
FIGURES = ("tvd_1way", "tvd_2way", "assoc_diff", "tstr_auc", "pmse", "pmse_cells")


def one(epsilon: float, seed: int) -> dict[str, float]:
    """One fit in this process: its CPU seconds and the judge's figures."""
    sys.path.insert(0, str(HERE))
    from quality import Judge, Method, _references, fit_mechanism, load_table

    table = load_table("adult")
    judge = Judge.build(table)
    uniform, _ = _references(table, judge, "adult")
    spec, why = table.spec_for(Method("aim", mechanism="aim", extra={"batch": 4}))
    if spec is None:
        raise SystemExit(f"aim does not run the demo spec: {why}")
    cpu = time.process_time()
    syn, _ = fit_mechanism(spec, judge.train, epsilon, (0, 1, seed))
    cpu = time.process_time() - cpu
    figures = judge.score(syn, seed, uniform["tvd_1way_per_column"])
    return {"cpu_s": round(cpu, 1), **{k: round(figures[k], 4) for k in FIGURES}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.epsilon, args.seed)))
        return 0
    rows = {}
    for name, flags in (("XLA defaults", XLA_DEFAULTS), ("FAST_COMPILE_FLAGS", None)):
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        if flags is not None:
            env["XLA_FLAGS"] = flags
        cmd = [sys.executable, __file__, "--one", "--epsilon", str(args.epsilon), "--seed", str(args.seed)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        rows[name] = json.loads(out.strip().splitlines()[-1])
        print(f"{name:<20} " + ", ".join(f"{k} {v}" for k, v in rows[name].items()), flush=True)
    ratio = rows["FAST_COMPILE_FLAGS"]["cpu_s"] / rows["XLA defaults"]["cpu_s"]
    print(f"CPU time with FAST_COMPILE_FLAGS / with XLA's defaults: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
