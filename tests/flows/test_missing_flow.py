"""Issue 19: ``missing: allowed`` on continuous columns, through the real flow (memory and
local engines). The missing cell is one more cell of the column's private marginal, of the
latent model and of the ``refine`` tables, so the synthetic table has empty cells at about
the real rate and tied to the same columns (here: income missing for people out of work)."""

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows.release import release
from tests.helpers import cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "age": {"type": "continuous", "bounds": [18, 90], "integer": True},
    "work": {"type": "nominal", "categories": ["employed", "out"]},
    "income": {
        "type": "continuous",
        "bounds": [0, 500_000],
        "integer": True,
        "transform": "log",
        "atoms": [0],
        "missing": "allowed",
    },
}
N = 6_000
MISSING_IF_OUT, MISSING_IF_EMPLOYED = 0.7, 0.05


def _table(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    out = rng.random(n) < np.where(age > 65, 0.8, 0.15)
    income = np.round(np.exp(rng.normal(10.3, 0.6, n))).clip(0, 500_000)
    income[rng.random(n) < 0.1] = 0
    missing = rng.random(n) < np.where(out, MISSING_IF_OUT, MISSING_IF_EMPLOYED)
    return pd.DataFrame(
        {
            "age": age,
            "work": np.where(out, "out", "employed"),
            "income": pd.array(np.where(missing, np.nan, income), dtype="Int64"),
        }
    )


def _missing_shares(df: pd.DataFrame) -> tuple[float, float, float]:
    gone = df["income"].isna()
    return (
        float(gone.mean()),
        float(gone[df["work"] == "out"].mean()),
        float(gone[df["work"] == "employed"].mean()),
    )


@pytest.mark.parametrize("engine", [{"name": "memory"}, {"name": "local", "chunk_rows": 2_000}])
def test_missing_incomes_come_out_at_the_real_rate_and_in_the_right_rows(tmp_path, engine):
    """Tolerance 0.05 on each share: the sampling s.d. of a share among ~1,900 synthetic
    people out of work is √(0.7·0.3/1,900) ≈ 0.011 and the noise on the missing cell's
    counts at ε = 1 moves it by well under 0.01 (``privacy.accuracy`` in release.json), so
    0.05 is over 4 s.d.; an income missing independently of work would give 0.29 and 0.29."""
    real = _table()
    spec = write_spec(
        tmp_path,
        real,
        schema=SCHEMA,
        checks={"target": "work"},
        mechanism={"name": "factor_gauss", "params": {"target": "work"}},
        engine=engine,
        output={"formats": ["csv", "parquet"]},
    )
    release(str(spec), str(tmp_path / "out"), release_id="miss", insecure_seed=3)
    public = tmp_path / "out" / "miss" / "public"
    text = (public / "synthetic.csv").read_text()
    assert "nan" not in text.lower() and ",\n" in text  # empty cells, the column last
    syn = pd.read_csv(public / "synthetic.csv")
    assert pq.read_schema(public / "synthetic.parquet").field("income").type == "int64"
    want, got = _missing_shares(real), _missing_shares(syn)
    assert np.allclose(got, want, atol=0.05), (got, want)
    present = syn["income"].dropna()
    assert (present == np.round(present)).all() and (present == 0).mean() > 0.05  # atoms kept
    doc = json.loads((public / "release.json").read_text())
    assert "histogram[income]" in {m["statistic"] for m in doc["privacy"]["ledger"]["measurements"]}


def test_an_empty_cell_without_missing_allowed_is_refused_naming_the_fix(tmp_path):
    schema = {**SCHEMA, "income": {k: v for k, v in SCHEMA["income"].items() if k != "missing"}}
    spec = write_spec(tmp_path, _table(500), schema=schema, checks={"target": "work"})
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    text = cli_text(result.output)
    assert "income" in text and "declare `missing: allowed`" in text, text


def test_missing_allowed_needs_a_mechanism_that_models_cells(tmp_path):
    spec = write_spec(
        tmp_path, _table(200), schema=SCHEMA, checks={}, mechanism={"name": "ron_gauss", "params": {}}
    )
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2
    assert "column 'income': missing: allowed needs a mechanism" in cli_text(result.output), result.output
