"""Issue 16: do the refine stage's public constants leave easy gains at ε = 1 on Adult?

Runs item 15's judge (``quality.py``, Adult, ε = 1, factor_gauss only) with 6 seeds and
reports the mean over seeds 2–5 — seeds the published §15 figures (seeds 0–1) do not use, so
the scan does not tune on the reported numbers. Each variant changes one constant of
``mechanisms.refine`` / ``mechanisms.factor_gauss`` in this process only:

* ``base``: as shipped;
* ``allpairs``: a table for every pair of the other columns (continuous ones too), 105 on Adult;
* ``refine=R``: the refine stage's weight R (marginals and moments keep their 0.6 : 0.4 ratio);
* ``target_share=S``: the target's tables' share of the stage;
* ``floor=F``: ``MODEL_FLOOR``.

    .venv/bin/python benchmarks/refine_knobs.py [VARIANT ...]

About a minute per variant on 2 cores. Not part of ``make bench``.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys

import numpy as np
import quality

import mechanisms.factor_gauss as fg
import mechanisms.refine as refine

DEFAULT = [
    "base",
    "allpairs",
    "refine=0.4",
    "refine=0.5",
    "target_share=0.5",
    "target_share=0.8",
    "floor=0.05",
]
JUDGE = ["--tables", "adult", "--epsilons", "1", "--seeds", "6", "--methods", "factor_gauss", "--no-peers"]
LINE = re.compile(
    r"factor_gauss\s+seed (\d+):.*tvd_2way ([\d.]+), assoc_diff ([\d.]+), tstr_auc ([\d.]+), pmse ([\d.]+)"
)


def _every_pair(schema, target: int) -> list[tuple[int, int]]:
    others = [j for j in range(len(schema)) if j != target]
    return [(j, target) for j in others] + [(i, j) for a, i in enumerate(others) for j in others[a + 1 :]]


def apply(variant: str) -> None:
    name, _, value = variant.partition("=")
    if name == "allpairs":
        refine.table_pairs = fg.table_pairs = _every_pair
    elif name == "refine":
        r = float(value)
        fg.REFINE_WEIGHTS.update({"marginals": (1 - r) * 0.6, "moments": (1 - r) * 0.4, "refine": r})
    elif name == "target_share":
        refine.TARGET_SHARE = float(value)
    elif name == "floor":
        refine.MODEL_FLOOR = float(value)
    elif name != "base":
        raise SystemExit(f"unknown variant {variant!r}")


def held_out(variant: str) -> np.ndarray:
    """Mean 2-way TVD, association difference, TSTR AUC and pMSE over seeds 2–5."""
    apply(variant)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        quality.main(JUDGE)
    rows = [
        [float(m.group(k)) for k in range(2, 6)]
        for m in map(LINE.search, out.getvalue().splitlines())
        if m and int(m.group(1)) >= 2
    ]
    return np.mean(rows, axis=0)


def main(argv: list[str]) -> int:
    """Each variant runs in a child process, so that its patches never reach the next."""
    variants = argv or DEFAULT
    if len(variants) == 1:
        two, assoc, tstr, pmse = held_out(variants[0])
        print(f"| {variants[0]} | {two:.4f} | {assoc:.4f} | {tstr:.4f} | {pmse:.4f} |")
        return 0
    print("| variant | 2-way TVD | assoc. diff | TSTR AUC | pMSE |\n|---|---:|---:|---:|---:|")
    for v in variants:
        done = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
