"""Reproduction of RON-Gauss (Chanyaswad, Liu, Mittal; PoPETs 2019), Tables 3–5 at ε = 1.

``run(quick)`` returns the figures (JSON-serialisable); ``render/ron_gauss.py`` writes the
section. ``.venv/bin/python benchmarks/repro_ron_gauss.py [--quick]`` runs it and prints the
section.

The paper's three tasks, on data sets available offline with the same shape of problem:

* clustering (paper: GFE, Alg 3): sklearn's bundled ``load_digits`` (1,797 × 64, pixels/16
  in [0, 1]); K-means with k ∈ {2..8} chosen by silhouette on the synthetic rows; the
  silhouette of the synthetic rows as clustered (the paper's metric);
* classification (paper: Realdisp, Alg 5, SVM accuracy): Adult, label income, the public-box
  design matrix of the other 14 columns; SVC (RBF, defaults) on a subsample of training rows;
* regression (paper: Twitter, Alg 4, KRR RMSE): Adult, label age rescaled to [−1, 1] by its
  public bounds [17, 90], design matrix of the other 14 columns; KernelRidge (RBF, defaults).

The tasks' data and learners are in ``ron_gauss_tasks``. RON-Gauss runs as a release does:
``RonGauss.fit`` in one call on a schema (the digits: 64 continuous columns with public
bounds [0, 1]; Adult: its schema with the label held out), the plan from ``plan_budget``;
its design of the features is the task's matrix, with the same public row bound. Both
learners see rows in R^p: synthetic rows as sampled (the sample stage's ``projected``), real
test rows through the model's ``project`` map. Each trial draws a fresh projection, noise,
sample (one generator per release) and subsample.

Configs (``configs``): corrected (ε-DP; Haar W, public normalisation), corrected with the
paper's record normalisation, the paper's literal variant (not DP), and a no-noise ablation;
baselines: the real rows with all m coordinates and in R^p, and data-free predictors.
p runs over P_GRID ∪ {Meckes' p}; the "tuned" column is the best grid p on the test data.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from common import machine, now_utc, run_command, stream_rng, summary
from ron_gauss_tasks import (
    K_RANGE,
    KMEANS_INIT,
    Supervised,
    Table,
    adult_tasks,
    digits_matrix,
    digits_table,
    kmeans_silhouette,
    krr_metrics,
    svm_metrics,
)
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

from dprelease.mechanisms import ron_gauss
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import design
from dprelease.mechanisms.ron_gauss import RonGaussModel

EPSILON = 1.0
WEIGHTS = (0.3, 0.7)  # ε_μ = 0.3ε, ε_Σ = 0.7ε (paper §5.2): stage weights for plan_budget
NO_NOISE_EPSILON = 1e9  # the ε = ∞ ablation (the module's Laplace needs a finite ε): noise ≈ 1e-9·Δ
DIGITS_ROW_BOUND = 8.0  # public bound on ‖x‖₂ of a row of [0, 1]^64 (the design's √64)
P_GRID = (2, 4, 8, 16, 32)
QUICK_GRID = (4, 16)  # plus Meckes' p
SVM_ROWS = 3_000
KRR_ROWS = 2_000
TRIALS = {False: 10, True: 2}
TASKS = ("clustering", "classification", "regression")
TASK_CODE = {t: i for i, t in enumerate(TASKS)}
SUMMARY = ("mean", "ci95", "n", "values")  # per field over trials: mean ± the 95 % t-interval's half-width


@dataclass(frozen=True)
class Config:
    """One way of running RON-Gauss: the module's variant and options and the ε used."""

    name: str
    variant: str
    projection: str
    normalise: str
    epsilon: float


# ---------------------------------------------------------------- the public default p


def meckes_p(m: int) -> int:
    """The public default p = ⌊2 ln m / ln ln m⌋ (Meckes' bound, natural logarithms)."""
    return math.floor(2 * math.log(m) / math.log(math.log(m)))


# ---------------------------------------------------------------- random streams


def rng_for(seed: int, task: str, p: int, stream: int) -> np.random.Generator:
    """A named stream: ``default_rng([seed, task code, p, stream])`` (trial seed, task, p, and
    a per-use code)."""
    return stream_rng(seed, TASK_CODE, task, p, stream)


# ---------------------------------------------------------------- the mechanism


