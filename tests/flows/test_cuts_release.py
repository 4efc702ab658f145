"""Groups at private quantiles through the real flow (issue 40): a small table whose skewed
column the public rule merges; the release measures ``cuts[...]`` in the ``marginals`` stage,
publishes the cut points in ``release.json``'s ``mechanism.facts``, and ``audit verify`` re-derives every Δ
from those facts; on the memory engine and on the local (streaming) one."""

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
    "wait": {"type": "continuous", "bounds": [0, 500]},  # 64 equal-width cells, most rows in the first
    "age": {"type": "continuous", "bounds": [18, 90], "integer": True, "bins": 8},  # declared: never cut
    "sex": {"type": "nominal", "categories": ["f", "m"]},
}


def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    wait = np.round(np.clip(rng.lognormal(2.0, 1.0, n), 0, 500), 1)
    return pd.DataFrame({"wait": wait, "age": rng.integers(18, 91, n), "sex": rng.choice(["f", "m"], n)})


@pytest.mark.parametrize(
    ("mechanism", "engine"),
    [("factor_gauss", {"name": "memory"}), ("mst", {"name": "local", "chunk_rows": 1_000})],
    ids=["factor_gauss-memory", "mst-local"],
)
def test_a_merged_column_is_cut_at_private_quantiles_published_and_audited(tmp_path, mechanism, engine):
    params = {"iters": 50} if mechanism == "mst" else {}  # the default cuts: quantiles
    streaming = engine["name"] != "memory"  # 1,500 rows in two chunks, at ε = 0.2 so that the rule merges
    spec = write_spec(
        tmp_path,
        _table(1_500 if streaming else 400),
        privacy={"epsilon": 0.2 if streaming else 1.0, "delta": 1e-6, "accountant": "zcdp"},
        schema=SCHEMA,
        mechanism={"name": mechanism, "params": params},
        checks={"target": "sex"},
        engine=engine,
        output={"formats": ["csv"]},
    )
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="q", insecure_seed=5)
    doc = json.loads((out / "q" / "public" / "release.json").read_text())
    rows = {r["statistic"]: r for r in doc["privacy"]["ledger"]["measurements"]}
    cuts = doc["mechanism"]["facts"]["cuts"]
    assert set(cuts) == {"wait"}  # the declared bins of age are final
    points = cuts["wait"]
    assert points == sorted(points) and all(0 < v < 500 for v in points)
    assert rows["cuts[wait]"]["stage"] == rows["histogram[wait]"]["stage"] == "marginals"
    assert rows["cuts[wait]"]["dimension"] == 64 and rows["histogram[wait]"]["dimension"] == len(points) + 1
    failed = [c for c in verify_bundle(out / "q", None) if not c.ok and c.group != "status"]
    assert failed == []
