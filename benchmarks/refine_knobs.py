"""Issue 16: do the refine stage's public constants leave easy gains at ε = 1 on Adult, and
where does the remaining error come from?

Runs item 15's judge (``quality.py``, Adult, ε = 1, factor_gauss only) with 6 seeds and
reports the mean over seeds 2–5 — seeds the published §15 figures (seeds 0–1) do not use, so
the scan does not tune on the reported numbers. Each variant changes one thing in this
process only:

* ``base``: as shipped;
* ``even``: the other categorical pairs' share split evenly (before: in proportion to
  K_t^(1/3), ``refine.table_parts``);
* ``allpairs``: a table for every pair of the other columns (continuous ones too), 105 on Adult;
* ``refine=R``: the refine stage's weight R (marginals and moments keep their 0.6 : 0.4 ratio);
* ``target_share=S``: the target's tables' share of the stage;
* ``floor=F``: ``MODEL_FLOOR``;
* ``noiseless=PART``, PART one of ``first`` (stages 1–2), ``marginals`` (stage 1), ``moments``
  (stage 2), ``target`` (the target's tables), ``extra`` (the other pairs), ``refine`` (every
  table): that part's noise scaled by 1e-4 (not DP: an ablation that shows what each part's
  noise costs);
* ``row_norm=C``: the default row bound B = C·√p instead of √p (moment noise ∝ B², more rows
  scaled down);
* ``select=K``: instead of every categorical pair, K of them chosen privately as AIM does
  (exponential mechanism, Gumbel-max, ε_s = 0.03 each, score ‖c_t − n·p̂_t‖₁ − √(2/π)·σ·K_t
  against the copula's own table p̂_t, Δ = 2 under replace-one), charged ε_s²/8 each
  (bounded range) out of the pairs' share, the rest measured evenly over the K tables.

    .venv/bin/python benchmarks/refine_knobs.py [VARIANT ...] [--table NAME] [--epsilon E]

About a minute per variant on 2 cores. Not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import re
import subprocess
import sys

import numpy as np
import quality

import dprelease.mechanisms.factor_gauss as fg
import dprelease.mechanisms.refine as refine
from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.synthesizer import Stage

DEFAULT = [
    "base",
    "even",
    "allpairs",
    "refine=0.4",
    "refine=0.5",
    "target_share=0.5",
    "target_share=0.8",
    "floor=0.05",
    "noiseless=first",
    "noiseless=marginals",
    "noiseless=moments",
    "noiseless=target",
    "noiseless=extra",
    "noiseless=refine",
    "select=6",
    "select=15",
    "row_norm=0.65",
    "row_norm=0.4",
]
SELECT_EPSILON = 0.03
JUDGE = ["--seeds", "6", "--methods", "factor_gauss", "--no-peers"]
LINE = re.compile(
    r"factor_gauss\s+seed (\d+):.*tvd_1way ([\d.]+), tvd_2way ([\d.]+), assoc_diff ([\d.]+), "
    r"tstr_auc ([\d.]+), pmse ([\d.]+)"
)


def _every_pair(schema, target: int) -> list[tuple[int, int]]:
    others = [j for j in range(len(schema)) if j != target]
    return [(j, target) for j in others] + [(i, j) for a, i in enumerate(others) for j in others[a + 1 :]]


def _even(budget: StageBudget, tables, target: int, sizes) -> list[StageBudget]:
    return SHIPPED_SHARES(budget, tables, target, [1] * len(sizes))


SHIPPED_SHARES = refine.table_parts
SHIPPED_MEASURE = refine.measure_stage


def _noiseless(part: str) -> None:
    """Scale the chosen part's noise by 1e-4 (its ρ by 1e8)."""

    def louder(budget: StageBudget) -> StageBudget:
        return dataclasses.replace(budget, rho=budget.rho * 1e8)

    def table_noise(value, share, **kw):
        is_target = kw["name"].endswith(",income]")
        wanted = part == "refine" or (part == "target") == is_target
        return SHIPPED_MEASURE(value, louder(share) if wanted else share, **kw)

    encode, moments = fg.encode, fg.measure_moments
    if part in ("first", "marginals"):
        fg.encode = lambda rows, schema, budget, *a, **kw: encode(rows, schema, louder(budget), *a, **kw)
    if part in ("first", "moments"):
        fg.measure_moments = lambda z, bound, budget, **kw: moments(z, bound, louder(budget), **kw)
    if part in ("target", "extra", "refine"):
        refine.measure_stage = table_noise


