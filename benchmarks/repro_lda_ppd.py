"""Reproduction of DP-LDA data publishing (Alg B of ``../shared/seeds/dp-pca-lda-data-publishing.txt``;
probably Jiang et al., TDP 2013), Fig. 3 (classification) and Fig. 4 (information) on Adult.

``.venv/bin/python benchmarks/run.py --only lda_ppd [--quick]`` (or this file directly,
which prints the section that ``render/lda_ppd.py`` writes). Data: ``publishing_data`` (the
paper's Adult columns, complete rows, public bounds; 33 features in [0, 1], label income >
50K). Per trial: a random 2/3 of the rows goes through ``lda_ppd.LDAPPD().fit`` in one
call (the plan from ``plan_budget`` with its stage weights; as many rows as it holds),
classifiers trained on the released rows are tested on the real held-out 1/3:

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
from common import machine, now_utc, run_command, stream_rng, summary
from publishing_data import LABEL, PaperAdult, describe, paper_adult
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics import roc_auc_score
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import Design

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

# ---------------------------------------------------------------- helpers


def rng_for(stream: str, epsilon: float, seed: int) -> np.random.Generator:
    """``default_rng([BASE_SEED, stream, round(100 ε), seed])`` (ε = 0 for the split)."""
    return stream_rng(BASE_SEED, STREAM, stream, round(min(epsilon, 1e6) * 100), seed)


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
    data: PaperAdult, train: np.ndarray, *, epsilon: float, variant: str, rng: np.random.Generator
) -> tuple[Any, np.ndarray, np.ndarray, float]:
    """One lda_ppd release of the training rows in one call (imported here: the module is
    another engineer's): ``LDAPPD.fit`` on the schema with the label (target income),
    the plan of ``plan_budget`` with the module's stage weights, as many rows as it holds.
    Returns (the model ``Fit.stages[1].state``, the greedy rows in design coordinates and
    their labels, ``Fit.stages[2].state``'s ``Synthesized``, seconds)."""
    from dprelease.mechanisms import lda_ppd

    schema = data.with_label
    params = lda_ppd.LDAPPDParams(variant=variant, target=LABEL)
    plan = plan_budget("pure", epsilon, 0.0, lda_ppd.LDAPPD().stage_weights(schema, params))
    rows = data.rows(True, train)
    t0 = time.perf_counter()
    fit = lda_ppd.LDAPPD().fit(rows, schema, plan, params, m=len(rows), rng=rng)
    seconds = time.perf_counter() - t0
    sampled = fit.stages[2].state
    assert isinstance(sampled, lda_ppd.Synthesized)
    return (
        fit.stages[1].state,
        np.asarray(sampled.x, dtype=float),
        np.asarray(sampled.labels, dtype=int),
        seconds,
    )


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
        model, xs, ys, release_s = fit_and_synthesize(
            data, train, epsilon=epsilon, variant=variant, rng=rng_for(name, epsilon, seed)
        )
        pub, bins = released(lay, xs)
        out["releases"][f"{name}@{epsilon:g}"] = {
            **classify(pub, ys, x_test, y_test, seed),
            "model": model_rule(model, x_test, y_test),
            "info": information(with_label(bins, ys), ref_bins, n_bins),
            "positive_share": float(np.mean(ys)),
            "release_s": release_s,
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
        for m in ("positive_share", "release_s"):
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
        "command": run_command("lda_ppd", quick),
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


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("lda_ppd", run))
