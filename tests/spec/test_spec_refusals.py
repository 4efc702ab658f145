"""Hostile specs refused by the loader (``spec.load_spec`` raises ``SpecError`` naming the
field and the rule, before any data is read): ε ≤ 0, NaN, infinite, absurdly large or not
a number, and the ``out_of_bounds`` / ``unknown`` / ``other`` policies declared wrongly.
The CLI's exit code for these is in tests/flows/test_hostile_release.py; the loader's
fuzz in test_spec_fuzz.py."""

from __future__ import annotations

import re

import pytest

from spec import SpecError, load_spec
from tests.helpers import toy_schema, write_spec


@pytest.mark.parametrize(
    ("column", "extra", "message"),
    [
        ("c", {"unknown": "other"}, "spec field 'schema.c.nominal.other': Value error, unknown: other needs"),
        ("c", {"unknown": "other", "other": "z"}, "other ('z') must be one of the declared categories"),
        ("o", {"unknown": "other", "other": "NA"}, "other ('NA') must be one of the declared levels"),
        ("c", {"other": "a"}, "spec field 'schema.c.nominal.other': Value error, other ('a') is used only"),
        (
            "c",
            {"unknown": "map"},
            "spec field 'schema.c.nominal.unknown': Input should be 'reject' or 'other'",
        ),
        ("x", {"out_of_bounds": "wrap"}, "spec field 'schema.x.continuous.out_of_bounds': Input should be"),
        (
            "x",
            {"unknown": "other"},
            "spec field 'schema.x.continuous.unknown': Extra inputs are not permitted",
        ),
    ],
    ids=[
        "other-missing",
        "other-undeclared",
        "other-is-missing-token",
        "other-without-policy",
        "bad-unknown",
        "bad-out-of-bounds",
        "unknown-on-continuous",
    ],
)
def test_other_must_be_declared(column, extra, message, tmp_path):
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(write_spec(tmp_path, checks={}, schema=toy_schema(**{column: extra})))


@pytest.mark.parametrize(
    ("epsilon", "message"),
    [
        (0, "Input should be greater than 0"),
        (-1, "Input should be greater than 0"),
        (float("nan"), "Input should be a finite number"),
        (float("inf"), "Input should be a finite number"),
        (1e9, "Input should be less than or equal to 100"),
        ("lots", "Input should be a valid number"),
        (None, "Input should be a valid number"),
    ],
    ids=["zero", "negative", "nan", "inf", "absurd", "text", "null"],
)
def test_epsilon_out_of_range(epsilon, message, tmp_path):
    with pytest.raises(SpecError, match=re.escape(f"spec field 'privacy.epsilon': {message}")):
        load_spec(write_spec(tmp_path, privacy={"epsilon": epsilon, "delta": 1e-6}))
