"""``mst`` and ``aim`` through the real flow (issue 33): the rehearsal, the reserve, the
selections and tables in the ledger (stages ``select`` and ``measure``), the bundle, and
``audit verify`` re-deriving every Δ (a selection's Δ∞ included) and every scale from the
public facts (the tree or the rounds, as ``release.json`` publishes them); on the memory,
local and dask engines."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dprelease.flows.release import release
from dprelease.records.audit import verify_bundle
from tests.helpers import write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "age": {"type": "continuous", "bounds": [18, 90], "integer": True, "bins": 8},
    "income": {"type": "continuous", "bounds": [0, 200000], "atoms": [0], "bins": 8},
    "edu": {"type": "ordinal", "levels": ["low", "mid", "high"]},
    "sex": {"type": "nominal", "categories": ["f", "m"]},
}
PARAMS = {"mst": {"iters": 50}, "aim": {"rounds": 6, "round_iters": 20, "iters": 50, "target": "edu"}}


def _table(n: int = 1_500, seed: int = 0) -> pd.DataFrame:
    """age drives edu and income; sex independent."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    edu = np.where(age > 40, rng.choice(["mid", "high"], n), rng.choice(["low", "mid"], n))
    income = np.where(rng.random(n) < 0.3, 0, np.round(age * 1000 + rng.normal(0, 5000, n)).clip(1, 200000))
    return pd.DataFrame({"age": age, "income": income, "edu": edu, "sex": rng.choice(["f", "m"], n)})


@pytest.mark.parametrize(
    ("mechanism", "engine"),
    [("aim", {"name": "memory"}), ("mst", {"name": "local", "chunk_rows": 1_000}), ("aim", {"name": "dask"})],
    ids=["aim-memory", "mst-local", "aim-dask"],
)
def test_a_marginal_release_is_published_and_audited(tmp_path, mechanism, engine, request):
    if engine["name"] == "dask":
        engine = {"name": "dask", "scheduler": request.getfixturevalue("dask_cluster")}
    spec = write_spec(
        tmp_path,
        _table(),
        schema=SCHEMA,
        mechanism={"name": mechanism, "params": PARAMS[mechanism]},
        checks={"target": "sex"},
        engine=engine,
        output={"formats": ["csv"]},
    )
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="m", insecure_seed=4)
    doc = json.loads((out / "m" / "public" / "release.json").read_text())
    rows = doc["privacy"]["ledger"]["measurements"]
    selections = [r for r in rows if r["stage"] == "select"]
    tables = [r for r in rows if r["stage"] == "measure"]
    assert selections and len(selections) == len(tables)
    assert {r["mechanism"] for r in selections} == {"exponential"} and {
        r["sensitivity_norm"] for r in selections
    } == {"linf"}
    facts = doc["mechanism"]["facts"]
    assert len(facts["tree" if mechanism == "mst" else "rounds"]) == len(tables)
    checks = verify_bundle(out / "m", None)
    failed = [c for c in checks if not c.ok and c.group != "status"]  # status: --insecure-seed
    assert failed == []
    synthetic = pd.read_csv(out / "m" / "public" / "synthetic.csv")
    assert list(synthetic.columns) == list(SCHEMA) and len(synthetic) == 1_500
    assert set(synthetic["edu"]) <= {"low", "mid", "high"} and synthetic["income"].between(0, 200000).all()
