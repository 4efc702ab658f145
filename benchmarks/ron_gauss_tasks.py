"""The three tasks of the RON-Gauss reproduction (used by ``repro_ron_gauss``): their data
(sklearn's digits for clustering; Adult's classification and regression design matrices on
the fixed 80/20 split; each also as the schema and rows a release fits, ``Table``) and their
learners and metrics (K-means silhouette with k chosen by silhouette, SVC accuracy,
KernelRidge RMSE).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from common import load_adult
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics import pairwise_distances, silhouette_score
from sklearn.svm import SVC

from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms.design import design
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import MixedRows

K_RANGE = range(2, 9)
KMEANS_INIT = 3  # k-means++ seedings per k
REG_LABEL = "age"
CLS_LABEL = "income"


@dataclass(frozen=True)
class Table:
    """What RON-Gauss is fitted on, as a release sees it: the public schema, the rows in its
    numeric view (``MixedRows``) and the label column (None: unsupervised). The mechanism's
    design matrix of the feature columns is the task's x (``x_train`` or the digits)."""

    schema: Schema
    rows: MixedRows
    label: str | None


@dataclass(frozen=True)
class Supervised:
    """A supervised task on Adult: design matrices and labels of the fixed 80/20 split, and
    the training rows with their label as the mechanism takes them (``train``)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    label: str
    row_bound: float
    train: Table


# ---------------------------------------------------------------- data


def digits_matrix() -> np.ndarray:
    """load_digits pixels (0..16) scaled by the public maximum 16 into [0, 1]^64."""
    return load_digits().data / 16.0


def digits_table(x: np.ndarray) -> Table:
    """The digits matrix as a schema of 64 ``Continuous`` columns with the public bounds
    [0, 1] (pixels / 16): the design is x itself (unit = x) and its row bound √64 = 8."""
    schema = Schema(tuple(Continuous(f"px{k}", 0.0, 1.0) for k in range(x.shape[1])))
    bins = np.column_stack([c.to_bins(x[:, k]) for k, c in enumerate(schema.columns)])
    return Table(schema, MixedRows(bins, x), None)


def _sub_schema(schema: Schema, drop: str) -> Schema:
    return Schema(tuple(c for c in schema.columns if c.name != drop))


def _encode(table: Any, schema: Schema) -> np.ndarray:
    """The public-box design matrix (``mechanisms.design``) of ``table``'s ``schema`` columns."""
    sub = table[schema.names]
    return design(schema).encode(table_to_rows(sub, table_to_bins(sub, schema), schema))


def adult_tasks() -> dict[str, Supervised]:
    """Adult's classification (income, 0/1) and regression (age on [−1, 1]) tasks. The
    mechanism sees the training rows in the full schema with the label column held out by
    ``RonGaussParams.label``: its features' design is ``x_train``, its label the class index
    (income's categories are ("<=50K", ">50K")) or 2·unit − 1 of age, i.e. ``y_train``."""
    adult = load_adult()
    train, test = adult.split()
    train_rows = table_to_rows(train, table_to_bins(train, adult.schema), adult.schema)
    cls_schema = _sub_schema(adult.schema, CLS_LABEL)
    positive = adult.schema[CLS_LABEL].categories[1]
    reg_schema = _sub_schema(adult.schema, REG_LABEL)
    age = adult.schema[REG_LABEL]
    assert isinstance(age, Continuous)

    def rescale(a: Any) -> np.ndarray:
        return 2.0 * (a.to_numpy(dtype=float) - age.lower) / (age.upper - age.lower) - 1.0

    return {
        "classification": Supervised(
            _encode(train, cls_schema),
            (train[CLS_LABEL] == positive).to_numpy(dtype=int),
            _encode(test, cls_schema),
            (test[CLS_LABEL] == positive).to_numpy(dtype=int),
            f"{CLS_LABEL} {positive}",
            design(cls_schema).max_norm,
            Table(adult.schema, train_rows, CLS_LABEL),
        ),
        "regression": Supervised(
            _encode(train, reg_schema),
            rescale(train[REG_LABEL]),
            _encode(test, reg_schema),
            rescale(test[REG_LABEL]),
            f"{REG_LABEL} (2·(age − {age.lower:g})/{age.upper - age.lower:g} − 1)",
            design(reg_schema).max_norm,
            Table(adult.schema, train_rows, REG_LABEL),
        ),
    }


# ---------------------------------------------------------------- learners and metrics


def kmeans_silhouette(x: np.ndarray, seed: int) -> tuple[float, int, KMeans | None]:
    """(best silhouette, its k, the fitted K-means) over k ∈ K_RANGE, as the paper's
    silhouette analysis picks k. Distances are computed once for all k. A sample K-means
    cannot split (all rows equal: a covariance clipped to 0) scores 0 with k = 1."""
    dist = pairwise_distances(x)
    best: tuple[float, int, KMeans | None] = (0.0, 1, None)
    if np.ptp(x, axis=0).max(initial=0.0) == 0.0:
        return best
    for k in K_RANGE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            km = KMeans(n_clusters=k, n_init=KMEANS_INIT, random_state=seed).fit(x)
        if len(np.unique(km.labels_)) < 2:
            continue
        s = float(silhouette_score(dist, km.labels_, metric="precomputed"))
        if best[2] is None or s > best[0]:
            best = (s, k, km)
    return best


def svm_metrics(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """Test accuracy (%) of SVC (RBF, defaults) and the share of positive predictions (%);
    a constant predictor when the training sample holds one class."""
    pred = np.full(len(y_test), y[0]) if len(np.unique(y)) < 2 else SVC().fit(x, y).predict(x_test)
    return {"score": float(100.0 * np.mean(pred == y_test)), "positive_rate": float(100.0 * np.mean(pred))}


def krr_metrics(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """Test RMSE of KernelRidge (RBF, defaults), the correlation of its predictions with the
    labels (0 for constant predictions) and the mean prediction."""
    pred = KernelRidge(kernel="rbf").fit(x, y).predict(x_test)
    corr = float(np.corrcoef(pred, y_test)[0, 1]) if np.std(pred) > 0 else 0.0
    return {
        "score": float(np.sqrt(np.mean((pred - y_test) ** 2))),
        "corr": corr,
        "pred_mean": float(np.mean(pred)),
    }
