import math

from tasks.checks.gates import evaluate_gates, failed_gates_message


def test_gates_pass_fail_and_unmeasurable():
    rows = evaluate_gates(
        {
            "tvd_1way": {"max": 0.03, "min": None},
            "tstr_auc": {"min": 0.8, "max": None},
            "pmse": {"min": None, "max": 0.1},
            "membership_share": {"min": 0.4, "max": 0.6},
        },
        {"tvd_1way": 0.02, "tstr_auc": None, "pmse": math.nan, "membership_share": 0.61},
    )
    assert [r["passed"] for r in rows] == [True, False, False, False]
    message = failed_gates_message(rows, "out/r1/internal")
    assert "gate 'tstr_auc' (min 0.8) failed" in message
    assert "gate 'membership_share' (min 0.4 and max 0.6) failed" in message
    assert "0.61" not in message and "measurable" not in message  # values stay in gates.json
    assert "tvd_1way" not in message and "out/r1/internal/gates.json" in message


def test_bounds_are_inclusive():
    rows = evaluate_gates({"exact_match_rate": {"min": None, "max": 0.0}}, {"exact_match_rate": 0.0})
    assert rows[0]["passed"]
