"""A Parquet file written from pandas' nullable numbers (``Int64``, ``Float64``): its
values are numbers, read as the CSV reader reads them (the rehearsal's own Parquet file
found the number rule refusing them)."""

import pandas as pd

from tests.helpers import toy_spec, validate


def test_nullable_numbers_from_parquet_are_numbers(tmp_path):
    table = pd.DataFrame(
        {
            "x": pd.array([0.5, 0.25], dtype="Float64"),
            "k": pd.array([3, 7], dtype="Int64"),
            "c": ["a", "b"],
            "o": ["lo", "hi"],
        }
    )
    spec = toy_spec(tmp_path, "x,k,c,o\n")
    table.to_parquet(tmp_path / "data.parquet", index=False)
    spec = spec.model_copy(
        update={"dataset": spec.dataset.model_copy(update={"path": tmp_path / "data.parquet"})}
    )
    df = validate(spec, tmp_path)
    assert df["k"].tolist() == [3, 7] and df["k"].dtype == "int64"
    assert df["x"].tolist() == [0.5, 0.25] and df["x"].dtype == "float64"
