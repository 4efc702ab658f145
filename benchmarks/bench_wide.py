"""Item 16 ``wide``: releases of 15 to 200 mixed columns through the CLI, and a table with
missing incomes (issue 19).

Wide tables: a public generator (no real data) draws n = 20,000 rows from a 5-factor
Gaussian and cuts each latent column into a declared kind: 40 % continuous (every other one
log-scale with an atom at 0, every fifth ``missing: allowed`` with 10 % missing), 15 %
ordinal (5 levels), 45 % nominal (3 to 8 categories), the first nominal the checks' target.
Each width runs ``dprelease release SPEC --insecure-seed 1 --verbose`` (memory engine,
ε = 1, δ = 1e-6, the checks on, no gates) after one discarded warm-up, and reports wall
time, peak RSS of the process tree, the mechanism's task times and the checks' figures.
``factor_gauss`` costs O(n·p) for the marginals, O(n·p²) for the latent second moment and
O(p³) for its eigendecomposition, so the table sets each width's mechanism time beside the
15-column time scaled by (p/15)².

Missing incomes: 20,000 people (age, work status, sex, hours, income) whose income is
missing for 70 % of people out of work and 5 % of the employed; the release's missing
shares overall and by work status beside the real ones, and the checks' figures.

``.venv/bin/python benchmarks/run.py --only wide`` (``--quick``: widths 15 and 50).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from bench_cli import release_run
from common import load_avg

WIDTHS = (15, 50, 100, 200)
ROWS = 20_000
FACTORS = 5
SEED = 16


def wide_table(p: int, n: int = ROWS, seed: int = SEED) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A table of p mixed columns and its public schema (declared from the generator)."""
    rng = np.random.default_rng([seed, p])
    loadings = rng.normal(0, 1, (p, FACTORS)) / np.sqrt(FACTORS)
    z = rng.normal(0, 1, (n, FACTORS)) @ loadings.T + rng.normal(0, 0.7, (n, p))
    u = (np.argsort(np.argsort(z, axis=0), axis=0) + 0.5) / n  # uniform scores per column
    data: dict[str, Any] = {}
    schema: dict[str, Any] = {}
    n_cont, n_ord = round(0.4 * p), round(0.15 * p)
    for j in range(p):
        name = f"c{j:03d}"
        if j < n_cont:
            if j % 2:
                x = np.where(u[:, j] < 0.3, 0, np.round(np.exp(5 + 8 * (u[:, j] - 0.3))))
                schema[name] = {
                    "type": "continuous",
                    "bounds": [0, 100_000],
                    "integer": True,
                    "transform": "log",
                    "atoms": [0],
                }
            else:
                x = np.round(100 * u[:, j], 2)
                schema[name] = {"type": "continuous", "bounds": [0.0, 100.0], "decimals": 2}
            if j % 5 == 0:
                x = np.where(rng.random(n) < 0.1, np.nan, x)
                schema[name]["missing"] = "allowed"
            data[name] = x
        elif j < n_cont + n_ord:
            levels = [f"l{k}" for k in range(5)]
            data[name] = np.array(levels)[np.minimum((u[:, j] * 5).astype(int), 4)]
            schema[name] = {"type": "ordinal", "levels": levels}
        else:
            cats = [f"k{k}" for k in range(3 + j % 6)]
            data[name] = np.array(cats)[np.minimum((u[:, j] * len(cats)).astype(int), len(cats) - 1)]
            schema[name] = {"type": "nominal", "categories": cats}
    target = next(n for n, c in schema.items() if c["type"] == "nominal")
    return pd.DataFrame(data), {"schema": schema, "target": target}


