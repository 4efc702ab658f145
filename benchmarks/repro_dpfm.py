"""Reproduction of DPFM (Zhang, Xu, Tang, Qu): simulation settings I/II and Census Income (Adult).

``.venv/bin/python benchmarks/run.py --only dpfm [--quick]`` (or this file directly, which
prints the section that ``render/dpfm.py`` writes). The paper's protocol (§4, App. J–K):
synthesize from all n rows, split the synthetic rows 80/20 by index, train SVM, RF and KNN
on the synthetic training part and score them on (a) the synthetic test part with its
synthetic labels ("test") and (b) the original rows at the synthetic test indices
("validating"; DPFM keeps row order). Metrics (mean over the 3 classifiers): accuracy,
ROC-AUC, F1 of the positive class.

Methods: ``mechanisms.dpfm`` variant ``"corrected"`` (pure ε-DP), variant ``"paper"`` (the
literal algorithm, not DP), both variants at ε = ∞ (no noise; our ablation) and "Original"
(train on the real 80 %, test on the real 20 %). Beside them: the paper's DPFM₁ numbers.
Diagnostics: the subspace overlap ‖ṼᵀV‖²_F / r of the released and the exact loadings, the
agreement of synthetic and real labels, the synthetic positive rate. The data sets are built
by ``dpfm_data``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from dpfm_data import MARRIED, WORKCLASS, Dataset, adult_dataset, load_adult_paper, sim_dataset
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import MixedRows

EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
WEIGHTS = (1 / 3, 1 / 3, 1 / 3)  # DPFM1: (ε1, ε2, ε3) = (⅓, ⅓, ⅓) ε, as stage weights for plan_budget
TRAIN_FRACTION = 0.8
# Reps per setting and the Adult subsample (rows drawn without replacement per rep), chosen so
# the full run stays within ~15 minutes on 2 busy cores (RF and SVC dominate the time).
REPS = {"full": {"sim": 20, "adult": 5}, "quick": {"sim": 2, "adult": 2}}
ADULT_N = {"full": 5_000, "quick": 2_000}
# Seeds (numpy SeedSequence entropy tuples; ``rep`` = 0 .. reps − 1, ``d`` = dataset index):
SEED_DATA = 1  # data: default_rng((1, d, rep)) — simulated rows, or the Adult subsample
SEED_MECH = 2  # mechanism: default_rng((2, d, rep, m)), m = method index in methods() order
SEED_SPLIT = 3  # 80/20 index split: default_rng((3, d, rep))
# Classifiers: random_state = rep (RF; SVC and KNN are deterministic).

# The paper's DPFM₁ rows (Tables 3–5: mean over 3 classifiers × 100 reps), (acc, AUC, F1), and
# the range of its four competitors' validating accuracy / AUC over ε = 0.1 and 5.
PAPER: dict[str, dict[str, Any]] = {
    "sim_I_ar1": {
        "original": (0.942, 0.976, 0.965),
        0.1: {"test": (0.907, 0.921, 0.947), "valid": (0.928, 0.959, 0.958)},
        5.0: {"test": (0.906, 0.923, 0.946), "valid": (0.926, 0.961, 0.957)},
        "competitors_valid": ".81–.84 / .43–.58",
    },
    "sim_I_exch": {
        "original": (0.940, 0.977, 0.964),
        0.1: {"test": (0.907, 0.923, 0.946), "valid": (0.928, 0.961, 0.958)},
        5.0: {"test": (0.908, 0.925, 0.947), "valid": (0.933, 0.961, 0.961)},
        "competitors_valid": ".81–.84 / .45–.56",
    },
    "sim_II_ar1": {
        "original": (0.925, 0.970, 0.957),
        0.1: {"test": (0.873, 0.853, 0.929), "valid": (0.898, 0.933, 0.942)},
        5.0: {"test": (0.870, 0.850, 0.928), "valid": (0.895, 0.932, 0.940)},
        "competitors_valid": ".85–.86 / .48–.60",
    },
    "sim_II_exch": {
        "original": (0.943, 0.977, 0.966),
        0.1: {"test": (0.882, 0.880, 0.934), "valid": (0.912, 0.952, 0.949)},
        5.0: {"test": (0.878, 0.879, 0.932), "valid": (0.912, 0.955, 0.949)},
        "competitors_valid": ".84–.86 / .47–.54",
    },
    "adult": {
        "original": (0.812, 0.848, 0.878),
        0.1: {"test": (0.785, 0.795, 0.864), "valid": (0.802, 0.829, 0.874)},
        5.0: {"test": (0.785, 0.794, 0.863), "valid": (0.802, 0.828, 0.874)},
        "competitors_valid": ".52–.73 / .48–.53",
    },
}


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scaler:
    """The evaluator's (public-to-the-evaluator) feature scaling of continuous columns:
    raw value → (x − mean) / sd with the original data's mean and sd."""

    mean: np.ndarray
    sd: np.ndarray


