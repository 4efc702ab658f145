"""The declared input policies in the ``validate_input`` task (``.fn``, without
Prefect): ``out_of_bounds: clip`` moves values to the declared bounds and ``unknown:
other`` maps undeclared categories to the declared token before the schema's rules run;
the counts go to ``internal/clipping.json`` only, while the policies themselves are
public. A missing cell stays governed by ``missing``, not by ``other``."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dprelease.engines.inputs import InputValidationError
from tests.helpers import TOY_GOOD, TOY_HEADER, TOY_SCHEMA, toy_schema, toy_spec, validate


def test_out_of_bounds_clip_counts_go_to_internal_only(tmp_path):
    """clip moves values to the *declared* bounds before validation (the suite then
    passes); the count per column is in internal/clipping.json and nowhere else. An
    integer column read as floats because of 1e23 or inf comes back as integers."""
    body = "1.5,3,a,lo\n-inf,12,a,lo\ninf,-1,b,hi\n0.25,99999999999999999999999,a,mid\n0.5,inf,b,lo\n"
    schema = toy_schema(x={"out_of_bounds": "clip"}, k={"out_of_bounds": "clip"})
    spec = toy_spec(tmp_path, TOY_HEADER + body, schema)
    df = validate(spec, tmp_path)
    assert df["x"].tolist() == [1.0, 0.0, 1.0, 0.25, 0.5]
    assert df["k"].tolist() == [3, 10, 0, 10, 10] and df["k"].dtype == np.int64
    report = json.loads((tmp_path / "internal" / "clipping.json").read_text())
    assert report["out_of_bounds_clipped"] == {"x": 3, "k": 4}
    assert report["unknown_mapped_to_other"] == {}
    validation = json.loads((tmp_path / "internal" / "validation_input.json").read_text())
    assert all(r["success"] for r in validation["results"])  # the suite ran on the clipped table
    # the policy itself is public (release.json publishes the spec), the counts are not
    assert spec.public_dict()["schema"]["x"]["out_of_bounds"] == "clip"


def test_clip_uses_the_declared_bounds_only(tmp_path):
    """Never data-dependent bounds: values inside the declared range are untouched even
    when they are the data's extremes."""
    spec = toy_spec(
        tmp_path, TOY_HEADER + "0.1,3,a,lo\n0.9,4,a,lo\n", toy_schema(x={"out_of_bounds": "clip"})
    )
    assert validate(spec, tmp_path)["x"].tolist() == [0.1, 0.9]
    assert json.loads((tmp_path / "internal" / "clipping.json").read_text())["out_of_bounds_clipped"] == {
        "x": 0
    }


def test_clip_leaves_text_to_the_type_rule(tmp_path):
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "abc,3,a,lo\n", toy_schema(x={"out_of_bounds": "clip"}))
    with pytest.raises(InputValidationError, match=re.escape("column 'x': values must be numbers")):
        validate(spec, tmp_path)


def test_unknown_category_other(tmp_path):
    """Undeclared values map to the declared ``other`` token; counts to internal only."""
    schema = toy_schema(c={"unknown": "other", "other": "b"}, o={"unknown": "other", "other": "mid"})
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,3,zz,lo\n0.5,3,A,medium\n0.5,3, a,hi\n", schema)
    df = validate(spec, tmp_path)
    assert df["c"].tolist() == ["a", "b", "b", "b", "b"]
    assert df["o"].tolist() == ["lo", "hi", "lo", "mid", "hi"]
    report = json.loads((tmp_path / "internal" / "clipping.json").read_text())
    assert report["unknown_mapped_to_other"] == {"c": 3, "o": 1}
    assert spec.public_dict()["schema"]["c"] == {
        **TOY_SCHEMA["c"],
        "missing": None,
        "unknown": "other",
        "other": "b",
    }


def test_missing_cell_is_governed_by_missing_not_other(tmp_path):
    """An empty cell becomes the ``missing`` token where one is declared (and the token
    itself is a declared value, not unknown); without one it stays an error, even under
    ``unknown: other``."""
    schema = toy_schema(c={"unknown": "other", "other": "a"}, o={"unknown": "other", "other": "lo"})
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,3,b,\n0.5,3,b,NA\n", schema)
    assert validate(spec, tmp_path)["o"].tolist() == ["lo", "hi", "NA", "NA"]
    spec = toy_spec(tmp_path, TOY_HEADER + TOY_GOOD + "0.5,3,,lo\n", schema)
    with pytest.raises(InputValidationError, match=re.escape("column 'c': missing values are not allowed")):
        validate(spec, tmp_path)