def _select(k: int) -> None:
    """AIM-style private choice of k categorical pairs against the copula's own tables."""

    def estimate(encoded, plan, params, rng):
        moments = fg.measure_moments(encoded.z, encoded.bound, plan.stage("moments"), rng=rng)
        code, n, counts = encoded.code, encoded.z.shape[0], list(encoded.pair_counts)
        pairs, rho = code.pairs, plan.stage("refine").rho
        corr, _ = fg.latent_model(moments, code, params)
        draws = code.cells.fine(fg.from_latent(fg.sample_latent(corr, n, rng=rng), code.latent), rng)
        model = refine.pair_counts(draws, pairs)
        target = [t for t, p in enumerate(pairs.tables) if pairs.target in p]
        left = [t for t, p in enumerate(pairs.tables) if pairs.target not in p]
        rho_each = ((1 - refine.TARGET_SHARE) * rho - k * SELECT_EPSILON**2 / 8) / k
        sigma = np.sqrt(2) / np.sqrt(2 * rho_each)
        chosen = []
        for _ in range(k):
            penalty = np.sqrt(2 / np.pi) * sigma
            score = [np.abs(counts[t] - model[t]).sum() - penalty * model[t].size for t in left]
            noisy = np.asarray(score) + rng.gumbel(size=len(left)) * 2 * 2 / SELECT_EPSILON
            chosen.append(left.pop(int(np.argmax(noisy))))
        keep = target + chosen
        kept = dataclasses.replace(pairs, tables=tuple(pairs.tables[t] for t in keep))
        shares = [refine.TARGET_SHARE * rho / len(target)] * len(target) + [rho_each] * k
        tables = tuple(
            refine.measure_stage(
                counts[t],
                StageBudget("refine", 0.0, r * (1 - 1e-12), None),
                l2_sensitivity=histogram_sensitivity("l2"),
                l1_sensitivity=histogram_sensitivity("l1"),
                rng=rng,
                name=name,
            )
            for t, r, name in zip(keep, shares, kept.table_names, strict=True)
        )
        return Stage((moments, dataclasses.replace(code, pairs=kept), (tables, n)), (moments, *tables))

    object.__setattr__(MECHANISMS["factor_gauss"], "estimate", estimate)  # the instance quality.py runs


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
    elif name == "even":
        refine.table_parts = _even
    elif name == "noiseless":
        _noiseless(value)
    elif name == "select":
        _select(int(value))
    elif name == "row_norm":
        c, default = float(value), fg.FactorGaussParams.bound
        fg.FactorGaussParams.bound = lambda self, p: default(self, p) * (1 if self.row_norm else c)  # type: ignore
    elif name != "base":
        raise SystemExit(f"unknown variant {variant!r}")


def held_out(variant: str, table: str, epsilon: str) -> np.ndarray:
    """Mean 1-way TVD, 2-way TVD, association difference, TSTR AUC and pMSE over seeds 2–5."""
    apply(variant)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        quality.main(["--tables", table, "--epsilons", epsilon, *JUDGE])
    rows = [
        [float(m.group(k)) for k in range(2, 7)]
        for m in map(LINE.search, out.getvalue().splitlines())
        if m and int(m.group(1)) >= 2
    ]
    return np.mean(rows, axis=0)


def main(argv: list[str]) -> int:
    """Each variant runs in a child process, so that its patches never reach the next.
    ``--table NAME`` (default adult) and ``--epsilon E`` (default 1) choose what is judged."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("variants", nargs="*", default=DEFAULT)
    parser.add_argument("--table", default="adult", help=f"one of {', '.join(quality.TABLES)}")
    parser.add_argument("--epsilon", default="1")
    args = parser.parse_args(argv)
    where = ["--table", args.table, "--epsilon", args.epsilon]
    if len(args.variants) == 1:
        figures = held_out(args.variants[0], args.table, args.epsilon)
        print(f"| {args.variants[0]} | " + " | ".join(f"{x:.4f}" for x in figures) + " |")
        return 0
    print(f"{args.table}, ε = {args.epsilon}, mean of seeds 2–5")
    print("| variant | 1-way TVD | 2-way TVD | assoc. diff | TSTR AUC | pMSE |")
    print("|---|---:|---:|---:|---:|---:|")
    for v in args.variants:
        child = [sys.executable, __file__, v, *where]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
