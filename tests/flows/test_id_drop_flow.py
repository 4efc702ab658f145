"""Issue 19: identifier and dropped columns through the real flow (memory and local
engines). The readers check they are in the header and never read them into the model;
the published table has fresh identifiers in the declared format, in the declared column
order, and no dropped column; no real identifier or dropped text reaches any public file."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows.release import release
from tests.helpers import cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "person": {"type": "id", "format": "SYN-{:06d}"},
    "age": {"type": "continuous", "bounds": [18, 90], "integer": True},
    "notes": {"type": "drop"},
    "group": {"type": "nominal", "categories": ["a", "b"]},
}
SECRET = "REAL-7731-secret"


def _table(n: int = 2_500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "person": [f"{SECRET}-{i}" for i in range(n)],
            "age": rng.integers(18, 91, n),
            "notes": [f"free text about {SECRET} number {i}" for i in range(n)],
            "group": rng.choice(["a", "b"], n),
        }
    )


@pytest.mark.parametrize("engine", [{"name": "memory"}, {"name": "local", "chunk_rows": 1_000}])
def test_identifiers_are_fresh_and_dropped_columns_are_gone(tmp_path, engine):
    spec = write_spec(
        tmp_path,
        _table(),
        schema=SCHEMA,
        checks={"target": "group"},
        mechanism={"name": "factor_gauss", "params": {}},
        engine=engine,
        output={"formats": ["csv", "parquet"]},
    )
    release(str(spec), str(tmp_path / "out"), release_id="ids", insecure_seed=2)
    public = tmp_path / "out" / "ids" / "public"
    syn = pd.read_csv(public / "synthetic.csv")
    assert list(syn.columns) == ["person", "age", "group"]  # declared order, no 'notes'
    assert list(syn["person"]) == [f"SYN-{i:06d}" for i in range(1, len(syn) + 1)]
    parquet = pd.read_parquet(public / "synthetic.parquet")
    assert parquet["person"].tolist() == syn["person"].tolist()
    for f in (p for p in public.rglob("*") if p.is_file()):  # tables/ and replicates/ too
        assert SECRET not in f.read_text(errors="replace"), f.name
    doc = json.loads((public / "release.json").read_text())
    assert doc["columns"]["modelled"] == ["age", "group"]
    assert doc["columns"]["identifiers"] == {"person": "SYN-{:06d}"} and doc["columns"]["dropped"] == [
        "notes"
    ]
    assert doc["outputs"]["synthetic.csv"]["columns"] == ["person", "age", "group"]
    readme = (public / "README.txt").read_text()
    assert "Left out of the release (type: drop): notes." in readme
    assert {m["statistic"] for m in doc["privacy"]["ledger"]["measurements"]} >= {
        "histogram[age]",
        "histogram[group]",
    }
    assert not any(
        "person" in m["statistic"] or "notes" in m["statistic"]
        for m in doc["privacy"]["ledger"]["measurements"]
    )


def test_a_declared_drop_column_missing_from_the_file_is_refused_before_prefect(tmp_path):
    spec = write_spec(
        tmp_path,
        _table().drop(columns=["notes"]),
        schema=SCHEMA,
        checks={"target": "group"},
        mechanism={"name": "factor_gauss", "params": {}},
    )
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "column 'notes' is declared in the schema but missing from the data" in cli_text(result.output)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("{:06d}", "literal text beside it"),
        ("SYN-{}-{}", "one integer field"),
        ("SYN", "literal text beside it"),
    ],
)
def test_an_identifier_format_needs_one_field_and_literal_text(tmp_path, fmt, message):
    schema = {**SCHEMA, "person": {"type": "id", "format": fmt}}
    spec = write_spec(tmp_path, _table(), schema=schema, checks={"target": "group"})
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2 and message in cli_text(result.output), result.output