MODE = {"clustering": "unsupervised", "classification": "classification", "regression": "regression"}


def release(
    table: Table, task: str, p: int, cfg: Config, m: int, rng: np.random.Generator
) -> tuple[RonGaussModel, np.ndarray, np.ndarray | None]:
    """RON-Gauss with ``cfg`` (Alg 3 unsupervised, 5 classification, 4 regression) as a
    release runs it: ``RonGauss.fit`` on the table's schema in one call, with the plan of
    ``plan_budget`` for the stage weights ε_μ : ε_Σ = WEIGHTS, m synthetic rows. Returns the
    model (``Fit.stages[1].state``), the m rows in R^p as the paper releases them and their
    labels (``Fit.stages[2].state``: ``projected``, ``labels``; None unsupervised)."""
    params = ron_gauss.RonGaussParams(
        variant=cfg.variant,
        task=MODE[task],
        label=table.label,
        dims=p,
        projection=cfg.projection,
        normalise=cfg.normalise,
    )
    plan = plan_budget(
        "pure", cfg.epsilon, 0.0, ron_gauss.stage_weights(params.task, params.variant, WEIGHTS)
    )
    fit = ron_gauss.RonGauss().fit(table.rows, table.schema, plan, params, m=m, rng=rng)
    sample = fit.stages[2].state
    return fit.stages[1].state, sample.projected, sample.labels


def project(model: RonGaussModel, x: np.ndarray) -> np.ndarray:
    """Real rows (design matrix) mapped into the model's R^p."""
    return ron_gauss.project(model, x)


