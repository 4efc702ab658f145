"""Utility of a synthetic table measured against the confidential one.

Every number here is computed from confidential data without noise: it goes to
``internal/utility.json`` and the internal report only, never to ``public/`` or to an
artifact (an artifact may only say pass/fail per gate).

Tables arrive as public-bin indices (``engines.tables.table_to_bins``) and as values.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ConstantInputWarning, spearmanr, wasserstein_distance
from scipy.stats.contingency import association
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import r2_score, roc_auc_score
from sklearn.model_selection import cross_val_predict
from threadpoolctl import threadpool_limits

from mechanisms.schema import Continuous, Nominal, Ordinal, Schema

__all__ = [
    "MAX_PAIRS_COLUMNS",
    "association_matrix",
    "model_frame",
    "pmse",
    "total_variation",
    "tstr",
    "tvd_1way",
    "tvd_2way",
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


def _joint(bins: np.ndarray, i: int, j: int, ki: int, kj: int) -> np.ndarray:
    return np.bincount(bins[:, i].astype(np.int64) * kj + bins[:, j], minlength=ki * kj)


def tvd_2way(real: np.ndarray, syn: np.ndarray, schema: Schema, rng: np.random.Generator) -> dict:
    """Mean TVD of the two-way histograms (public bins) over column pairs."""
    k = schema.n_bins
    pairs, sampled = _pairs(len(schema), rng)
    tv = [total_variation(_joint(real, i, j, k[i], k[j]), _joint(syn, i, j, k[i], k[j])) for i, j in pairs]
    return {"mean": float(np.mean(tv)) if tv else 0.0, "pairs": len(pairs), "sampled_pairs": sampled}


def _cramers_v(bins: np.ndarray, i: int, j: int, ki: int, kj: int) -> float:
    table = _joint(bins, i, j, ki, kj).reshape(ki, kj)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    if min(table.shape) < 2:
        return 0.0
    return float(association(table, method="cramer"))


def association_matrix(bins: np.ndarray, values: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Pairwise association: Spearman's ρ between two non-nominal columns (continuous
    values, ordinal level codes); Cramér's V on the public-bin crosstab when either
    column is nominal (continuous columns enter it binned). Diagonal 1."""
    p = len(schema)
    out = np.eye(p)
    numeric = [j for j, c in enumerate(schema.columns) if not isinstance(c, Nominal)]
    if len(numeric) >= 2:
        cols = [
            values[c.name].to_numpy(float) if isinstance(c, Continuous) else bins[:, j].astype(float)
            for j, c in ((j, schema.columns[j]) for j in numeric)
        ]
        # a constant column (e.g. all zeros) has no ρ: scipy or numpy warn, NaN becomes 0 below
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", ConstantInputWarning)
            stat = spearmanr(np.column_stack(cols)).statistic  # a scalar for two columns
        rho = np.array([[1.0, stat], [stat, 1.0]]) if np.ndim(stat) == 0 else stat
        rho = np.nan_to_num(rho)  # a constant column has no rank correlation
        for a, i in enumerate(numeric):
            for b, j in enumerate(numeric):
                if i != j:
                    out[i, j] = rho[a, b]
    k = schema.n_bins
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


def _score(model, x_test: pd.DataFrame, y_test: np.ndarray, nominal: bool) -> float | None:
    """R², or ROC-AUC (binary: the later declared category is positive; more classes:
    one-vs-rest macro average). None when the AUC is undefined (one class)."""
    if not nominal:
        return float(r2_score(y_test, model.predict(x_test)))
    classes = list(model.classes_)
    present = set(np.unique(y_test))
    if len(present) < 2 or not present <= set(classes):
        return None
    proba = model.predict_proba(x_test)
    if len(classes) == 2:
        return float(roc_auc_score(y_test == classes[1], proba[:, 1]))
    return float(roc_auc_score(y_test, proba, multi_class="ovr", labels=classes))


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
    is positive; more classes: one-vs-rest macro average); continuous → R²."""
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
    for name, train in (("tstr", synthetic), ("trtr", real_train)):
        x, y = xy(train)
        if nominal and len(np.unique(y)) < 2:
            scores[name] = None
            continue
        with _one_thread():
            model = model_type(categorical_features="from_dtype", random_state=seed).fit(x, y)
            scores[name] = _score(model, x_test, y_test, nominal)
    ratio = scores["tstr"] / scores["trtr"] if scores["tstr"] is not None and scores["trtr"] else None
    return {
        "target": target,
        "metric": "roc_auc" if nominal else "r2",
        "tstr": scores["tstr"],
        "trtr": scores["trtr"],
        "ratio": ratio,
        "test_rows": len(real_test),
    }


def pmse(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, *, seed: int) -> dict:
    """Propensity mean squared error (Woo et al. 2009): a classifier tells real (0) from
    synthetic (1); with c = n_syn/(n_real + n_syn) and 5-fold cross-validated scores p̂,
    pMSE = mean((p̂ − c)²). 0 is indistinguishable; c(1−c) (0.25 for equal sizes) is
    perfectly separable."""
    x = pd.concat([model_frame(real, schema), model_frame(synthetic, schema)], ignore_index=True)
    y = np.r_[np.zeros(len(real)), np.ones(len(synthetic))]
    c = len(synthetic) / len(y)
    model = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
    folds = min(5, len(real), len(synthetic))
    with _one_thread():
        p = cross_val_predict(model, x, y, cv=folds, method="predict_proba")[:, 1]
    return {"pmse": float(np.mean((p - c) ** 2)), "worst": c * (1 - c), "folds": folds}


def wasserstein_scaled(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict:
    """Wasserstein-1 distance per continuous column divided by its public range."""
    return {
        c.name: float(
            wasserstein_distance(real[c.name].to_numpy(float), synthetic[c.name].to_numpy(float))
            / (c.upper - c.lower)
        )
        for c in schema.columns
        if isinstance(c, Continuous)
    }
