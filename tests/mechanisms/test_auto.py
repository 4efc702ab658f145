"""``mechanisms.auto.choose``: the public rule ``mechanism: auto`` applies (README, "Which
mechanism"): aim when zCDP, n ≥ MIN_AIM_ROWS, fewer than half the columns continuous and
p ≤ MAX_AIM_COLUMNS, else factor_gauss."""

from __future__ import annotations

import pytest

from dprelease.mechanisms.auto import AIM_BATCH, MAX_AIM_COLUMNS, MIN_AIM_ROWS, choose, rule_text


def test_aim_from_the_threshold_on_and_factor_gauss_below_it():
    below = choose(MIN_AIM_ROWS - 1, "zcdp", 15, 6, "income")
    at = choose(MIN_AIM_ROWS, "zcdp", 15, 6, "income")
    assert below.mechanism == "factor_gauss" and below.params == {"target": "income"}
    assert at.mechanism == "aim" and at.params == {"target": "income", "batch": AIM_BATCH}
    assert f"< {MIN_AIM_ROWS:,}" in below.reason and f">= {MIN_AIM_ROWS:,}" in at.reason


def test_too_many_columns_or_a_pure_accountant_keep_factor_gauss():
    wide = choose(10**7, "zcdp", MAX_AIM_COLUMNS + 1, 0, None)
    assert wide.mechanism == "factor_gauss" and wide.params == {} and "columns >" in wide.reason
    assert choose(10**7, "zcdp", MAX_AIM_COLUMNS, 0, None).mechanism == "aim"
    pure = choose(10**7, "pure", 5, 0, None)
    assert pure.mechanism == "factor_gauss" and "needs zcdp" in pure.reason


def test_half_or_more_continuous_columns_keep_factor_gauss():
    half = choose(10**7, "zcdp", 14, 7, None)
    assert half.mechanism == "factor_gauss" and "7 of 14 columns continuous" in half.reason
    assert choose(10**7, "zcdp", 15, 7, None).mechanism == "aim"


def test_the_candidates_the_spec_admits_bound_the_choice():
    assert choose(10**7, "zcdp", 5, 0, None, allowed=("factor_gauss",)).mechanism == "factor_gauss"
    assert choose(10, "zcdp", 5, 0, None, allowed=("aim",)).mechanism == "aim"
    with pytest.raises(ValueError, match="no candidate"):
        choose(10, "pure", 5, 0, None, allowed=("aim",))


def test_the_choice_publishes_its_rule_and_facts():
    facts = choose(MIN_AIM_ROWS, "zcdp", 15, 6, None).as_dict()
    assert facts["rule"] == rule_text() and f"n >= {MIN_AIM_ROWS:,}" in facts["rule"]
    assert facts["n_fitted"] == MIN_AIM_ROWS and facts["columns"] == 15 and facts["continuous"] == 6
    assert set(facts) == {
        "rule",
        "mechanism",
        "params",
        "n_fitted",
        "columns",
        "continuous",
        "accountant",
        "reason",
        "rows",
    }