def continuous_raw(rows: MixedRows, schema: Schema) -> np.ndarray:
    """Raw continuous values (from ``unit`` via ``from_unit``), continuous columns only."""
    cols = [j for j, c in enumerate(schema.columns) if c.kind == "continuous"]
    assert rows.unit is not None
    return np.column_stack([schema.columns[j].from_unit(rows.unit[:, j]) for j in cols])


def fit_scaler(rows: MixedRows, schema: Schema) -> Scaler:
    raw = continuous_raw(rows, schema)
    sd = raw.std(axis=0)
    return Scaler(raw.mean(axis=0), np.where(sd > 0, sd, 1.0))


def features(rows: MixedRows, schema: Schema, label: int, scaler: Scaler) -> tuple[np.ndarray, np.ndarray]:
    """Classifier inputs: standardized continuous columns, ordinal level indices, one-hot
    nominal columns (all levels); the label as 0/1 (category index)."""
    parts = [(continuous_raw(rows, schema) - scaler.mean) / scaler.sd]
    for j, col in enumerate(schema.columns):
        if j == label or col.kind == "continuous":
            continue
        if col.kind == "ordinal":
            parts.append(rows.bins[:, [j]].astype(float))
        else:
            parts.append((rows.bins[:, [j]] == np.arange(col.n_bins)).astype(float))
    return np.concatenate(parts, axis=1), rows.bins[:, label].astype(int)


CLASSIFIERS: dict[str, Callable[[int], Any]] = {
    "SVM": lambda seed: SVC(),
    "RF": lambda seed: RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1),
    "KNN": lambda seed: KNeighborsClassifier(n_neighbors=5),
}
METRICS = ("acc", "auc", "f1", "f1_neg")


def _scores(model: Any, x: np.ndarray) -> np.ndarray:
    """Continuous scores for ROC-AUC: SVC decision_function, otherwise P(y = 1)."""
    if hasattr(model, "decision_function"):
        return model.decision_function(x)
    proba = model.predict_proba(x)
    return proba[:, list(model.classes_).index(1)]


def _metrics(y: np.ndarray, pred: np.ndarray, score: np.ndarray) -> dict[str, float]:
    """Accuracy, ROC-AUC (NaN when y has one class), F1 of class 1 and of class 0 (0 if undefined)."""
    auc = float(roc_auc_score(y, score)) if len(np.unique(y)) == 2 else math.nan
    return {
        "acc": float(accuracy_score(y, pred)),
        "auc": auc,
        "f1": float(f1_score(y, pred, pos_label=1, zero_division=0)),
        "f1_neg": float(f1_score(y, pred, pos_label=0, zero_division=0)),
    }


def evaluate(
    x_train: np.ndarray, y_train: np.ndarray, evals: dict[str, tuple[np.ndarray, np.ndarray]], seed: int
) -> dict[str, dict[str, float]]:
    """Train each classifier once, score it on every evaluation set; mean over the classifiers.

    A single-class training label set gives a constant predictor (that class, AUC 0.5)."""
    per: dict[str, dict[str, list[float]]] = {k: {m: [] for m in METRICS} for k in evals}
    single = len(np.unique(y_train)) < 2
    for make in CLASSIFIERS.values():
        model = None if single else make(seed).fit(x_train, y_train)
        for k, (x, y) in evals.items():
            if model is None:
                pred, score = np.full(len(y), y_train[0]), np.zeros(len(y))
            else:
                pred, score = model.predict(x), _scores(model, x)
            for m, v in _metrics(y, pred, score).items():
                per[k][m].append(v)
    out = {k: {m: float(np.mean(v)) for m, v in d.items()} for k, d in per.items()}
    for k in out:
        out[k]["single_class_train"] = float(single)
    return out


