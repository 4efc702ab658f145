"""End to end: streaming releases through the real Prefect flow (local and Dask engines):
the published bundle, the same rows from both engines, and a bad value in a late chunk
stopped before any noise. The passes themselves are in tests/engines."""

import json

import pandas as pd
import pytest

from dprelease.engines.inputs import InputRefused
from dprelease.flows.release import release
from dprelease.records.audit import verify_bundle
from tests.helpers import adult_rows, assert_nothing_published, assert_nothing_spent, ledger_rows, write_spec

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("prefect_harness"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

CHECKS = {
    "target": "income",
    "holdout_fraction": 0.2,
    "sample_rows": 1_000,
    "gates": {"tvd_1way": {"max": 0.9}},  # decided on the 1,000-row sample: Δ = 1/1,000
}


def _spec(folder, engine, data=None, **more):
    folder.mkdir(parents=True, exist_ok=True)
    return write_spec(
        folder, adult_rows(6_000, seed=9) if data is None else data, checks=CHECKS, engine=engine, **more
    )


@pytest.fixture(scope="module")
def local_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    spec = _spec(root, {"name": "local", "chunk_rows": 2_000}, output={"formats": ["csv", "parquet"]})
    release(str(spec), str(root / "out"), release_id="stream-local", insecure_seed=5)
    return root / "out" / "stream-local"


def test_local_engine_publishes_parquet_and_csv_in_the_manifest(local_bundle):
    public, internal = local_bundle / "public", local_bundle / "internal"
    manifest = json.loads((public / "manifest.json").read_text())["files"]
    assert {"synthetic.csv", "synthetic.parquet"} <= set(manifest)
    checks = verify_bundle(local_bundle, None)
    assert [c.name for c in checks if not c.ok] == ["randomness"]  # --insecure-seed is flagged

    doc = json.loads((public / "release.json").read_text())
    n_fit = doc["privacy"]["rows_fitted"]
    assert doc["privacy"]["input_rows_n_public"] == 6_000 and abs(n_fit - 4_800) < 4 * (6_000 * 0.16) ** 0.5
    assert doc["engine"] == {**doc["engine"], "name": "local", "chunk_rows": 2_000}
    assert "chunks" not in doc["engine"]  # a function of the file's byte length: not published
    assert doc["engine"]["checks_sample"]["rows"] == 1_000
    assert doc["outputs"]["synthetic.parquet"] == {**doc["outputs"]["synthetic.parquet"], "rows": n_fit}
    # 15 histograms, the cuts of hours-per-week (4,800 rows merge its 99 cells into groups placed
    # by private mass), the moment, 14 tables with income, 28 of the other categorical pairs, a gate
    names = [m["statistic"] for m in doc["privacy"]["ledger"]["measurements"]]
    assert len(names) == 60 and [c for c in names if c.startswith("cuts[")] == ["cuts[hours-per-week]"]
    assert doc["checks"]["compared_rows"] == 1_000 and doc["checks"]["gates"][0]["passed"]

    parquet = pd.read_parquet(public / "synthetic.parquet")
    csv = pd.read_csv(
        public / "synthetic.csv", dtype={c: str for c in parquet.columns if parquet[c].dtype != "int64"}
    )
    assert len(parquet) == n_fit and list(parquet.columns) == list(csv.columns)
    assert parquet.astype(str).equals(csv.astype(str))
    assert parquet["age"].between(17, 90).all() and set(parquet["sex"]) <= {"Female", "Male"}

    validation = json.loads((internal / "validation_input.json").read_text())
    assert validation["rows"] == 6_000 and "in chunks" in validation["validated"]
    assert validation["chunks"] in (3, 4)  # of about 2,000 rows
    assert (internal / "utility.json").is_file() and (internal / "report.html").is_file()


def test_dask_engine_release_equals_the_local_one(local_bundle, dask_cluster, tmp_path):
    """Same data, same seed: the Dask engine's bundle holds the very same synthetic rows
    (its statistics equal the local engine's; the noise is drawn once, on the driver);
    the scheduler's address is not published."""
    spec = _spec(
        tmp_path,
        {"name": "dask", "chunk_rows": 2_000, "scheduler": dask_cluster},
        output={"formats": ["parquet"]},
    )
    release(str(spec), str(tmp_path / "out"), release_id="stream-dask", insecure_seed=5)
    public = tmp_path / "out" / "stream-dask" / "public"
    doc = json.loads((public / "release.json").read_text())
    assert doc["engine"]["name"] == "dask" and doc["engine"]["workers"] == 2
    assert dask_cluster not in (public / "release.json").read_text()
    mine = pd.read_parquet(public / "synthetic.parquet")
    assert mine.equals(pd.read_parquet(local_bundle / "public" / "synthetic.parquet"))
    local_doc = json.loads((local_bundle / "public" / "release.json").read_text())
    assert len(doc["privacy"]["ledger"]["measurements"]) == 60  # once per statistic, not per chunk
    values = [m["noise_scale"] for m in doc["privacy"]["ledger"]["measurements"]]
    assert values == [m["noise_scale"] for m in local_doc["privacy"]["ledger"]["measurements"]]


def test_a_bad_value_in_a_late_chunk_stops_before_any_noise(tmp_path):
    data = adult_rows(6_000, seed=9)
    data.loc[5_500, "age"] = "200"
    spec = _spec(tmp_path, {"name": "local", "chunk_rows": 2_000}, data=data)
    out = tmp_path / "out"
    with pytest.raises(InputRefused) as err:
        release(str(spec), str(out), release_id="late-bad")
    assert "column 'age'" not in str(err.value)  # what Prefect stores names no column
    message = err.value.detail
    assert "column 'age': values must lie within the public bounds [17, 90]" in message
    assert "200" not in message
    assert_nothing_published(out, "late-bad")
    assert_nothing_spent(out, "late-bad")
    assert len(ledger_rows(out, "late-bad")) == 1
    failure = next((out / "failures").iterdir())
    report = json.loads((failure / "internal" / "validation_input.json").read_text())
    age = next(r for r in report["results"] if r["column"] == "age" and not r["success"])
    assert age["unexpected_count"] == 1 and age["element_count"] == 6_000
