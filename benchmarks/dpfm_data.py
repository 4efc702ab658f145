"""The DPFM paper's data (Zhang, Xu, Tang, Qu; used by ``repro_dpfm``): simulation settings I
and II (§4.1: continuous N(0, Σ) columns with AR-1 or exchangeable Σ, uniform ordinal and
nominal columns, a logistic label) and Census Income (Adult) in the paper's 12 columns, each
in the schema's public numeric view (``MixedRows``) with the label's column index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from common import REPO

from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

N_SIM = 200
RHO = 0.95
SIM_BOUND = 4.0  # public bounds [−4, 4] of the N(0, Σ) columns; values are clipped to them
BETA0 = 1.5

ADULT_CSV = REPO / "flows" / "demo" / "adult.csv.gz"
WORKCLASS = {
    "Federal-gov": "Govt",
    "State-gov": "Govt",
    "Local-gov": "Govt",
    "Private": "Private",
    "Self-emp-inc": "Self-employed",
    "Self-emp-not-inc": "Self-employed",
    "Without-pay": "Without-pay",
    "Never-worked": "Without-pay",
}
MARRIED = ("Married-civ-spouse", "Married-AF-spouse")

BETAS: dict[str, tuple[tuple[float, ...], ...]] = {
    # β1 (continuous), β2 (2 dummies per {0,1,2} ordinal), β3, β4 (3 per {0..3} nominal), β5
    "I": (
        (3, 2.5, 2, 1.5, 1, 0.5),
        (0.3, 1, 0.1, 1, 0.2, 2, 0.5, 3),
        (1.5, 0.8, 0.5, 1.8),
        (0.5, 1, 3, 0.5, 1, 2, 0.5, 1, 0.3, 0.5, 1, 0.2),
        (1, 1.5, 0.5, 0.5),
    ),
}
SIM_SIZES = {"I": (6, 4, 4, 4, 4), "II": (20, 15, 15, 15, 15)}


def _sim_betas(setting: str) -> tuple[np.ndarray, ...]:
    """β1..β5 of a setting; setting II pads setting I's vectors with zeros."""
    base = BETAS["I"]
    p1, p2, p3, p4, p5 = SIM_SIZES[setting]
    widths = (p1, 2 * p2, p3, 3 * p4, p5)
    return tuple(np.pad(np.asarray(b, float), (0, w - len(b))) for b, w in zip(base, widths, strict=True))


@dataclass(frozen=True)
class Dataset:
    """One data set in the schema's public numeric view, plus the label's column index."""

    key: str
    title: str
    schema: Schema
    rows: MixedRows
    label: int


def covariance(p: int, structure: str, rho: float = RHO) -> np.ndarray:
    """AR-1 (Σ_ij = ρ^|i−j|) or exchangeable (correlation ρ²) with unit variances."""
    if structure == "ar1":
        idx = np.arange(p)
        return rho ** np.abs(idx[:, None] - idx[None, :])
    if structure == "exch":
        r = rho**2
        return (1 - r) * np.eye(p) + r * np.ones((p, p))
    raise ValueError(f"unknown covariance structure {structure!r}")


def _dummies(codes: np.ndarray, levels: int) -> np.ndarray:
    """(n, k) codes → (n, k·(levels−1)) dummies 1(x = l), l = 1..levels−1, per column."""
    return np.concatenate(
        [(codes[:, [j]] == np.arange(1, levels)).astype(float) for j in range(codes.shape[1])], 1
    )


def sim_schema(setting: str) -> Schema:
    """X1 continuous on [−4, 4], X2 ordinal {0,1,2}, X3 ordinal {0,1}, X4 nominal {0..3},
    X5 nominal {0,1}, then the label y (nominal {0,1})."""
    p1, p2, p3, p4, p5 = SIM_SIZES[setting]
    cols: list[Any] = [Continuous(f"x1_{j}", -SIM_BOUND, SIM_BOUND) for j in range(p1)]
    cols += [Ordinal(f"x2_{j}", ("0", "1", "2")) for j in range(p2)]
    cols += [Ordinal(f"x3_{j}", ("0", "1")) for j in range(p3)]
    cols += [Nominal(f"x4_{j}", ("0", "1", "2", "3")) for j in range(p4)]
    cols += [Nominal(f"x5_{j}", ("0", "1")) for j in range(p5)]
    cols.append(Nominal("y", ("0", "1")))
    return Schema(tuple(cols))


