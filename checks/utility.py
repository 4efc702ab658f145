"""Utility of a synthetic table measured against the confidential one.

Every number here is computed from confidential data without noise: it goes to
``internal/utility.json`` and the internal report only, never to ``public/`` or to an
artifact (an artifact may only say pass/fail per gate).

Tables arrive as public-bin indices (``engines.tables.table_to_bins``) and as values.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata, wasserstein_distance
from scipy.stats.contingency import association
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import r2_score, roc_auc_score
from sklearn.model_selection import cross_val_predict
from threadpoolctl import threadpool_limits

from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

__all__ = [
    "MAX_PAIRS_COLUMNS",
    "association_matrix",
    "model_frame",
    "pmse",
    "rank_correlation",
    "total_variation",
    "tstr",
    "tvd_1way",
    "tvd_2way",
    "wasserstein_1d",
    "wasserstein_scaled",
]

MAX_PAIRS_COLUMNS = 30  # all pairs up to 30 columns (435 pairs); a random sample of 435 above


def _one_thread() -> threadpool_limits:
    """One OpenMP thread for the check models: on a shared 2-core machine, OpenMP threads
    spin-waiting against other processes slowed a 1 s fit to minutes (measured)."""
    return threadpool_limits(limits=1, user_api="openmp")


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """½ Σ |p/Σp − q/Σq| of two count vectors on the same support.

    >>> round(total_variation(np.array([5, 5]), np.array([2, 8])), 12)
    0.3
    """
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


def tvd_1way(real: np.ndarray, syn: np.ndarray, schema: Schema) -> dict:
    """TVD of each column's histogram on the public bins, and their mean."""
    per = {
        c.name: total_variation(
            np.bincount(real[:, j], minlength=c.n_bins), np.bincount(syn[:, j], minlength=c.n_bins)
        )
        for j, c in enumerate(schema.columns)
    }
    return {"per_column": per, "mean": float(np.mean(list(per.values())))}


