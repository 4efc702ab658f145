"""Derived columns' formulas: arithmetic, numbers, names and a few numpy functions only."""

import numpy as np
import pytest

from dprelease.mechanisms.formula import Formula, FormulaError


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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("age * " + "9" * 400, "numbers must be finite floats"),
        ("age * 1e400", "numbers must be finite floats"),
        ("-" * 1000 + "age", "must be at most 1000 characters"),
        ("+".join(["age*age*age*age"] * 40), "at most 256 numbers, names and operations"),
    ],
    ids=["400-digits", "1e400", "long", "many-nodes"],
)
def test_a_formula_is_bounded_in_size_depth_and_numbers(text, message):
    """Issue 30: a 400-digit literal (OverflowError) and 1,000 unary minus signs
    (RecursionError) passed the spec and crashed the bundle after the noise was drawn."""
    with pytest.raises(FormulaError, match=message):
        Formula.parse(text)


def test_the_depth_cap_is_exact_and_a_formula_at_it_evaluates():
    """Nested 64 deep (63 signs on a name; a sum of 64 columns, parsed left-deep) evaluates;
    one level more is refused. The largest float literal is accepted."""
    age = {"age": np.array([1.0, 2.0])}
    np.testing.assert_array_equal(Formula.parse("-" * 63 + "age").evaluate(age), [-1.0, -2.0])
    np.testing.assert_array_equal(Formula.parse("+".join(["age"] * 64)).evaluate(age), [64.0, 128.0])
    for deeper in ("-" * 64 + "age", "+".join(["age"] * 65)):
        with pytest.raises(FormulaError, match="nested at most 64 deep"):
            Formula.parse(deeper)
    assert (
        Formula.parse("age * 1.7e308").evaluate(age)[1] == np.inf
    )  # a finite literal, an overflowing result


@pytest.mark.parametrize("error", [RecursionError, MemoryError])
def test_the_parsers_own_limits_are_a_formula_error(error, monkeypatch):
    """``ast.parse`` itself can run out of stack or memory on a deep formula."""

    def parse(*args, **kwargs):
        raise error

    monkeypatch.setattr("dprelease.mechanisms.formula.ast.parse", parse)
    with pytest.raises(FormulaError, match="must be a plain expression"):
        Formula.parse("age")