def _rows(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(n, size=min(k, n), replace=False)


# ---------------------------------------------------------------- one trial of each task


def clustering_trial(
    x: np.ndarray, table: Table, p: int, configs: Sequence[Config], seed: int
) -> dict[str, dict[str, float]]:
    """For each config: silhouette and k of the synthetic rows (the paper's metric) and the
    silhouette of the real rows (through ``project``) under the synthetic K-means; 'real':
    the real rows in the no-noise model's R^p; 'null': an isotropic N(0, I_p) sample.
    ``table``: x as the mechanism takes it."""
    out: dict[str, dict[str, float]] = {}
    for j, cfg in enumerate(configs):
        model, syn, _ = release(table, "clustering", p, cfg, len(x), rng_for(seed, "clustering", p, 10 + j))
        s, k, km = kmeans_silhouette(syn, seed)
        real = project(model, x)
        labels = np.zeros(len(real)) if km is None else km.predict(real)
        s_real = float(silhouette_score(real, labels)) if len(np.unique(labels)) > 1 else 0.0
        out[cfg.name] = {
            "score": s,
            "k": k,
            "real_rows_by_synthetic_kmeans": s_real,
            "collapsed": float(km is None),
            "clipped_mass": float(model.clipped_mass),
        }
        if cfg.name == "no_noise":
            s, k, _ = kmeans_silhouette(real, seed)
            out["real"] = {"score": s, "k": k}
    null = rng_for(seed, "clustering", p, 1).standard_normal((len(x), p))
    s, k, _ = kmeans_silhouette(null, seed)
    out["null"] = {"score": s, "k": k}
    return out


def _learner(task: str) -> tuple[Callable[..., dict[str, float]], int]:
    return (svm_metrics, SVM_ROWS) if task == "classification" else (krr_metrics, KRR_ROWS)


def supervised_trial(
    task: str, data: Supervised, p: int, configs: Sequence[Config], seed: int
) -> dict[str, dict[str, float]]:
    """For each config: the learner trained on a subsample of n synthetic rows, tested on
    the real test rows mapped by ``project``; 'real': the same learner on as many real
    training rows, in the no-noise model's R^p."""
    learner, size = _learner(task)
    n = len(data.x_train)
    out: dict[str, dict[str, float]] = {}
    for j, cfg in enumerate(configs):
        model, syn_x, syn_y = release(data.train, task, p, cfg, n, rng_for(seed, task, p, 10 + j))
        assert syn_y is not None
        idx = _rows(len(syn_x), size, rng_for(seed, task, p, 30 + j))
        test = project(model, data.x_test)
        out[cfg.name] = learner(syn_x[idx], np.asarray(syn_y)[idx], test, data.y_test)
        if cfg.name == "no_noise":
            ridx = _rows(n, size, rng_for(seed, task, p, 2))
            out["real"] = learner(project(model, data.x_train[ridx]), data.y_train[ridx], test, data.y_test)
    return out


def unprojected_clustering(x: np.ndarray, seed: int) -> dict[str, float]:
    """Silhouette (and k) of the real rows with all m coordinates, k by silhouette."""
    s, k, _ = kmeans_silhouette(x, seed)
    return {"score": s, "k": k}


def unprojected_trial(task: str, data: Supervised, seed: int) -> dict[str, float]:
    """The learner on as many real training rows with all m design coordinates (x/B, no
    projection): what the projection itself loses."""
    learner, size = _learner(task)
    ridx = _rows(len(data.x_train), size, rng_for(seed, task, 0, 2))
    b = data.row_bound
    return learner(data.x_train[ridx] / b, data.y_train[ridx], data.x_test / b, data.y_test)


def class_spread(data: Supervised, p: int, seed: int = 0) -> dict[str, list[float]]:
    """Alg 5 without noise: RMS distance of each class's synthetic rows from its projected
    mean Wᵀμ_c, beside that of the real training rows mapped by ``project``, per
    normalisation. Record normalisation re-normalises centred rows to norm 1 (Alg 1), which
    the test-time map cannot do (a test row's class is unknown)."""
    out: dict[str, list[float]] = {}
    for j, norm in enumerate(("public", "record")):
        cfg = Config("spread", "corrected", "haar", norm, NO_NOISE_EPSILON)
        rng = rng_for(seed, "classification", p, 40 + j)
        model, syn, labels = release(data.train, "classification", p, cfg, len(data.x_train), rng)
        assert labels is not None
        real = project(model, data.x_train)
        for c in (0, 1):
            mu = model.mean[c] @ model.w
            out[f"{norm}_class{c}"] = [
                float(np.sqrt(np.mean(np.sum((syn[labels == c] - mu) ** 2, axis=1)))),
                float(np.sqrt(np.mean(np.sum((real[data.y_train == c] - mu) ** 2, axis=1)))),
            ]
    return out


def baselines(tasks: dict[str, Supervised]) -> dict[str, dict[str, float]]:
    """Data-free reference points on the real test rows."""
    cls, reg = tasks["classification"], tasks["regression"]
    majority = int(np.mean(cls.y_train) >= 0.5)
    mean = float(np.mean(reg.y_train))
    return {
        "classification": {"majority_accuracy": float(100.0 * np.mean(cls.y_test == majority))},
        "regression": {
            "constant_rmse": float(np.sqrt(np.mean((reg.y_test - mean) ** 2))),
            "constant": mean,
            # E over u ~ U[−1, 1] of (y − u)², the paper's random guess.
            "random_guess_rmse": float(np.sqrt(np.mean(reg.y_test**2) + 1.0 / 3.0)),
            "label_sd": float(np.std(reg.y_test)),
        },
    }


# ---------------------------------------------------------------- run


def configs() -> list[Config]:
    """Corrected (Haar, corrected sensitivity, public normalisation); corrected with the
    paper's record normalisation (separates the normalisation from the sensitivity); the
    paper's literal variant (uniform QR, the paper's sensitivity, record normalisation); the
    no-noise ablation (corrected options at ε = NO_NOISE_EPSILON). The no-noise config must
    stay the last: its map carries the real-data baseline."""
    return [
        Config("corrected", "corrected", "haar", "public", EPSILON),
        Config("corrected_record", "corrected", "haar", "record", EPSILON),
        Config("paper", "paper", "uniform_qr", "record", EPSILON),
        Config("no_noise", "corrected", "haar", "public", NO_NOISE_EPSILON),
    ]


def _aggregate(per_trial: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per method and field, the summary over trials (k: the list of chosen k)."""
    out: dict[str, dict[str, Any]] = {}
    for method, fields in per_trial[0].items():
        out[method] = {f: summary([t[method][f] for t in per_trial], SUMMARY) for f in fields if f != "k"}
        if "k" in fields:
            out[method]["k"] = [int(t[method]["k"]) for t in per_trial]
    return out


def _tuned(by_p: dict[str, dict[str, Any]], grid: Sequence[int], method: str, higher: bool) -> dict[str, Any]:
    """The grid p with the best mean score of ``method`` (chosen on the real test data)."""
    pick = (max if higher else min)(grid, key=lambda p: by_p[str(p)][method]["score"]["mean"])
    return {"p": int(pick), **by_p[str(pick)][method]["score"]}


def run_task(
    task: str,
    trial_fn: Callable[[int, int], dict[str, dict[str, float]]],
    m: int,
    grid: Sequence[int],
    seeds: Sequence[int],
) -> dict[str, Any]:
    """All p (grid ∪ Meckes) × all seeds of one task, with the Meckes and tuned summaries."""
    t0 = time.perf_counter()
    ps = sorted({*grid, meckes_p(m)})
    by_p: dict[str, dict[str, Any]] = {}
    for p in ps:
        by_p[str(p)] = _aggregate([trial_fn(p, s) for s in seeds])
        print(f"  {task} p={p} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    higher = task != "regression"
    methods = list(by_p[str(ps[0])])
    return {
        "m": m,
        "meckes_p": meckes_p(m),
        "p_values": ps,
        "by_p": by_p,
        "meckes": {k: {"p": meckes_p(m), **by_p[str(meckes_p(m))][k]["score"]} for k in methods},
        "tuned": {k: _tuned(by_p, grid, k, higher) for k in methods},
        "wall_s": time.perf_counter() - t0,
    }


def _data_facts(digits: np.ndarray, sup: dict[str, Supervised]) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "clustering": {"name": "sklearn load_digits", "rows": digits.shape[0], "cols": digits.shape[1]}
    }
    for t, d in sup.items():
        facts[t] = {
            "name": "Adult (flows/demo/adult.csv), 80/20 split seed 0",
            "label": d.label,
            "train_rows": len(d.x_train),
            "test_rows": len(d.x_test),
            "cols": d.x_train.shape[1],
            "row_bound": d.row_bound,
            "label_mean_train": float(np.mean(d.y_train)),
        }
    return facts


def run(quick: bool = False) -> dict[str, Any]:
    """The benchmark: three tasks, four configs (module docstring), p ∈ grid ∪ {Meckes}."""
    started = time.perf_counter()
    seeds = list(range(TRIALS[quick]))
    grid = QUICK_GRID if quick else P_GRID
    info = machine()
    digits, sup = digits_matrix(), adult_tasks()
    table = digits_table(digits)
    # The mechanism's design of the digits' schema is the digits matrix, with the same public row
    # bound; Adult's matrices are the same design of the same schema (``ron_gauss_tasks``).
    assert design(table.schema).max_norm == DIGITS_ROW_BOUND
    cfgs = configs()
    tasks: dict[str, Any] = {}
    # One thread for BLAS/OpenMP: the cores are shared, and oversubscribed K-means / SVC
    # threads were several times slower than one thread each.
    with threadpool_limits(1):
        tasks["clustering"] = run_task(
            "clustering",
            lambda p, s: clustering_trial(digits, table, p, cfgs, s),
            digits.shape[1],
            grid,
            seeds,
        )
        tasks["clustering"]["unprojected"] = _aggregate(
            [{"real_full": unprojected_clustering(digits, s)} for s in seeds]
        )["real_full"]
        for task, data in sup.items():
            tasks[task] = run_task(
                task,
                lambda p, s, task=task, data=data: supervised_trial(task, data, p, cfgs, s),
                data.x_train.shape[1],
                grid,
                seeds,
            )
            tasks[task]["unprojected"] = _aggregate(
                [{"real_full": unprojected_trial(task, data, s)} for s in seeds]
            )["real_full"]
    return {
        "date": now_utc(),
        "machine": info,
        "command": run_command("ron_gauss", quick),
        "quick": quick,
        "seeds": seeds,
        "epsilon": EPSILON,
        "weights": list(WEIGHTS),
        "no_noise_epsilon": NO_NOISE_EPSILON,
        "configs": [vars(c) for c in cfgs],
        "p_grid": list(grid),
        "k_range": [K_RANGE.start, K_RANGE.stop - 1],
        "kmeans_n_init": KMEANS_INIT,
        "svm_rows": SVM_ROWS,
        "krr_rows": KRR_ROWS,
        "data": _data_facts(digits, sup),
        "baselines": baselines(sup),
        "class_spread_p16": class_spread(sup["classification"], 16),
        "tasks": tasks,
        "elapsed_s": time.perf_counter() - started,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("ron_gauss", run))
