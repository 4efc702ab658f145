"""Issue 19, ``dprelease init``: a draft spec from a file's header (and a Parquet file's
declared types) without reading a value; ``validate`` names what is left to fill and to
confirm; ``release`` refuses a draft."""

import numpy as np
import pandas as pd
import yaml
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.header import read_header
from tests.helpers import cli_text


def _people(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            "income": rng.uniform(0, 1e5, n),
            "born": pd.to_datetime("1950-01-01") + pd.to_timedelta(rng.integers(0, 20_000, n), "D"),
            "sex": rng.choice(["f", "m"], n),
        }
    )


def test_a_parquet_draft_takes_kinds_from_types_and_leaves_every_value_to_fill(tmp_path):
    _people().to_parquet(tmp_path / "people.parquet")
    result = CliRunner().invoke(app, ["init", str(tmp_path / "people.parquet")])
    assert result.exit_code == 0, result.output
    draft = tmp_path / "people.yaml"
    raw = yaml.safe_load(draft.read_text())
    assert raw["schema"] == {
        "age": {"type": "continuous", "bounds": "FILL", "integer": True},
        "income": {"type": "continuous", "bounds": "FILL"},
        "born": {"type": "datetime", "bounds": "FILL"},
        "sex": {"type": "nominal", "categories": "FILL"},
    }
    assert raw["draft"]["confirm"][0] == "schema.age: kind guessed from the Parquet type int64"
    result = CliRunner().invoke(app, ["validate", str(draft)])
    assert result.exit_code == 2
    assert "4 value(s) still to fill from public knowledge" in cli_text(result.output)
    assert "schema.age.bounds, schema.income.bounds, schema.born.bounds, schema.sex.categories" in cli_text(
        result.output
    )


def test_a_filled_draft_lists_what_to_confirm_and_is_not_released(tmp_path):
    _people().to_parquet(tmp_path / "people.parquet")
    CliRunner().invoke(app, ["init", str(tmp_path / "people.parquet")])
    draft = tmp_path / "people.yaml"
    raw = yaml.safe_load(draft.read_text())
    raw["schema"]["age"]["bounds"] = [18, 90]
    raw["schema"]["income"]["bounds"] = [0.0, 1e5]
    raw["schema"]["born"]["bounds"] = ["1950-01-01T00:00", "2010-12-31T23:59"]
    raw["schema"]["born"]["resolution"] = "hour"
    raw["schema"]["sex"]["categories"] = ["f", "m"]
    draft.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = CliRunner().invoke(app, ["validate", str(draft)])
    text = cli_text(result.output)
    assert result.exit_code == 2 and "the spec is a draft: 5 item(s) to confirm" in text, text
    assert "schema.sex: kind guessed from the Parquet type" in text
    result = CliRunner().invoke(app, ["release", str(draft), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "delete its draft: section" in cli_text(result.output)
    del raw["draft"]
    draft.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = CliRunner().invoke(app, ["validate", str(draft)])
    assert result.exit_code == 0, result.output


def test_a_csv_draft_reads_the_header_line_only(tmp_path):
    """The second line is not even text: init reads the header and nothing else."""
    (tmp_path / "data.csv").write_bytes(b"id,score,group\n\xff\xfe\x00garbage\n")
    runner = CliRunner()
    result = runner.invoke(app, ["init", str(tmp_path / "data.csv"), "--out", str(tmp_path / "d.yaml")])
    assert result.exit_code == 0, result.output
    raw = yaml.safe_load((tmp_path / "d.yaml").read_text())
    assert raw["schema"] == {name: {"type": "FILL"} for name in ("id", "score", "group")}
    assert "3 of unknown kind" in cli_text(result.output)
    result = runner.invoke(app, ["init", str(tmp_path / "data.csv"), "--out", str(tmp_path / "d.yaml")])
    assert result.exit_code == 2 and "--force" in cli_text(result.output)


def test_a_quoted_line_break_in_the_header_keeps_every_column(tmp_path):
    """Issue 30: the header is the first CSV record, which may span lines; nothing past it
    is read (the next line is not even text)."""
    (tmp_path / "data.csv").write_bytes(b'a,"b\nc",d\n\xff\xfe\x00garbage\n')
    assert read_header(tmp_path / "data.csv") == ["a", "b\nc", "d"]
    result = CliRunner().invoke(app, ["init", str(tmp_path / "data.csv"), "--out", str(tmp_path / "d.yaml")])
    assert result.exit_code == 0, result.output
    assert "3 column(s), 3 of unknown kind" in cli_text(result.output)
    draft = yaml.safe_load((tmp_path / "d.yaml").read_text())  # a line break in a name stays valid YAML
    assert list(draft["schema"]) == ["a", "b\nc", "d"]
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "d.yaml")])
    assert result.exit_code == 2 and "schema.b\\nc.type" in cli_text(result.output), result.output


def test_a_folder_as_the_data_path_is_named_a_folder(tmp_path):
    (tmp_path / "data.csv").mkdir()
    result = CliRunner().invoke(app, ["init", str(tmp_path / "data.csv")])
    text = cli_text(result.output)
    assert result.exit_code == 2 and "is a folder, not a file" in text and "does not exist" not in text, text