def _pairs(p: int, rng: np.random.Generator) -> tuple[list[tuple[int, int]], bool]:
    pairs = list(itertools.combinations(range(p), 2))
    if p <= MAX_PAIRS_COLUMNS:
        return pairs, False
    keep = rng.choice(len(pairs), size=MAX_PAIRS_COLUMNS * (MAX_PAIRS_COLUMNS - 1) // 2, replace=False)
    return [pairs[i] for i in sorted(keep)], True


def _joint(a: np.ndarray, b: np.ndarray, ka: int, kb: int) -> np.ndarray:
    """Counts of the ka·kb cells of two columns of public-bin indices."""
    return np.bincount(a.astype(np.int64, copy=False) * kb + b, minlength=ka * kb)


def tvd_2way(real: np.ndarray, syn: np.ndarray, schema: Schema, rng: np.random.Generator) -> dict:
    """Mean TVD of the two-way histograms (public bins) over column pairs. Each column is
    copied once into a contiguous int64 array (a strided column per pair took 3× as long
    on 800,000 rows)."""
    k = schema.n_bins
    pairs, sampled = _pairs(len(schema), rng)
    r = [np.ascontiguousarray(real[:, j], dtype=np.int64) for j in range(len(schema))]
    s = [np.ascontiguousarray(syn[:, j], dtype=np.int64) for j in range(len(schema))]
    tv = [total_variation(_joint(r[i], r[j], k[i], k[j]), _joint(s[i], s[j], k[i], k[j])) for i, j in pairs]
    return {"mean": float(np.mean(tv)) if tv else 0.0, "pairs": len(pairs), "sampled_pairs": sampled}


def _cramers_v(bins: np.ndarray, i: int, j: int, ki: int, kj: int) -> float:
    """Cramér's V = √(χ²/(n·(min(r, c) − 1))) of the crosstab without empty rows and
    columns. A column with one observed bin leaves min(r, c) = 1: 0/0, NaN (undefined)."""
    table = _joint(bins[:, i], bins[:, j], ki, kj).reshape(ki, kj)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    if min(table.shape) < 2:
        return float("nan")
    return float(association(table, method="cramer"))


def rank_correlation(x: np.ndarray) -> np.ndarray:
    """Spearman's ρ of every pair of columns of ``x`` (n, q): Pearson's r of the average
    ranks, r = Σ(a − ā)(b − b̄)/√(Σ(a − ā)²·Σ(b − b̄)²). A column with one value has
    Σ(a − ā)² = 0, so ρ with it (its own included) is 0/0: NaN, never 0; the other pairs
    are measured as usual (scipy's ``spearmanr`` returns one NaN for the whole matrix).

    >>> rank_correlation(np.array([[1.0, 5.0, 2.0], [2.0, 5.0, 4.0], [3.0, 5.0, 3.0]]))
    array([[1. , nan, 0.5],
           [nan, nan, nan],
           [0.5, nan, 1. ]])
    """
    q = x.shape[1]
    varies = np.array([len(np.unique(x[:, j])) > 1 for j in range(q)], dtype=bool)
    out = np.full((q, q), np.nan)
    ranks = rankdata(x[:, varies], axis=0)
    centred = ranks - ranks.mean(axis=0)
    unit = centred / np.linalg.norm(centred, axis=0)
    rho = np.clip(unit.T @ unit, -1.0, 1.0)
    np.fill_diagonal(rho, 1.0)
    out[np.ix_(varies, varies)] = rho
    return out


def _ranked_values(column: pd.Series, c: Continuous) -> np.ndarray:
    """A continuous column's values for ranking; a missing value ranks lowest (below the
    public lower bound), as its cell does in the model."""
    x = column.to_numpy(float, na_value=np.nan)
    return np.where(np.isnan(x), c.lower - 1.0, x)


def association_matrix(bins: np.ndarray, values: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Pairwise association: Spearman's ρ between two non-nominal columns (continuous
    values, ordinal level codes; ``rank_correlation``); Cramér's V on the public-bin
    crosstab when either column is nominal (continuous columns enter it binned). Diagonal
    1. An association with a column that takes one value in these rows (on its values for
    ρ, on its public bins for V) is 0/0 and stays NaN: undefined, not 0."""
    p = len(schema)
    out = np.full((p, p), np.nan)
    numeric = [j for j, c in enumerate(schema.columns) if not isinstance(c, Nominal)]
    if numeric:
        cols = [
            _ranked_values(values[c.name], c) if isinstance(c, Continuous) else bins[:, j].astype(float)
            for j, c in ((j, schema.columns[j]) for j in numeric)
        ]
        out[np.ix_(numeric, numeric)] = rank_correlation(np.column_stack(cols))
    k = schema.n_bins
    for j, c in enumerate(schema.columns):
        if isinstance(c, Nominal) and len(np.unique(bins[:, j])) > 1:
            out[j, j] = 1.0
    for i, j in itertools.combinations(range(p), 2):
        if isinstance(schema.columns[i], Nominal) or isinstance(schema.columns[j], Nominal):
            out[i, j] = out[j, i] = _cramers_v(bins, i, j, k[i], k[j])
    return out


def model_frame(df: pd.DataFrame, schema: Schema, drop: str | None = None) -> pd.DataFrame:
    """Features for scikit-learn: numbers as floats, ordinal levels as codes, nominal
    columns as pandas Categoricals over the declared categories."""
    out: dict[str, Any] = {}
    for c in schema.columns:
        if c.name == drop:
            continue
        if isinstance(c, Continuous):
            out[c.name] = df[c.name].to_numpy(float)
        elif isinstance(c, Ordinal):
            out[c.name] = pd.Categorical(df[c.name], categories=list(c.values)).codes.astype(float)
        else:
            out[c.name] = pd.Categorical(df[c.name], categories=list(c.values))
    return pd.DataFrame(out)


def _score(model, x_test: pd.DataFrame, y_test: np.ndarray, nominal: bool) -> tuple[float | None, str | None]:
    """R², or ROC-AUC (binary: the later declared category is positive; more classes:
    one-vs-rest macro average); or None and why it is undefined: R² = 1 − SS_res/SS_tot
    needs a test target that varies (SS_tot > 0); an AUC needs two classes in the test
    rows, each known to the model."""
    if not nominal:
        if len(np.unique(y_test)) < 2:
            return None, "R² is undefined: the real test target takes one value (its variance is 0)"
        return float(r2_score(y_test, model.predict(x_test))), None
    classes = list(model.classes_)
    present = set(np.unique(y_test))
    if len(present) < 2:
        return None, "ROC-AUC is undefined: the real test rows hold one class"
    if not present <= set(classes):
        return None, "ROC-AUC is undefined: the real test rows hold a class the training rows lack"
    proba = model.predict_proba(x_test)
    if len(classes) == 2:
        return float(roc_auc_score(y_test == classes[1], proba[:, 1])), None
    return float(roc_auc_score(y_test, proba, multi_class="ovr", labels=classes)), None


def tstr(
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    target: str,
    *,
    seed: int,
) -> dict:
    """Train on synthetic, test on real (TSTR), beside train-real-test-real (TRTR), with
    HistGradientBoosting. Nominal target → ROC-AUC (binary: the last declared category
    is positive; more classes: one-vs-rest macro average); continuous → R². A score that
    is undefined (training rows with one class, a test target without spread) is None,
    with the reason in ``undefined``; so is the ratio TSTR/TRTR without both scores."""
    col = schema[target]
    nominal = not isinstance(col, Continuous)

    def xy(df):
        x = model_frame(df, schema, drop=target)
        if nominal:
            return x, pd.Categorical(df[target], categories=list(col.values)).codes
        return x, df[target].to_numpy(float)

    model_type = HistGradientBoostingClassifier if nominal else HistGradientBoostingRegressor
    x_test, y_test = xy(real_test)
    scores: dict[str, float | None] = {}
    undefined: dict[str, str] = {}
    for name, side, train in (("tstr", "synthetic", synthetic), ("trtr", "real", real_train)):
        x, y = xy(train)
        if nominal and len(np.unique(y)) < 2:
            scores[name] = None
            undefined[name] = f"the {side} training rows hold one class of {target}: no classifier to fit"
            continue
        with _one_thread():
            model = model_type(categorical_features="from_dtype", random_state=seed).fit(x, y)
            scores[name], reason = _score(model, x_test, y_test, nominal)
        if reason is not None:
            undefined[name] = reason
    ratio = scores["tstr"] / scores["trtr"] if scores["tstr"] is not None and scores["trtr"] else None
    return {
        "target": target,
        "metric": "roc_auc" if nominal else "r2",
        "tstr": scores["tstr"],
        "trtr": scores["trtr"],
        "ratio": ratio,
        "test_rows": len(real_test),
        "undefined": undefined,
    }


def pmse(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, *, seed: int) -> dict:
    """Propensity mean squared error (Woo et al. 2009): a classifier tells real (0) from
    synthetic (1); with c = n_syn/(n_real + n_syn) and k-fold cross-validated scores p̂
    (k = min(3, n_real, n_syn)), pMSE = mean((p̂ − c)²). 0 is indistinguishable; c(1−c)
    (0.25 for equal sizes) is perfectly separable. Cross-validation needs k ≥ 2 (a row
    of each side in every fold): with fewer rows pMSE is None, the reason in
    ``undefined``. Three folds, not five: on Adult (10,000 rows a side, 3 seeds) pMSE
    was 0.089–0.094 with either, at 60 % of the time."""
    c = len(synthetic) / (len(real) + len(synthetic))
    folds = min(3, len(real), len(synthetic))
    if folds < 2:
        reason = (
            "cross-validated propensity scores need at least 2 rows on each side; got "
            f"{len(real)} real and {len(synthetic)} synthetic"
        )
        return {"pmse": None, "worst": c * (1 - c), "folds": folds, "undefined": reason}
    x = pd.concat([model_frame(real, schema), model_frame(synthetic, schema)], ignore_index=True)
    y = np.r_[np.zeros(len(real)), np.ones(len(synthetic))]
    model = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
    with _one_thread():
        p = cross_val_predict(model, x, y, cv=folds, method="predict_proba")[:, 1]
    return {"pmse": float(np.mean((p - c) ** 2)), "worst": c * (1 - c), "folds": folds, "undefined": None}


def wasserstein_1d(u: np.ndarray, v: np.ndarray) -> float:
    """Wasserstein-1 distance of two samples. With equal sizes the empirical quantile
    functions are steps on the same grid, so W₁ = (1/n) Σᵢ |u₍ᵢ₎ − v₍ᵢ₎| (sorted): two sorts,
    5× faster than ``scipy.stats.wasserstein_distance`` on 800,000 rows, which is used
    for unequal sizes."""
    if len(u) == len(v) > 0:
        return float(np.mean(np.abs(np.sort(u) - np.sort(v))))
    return float(wasserstein_distance(u, v))


def wasserstein_scaled(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, *, complete_only: bool = False
) -> dict:
    """Wasserstein-1 distance per continuous column divided by its public range; for a
    column with ``missing: allowed``, between the present values (None when either side
    has none; the missing share is in the 1-way TVD, on its own cell). ``complete_only``
    leaves those columns out (the ``wasserstein_max`` gate: its Δ = 1/k needs k values)."""
    out: dict[str, float | None] = {}
    for c in schema.columns:
        if not isinstance(c, Continuous) or (complete_only and c.missing):
            continue
        u, v = (df[c.name].to_numpy(float, na_value=np.nan) for df in (real, synthetic))
        u, v = u[~np.isnan(u)], v[~np.isnan(v)]
        out[c.name] = wasserstein_1d(u, v) / (c.upper - c.lower) if len(u) and len(v) else None
    return out