def split(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random 80/20 split of the row indices (the same indices for synthetic and real rows)."""
    perm = rng.permutation(n)
    cut = round(TRAIN_FRACTION * n)
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def subspace_overlap(v_private: np.ndarray, v_exact: np.ndarray) -> float:
    """‖ṼᵀV‖²_F / r for orthonormal (p*, r) loadings: 1 = same subspace, ≈ r/p* = random."""
    r = v_exact.shape[1]
    return float(np.linalg.norm(v_private.T @ v_exact) ** 2 / r)


# ---------------------------------------------------------------------------------------------
# Methods
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One row of the tables: ``variant`` None is Original; ``epsilon`` inf is the no-noise ablation."""

    key: str
    label: str
    variant: str | None  # None: Original
    epsilon: float


def methods() -> list[Method]:
    """Original, both variants at ε = ∞, then per ε the corrected and the paper variant."""
    out = [Method("original", "Original (real 80 % → real 20 %)", None, math.nan)]
    out.append(Method("inf", "DPFM corrected, ε = ∞ (no noise)", "corrected", math.inf))
    out.append(Method("paper_inf", "DPFM paper, ε = ∞ (no noise)", "paper", math.inf))
    for eps in EPSILONS:
        out.append(Method(f"corrected_{eps:g}", "DPFM corrected (DP)", "corrected", eps))
        out.append(Method(f"paper_{eps:g}", "DPFM paper (not DP)", "paper", eps))
    return out


def dpfm_params(variant: str) -> Any:
    """corrected: the module's defaults (r = ``DPFMParams().factors``, public; κ; calibrated
    ordinal decoding); paper: r by eq. (3) (``factors=None``), the paper's decoding."""
    from dprelease.mechanisms.dpfm import DPFMParams

    return (
        DPFMParams(variant="corrected")
        if variant == "corrected"
        else DPFMParams(variant="paper", factors=None)
    )


def mechanism_facts() -> dict[str, Any]:
    """The parameters used, read from the module (so the report follows its defaults)."""
    from dprelease.mechanisms.dpfm import FACTOR_THRESHOLD

    c, pp = dpfm_params("corrected"), dpfm_params("paper")
    return {
        "corrected": {"factors": c.factors, "clip": c.clip, "calibrated": c.calibrated},
        "paper": {"factors": "eq. (3)", "c": FACTOR_THRESHOLD, "calibrated": pp.calibrated},
        "text": (
            "`dpfm.DPFM().fit(rows, schema, plan, params, m=n, rng=rng)` with "
            '`plan = plan_budget("pure", ε, 0, dpfm.stage_weights(schema, params, shares=(⅓, ⅓, ⅓)))`. '
            f"Corrected: `DPFMParams()` defaults, r = {c.factors} factors (public), κ = {c.clip:g}, "
            f'calibrated ordinal decoding {c.calibrated}. Paper: `DPFMParams(variant="paper", '
            f"factors=None)`, r by eq. (3) with c = {FACTOR_THRESHOLD} from the raw eigenvalues, "
            f"calibrated {pp.calibrated}. ε = ∞: `dpfm.fit_without_noise(rows, schema, params, rng=rng)` "
            "(the same steps, no noise anywhere; not a release)."
        ),
    }


def synthesize(ds: Dataset, method: Method, rng: np.random.Generator) -> tuple[MixedRows, dict[str, Any]]:
    """Run dpfm on all rows of ``ds``: ``DPFM.fit`` with a pure ε-DP plan of the DPFM1
    stage weights, or at ε = ∞ ``fit_without_noise``; returns the synthetic rows and
    diagnostics (r, p*, subspace overlap, from ``dpfm.internals``)."""
    from dprelease.mechanisms import dpfm
    from dprelease.mechanisms.accounting import plan_budget

    assert method.variant is not None
    params = dpfm_params(method.variant)
    if math.isinf(method.epsilon):
        fit = dpfm.fit_without_noise(ds.rows, ds.schema, params, rng=rng)
    else:
        plan = plan_budget("pure", method.epsilon, 0.0, dpfm.stage_weights(ds.schema, params, shares=WEIGHTS))
        fit = dpfm.DPFM().fit(ds.rows, ds.schema, plan, params, m=len(ds.rows), rng=rng)
    inner = dpfm.internals(fit)
    diag = {
        "r": float(fit.facts["factors_used"]),
        "p_star": float(fit.facts["encoded_width"]),
        "overlap": subspace_overlap(inner.loadings, inner.exact_loadings),
    }
    return fit.rows, diag


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _stat(values: list[float]) -> dict[str, Any]:
    a = np.asarray(values, float)
    ok = a[np.isfinite(a)]
    return {
        "mean": float(ok.mean()) if len(ok) else math.nan,
        "sd": float(ok.std(ddof=1)) if len(ok) > 1 else math.nan,
        "n": len(ok),
        "undefined": int(len(a) - len(ok)),
    }


def score_synthetic(
    ds: Dataset,
    method: Method,
    rng: np.random.Generator,
    scaler: Scaler,
    split_idx: tuple[np.ndarray, np.ndarray],
    seed: int,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Synthesize from all rows, train on the synthetic train indices, score on the synthetic
    test rows ("test") and on the real rows at the same indices ("valid")."""
    tr, te = split_idx
    syn, diag = synthesize(ds, method, rng)
    x_syn, y_syn = features(syn, ds.schema, ds.label, scaler)
    x_real, y_real = features(ds.rows, ds.schema, ds.label, scaler)
    evals = {"test": (x_syn[te], y_syn[te]), "valid": (x_real[te], y_real[te])}
    diag["label_agreement"] = float(np.mean(y_syn == y_real))
    diag["synthetic_positive_rate"] = float(np.mean(y_syn))
    return evaluate(x_syn[tr], y_syn[tr], evals, seed), diag


def run_dataset(index: int, make: Callable[[np.random.Generator], Dataset], reps: int) -> dict[str, Any]:
    """All methods × reps on one data-generating setting."""
    ms = methods()
    raw: dict[str, dict[str, list[float]]] = {m.key: {} for m in ms}
    wall = dict.fromkeys((m.key for m in ms), 0.0)
    first: Dataset | None = None
    positive_rates: list[float] = []
    for rep in range(reps):
        ds = make(np.random.default_rng((SEED_DATA, index, rep)))
        first = first or ds
        positive_rates.append(float(np.mean(ds.rows.bins[:, ds.label])))
        scaler = fit_scaler(ds.rows, ds.schema)
        x_real, y_real = features(ds.rows, ds.schema, ds.label, scaler)
        tr, te = split(len(ds.rows), np.random.default_rng((SEED_SPLIT, index, rep)))
        for mi, m in enumerate(ms):
            t0 = time.perf_counter()
            record = raw[m.key]
            if m.variant is None:
                res = evaluate(x_real[tr], y_real[tr], {"test": (x_real[te], y_real[te])}, rep)
                res["valid"] = res["test"]
                diag: dict[str, Any] = {}
            else:
                rng = np.random.default_rng((SEED_MECH, index, rep, mi))
                res, diag = score_synthetic(ds, m, rng, scaler, (tr, te), rep)
            for part, vals in res.items():
                for k, v in vals.items():
                    record.setdefault(f"{part}_{k}", []).append(v)
            for k, v in diag.items():
                if isinstance(v, int | float):
                    record.setdefault(k, []).append(float(v))
            wall[m.key] += time.perf_counter() - t0
    assert first is not None
    configs = {
        m.key: {
            "label": m.label,
            "variant": m.variant,
            "epsilon": None if math.isnan(m.epsilon) else (m.epsilon if math.isfinite(m.epsilon) else "inf"),
            "wall_s": wall[m.key],
            **{k: _stat(v) for k, v in raw[m.key].items()},
        }
        for m in ms
    }
    summary = {
        "title": first.title,
        "reps": reps,
        "n": len(first.rows),
        "p": len(first.schema) - 1,
        "positive_rate": _stat(positive_rates),
        "configs": configs,
        "wall_s": float(sum(wall.values())),
    }
    return summary


def settings(quick: bool) -> list[tuple[str, Callable[[np.random.Generator], Dataset], int]]:
    """(key, maker, reps) of the five data sets, in order (index = dataset seed component)."""
    reps = REPS["quick" if quick else "full"]
    out: list[tuple[str, Callable[[np.random.Generator], Dataset], int]] = []
    for setting in ("I", "II"):
        for structure in ("ar1", "exch"):
            out.append(
                (
                    f"sim_{setting}_{structure}",
                    lambda rng, s=setting, c=structure: sim_dataset(s, c, rng),
                    reps["sim"],
                )
            )
    cont, codes, _ = load_adult_paper()
    n_adult = ADULT_N["quick" if quick else "full"]
    out.append(("adult", lambda rng: adult_dataset(cont, codes, n_adult, rng), reps["adult"]))
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Every figure of the section, JSON-serialisable."""
    t0 = time.perf_counter()
    _, _, adult_facts = load_adult_paper()
    datasets: dict[str, Any] = {}
    plan = settings(quick)
    # One BLAS/OpenMP thread: on a small shared machine, threads only contend (KNN was 4× slower).
    with threadpool_limits(limits=1):
        for index, (key, make, reps) in enumerate(plan):
            print(f"  dpfm: {key} ({reps} reps)", flush=True)
            datasets[key] = run_dataset(index, make, reps)
    return {
        "quick": quick,
        "epsilons": list(EPSILONS),
        "weights": list(WEIGHTS),
        "reps": REPS["quick" if quick else "full"],
        "seeds": {
            "data": "default_rng((1, d, rep))",
            "mechanism": "default_rng((2, d, rep, m))",
            "split": "default_rng((3, d, rep))",
            "classifiers": "random_state = rep",
            "d": {key: i for i, (key, _, _) in enumerate(plan)},
        },
        "adult": {
            **adult_facts,
            "subsample": ADULT_N["quick" if quick else "full"],
            "workclass": WORKCLASS,
            "married": list(MARRIED),
        },
        "mechanism": mechanism_facts(),
        "datasets": datasets,
        "paper": {k: {str(kk): vv for kk, vv in v.items()} for k, v in PAPER.items()},
        "total_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("dpfm", run))
