"""Derived columns' formulas: arithmetic, numbers, names and a few numpy functions only."""

import numpy as np
import pytest

from mechanisms.formula import Formula, FormulaError


def test_a_formula_evaluates_on_columns_and_lists_what_it_reads():
    f = Formula.parse("log1p(income) - 2 * age ** 2 / 4")
    assert f.names == ("income", "age")
    got = f.evaluate({"income": np.array([0.0, np.nan]), "age": np.array([2.0, 1.0])})
    np.testing.assert_array_equal(got, [-2.0, np.nan])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os').system('x')", "may be called"),
        ("age.real", "Attribute is not"),
        ("age if age else 1", "IfExp is not"),
        ("age < 3", "Compare is not"),
        ("age @ age", "MatMult is not allowed"),
        ("'a' * age", "constants must be numbers"),
        ("max(age, 1)", "may be called"),
        ("[age][0]", "is not"),
        ("3", "must read at least one column"),
        ("age +", "is not an expression"),
    ],
)
def test_anything_else_is_refused(text, message):
    with pytest.raises(FormulaError, match=message):
        Formula.parse(text)
