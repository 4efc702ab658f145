"""Reproduction of DP-LDA data publishing (Alg B of ``../shared/seeds/dp-pca-lda-data-publishing.txt``;
probably Jiang et al., TDP 2013), Fig. 3 (classification) and Fig. 4 (information) on Adult.

``.venv/bin/python benchmarks/run.py --only lda_ppd [--quick]`` (or this file directly, which
prints the markdown). Data: ``publishing_data`` (the paper's Adult columns, complete rows,
public bounds; 33 features in [0, 1], label income > 50K). Per trial: a random 2/3 of the rows
goes through ``lda_ppd.fit`` + ``synthesize`` (as many rows as it holds), classifiers trained
on the released rows are tested on the real held-out 1/3:

* sklearn ``LinearDiscriminantAnalysis`` (the paper's classifier for its own output) and
  ``DecisionTreeClassifier(criterion="entropy")`` as a C4.5 stand-in (the paper used C4.5 for
  DiffGen's output);
* best achievable (BA) = the same classifier trained on the real 2/3; lowest achievable (LA)
  = the majority class of the real 2/3 (AUC 0.5);
* variants ``corrected`` (ε-DP; proven categorical sensitivity) and ``paper`` (the paper's Δ,
  not DP), and ``corrected`` without noise (ε = 1e9: the greedy synthesis alone).

Information (Fig. 4): the paper's entropy and KL estimators are unstated; ours are the sums
over the 11 schema columns (public bins) of the 1-way Shannon entropy (bits) of the released
rows, and of KL(released ‖ real 2/3) with add-½ smoothing of the real marginal.
DiffGen (needs taxonomy trees per attribute) is not run.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
from bench_common import machine, now_utc, standalone
from publishing_data import PaperAdult, describe, paper_adult
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics import roc_auc_score
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from mechanisms.design import Design

COMMAND = ".venv/bin/python benchmarks/run.py --only lda_ppd"
EPSILONS = {False: (0.1, 0.25, 0.5, 1.0, 1.25, 1.5), True: (0.1, 1.0)}
TRIALS = {False: 10, True: 2}
VARIANTS = ("corrected", "paper")
NO_NOISE_EPSILON = 1e9
BASE_SEED = 20_130_004
STREAM = {"split": 0, "corrected": 1, "paper": 2, "no_noise": 3}
TRAIN_FRACTION = 2 / 3
TREE_MIN_LEAF = 20  # a stand-in for C4.5's pruning
BUDGET_S = {False: 660.0, True: 80.0}  # no new trial starts when the slowest so far would overrun
WORKERS = 2  # trial processes (each one BLAS thread)
NO_NOISE_TRIALS = 3  # the no-noise ablation runs in the first trials only (it varies little)
RULE_RIDGE = 1e-2  # added to the clipped eigenvalues of the released pooled covariance (model_rule)
CLASSIFIERS = ("lda", "tree")
CLASSIFIER_NAMES = {
    "lda": "LinearDiscriminantAnalysis",
    "tree": f"DecisionTree (entropy, min_samples_leaf={TREE_MIN_LEAF}; C4.5 stand-in)",
}

# The paper's Fig. 3/4 (read from the text: the figures give no table of values).
PAPER = {
    "ba": 85.3,
    "la": 75.5,
    "aca": "rises with ε; LDA > DiffGen-INFOGAIN for ε ≥ 0.25, slightly < DiffGen-MAX at high ε; small sd",
    "auc": "LDA > both DiffGen for ε > 0.5; lowest sd at every ε",
    "entropy": "LDA ≈ the original data; DiffGen-INFOGAIN ≈ 30 %, DiffGen-MAX ≈ 20 % of it",
    "kl": "LDA ≈ 1/3 of either DiffGen",
}


# ---------------------------------------------------------------- helpers


def rng_for(stream: str, epsilon: float, seed: int) -> np.random.Generator:
    """``default_rng([BASE_SEED, stream, round(100 ε), seed])`` (ε = 0 for the split)."""
    return np.random.default_rng([BASE_SEED, STREAM[stream], round(min(epsilon, 1e6) * 100), seed])


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sd (ddof 1; 0 for one value) and the values."""
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "n": len(v),
        "values": [float(a) for a in v],
    }


