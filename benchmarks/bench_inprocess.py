"""In-process measurements (no Prefect): mechanism time and utility of ``factor_gauss``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from common import MEAN_RANGE, Adult, median, summary, timed
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score

from dprelease.engines.tables import bins_to_table, read_table, table_to_bins
from dprelease.mechanisms import factor_gauss
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.factor_gauss import FactorGaussParams
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import MixedRows
from dprelease.spec import ReleaseSpec, load_spec

EPSILON = 1.0
DELTA = 1e-6
TARGET = "income"
POSITIVE = ">50K"


def release_once(
    bins: np.ndarray, schema: Schema, spec: ReleaseSpec, params: FactorGaussParams, epsilon: float, seed: int
) -> tuple[pd.DataFrame, float, float]:
    """fit + decode with one generator; returns (synthetic table, fit s, decode s)."""
    plan = plan_budget("zcdp", epsilon, DELTA, spec.stage_weights())
    rng = np.random.default_rng(seed)
    fitted, fit_s = timed(
        lambda: factor_gauss.FactorGauss().fit(MixedRows(bins), schema, plan, params, m=len(bins), rng=rng)
    )
    table, decode_s = timed(lambda: bins_to_table(fitted.rows.bins, schema, rng=rng))
    return table, fit_s, decode_s


def time_mechanism(bins: np.ndarray, schema: Schema, spec: ReleaseSpec, repeats: int) -> dict[str, Any]:
    """Median over ``repeats`` (seeds 0..repeats-1) of fit, decode and fit + decode, after one
    untimed warm-up call."""
    params = spec.mechanism_params()
    release_once(bins, schema, spec, params, EPSILON, seed=10_000)
    fits, decodes = [], []
    for seed in range(repeats):
        _, f, d = release_once(bins, schema, spec, params, EPSILON, seed)
        fits.append(f)
        decodes.append(d)
    totals = [f + d for f, d in zip(fits, decodes, strict=True)]
    return {
        "rows": len(bins),
        "repeats": repeats,
        "fit_s": median(fits),
        "decode_s": median(decodes),
        "total_s": median(totals),
        "total_all_s": totals,
    }


def time_loading(spec: ReleaseSpec, repeats: int) -> dict[str, float]:
    """Medians of ``read_table`` and ``table_to_bins`` (not part of the mechanism time)."""
    schema = spec.public_schema()
    reads, binning = [], []
    for _ in range(repeats):
        df, r = timed(lambda: read_table(spec.data_path, schema, spec.missing_tokens()))
        _, b = timed(lambda df=df: table_to_bins(df, schema))
        reads.append(r)
        binning.append(b)
    return {"read_table_s": median(reads), "table_to_bins_s": median(binning), "repeats": repeats}


def mechanism_adult(adult: Adult, repeats: int) -> dict[str, Any]:
    """Item 1: the 80% training split and the full table."""
    train, _ = adult.split()
    return {
        "train": time_mechanism(table_to_bins(train, adult.schema), adult.schema, adult.spec, repeats),
        "full": time_mechanism(table_to_bins(adult.table, adult.schema), adult.schema, adult.spec, repeats),
        "loading_full": time_loading(adult.spec, repeats),
    }


def mechanism_file(spec_path: Path, repeats: int, load_repeats: int) -> dict[str, Any]:
    """Item 2's in-process part: the same measurement on the spec's (large) data file."""
    spec = load_spec(spec_path)
    schema = spec.public_schema()
    bins = table_to_bins(read_table(spec.data_path, schema, spec.missing_tokens()), schema)
    result = time_mechanism(bins, schema, spec, repeats)
    del bins
    result["loading"] = time_loading(spec, load_repeats)
    return result


# ---------------------------------------------------------------------------------------- utility


def one_way_tvd(real: np.ndarray, synthetic: np.ndarray, n_bins: list[int]) -> np.ndarray:
    """Per column: ½ Σ |p − q| between the normalised bin counts."""
    out = np.empty(len(n_bins))
    for j, k in enumerate(n_bins):
        p = np.bincount(real[:, j], minlength=k) / len(real)
        q = np.bincount(synthetic[:, j], minlength=k) / len(synthetic)
        out[j] = 0.5 * np.abs(p - q).sum()
    return out


def model_frame(df: pd.DataFrame, schema: Schema) -> tuple[pd.DataFrame, np.ndarray]:
    """Features (categoricals with the declared categories, continuous as float) and y."""
    cols: dict[str, Any] = {}
    for c in schema.columns:
        if c.name == TARGET:
            continue
        if isinstance(c, Continuous):
            cols[c.name] = df[c.name].to_numpy(dtype=float)
        else:
            cols[c.name] = pd.Categorical(df[c.name], categories=list(c.values))
    return pd.DataFrame(cols), (df[TARGET].to_numpy(dtype=object) == POSITIVE)


def auc(train: pd.DataFrame, test: pd.DataFrame, schema: Schema) -> float:
    x_train, y_train = model_frame(train, schema)
    x_test, y_test = model_frame(test, schema)
    if len(np.unique(y_train)) < 2:
        return float("nan")  # a synthetic table without both classes: no classifier
    model = HistGradientBoostingClassifier(random_state=0, categorical_features="from_dtype")
    model.fit(x_train, y_train)
    return float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))


def _tvd_block(tvds: np.ndarray, names: list[str]) -> dict[str, Any]:
    """``tvds``: (seeds, columns). The mean over columns per seed, and the worst column
    (largest TVD averaged over seeds)."""
    worst = int(np.argmax(tvds.mean(axis=0)))
    return {
        "mean_tvd": summary([float(x) for x in tvds.mean(axis=1)], MEAN_RANGE),
        "worst_column": names[worst],
        "worst_column_tvd": summary([float(x) for x in tvds[:, worst]], MEAN_RANGE),
        "per_column_mean": dict(zip(names, (float(x) for x in tvds.mean(axis=0)), strict=True)),
    }


@dataclasses.dataclass(frozen=True)
class UtilityConfig:
    key: str
    label: str
    epsilon: float
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)


UTILITY_CONFIGS = (
    UtilityConfig("default", "factor_gauss, ε = 1 (default params)", 1.0),
    UtilityConfig(
        "no_correction",
        "ablation: attenuation_correction=False, ε = 1",
        1.0,
        {"attenuation_correction": False},
    ),
    UtilityConfig("ceiling", "ceiling: ε = 1e6 (near-noiseless)", 1e6),
)


def _paired(a: list[float], b: list[float]) -> dict[str, Any]:
    return summary([x - y for x, y in zip(a, b, strict=True)], MEAN_RANGE)


def utility(adult: Adult, seeds: int) -> dict[str, Any]:
    """Item 4: 1-way TVD on the public bins and income ROC-AUC (train synthetic, test real)."""
    schema, spec = adult.schema, adult.spec
    train, test = adult.split()
    train_bins = table_to_bins(train, schema)
    rows: dict[str, dict[str, Any]] = {}
    for cfg in UTILITY_CONFIGS:
        params = dataclasses.replace(spec.mechanism_params(), **cfg.overrides)
        tvds, aucs = [], []
        for seed in range(seeds):
            synthetic, _, _ = release_once(train_bins, schema, spec, params, cfg.epsilon, seed)
            # The released table seen through the public bins (decoding, then re-binning).
            tvds.append(one_way_tvd(train_bins, table_to_bins(synthetic, schema), schema.n_bins))
            aucs.append(auc(synthetic, test, schema))
        rows[cfg.key] = {
            "label": cfg.label,
            "epsilon": cfg.epsilon,
            "params": cfg.overrides,
            **_tvd_block(np.vstack(tvds), schema.names),
            "auc": summary(aucs, MEAN_RANGE),
        }
    # Same seeds give the same noisy measurements (the correction is post-processing), so
    # the with-minus-without differences are paired per seed.
    on, off = rows["default"], rows["no_correction"]
    gain = {
        "auc": _paired(on["auc"]["per_seed"], off["auc"]["per_seed"]),
        "mean_tvd": _paired(on["mean_tvd"]["per_seed"], off["mean_tvd"]["per_seed"]),
    }
    # Sampling-noise reference: an iid resample (with replacement) of the real training rows.
    ref = []
    for seed in range(seeds):
        idx = np.random.default_rng(seed).integers(0, len(train_bins), len(train_bins))
        ref.append(one_way_tvd(train_bins, train_bins[idx], schema.n_bins))
    return {
        "epsilon": EPSILON,
        "delta": DELTA,
        "seeds": seeds,
        "train_rows": len(train),
        "test_rows": len(test),
        "positive_rate_test": float(np.mean(test[TARGET] == POSITIVE)),
        "real_auc": auc(train, test, schema),
        "configs": rows,
        "correction_gain": gain,
        "resample_reference": _tvd_block(np.vstack(ref), schema.names),
    }