def simulate(setting: str, structure: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The paper's generator: (continuous (n, p1) clipped to [−4, 4], codes (n, p2+..+p5+1)).

    Discrete columns are uniform and independent; y ~ Bernoulli(logistic(β0 + βᵀz)) with z the
    continuous columns (as clipped) and the dummy-coded discrete ones."""
    p1, p2, p3, p4, p5 = SIM_SIZES[setting]
    x1 = rng.multivariate_normal(np.zeros(p1), covariance(p1, structure), size=n, method="cholesky")
    x1 = np.clip(x1, -SIM_BOUND, SIM_BOUND)
    x2, x3 = rng.integers(0, 3, (n, p2)), rng.integers(0, 2, (n, p3))
    x4, x5 = rng.integers(0, 4, (n, p4)), rng.integers(0, 2, (n, p5))
    b1, b2, b3, b4, b5 = _sim_betas(setting)
    eta = BETA0 + x1 @ b1 + _dummies(x2, 3) @ b2 + x3 @ b3 + _dummies(x4, 4) @ b4 + x5 @ b5
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return x1, np.column_stack([x2, x3, x4, x5, y])


def to_rows(schema: Schema, cont: np.ndarray, codes: np.ndarray) -> MixedRows:
    """Continuous columns first (raw values within bounds), then category codes → MixedRows."""
    n, p1 = cont.shape
    bins = np.empty((n, len(schema)), dtype=np.int64)
    unit = np.full((n, len(schema)), np.nan)
    for j, col in enumerate(schema.columns):
        if j < p1:
            bins[:, j] = col.to_bins(cont[:, j])
            unit[:, j] = col.to_unit(cont[:, j])
        else:
            bins[:, j] = codes[:, j - p1]
    return MixedRows(bins=bins, unit=unit)


def sim_dataset(setting: str, structure: str, rng: np.random.Generator) -> Dataset:
    """One replicate of simulation setting I or II (AR-1 or exchangeable)."""
    schema = sim_schema(setting)
    cont, codes = simulate(setting, structure, N_SIM, rng)
    name = {"ar1": "AR-1", "exch": "Exch"}[structure]
    return Dataset(
        f"sim_{setting}_{structure}",
        f"Sim {setting} {name}",
        schema,
        to_rows(schema, cont, codes),
        len(schema) - 1,
    )


ADULT_SCHEMA = Schema(
    (
        Continuous("age", 17, 90, integer=True),
        Continuous("education_num", 1, 16, integer=True),
        Continuous("hours-per-week", 1, 99, integer=True),
        Ordinal("capital_loss>0", ("no", "yes")),
        Ordinal("capital_gain>0", ("no", "yes")),
        Nominal("income", ("<=50K", ">50K")),
        Nominal("marital", ("Couple", "Single")),
        Nominal("native-country", ("US", "Non-US")),
        Nominal("sex", ("Male", "Female")),
        Nominal("workclass", ("Govt", "Private", "Self-employed", "Without-pay")),
        Nominal("race", ("White", "Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other")),
        Nominal(
            "relationship", ("Unmarried", "Wife", "Husband", "Not-in-family", "Own-child", "Other-relative")
        ),
    )
)


def load_adult_paper() -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Adult (flows/demo/adult.csv.gz) in the paper's 12 columns, rows with "?" anywhere dropped.

    Returns (continuous (N, 3), codes (N, 9) in ADULT_SCHEMA order, facts)."""
    raw = pd.read_csv(ADULT_CSV, skipinitialspace=True, dtype=str)
    clean = raw[~(raw == "?").any(axis=1)].reset_index(drop=True)
    cont = clean[["age", "education_num", "hours-per-week"]].astype(float).to_numpy()
    derived = {
        "capital_loss>0": np.where(clean["capital_loss"].astype(float) > 0, "yes", "no"),
        "capital_gain>0": np.where(clean["capital_gain"].astype(float) > 0, "yes", "no"),
        "income": clean["income"].str.rstrip("."),
        "marital": np.where(clean["marital_status"].isin(MARRIED), "Couple", "Single"),
        "native-country": np.where(clean["native-country"] == "United-States", "US", "Non-US"),
        "sex": clean["sex"],
        "workclass": clean["workclass"].map(WORKCLASS),
        "race": clean["race"],
        "relationship": clean["relationship"],
    }
    codes = np.column_stack(
        [
            pd.Categorical(np.asarray(derived[c.name]), categories=list(c.values)).codes
            for c in ADULT_SCHEMA.columns[3:]
        ]
    )
    if (codes < 0).any():
        raise ValueError("an Adult value is outside the declared categories")
    facts = {"rows_csv": len(raw), "rows_dropped": len(raw) - len(clean), "rows_clean": len(clean)}
    return cont, codes, facts


def adult_dataset(cont: np.ndarray, codes: np.ndarray, n: int, rng: np.random.Generator) -> Dataset:
    """A random subsample of n cleaned Adult rows (without replacement)."""
    idx = np.sort(rng.choice(len(cont), size=min(n, len(cont)), replace=False))
    rows = to_rows(ADULT_SCHEMA, cont[idx], codes[idx])
    return Dataset("adult", "Census (Adult)", ADULT_SCHEMA, rows, ADULT_SCHEMA.names.index("income"))
