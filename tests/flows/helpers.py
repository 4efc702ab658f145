"""Spec and data builders for the flow tests: the demo's public schema on small data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

DEMO_DIR = Path(__file__).resolve().parents[2] / "flows" / "demo"
DEMO_SPEC = yaml.safe_load((DEMO_DIR / "adult.yaml").read_text())


def adult_rows(n: int, seed: int = 0) -> pd.DataFrame:
    df = pd.read_csv(DEMO_DIR / "adult.csv", dtype=str, keep_default_na=False)
    return df.sample(n=n, random_state=seed).reset_index(drop=True)


def write_spec(folder: Path, data: pd.DataFrame | None = None, **overrides) -> Path:
    """A spec with the demo schema and checks without gates (small data cannot pass the
    demo's); ``data`` is written to data.csv beside it."""
    base = {**DEMO_SPEC, "dataset": {"name": "adult", "path": "data.csv"}, "checks": {"target": "income"}}
    spec = {**base, **overrides}
    if data is not None:
        data.to_csv(folder / "data.csv", index=False)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
