"""Record-linkage risk of a synthetic table: distances to the closest real record, exact
matches, correct links for row-preserving mechanisms, and a membership signal.

Distances are Gower-style on public scales: a continuous column contributes
|x − y|/(upper − lower), an ordinal column |i − j|/(L − 1), a nominal column 0 or 1;
the distance is their mean over columns, so it lies in [0, 1]. Everything here is
confidential (``internal/linkage.json``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from dprelease.mechanisms.schema import Continuous, Nominal, Schema

__all__ = [
    "EXACT_MATCH_DISTANCE",
    "correct_link_rate",
    "dcr_summary",
    "exact_match_rates",
    "gower_features",
    "membership_share",
    "nearest",
]

EXACT_MATCH_DISTANCE = 1e-6  # as in the spectral anonymization paper
_CHUNK = 512


def gower_features(df: pd.DataFrame, bins: np.ndarray, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """(n, p) float32 features on [0, 1] (nominal: the category code) and the nominal mask.
    A missing value (``missing: allowed``) is −1: ``nearest`` caps each column's |x − y|
    at 1, so it is at distance 1 from every present value and 0 from another missing one
    (Gower's convention for a missing cell scored as a mismatch)."""
    out = np.empty((len(df), len(schema)), dtype=np.float32)
    for j, c in enumerate(schema.columns):
        if isinstance(c, Continuous):
            x = (df[c.name].to_numpy(float, na_value=np.nan) - c.lower) / (c.upper - c.lower)
            out[:, j] = np.where(np.isnan(x), -1.0, x)
        elif isinstance(c, Nominal):
            out[:, j] = bins[:, j]
        else:
            out[:, j] = bins[:, j] / (c.n_bins - 1)
    return out, np.array([isinstance(c, Nominal) for c in schema.columns])


def _one_hot(codes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(n, Σ sizes) float32: one 1 per row and nominal column, at that column's code."""
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    out = np.zeros((len(codes), int(sizes.sum())), dtype=np.float32)
    out[np.arange(len(codes))[:, None], offsets + codes.astype(np.int64)] = 1.0
    return out


def nearest(
    query: np.ndarray, ref: np.ndarray, nominal: np.ndarray, *, self_index: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Gower distance from each query row to its nearest ref row, and that row's index.
    ``self_index[i]`` (if given) is query row i's own position in ref, which is skipped
    (nearest *other* record).

    The nominal mismatches are counted as (number of nominal columns) − Q·Rᵀ with Q, R the
    rows' one-hot codes: a matrix product, exact in float32 (integer counts), instead of
    one comparison pass per column, and the other columns' |x − y| in place (the demo
    release's distance step: 2.3 s → 1.5 s)."""
    p = query.shape[1]
    numeric = np.flatnonzero(~nominal)
    sizes = (
        np.maximum(query[:, nominal].max(initial=0, axis=0), ref[:, nominal].max(initial=0, axis=0)) + 1
    ).astype(np.int64)
    q_hot, r_hot_t = _one_hot(query[:, nominal], sizes), _one_hot(ref[:, nominal], sizes).T
    capped = {j for j in numeric if min(query[:, j].min(initial=0), ref[:, j].min(initial=0)) < 0}
    dist = np.empty(len(query))
    idx = np.empty(len(query), dtype=np.int64)
    with threadpool_limits(limits=1, user_api="blas"):  # the utility check runs meanwhile
        for start in range(0, len(query), _CHUNK):
            q = query[start : start + _CHUNK]
            d = np.float32(len(sizes)) - q_hot[start : start + _CHUNK] @ r_hot_t
            step = np.empty_like(d)  # in place: half the time of d += np.abs(q − r)
            for j in numeric:
                np.subtract(q[:, j, None], ref[None, :, j], out=step)
                np.abs(step, out=step)
                if j in capped:  # a missing value (−1) against a present one: 1
                    np.minimum(step, 1.0, out=step)
                d += step
            if self_index is not None:
                d[np.arange(len(q)), self_index[start : start + _CHUNK]] = np.inf
            idx[start : start + len(q)] = np.argmin(d, axis=1)
            dist[start : start + len(q)] = d[np.arange(len(q)), idx[start : start + len(q)]] / p
    return dist, idx


def dcr_summary(distances: np.ndarray) -> dict:
    """Quantiles and mean of a distance-to-closest-record sample, and a 40-bin histogram
    on [0, max] for the report."""
    qs = [0.0, 0.01, 0.05, 0.25, 0.5]
    hist, edges = np.histogram(distances, bins=40, range=(0.0, max(float(distances.max()), 1e-9)))
    return {
        "rows": len(distances),
        "mean": float(distances.mean()),
        "quantiles": {f"q{int(q * 100):02d}": float(np.quantile(distances, q)) for q in qs},
        "histogram": {"counts": hist.tolist(), "edges": edges.tolist()},
    }


def exact_match_rates(real: pd.DataFrame, synthetic: pd.DataFrame) -> dict:
    """On all rows (hashing, no subsample): the share of synthetic rows equal to some
    real row, and equal to a real row that is unique in the real data."""
    h_real = pd.util.hash_pandas_object(real, index=False).to_numpy()
    h_syn = pd.util.hash_pandas_object(synthetic[real.columns], index=False).to_numpy()
    values, counts = np.unique(h_real, return_counts=True)
    match = np.isin(h_syn, values)
    unique_match = np.isin(h_syn, values[counts == 1])
    return {"exact_match_rate": float(match.mean()), "unique_exact_match_rate": float(unique_match.mean())}


def correct_link_rate(
    real: np.ndarray, synthetic: np.ndarray, nominal: np.ndarray, rows: np.ndarray, ref_rows: np.ndarray
) -> float:
    """For mechanisms whose output row i comes from input row i: the share of the
    sampled synthetic ``rows`` whose nearest real row (among ``ref_rows``, which holds
    them) is their own source row. Distance-based record linkage as in the spectral
    anonymization paper; on a subsample of candidates it over-states the full-data rate."""
    _, idx = nearest(synthetic[rows], real[ref_rows], nominal)
    return float(np.mean(ref_rows[idx] == rows))


def membership_share(
    train: np.ndarray, holdout: np.ndarray, synthetic: np.ndarray, nominal: np.ndarray
) -> float:
    """Share of synthetic rows strictly closer to a training row than to any holdout row,
    with equally many training and holdout rows; ties count half. 0.5 means the release
    is no closer to the rows it was fitted on than to fresh rows of the population."""
    d_train, _ = nearest(synthetic, train, nominal)
    d_hold, _ = nearest(synthetic, holdout, nominal)
    return float(np.mean(d_train < d_hold) + 0.5 * np.mean(d_train == d_hold))