def split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random 2/3 (sorted indices) and the remaining 1/3."""
    perm = rng_for("split", 0.0, seed).permutation(n)
    cut = round(TRAIN_FRACTION * n)
    return np.sort(perm[:cut]), np.sort(perm[cut:])


# ---------------------------------------------------------------- classifiers


def _classifier(name: str, seed: int) -> Any:
    if name == "lda":
        return LinearDiscriminantAnalysis()
    return DecisionTreeClassifier(criterion="entropy", min_samples_leaf=TREE_MIN_LEAF, random_state=seed)


def _score(model: Any, x: np.ndarray) -> np.ndarray:
    if hasattr(model, "decision_function"):
        return model.decision_function(x)
    return model.predict_proba(x)[:, 1]


def classify(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, seed: int
) -> dict[str, dict[str, float]]:
    """Test accuracy (%), ROC-AUC and the predicted positive share (%) of each classifier
    trained on (x, y); a constant predictor (AUC 0.5) when y holds one class."""
    out = {}
    for name in CLASSIFIERS:
        if len(np.unique(y)) < 2:
            pred = np.full(len(y_test), y[0] if len(y) else 0)
            auc = 0.5
        else:
            model = _classifier(name, seed).fit(x, y)
            pred = model.predict(x_test)
            auc = float(roc_auc_score(y_test, _score(model, x_test)))
        out[name] = {
            "accuracy": float(100 * np.mean(pred == y_test)),
            "auc": auc,
            "positive_rate": float(100 * np.mean(pred)),
        }
    return out


def majority(y: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """The lowest achievable: the training majority class for every test row."""
    label = int(np.mean(y) > 0.5)
    return {"accuracy": float(100 * np.mean(y_test == label)), "auc": 0.5}


# ---------------------------------------------------------------- information


def entropy_bits(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def kl_bits(released: np.ndarray, original: np.ndarray) -> float:
    """KL(P ‖ Q) in bits, P the released counts, Q the original counts + ½ per bin."""
    p = released / released.sum()
    q = (original + 0.5) / (original.sum() + 0.5 * len(original))
    mask = p > 0
    return float((p[mask] * np.log2(p[mask] / q[mask])).sum())


def information(bins: np.ndarray, ref: np.ndarray, n_bins: Sequence[int]) -> dict[str, Any]:
    """Sum over columns of the 1-way entropy of ``bins`` and of KL(bins ‖ ref) (bits), and
    both per column."""
    h, kl = [], []
    for j, b in enumerate(n_bins):
        c = np.bincount(bins[:, j], minlength=b).astype(float)
        r = np.bincount(ref[:, j], minlength=b).astype(float)
        h.append(entropy_bits(c))
        kl.append(kl_bits(c, r))
    return {"entropy": float(sum(h)), "kl": float(sum(kl)), "entropy_by_column": h, "kl_by_column": kl}


def _info_summary(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """Summaries of the sums, means of the per-column values."""
    out: dict[str, Any] = {m: summary([i[m] for i in infos]) for m in ("entropy", "kl")}
    for m in ("entropy_by_column", "kl_by_column"):
        out[m] = [float(v) for v in np.mean([i[m] for i in infos], axis=0)]
    return out


def with_label(bins: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.column_stack([bins, y.astype(bins.dtype)])


# ---------------------------------------------------------------- the mechanism


def fit_and_synthesize(
    x: np.ndarray, y: np.ndarray, lay: Design, *, epsilon: float, variant: str, rng: np.random.Generator
) -> tuple[Any, np.ndarray, np.ndarray, float, float]:
    """``mechanisms.lda_ppd.fit`` then ``synthesize`` of len(x) rows (imported here: the module
    is another engineer's). Returns (model, rows, labels, fit seconds, synthesis seconds)."""
    from mechanisms import lda_ppd

    t0 = time.perf_counter()
    model = lda_ppd.fit(x, y, 2, lay, epsilon=epsilon, variant=variant, rng=rng)
    t1 = time.perf_counter()
    xs, ys = lda_ppd.synthesize(model, len(x))
    t2 = time.perf_counter()
    return model, np.asarray(xs, dtype=float), np.asarray(ys, dtype=int), t1 - t0, t2 - t1


def model_rule(model: Any, x_test: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """The LDA rule read off the released statistics without synthesis (the paper says the
    samples serve better than the noisy statistics): pooled Σ = M − Σ_c π_c μ_c μ_cᵀ with its
    eigenvalues clipped at 0 plus RULE_RIDGE·I (the noisy Σ is indefinite and the one-hot
    blocks make the exact one singular), w = Σ⁻¹(μ₁ − μ₀), predict 1 when
    wᵀ(x − (μ₀+μ₁)/2) + log(π₁/π₀) > 0."""
    mu, pi = np.asarray(model.means), np.clip(np.asarray(model.shares, dtype=float), 1e-9, 1.0)
    sigma = np.asarray(model.second) - (pi[:, None, None] * np.einsum("ci,cj->cij", mu, mu)).sum(axis=0)
    vals, vecs = np.linalg.eigh((sigma + sigma.T) / 2)
    inv = (vecs / (np.maximum(vals, 0.0) + RULE_RIDGE)) @ vecs.T
    w = inv @ (mu[1] - mu[0])
    score = (x_test - (mu[0] + mu[1]) / 2) @ w + np.log(pi[1] / pi[0])
    pred = (score > 0).astype(int)
    auc = float(roc_auc_score(y_test, score)) if np.ptp(score) > 0 else 0.5
    return {
        "accuracy": float(100 * np.mean(pred == y_test)),
        "auc": auc,
        "positive_rate": float(100 * pred.mean()),
    }


def released(lay: Design, x_syn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The published rows on the design scale (numerics clipped, one-hot blocks by their
    largest coordinate) and their public bins."""
    rows = lay.decode(x_syn)
    return lay.encode(rows), rows.bins


# ---------------------------------------------------------------- the sweep


def trial(epsilons: Sequence[float], seed: int, no_noise: bool) -> dict[str, Any]:
    """One split: the baselines and every (variant, ε) release, scored, and the no-noise
    release when ``no_noise``; its wall time. Runs in a worker process (one BLAS thread)."""
    t0 = time.perf_counter()
    with threadpool_limits(1):
        out = _trial(paper_adult(), epsilons, seed, no_noise)
    return {**out, "seed": seed, "wall_s": time.perf_counter() - t0}


def _trial(data: PaperAdult, epsilons: Sequence[float], seed: int, no_noise: bool) -> dict[str, Any]:
    lay = data.design(label=False)
    train, test = split(data.n, seed)
    x, y = data.matrix(False, train), data.target(train)
    x_test, y_test = data.matrix(False, test), data.target(test)
    ref_bins = with_label(data.bins(False, train), y)
    n_bins = [*data.features.n_bins, 2]
    out: dict[str, Any] = {
        "best": classify(x, y, x_test, y_test, seed),
        "lowest": majority(y, y_test),
        "info_original": information(ref_bins, ref_bins, n_bins),
        "info_holdout": information(with_label(data.bins(False, test), y_test), ref_bins, n_bins),
        "releases": {},
    }
    configs = [(v, e) for e in epsilons for v in VARIANTS] + (
        [("no_noise", NO_NOISE_EPSILON)] if no_noise else []
    )
    for name, epsilon in configs:
        variant = "corrected" if name == "no_noise" else name
        model, xs, ys, fit_s, syn_s = fit_and_synthesize(
            x, y, lay, epsilon=epsilon, variant=variant, rng=rng_for(name, epsilon, seed)
        )
        pub, bins = released(lay, xs)
        out["releases"][f"{name}@{epsilon:g}"] = {
            **classify(pub, ys, x_test, y_test, seed),
            "model": model_rule(model, x_test, y_test),
            "info": information(with_label(bins, ys), ref_bins, n_bins),
            "positive_share": float(np.mean(ys)),
            "fit_s": fit_s,
            "synthesize_s": syn_s,
        }
    return out


def _collect(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Summaries over trials of every figure."""

    def scores(get: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        res = {}
        for name in (*CLASSIFIERS, "model"):
            if name in get(trials[0]):
                res[name] = {m: summary([get(t)[name][m] for t in trials]) for m in get(trials[0])[name]}
        return res

    out: dict[str, Any] = {
        "best": scores(lambda t: t["best"]),
        "lowest": {m: summary([t["lowest"][m] for t in trials]) for m in ("accuracy", "auc")},
        "info_original": _info_summary([t["info_original"] for t in trials]),
        "info_holdout": _info_summary([t["info_holdout"] for t in trials]),
        "releases": {},
    }
    keys = dict.fromkeys(k for t in trials for k in t["releases"])
    for key in keys:
        have = [t for t in trials if key in t["releases"]]
        rel = {
            name: {
                m: summary([t["releases"][key][name][m] for t in have])
                for m in have[0]["releases"][key][name]
            }
            for name in (*CLASSIFIERS, "model")
        }
        rel["info"] = _info_summary([t["releases"][key]["info"] for t in have])
        for m in ("positive_share", "fit_s", "synthesize_s"):
            rel[m] = summary([t["releases"][key][m] for t in have])
        out["releases"][key] = rel
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """The whole benchmark; JSON-serialisable figures (every rendered number, the per-trial
    values, seeds and wall times)."""
    t0 = time.perf_counter()
    info, date = machine(), now_utc()
    epsilons, planned = EPSILONS[quick], list(range(TRIALS[quick]))
    trials = run_trials(epsilons, planned, BUDGET_S[quick] - (time.perf_counter() - t0))
    seeds = [t["seed"] for t in trials]
    walls = [t["wall_s"] for t in trials]
    data = paper_adult()
    train, test = split(data.n, seeds[0])
    return {
        "quick": quick,
        "command": COMMAND + (" --quick" if quick else ""),
        "date": date,
        "machine": info,
        "base_seed": BASE_SEED,
        "seeds": seeds,
        "planned_trials": len(planned),
        "budget_s": BUDGET_S[quick],
        "epsilons": list(epsilons),
        "no_noise_epsilon": NO_NOISE_EPSILON,
        "data": {**describe(data, label=False), "train_rows": len(train), "test_rows": len(test)},
        "classifiers": CLASSIFIER_NAMES,
        "rule_ridge": RULE_RIDGE,
        "workers": WORKERS,
        "info_columns": [*data.features.names, "income"],
        "no_noise_trials": min(NO_NOISE_TRIALS, len(seeds)),
        "results": _collect(trials),
        "trial_wall_s": walls,
        "elapsed_s": time.perf_counter() - t0,
    }


def run_trials(epsilons: Sequence[float], seeds: Sequence[int], budget_s: float) -> list[dict[str, Any]]:
    """The trials in WORKERS spawned processes, in seed order; once the slowest trial so far
    would end past ``budget_s``, trials not yet started are cancelled (at most one queued
    trial per worker still runs). The no-noise release runs in the first NO_NOISE_TRIALS."""
    t0 = time.perf_counter()
    done: list[dict[str, Any]] = []
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=WORKERS, mp_context=ctx) as pool:
        futures = [pool.submit(trial, tuple(epsilons), s, i < NO_NOISE_TRIALS) for i, s in enumerate(seeds)]
        for fut in as_completed(futures):
            if fut.cancelled():
                continue
            done.append(fut.result())
            elapsed = time.perf_counter() - t0
            print(
                f"  lda_ppd trial {done[-1]['seed']}: {done[-1]['wall_s']:.1f} s ({elapsed:.0f} s)",
                flush=True,
            )
            if elapsed + max(t["wall_s"] for t in done) > budget_s:
                cancelled = sum(f.cancel() for f in futures)
                if cancelled:
                    print(f"  lda_ppd: {cancelled} trials cancelled for time", flush=True)
    return sorted(done, key=lambda t: t["seed"])


# ---------------------------------------------------------------- rendering


def _ms(s: dict[str, Any], fmt: str = ".1f") -> str:
    return f"{s['mean']:{fmt}} ± {s['sd']:{fmt}}"


def _cut(f: dict[str, Any]) -> str:
    """A note when the time budget stopped the trials early."""
    done, planned = len(f["seeds"]), f.get("planned_trials", len(f["seeds"]))
    return (
        "" if done >= planned else f" — {planned} planned, stopped by the {f['budget_s']:.0f} s time budget"
    )


def _header(f: dict[str, Any]) -> list[str]:
    m, d, seeds = f["machine"], f["data"], f["seeds"]
    nominal = ", ".join(f"{k} {v}" for k, v in d["nominal"].items())
    walls = f["trial_wall_s"]
    return [
        f"- Reproduce: `{f['command']}` (or `.venv/bin/python benchmarks/repro_lda_ppd.py"
        f"{' --quick' if f['quick'] else ''}`)"
        + (" — these figures: `--quick`, 2 ε, 2 trials" if f["quick"] else ""),
        f"- Measured: {f['date']}, commit {m['commit']}, took {f['elapsed_s']:.0f} s ({len(walls)} trials, "
        f"{min(walls):.0f}–{max(walls):.0f} s each, {f.get('workers', 1)} worker processes); "
        f"nproc {m['nproc']}, {m['cpu']}, load average (1 min) at start {m['load_avg_1m']}; BLAS/OpenMP "
        "limited to one thread per process",
        f"- Trials: {len(seeds)}, seeds {seeds[0]}–{seeds[-1]} (the paper: 10){_cut(f)}; each draws a new "
        f"2/3 : 1/3 split and new noise; mean ± sd (the paper's error bars are sd). Generators "
        f"`default_rng([{f['base_seed']}, stream, round(100ε), seed])`, streams 0 split, 1 corrected, "
        "2 paper, 3 no noise.",
        f"- Data: `flows/demo/adult.csv`, {d['rows_dropped']:,} rows with `?` dropped → {d['rows']:,} "
        f"complete rows (the paper: 45,222 from train + test); {d['train_rows']:,} go to the mechanism, "
        f"{d['test_rows']:,} are the test rows. Features ({d['width']}): numeric "
        f"{', '.join(d['numeric'])} linear onto [0, 1] by the public bounds of `flows/demo/adult.yaml` "
        f"(p1 = {d['p1']}); "
        f"one-hot {nominal} (p2 = {d['p2']}); "
        f"label income > 50K (share {100 * d['positive_share']:.1f} %). Dropped: {', '.join(d['dropped'])}.",
        "- Released rows: what `lda_ppd.synthesize` returns for as many rows as the 2/3 holds, decoded by "
        "`mechanisms.design` (numerics clipped to [0, 1], one-hot blocks by their largest coordinate) with "
        "their synthetic labels; classifiers: "
        + "; ".join(f"{k} = {v}" for k, v in f["classifiers"].items())
        + ".",
        "- Our diagnostic column 'LDA rule from the released statistics': no synthesis, the Fisher rule "
        "w = Σ⁻¹(μ̃₁ − μ̃₀) from the model's noisy class means μ̃_c, second moment M̃ and shares π̃, with "
        f"Σ = M̃ − Σ_c π̃_c μ̃_c μ̃_cᵀ, eigenvalues clipped at 0 plus {f.get('rule_ridge', RULE_RIDGE):g}·I "
        "(the paper claims the samples serve better than the noisy statistics).",
        "",
    ]


COLUMNS = (
    ("lda", "corrected", "LDA classifier: corrected"),
    ("lda", "paper", "paper variant"),
    ("tree", "corrected", "tree: corrected"),
    ("tree", "paper", "paper variant"),
    ("model", "corrected", "LDA rule from the released statistics (no synthesis): corrected"),
    ("model", "paper", "paper variant"),
)


def _class_table(f: dict[str, Any], metric: str) -> list[str]:
    r = f["results"]
    fmt, unit = (".1f", "accuracy %") if metric == "accuracy" else (".3f", "ROC-AUC")
    paper = PAPER["aca"] if metric == "accuracy" else PAPER["auc"]
    lines = [
        f"**{unit} on the real held-out 1/3** (the paper, Fig. 3{'a' if metric == 'accuracy' else 'b'}: "
        f"{paper})",
        "",
        "| ε | " + " | ".join(c[2] for c in COLUMNS) + " |",
        "|---:|" + "---:|" * len(COLUMNS),
    ]
    for e in f["epsilons"]:
        rel = {v: r["releases"][f"{v}@{e:g}"] for v in VARIANTS}
        lines.append(f"| {e:g} | " + " | ".join(_ms(rel[v][c][metric], fmt) for c, v, _ in COLUMNS) + " |")
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    cells = [_ms(nn[c][metric], fmt) if v == "corrected" else "" for c, v, _ in COLUMNS]
    lines.append(
        f"| ∞ (no noise, ε = {f['no_noise_epsilon']:g}; first {f['no_noise_trials']} trials) | "
        + " | ".join(cells)
        + " |"
    )
    ba = f" (paper BA {PAPER['ba']} %)" if metric == "accuracy" else ""
    la = f" (paper LA {PAPER['la']} %)" if metric == "accuracy" else ""
    best = {c: _ms(r["best"][c][metric], fmt) for c in CLASSIFIERS}
    lowest = _ms(r["lowest"][metric], fmt)
    lines += [
        f"| best achievable: trained on the real 2/3{ba} | "
        + " | ".join(best.get(c, "") if v == "corrected" else "" for c, v, _ in COLUMNS)
        + " |",
        f"| lowest achievable: majority class{la} | "
        + " | ".join(lowest if v == "corrected" and c != "model" else "" for c, v, _ in COLUMNS)
        + " |",
    ]
    return [*lines, ""]


def _info_table(f: dict[str, Any]) -> list[str]:
    r = f["results"]
    lines = [
        "**Information** (sum over the 11 columns of the 1-way entropy, bits, and of "
        f"KL(released ‖ real 2/3), bits; the paper, Fig. 4: entropy {PAPER['entropy']}; "
        f"KL {PAPER['kl']}) and the released rows' "
        "positive share",
        "",
        "| ε | entropy: corrected | paper variant | KL: corrected | paper variant | >50K share: corrected |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for e in f["epsilons"]:
        c, p = r["releases"][f"corrected@{e:g}"], r["releases"][f"paper@{e:g}"]
        lines.append(
            f"| {e:g} | {_ms(c['info']['entropy'], '.2f')} | {_ms(p['info']['entropy'], '.2f')} "
            f"| {_ms(c['info']['kl'], '.3f')} | {_ms(p['info']['kl'], '.3f')} "
            f"| {100 * c['positive_share']['mean']:.1f} % |"
        )
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    lines += [
        f"| ∞ (no noise) | {_ms(nn['info']['entropy'], '.2f')} | | {_ms(nn['info']['kl'], '.3f')} | "
        f"| {100 * nn['positive_share']['mean']:.1f} % |",
        f"| real 2/3 (the original) | {_ms(r['info_original']['entropy'], '.2f')} | | 0 | "
        f"| {100 * f['data']['positive_share']:.1f} % |",
        f"| real held-out 1/3 (sampling floor of KL) | {_ms(r['info_holdout']['entropy'], '.2f')} | "
        f"| {_ms(r['info_holdout']['kl'], '.3f')} | | |",
        "",
    ]
    return [*lines, *_info_by_column(f)]


def _info_by_column(f: dict[str, Any]) -> list[str]:
    """Per-column entropy and KL (means over trials): where the KL sits."""
    r, top = f["results"], f"{f['epsilons'][-1]:g}"
    c, nn = (
        r["releases"][f"corrected@{top}"]["info"],
        r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]["info"],
    )
    orig = r["info_original"]
    lines = [
        f"<details><summary>Entropy / KL (bits) per column: real 2/3, corrected at ε = {top}, "
        "no noise</summary>",
        "",
        f"| column | entropy: real | corrected ε = {top} | no noise | KL: corrected ε = {top} | no noise |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for j, name in enumerate(f["info_columns"]):
        lines.append(
            f"| {name} | {orig['entropy_by_column'][j]:.2f} | {c['entropy_by_column'][j]:.2f} "
            f"| {nn['entropy_by_column'][j]:.2f} | {c['kl_by_column'][j]:.3f} | {nn['kl_by_column'][j]:.3f} |"
        )
    return [*lines, "", "</details>", ""]


def _time_table(f: dict[str, Any]) -> list[str]:
    r = f["results"]
    lines = [
        f"**Time** of one release on the {f['data']['train_rows']:,} training rows (mean ± sd over trials, "
        f"seconds; the paper reports none). Measured inside {f.get('workers', 1)} concurrent worker "
        "processes on shared cores, so the spread follows the machine's load; the greedy synthesis is a "
        "Python loop over rows, O(m·p²).",
        "",
        "| ε | fit: corrected | synthesize: corrected | fit: paper | synthesize: paper |",
        "|---:|---:|---:|---:|---:|",
    ]
    keys = [(f"{e:g}", f"corrected@{e:g}", f"paper@{e:g}") for e in f["epsilons"]]
    for label, ck, pk in keys:
        c, p = r["releases"][ck], r["releases"][pk]
        lines.append(
            f"| {label} | {_ms(c['fit_s'], '.3f')} | {_ms(c['synthesize_s'], '.2f')} "
            f"| {_ms(p['fit_s'], '.3f')} | {_ms(p['synthesize_s'], '.2f')} |"
        )
    return [*lines, ""]


def _reading(f: dict[str, Any]) -> list[str]:
    r, eps = f["results"], f["epsilons"]
    rel = {e: r["releases"][f"corrected@{e:g}"] for e in eps}
    nn = r["releases"][f"no_noise@{f['no_noise_epsilon']:g}"]
    acc = {e: rel[e]["lda"]["accuracy"]["mean"] for e in eps}
    la, ba = r["lowest"]["accuracy"]["mean"], r["best"]["lda"]["accuracy"]["mean"]
    beats_rule = sum(rel[e]["lda"]["accuracy"]["mean"] > rel[e]["model"]["accuracy"]["mean"] for e in eps)
    top = eps[-1]
    kl_cols = sorted(zip(rel[top]["info"]["kl_by_column"], f["info_columns"], strict=True), reverse=True)[:2]
    h_ratio = {e: rel[e]["info"]["entropy"]["mean"] / r["info_original"]["entropy"]["mean"] for e in eps}
    accs = ", ".join(f"{acc[e]:.1f} %" for e in eps)
    eps_list = ", ".join(f"{e:g}" for e in eps)
    above = sum(a > la for a in acc.values())
    auc0, auc1 = rel[eps[0]]["lda"]["auc"]["mean"], rel[top]["lda"]["auc"]["mean"]
    nn_acc = nn["lda"]["accuracy"]["mean"]
    ceiling = (
        "the synthesis, not the noise, sets the ceiling (the module notes that later numerics collapse "
        "towards the class means, so within-class spread is lost)"
        if nn_acc <= max(acc.values()) + 1.0
        else "noise still costs accuracy at every ε"
    )
    h_txt = ", ".join(f"{100 * h:.0f} %" for h in h_ratio.values())
    return [
        "The paper's claims against ours (corrected, LDA classifier unless said):",
        "",
        f"- BA {PAPER['ba']} % / LA {PAPER['la']} % — ours BA {ba:.1f} % (LDA), "
        f"{r['best']['tree']['accuracy']['mean']:.1f} % (tree), LA {la:.1f} %.",
        f"- Accuracy rises with ε — ours {accs} at ε = {eps_list}; above the majority class at {above} of "
        f"{len(eps)} ε; AUC {auc0:.3f} → {auc1:.3f}.",
        f"- Samples serve better than the noisy statistics (§3.2) — the LDA classifier on the released rows "
        f"beats the rule read off the statistics at {beats_rule} of {len(eps)} ε.",
        f"- Without noise the greedy synthesis alone gives {nn_acc:.1f} % "
        f"(AUC {nn['lda']['auc']['mean']:.3f}) against BA {ba:.1f} % and {acc[top]:.1f} % at ε = {top:g}: "
        f"{ceiling}.",
        f"- Entropy ≈ the original — ours {h_txt} of the real 2/3's sum of 1-way entropies (ε = {eps_list}); "
        f"KL at ε = {top:g} is dominated by "
        + " and ".join(f"{name} ({v:.2f} bits)" for v, name in kl_cols)
        + ": matching moments does not reproduce point masses (capital loss 0, 40 hours a week).",
        "- The DiffGen comparisons (ACA, AUC, entropy 30 % / 20 %, KL 1/3) cannot be checked: DiffGen is "
        "not run.",
        "",
    ]


def _differences(f: dict[str, Any]) -> list[str]:
    d = f["data"]
    return [
        "What differs from the paper:",
        "",
        f"- Data: the UCI training file only ({d['rows']:,} complete rows, not 45,222), so the mechanism "
        f"sees {d['train_rows']:,} rows, not about 30,150. Features as the paper describes (its '35' "
        f"cannot be matched exactly: ours are {d['width']} plus the label).",
        "- DiffGen-INFOGAIN / DiffGen-MAX (Mohammed et al., KDD 2011) are not run: they need a taxonomy "
        "tree per attribute, which the paper does not give. Only the BA / LA reference points are "
        "comparable.",
        "- Classifiers: the paper trains an LDA classifier on its own output and C4.5 on DiffGen's; we train "
        f"both an LDA classifier and a decision tree ({CLASSIFIER_NAMES['tree']}) on every release. "
        "BA / LA are computed on our split per trial, not copied.",
        "- `corrected` replaces the paper's categorical Δ (too small: not a valid bound) with a proven one "
        "and spends 5 % of ε on noisy class counts (ε-DP); `paper` is the literal Δ with the true n₁, n₂ "
        "(not DP). Both treat n as public (replace-one neighbours, as the paper's proofs do). The no-noise "
        "row (ε = 1e9, corrected) is our ablation: the greedy synthesis's own loss.",
        "- Entropy and KL: the paper's estimators are unstated (and DiffGen releases generalised values, "
        "so its entropy is over its own cells); ours are sums of 1-way marginals over public bins, which "
        "ignore dependence between columns. Our numbers only say how close the released marginals are to "
        "the real ones.",
        "- Numeric columns are normalised by public bounds (the paper's data-derived normalisation "
        "would leak).",
        "",
    ]


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    return [
        *_header(f),
        *_class_table(f, "accuracy"),
        *_class_table(f, "auc"),
        *_info_table(f),
        *_time_table(f),
        *_reading(f),
        *_differences(f),
    ]


if __name__ == "__main__":
    sys.exit(standalone(run, render, sys.argv))
