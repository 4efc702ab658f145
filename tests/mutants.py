"""Sensitivity and wiring mutants: does the test suite see a stage that under-noises?

Each mutant is one textual edit of a mechanism that a reviewer could miss: a halved Δ,
n replaced by 2n, a statistic scaled without its Δ, a clipping step dropped. The script
copies the tree into a temporary folder, applies one mutant at a time, runs the wiring
tests of that module (``tests/wiring.py``) and reports which mutants survive. The last ones
(issue 30) keep the noise right but use an exact statistic where its noisy release belongs
(a gate decided on the exact metric, raking to the exact tables): the gates' decision test
and the replay tests of ``tests/mechanisms/test_isolation.py`` must kill them. It is not
part of ``make test`` (``tests/conftest.py`` keeps pytest from collecting it)::

    .venv/bin/python tests/mutants.py            # every mutant; exit 1 if any survives
    .venv/bin/python tests/mutants.py --only ron  # those whose name contains "ron"

The first five are the ones issue 14 found passing the whole suite.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


FG = ("tests/mechanisms/test_wiring_factor_gauss.py",)
RON = ("tests/mechanisms/test_wiring_ron_gauss.py",)
DPFM = ("tests/mechanisms/test_wiring_dpfm.py",)
PCA = ("tests/mechanisms/test_wiring_private_pca.py",)
PUB = ("tests/mechanisms/test_wiring_publishing.py",)
GATES = ("tests/checks/test_gates.py", "tests/tasks/test_check_gates.py")
MARGINAL = ("tests/mechanisms/test_marginal_synthesizers.py",)
ISOLATION = ("tests/mechanisms/test_isolation.py",)
ROAD = ("tests/mechanisms/test_road.py", "tests/mechanisms/test_accounting.py")

MUTANTS = [
    # --- the five of issue 14 ---
    Mutant(
        "factor_gauss: histograms measured with half their sensitivity",
        "mechanisms/factor_marginals.py",
        'l2_sensitivity=histogram_sensitivity("l2"),\n        l1_sensitivity=histogram_sensitivity("l1"),',
        'l2_sensitivity=histogram_sensitivity("l2") / 2,\n        l1_sensitivity=histogram_sensitivity("l1") / 2,',
        FG,
    ),
    Mutant(
        "ron_gauss: mean measured with n replaced by 2n",
        "mechanisms/ron_gauss/centring.py",
        'l1, l2 = mean_sensitivity(m, n, "l1"), mean_sensitivity(m, n, "l2")',
        'l1, l2 = mean_sensitivity(m, 2 * n, "l1"), mean_sensitivity(m, 2 * n, "l2")',
        RON,
    ),
    Mutant(
        "ron_gauss: second moment measured with n replaced by 2n",
        "mechanisms/ron_gauss/moments.py",
        "n_eff = 1 if classes else len(v)",
        "n_eff = 1 if classes else 2 * len(v)",
        RON,
    ),
    Mutant(
        "ron_gauss: class counts measured at half their sensitivity",
        "mechanisms/ron_gauss/centring.py",
        'l1_sensitivity=histogram_sensitivity("l1"),\n            l2_sensitivity=histogram_sensitivity("l2"),\n'
        '            name="class_counts",',
        'l1_sensitivity=histogram_sensitivity("l1") / 2,\n            l2_sensitivity=histogram_sensitivity("l2") / 2,\n'
        '            name="class_counts",',
        RON,
    ),
    Mutant(
        "ron_gauss: no projection into the unit ball when rows are re-centred",
        "mechanisms/ron_gauss/centring.py",
        'return _unit_rows(x - mu) if normalise == "record" else _into_ball(x - mu)',
        'return _unit_rows(x - mu) if normalise == "record" else x - mu',
        RON,
    ),
    # --- more of the same kinds ---
    Mutant(
        "factor_gauss: second moment divided by 2n",
        "mechanisms/factor_gauss.py",
        "upper = (total / n)[np.triu_indices(p)]",
        "upper = (total / (2 * n))[np.triu_indices(p)]",
        FG,
    ),
    Mutant(
        "factor_gauss: second moment's sensitivity with n replaced by 2n",
        "mechanisms/factor_gauss.py",
        'l2_sensitivity=second_moment_sensitivity(n, bound, p, "l2"),',
        'l2_sensitivity=second_moment_sensitivity(2 * n, bound, p, "l2"),',
        FG,
    ),
    Mutant(
        "factor_gauss: rows not scaled into the ball of radius B",
        "mechanisms/factor_model.py",
        "scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))",
        "scale = np.ones_like(norms)",
        FG,
    ),
    Mutant(
        "dpfm: thresholds with n replaced by 2n",
        "mechanisms/dpfm/thresholds.py",
        'l1=threshold_sensitivity(levels, n, "l1"),\n        l2=threshold_sensitivity(levels, n, "l2"),',
        'l1=threshold_sensitivity(levels, 2 * n, "l1"),\n        l2=threshold_sensitivity(levels, 2 * n, "l2"),',
        DPFM,
    ),
    Mutant(
        "dpfm: cumulative frequencies divided by 2n",
        "mechanisms/dpfm/thresholds.py",
        "[:-1] / n for j, L in enumerate(levels)]",
        "[:-1] / (2 * n) for j, L in enumerate(levels)]",
        DPFM,
    ),
    Mutant(
        "dpfm: factor scores measured at half their sensitivity",
        "mechanisms/dpfm/factors.py",
        'l1=scores_sensitivity(r, "l1", params.variant),\n        l2=scores_sensitivity(r, "l2", params.variant),',
        'l1=scores_sensitivity(r, "l1", params.variant) / 2,\n        l2=scores_sensitivity(r, "l2", params.variant) / 2,',
        DPFM,
    ),
    Mutant(
        "dpfm: rows divided by κ instead of κ√p* (‖x*‖ up to √p*)",
        "mechanisms/dpfm/links.py",
        "float(params.clip) * math.sqrt(encoded_width(schema)),",
        "float(params.clip),",
        DPFM,
    ),
    Mutant(
        "dpfm: coordinates not clipped to [−κ, κ]",
        "mechanisms/dpfm/links.py",
        "x = np.clip(x, -code.clip, code.clip)",
        "x = x",
        DPFM,
    ),
    Mutant(
        "dpfm: loadings' sensitivity halved",
        "mechanisms/dpfm/factors.py",
        'return 2 * math.sqrt(p_star) * r if norm == "l1" else 2 * math.sqrt(r)',
        'return math.sqrt(p_star) * r if norm == "l1" else math.sqrt(r)',
        DPFM,
    ),
    Mutant(
        "private_pca: mean measured with d/(2n)",
        "mechanisms/private_pca/subspace.py",
        "x.mean(axis=0), l1_sensitivity=d / n,",
        "x.mean(axis=0), l1_sensitivity=d / (2 * n),",
        PCA,
    ),
    Mutant(
        "private_pca: mean halved, its sensitivity not",
        "mechanisms/private_pca/subspace.py",
        "x.mean(axis=0), l1_sensitivity=d / n,",
        "x.mean(axis=0) / 2, l1_sensitivity=d / n,",
        PCA,
    ),
    Mutant(
        "private_pca: PSMM counts recorded with sensitivity 1",
        "mechanisms/private_pca/psmm.py",
        "return math.nextafter(2.0 / epsilon, math.inf), 2.0",
        "return math.nextafter(2.0 / epsilon, math.inf), 1.0",
        PCA,
    ),
    Mutant(
        "private_pca: covariance weights dropped (diagonal doubled)",
        "mechanisms/private_pca/subspace.py",
        "covariance(x)[iu] * w,",
        "covariance(x)[iu],",
        PCA,
    ),
    Mutant(
        "pcappd: moments measured at half their sensitivity",
        "mechanisms/pcappd.py",
        "moment_statistic(x), l1_sensitivity=delta,",
        "moment_statistic(x), l1_sensitivity=delta / 2,",
        PUB,
    ),
    Mutant(
        "pcappd: moments halved, their sensitivity not",
        "mechanisms/pcappd.py",
        "moment_statistic(x), l1_sensitivity=delta,",
        "moment_statistic(x) / 2, l1_sensitivity=delta,",
        PUB,
    ),
    Mutant(
        "pcappd: component scores' sensitivity without the factor 2 for categories",
        "mechanisms/pcappd.py",
        "lay.p1 + 2 * lay.p2 if variant",
        "lay.p1 + lay.p2 if variant",
        PUB,
    ),
    Mutant(
        "lda_ppd: class counts with sensitivity 1",
        "mechanisms/lda_ppd.py",
        'l1_sensitivity=histogram_sensitivity("l1"),',
        "l1_sensitivity=1.0,",
        PUB,
    ),
    Mutant(
        "lda_ppd: the paper's (too small) moment sensitivity in the corrected variant",
        "mechanisms/lda_ppd.py",
        'delta = exact if variant == "corrected" else paper_class_moment_sensitivity(lay.p1, lay.p2)',
        "delta = paper_class_moment_sensitivity(lay.p1, lay.p2)",
        PUB,
    ),
    Mutant(
        "gates: metrics measured with Δ = 1/(2k)",
        "mechanisms/gates.py",
        "    return 1.0 / k\n",
        "    return 0.5 / k\n",
        GATES,
    ),
    Mutant(
        "gates: tvd_1way halved, its sensitivity not",
        "checks/gates.py",
        'out[name] = ut.tvd_1way(real_bins, syn_bins, schema)["mean"]',
        'out[name] = ut.tvd_1way(real_bins, syn_bins, schema)["mean"] / 2',
        GATES,
    ),
    # --- the road of ε: the accountant's one dispatch (issue 31) ---
    Mutant(
        "primitives: a stage's Gaussian sigma from half its sensitivity",
        "mechanisms/primitives.py",
        'return "gaussian", gaussian_sigma(l2_sensitivity, part.rho)',
        'return "gaussian", gaussian_sigma(l2_sensitivity / 2, part.rho)',
        ROAD,
    ),
    Mutant(
        "primitives: a stage's Laplace scale at twice its epsilon",
        "mechanisms/primitives.py",
        'return "laplace", laplace_scale(l1_sensitivity, part.share)',
        'return "laplace", laplace_scale(l1_sensitivity, 2 * part.share)',
        ROAD,
    ),
    Mutant(
        "accounting: a stage's parts not rounded down (their sum may exceed the stage's share)",
        "mechanisms/accounting.py",
        "    while math.fsum(shares) > total or sum(shares) > total:",
        "    while False:",
        ROAD,
    ),
    # --- post-processing of something other than the releases (issue 30) ---
    Mutant(
        "gates: decided on the exact metrics (the ledger still shows the noisy ones)",
        "tasks/post_release.py",
        "    return measurements, decide(measurements, bounds)",
        "    exact = [__import__('dataclasses').replace(m, value=np.array([values[m.name[5:-1]]]))\n"
        "             for m in measurements]\n"
        "    return measurements, decide(exact, bounds)",
        GATES,
    ),
    Mutant(
        "factor_gauss: raked to the exact pair tables (the noisy ones drawn, charged, unused)",
        "mechanisms/factor_gauss.py",
        "        return Stage(Measured(moments, state.code, Refinement(tables, state.z.shape[0])), (moments, *tables))",
        "        exact = tuple(replace(t, value=c) for t, c in zip(tables, state.pair_counts))\n"
        "        return Stage(Measured(moments, state.code, Refinement(exact, state.z.shape[0])), (moments, *tables))",
        ISOLATION,
    ),
    Mutant(
        "one-way stage: groups cut at the exact quantiles (the noisy cuts drawn, charged, unused)",
        "mechanisms/factor_marginals.py",
        "        groups[j] = mass_groups(column, private_distribution(m, n), plan.cells.n_groups[j])\n",
        "        groups[j] = mass_groups(column, np.asarray(counts[j], dtype=float) / n, plan.cells.n_groups[j])\n",
        ("tests/mechanisms/test_cuts.py",),
    ),
    Mutant(
        "factor_gauss: CDFs from the exact histograms (the noisy ones drawn, charged, unused)",
        "mechanisms/factor_marginals.py",
        "    distributions = [private_distribution(m, n) for m in marginals]\n",
        "    distributions = [np.asarray(c, dtype=float) / n for c in coarse]\n",
        ISOLATION,
    ),
    Mutant(
        "factor_gauss: factor model from the exact second moment (the noisy one drawn, charged, unused)",
        "mechanisms/factor_gauss.py",
        "        return Stage(Measured(moments, state.code, Refinement(tables, state.z.shape[0])), (moments, *tables))",
        "        z = state.z\n"
        "        s = replace(moments, value=(z.T @ z / len(z))[np.triu_indices(z.shape[1])])\n"
        "        return Stage(Measured(s, state.code, Refinement(tables, state.z.shape[0])), (moments, *tables))",
        ISOLATION,
    ),
    Mutant(
        "ron_gauss: model mean from the exact mean (the noisy one drawn, charged, unused)",
        "mechanisms/ron_gauss/centring.py",
        "target, mean.value, None, None, (mean,))",
        "target, xb.mean(axis=0), None, None, (mean,))",
        ISOLATION,
    ),
    Mutant(
        "ron_gauss: class proportions from the exact class counts",
        "mechanisms/ron_gauss/centring.py",
        "sizes, proportions = np.maximum(counts.value, 1.0), private_distribution(counts, n)",
        "sizes, proportions = np.maximum(counts.value, 1.0), np.bincount(target, minlength=n_classes) / n",
        ISOLATION,
    ),
    Mutant(
        "dpfm: scores and rows from the exact loadings (the noisy ones drawn, charged, unused)",
        "mechanisms/dpfm/stages.py",
        "    v_tilde, _, note, measurements = _estimate(encoded, plan, params, rng)",
        "    _, v_tilde, note, measurements = _estimate(encoded, plan, params, rng)",
        ISOLATION,
    ),
    Mutant(
        "private_pca: subspace placed at the exact mean (the noisy one drawn, charged, unused)",
        "mechanisms/private_pca/stages.py",
        "projection = private_projection(cov, mean, params.dims, e3, n)",
        "projection = private_projection(\n"
        "        cov, __import__('dataclasses').replace(mean, value=x.mean(axis=0)), params.dims, e3, n\n"
        "    )",
        ISOLATION,
    ),
    Mutant(
        "pcappd: rows rebuilt from the exact component scores (the noisy ones drawn, charged, unused)",
        "mechanisms/pcappd.py",
        "return Stage(reconstruct(scores.value, mean, axes),",
        "return Stage(reconstruct((encoded.x - mean) @ axes, mean, axes),",
        ISOLATION,
    ),
    Mutant(
        "lda_ppd: class shares from the exact class counts (the noisy ones drawn, charged, unused)",
        "mechanisms/lda_ppd.py",
        "model = build_model(encoded.counts, moments, len(encoded.y), encoded.layout)",
        "exact = np.bincount(encoded.y, minlength=n_classes).astype(float)\n"
        "    model = build_model(\n"
        "        __import__('dataclasses').replace(encoded.counts, value=exact), moments, len(encoded.y), "
        "encoded.layout\n"
        "    )",
        ISOLATION,
    ),
    # --- the marginal synthesizers on Private-PGM (issue 33) ---
    Mutant(
        "mst: selection scores with half their sensitivity",
        "mechanisms/mst.py",
        "SCORE_SENSITIVITY = 2.0\n",
        "SCORE_SENSITIVITY = 1.0\n",
        MARGINAL,
    ),
    Mutant(
        "aim: selection scores with half their sensitivity",
        "mechanisms/aim.py",
        "SCORE_SENSITIVITY = 2.0\n",
        "SCORE_SENSITIVITY = 1.0\n",
        MARGINAL,
    ),
    Mutant(
        "aim: tables measured with half their sensitivity",
        "mechanisms/aim.py",
        'measure.take(budget.rho_m),\n            l2_sensitivity=histogram_sensitivity("l2"),',
        'measure.take(budget.rho_m),\n            l2_sensitivity=histogram_sensitivity("l2") / 2,',
        MARGINAL,
    ),
    Mutant(
        "aim: the model fitted to the exact table (the noisy one drawn, charged, unused)",
        "mechanisms/aim.py",
        "        measured.append(Marginal(columns, table))",
        "        measured.append(Marginal(columns, replace(table, value=np.asarray(_exact(workload, counts, columns), float))))",
        ISOLATION,
    ),
    Mutant(
        "mst: the model fitted to the exact tree tables (the noisy ones drawn, charged, unused)",
        "mechanisms/mst.py",
        "    measured = [Marginal(pair, m) for pair, m in zip(chosen, tables, strict=True)]",
        "    index = {pair: k for k, pair in enumerate(workload.pairs)}\n"
        "    measured = [Marginal(pair, replace(m, value=np.asarray(counts[index[pair]], float)))\n"
        "                for pair, m in zip(chosen, tables, strict=True)]",
        ISOLATION,
    ),
]


def _copy_tree(dest: Path) -> None:
    """Tracked and untracked (not ignored) files of the checkout; a link (``dprelease/<package>``)
    stays a link, so the copy imports its own mutated modules, not the checkout's."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).symlink_to(src.readlink())
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run(mutant: Mutant, tree: Path) -> tuple[bool, float]:
    """(killed, seconds): apply the edit, run its tests, restore the file."""
    path = tree / mutant.file
    original = path.read_text()
    if original.count(mutant.old) != 1:
        raise SystemExit(f"mutant '{mutant.name}': its text is not found exactly once in {mutant.file}")
    path.write_text(original.replace(mutant.old, mutant.new))
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests],
            cwd=tree,
            capture_output=True,
            text=True,
        )
    finally:
        path.write_text(original)
    return result.returncode != 0, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="run the mutants whose name contains this text")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.only is None or args.only in m.name]
    survivors = []
    with tempfile.TemporaryDirectory(prefix="dprelease-mutants-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        for m in chosen:
            killed, seconds = run(m, tree)
            print(f"{'killed  ' if killed else 'SURVIVED'}  {seconds:5.1f} s  {m.name}", flush=True)
            if not killed:
                survivors.append(m.name)
    print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} mutants killed; {len(survivors)} survived")
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
