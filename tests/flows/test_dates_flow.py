"""Issue 19: ``type: date`` and ``type: datetime`` through the real flow (memory and local
engines): read as ISO 8601 text, modelled as whole units of the public resolution between
the public bounds, written back as ISO text at that resolution; a cell that is not a date
is refused naming the column and the rule."""

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows.release import release
from tests.helpers import cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "born": {"type": "date", "bounds": ["1920-01-01", "2010-12-31"]},
    "admitted": {
        "type": "datetime",
        "bounds": ["2024-01-01T00:00", "2024-12-31T23:59"],
        "resolution": "minute",
        "missing": "allowed",
    },
    "ward": {"type": "nominal", "categories": ["a", "b"]},
}


def _table(n: int = 4_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    days = np.clip(rng.normal(0, 12 * 365, n), -30 * 365, 60 * 365).astype(int)  # inside the bounds
    born = np.datetime64("1950-01-01") + days
    ward = np.where(born < np.datetime64("1960-01-01"), "a", "b")
    minutes = rng.integers(0, 366 * 24 * 60, n)
    admitted = np.datetime_as_string(np.datetime64("2024-01-01T00:00") + minutes, unit="m")
    admitted = np.where(rng.random(n) < 0.1, "", admitted)
    return pd.DataFrame({"born": np.datetime_as_string(born, unit="D"), "admitted": admitted, "ward": ward})


@pytest.mark.parametrize("engine", [{"name": "memory"}, {"name": "local", "chunk_rows": 1_500}])
def test_dates_come_back_as_iso_text_at_their_resolution(tmp_path, engine):
    """Tolerances: 64 public bins over 91 years are 1.4 years wide, so a median within
    3 years; the share born before 1960 (real ≈ 0.75) within 0.05 (sampling s.d. √(.19/4000)
    ≈ 0.007, plus the marginal's noise at ε = 1 and the placement inside a bin)."""
    real = _table()
    spec = write_spec(
        tmp_path,
        real,
        schema=SCHEMA,
        checks={"target": "ward"},
        mechanism={"name": "factor_gauss", "params": {"target": "ward"}},
        engine=engine,
        output={"formats": ["csv"]},
    )
    release(str(spec), str(tmp_path / "out"), release_id="dates", insecure_seed=4)
    public = tmp_path / "out" / "dates" / "public"
    syn = pd.read_csv(public / "synthetic.csv", dtype=str, keep_default_na=False)
    assert syn["born"].str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    present = syn["admitted"][syn["admitted"] != ""]
    assert present.str.fullmatch(r"2024-\d{2}-\d{2}T\d{2}:\d{2}").all()
    assert abs((syn["admitted"] == "").mean() - 0.1) < 0.05
    born = pd.to_datetime(syn["born"])
    real_born = pd.to_datetime(real["born"])
    assert born.min() >= pd.Timestamp("1920-01-01") and born.max() <= pd.Timestamp("2010-12-31")
    assert abs((born.median() - real_born.median()).days) < 3 * 365
    assert abs((born < "1960-01-01").mean() - (real_born < "1960-01-01").mean()) < 0.05
    both = syn["ward"] == "a"
    assert (born[both] < "1960-01-01").mean() > 0.8  # the tie with ward is kept (real: 1.0)


def test_a_cell_that_is_not_a_date_is_refused_naming_the_column(tmp_path):
    real = _table(300)
    real.loc[7, "born"] = "31/12/1950"
    spec = write_spec(tmp_path, real, schema=SCHEMA, checks={"target": "ward"})
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    text = cli_text(result.output)
    assert "column 'born'" in text and "values must be ISO 8601 dates" in text, text
    assert "31/12/1950" not in text