def incomes_table(n: int = ROWS, seed: int = SEED) -> tuple[pd.DataFrame, dict[str, Any]]:
    """People with incomes missing mostly for those out of work, and its public schema."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    out = rng.random(n) < np.where(age > 65, 0.8, 0.15)
    sex = rng.choice(["female", "male"], n)
    hours = np.where(out, 0, np.clip(np.round(rng.normal(38, 8, n)), 1, 99))
    income = np.round(np.exp(rng.normal(10.2, 0.6, n) + 0.01 * (hours - 38))).clip(0, 500_000)
    income = np.where(rng.random(n) < 0.7 * out + 0.05 * ~out, np.nan, np.where(out, 0, income))
    data = pd.DataFrame(
        {
            "age": age,
            "work": np.where(out, "out", "employed"),
            "sex": sex,
            "hours": hours.astype(int),
            "income": income,
        }
    )
    schema = {
        "age": {"type": "continuous", "bounds": [18, 90], "integer": True},
        "work": {"type": "nominal", "categories": ["employed", "out"]},
        "sex": {"type": "nominal", "categories": ["female", "male"]},
        "hours": {"type": "continuous", "bounds": [0, 99], "integer": True, "atoms": [0]},
        "income": {
            "type": "continuous",
            "bounds": [0, 500_000],
            "integer": True,
            "transform": "log",
            "atoms": [0],
            "missing": "allowed",
        },
    }
    return data, {"schema": schema, "target": "work"}


def write_spec(folder: Path, label: str, data: pd.DataFrame, info: dict[str, Any]) -> Path:
    data.to_csv(folder / f"{label}.csv", index=False)
    spec = {
        "release_id": None,
        "dataset": {"name": label, "path": f"{label}.csv"},
        "schema": info["schema"],
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "accountant": "zcdp"},
        "mechanism": {"name": "factor_gauss", "params": {"target": info["target"]}},
        "checks": {"target": info["target"], "holdout_fraction": 0.2},
    }
    path = folder / f"{label}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _checks(out: Path) -> dict[str, Any]:
    """The checks' figures from the release's internal utility report."""
    (release,) = [d for d in (out / "out").iterdir() if d.is_dir()]
    u = json.loads((release / "internal" / "utility.json").read_text())
    return {
        "tvd_1way": u["tvd_1way"]["mean"],
        "tvd_2way": u["tvd_2way"]["mean"],
        "assoc_diff": u["corr_diff"]["mean"],
        "pmse": u["pmse"]["pmse"],
        "tstr": u["tstr"]["tstr"],
        "trtr": u["tstr"]["trtr"],
    }


def _missing_shares(df: pd.DataFrame) -> dict[str, float]:
    gone = df["income"].isna()
    return {
        "all": float(gone.mean()),
        "out": float(gone[df["work"] == "out"].mean()),
        "employed": float(gone[df["work"] == "employed"].mean()),
    }


def run(quick: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    load_start = load_avg()
    widths = WIDTHS[:2] if quick else WIDTHS
    with tempfile.TemporaryDirectory(prefix="dprelease-bench-wide-") as tmp:
        root = Path(tmp)
        home = root / "prefect-home"
        home.mkdir()
        release_run(write_spec(root, "warm", *wide_table(15, 2_000)), root, "warm-up", home)
        runs = []
        for p in widths:
            spec = write_spec(root, f"wide{p}", *wide_table(p))
            r = release_run(spec, root, f"wide-{p}", home)
            runs.append({"columns": p, "rows": ROWS, **asdict(r), "checks": _checks(root / f"wide-{p}")})
        data, info = incomes_table()
        r = release_run(write_spec(root, "incomes", data, info), root, "incomes", home)
        (release,) = [d for d in (root / "incomes" / "out").iterdir() if d.is_dir()]
        syn = pd.read_csv(release / "public" / "synthetic.csv")
        incomes = {
            **asdict(r),
            "rows": len(data),
            "real": _missing_shares(data),
            "synthetic": _missing_shares(syn),
            "checks": _checks(root / "incomes"),
        }
    return {
        "quick": quick,
        "rows": ROWS,
        "runs": runs,
        "incomes": incomes,
        "load_avg_1m": {"start": load_start, "end": load_avg()},
        "wall_s": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("wide", run))
