"""Every post-release check on degenerate synthetic tables (issue 17).

At ε = 1e-9 the private marginals are pure noise and factor_gauss puts every row of most
columns in one bin: the synthetic table has one value per column. The checks must then
report what is undefined as undefined (``None`` in the JSON, "undefined" in the HTML),
never crash and never invent a 0. The tests call what ``tasks.post_release`` calls
(``utility_report``, ``linkage_report``, ``gate_metrics`` + ``measure_gates`` + ``decide``,
``render_report``), on the real side a normal table, and check that the reports are
strict JSON (``write_json`` writes them; NaN is not JSON).

The pipeline hands the checks at least 2 synthetic rows (``engines.inputs.check_rows``
refuses fewer before any noise is drawn) and never a NaN value (``bins_to_table`` decodes a
continuous column from bins inside the public bounds unless its unit values are all
finite), so the smallest tables tested are 2 rows (the pipeline's minimum) and 1 row (the
functions are public: ``benchmarks/`` call them too).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger
from scipy.stats import spearmanr

from dprelease.checks.gates import gate_metrics
from dprelease.checks.html import render_report
from dprelease.checks.reports import flat_metrics, linkage_report, utility_report
from dprelease.engines.tables import bins_to_table, rows_to_table, table_to_bins
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import account, plan_budget
from dprelease.mechanisms.gates import GATEABLE, GATES_STAGE, decide, measure_gates
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.tasks.post_release import check_linkage, check_utility, write_report
from tests.mechanisms.small import SMALL, run, small_rows

SCHEMA = Schema(
    (
        Continuous("age", 17.0, 90.0, integer=True),
        Continuous("income", 0.0, 1e5, transform="log"),
        Continuous("score", 0.0, 1.0),
        Ordinal("edu", ("lo", "mid", "hi", "top")),
        Nominal("job", ("a", "b", "c")),
        Nominal("flag", ("no", "yes")),
    )
)
BOUNDS = {name: {"max": 0.5} for name in GATEABLE}


def _table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """A normal table: every column varies, score and flag depend on age."""
    age = rng.integers(17, 91, n)
    score = np.clip((age - 17) / 73 + rng.normal(0, 0.2, n), 0.0, 1.0)
    return pd.DataFrame(
        {
            "age": age.astype(np.int64),
            "income": rng.uniform(0, 1e5, n),
            "score": score,
            "edu": rng.choice(["lo", "mid", "hi", "top"], n),
            "job": rng.choice(["a", "b", "c"], n),
            "flag": np.where(score + rng.normal(0, 0.2, n) > 0.5, "yes", "no"),
        }
    )


def _binned(df: pd.DataFrame, schema: Schema = SCHEMA) -> tuple[pd.DataFrame, np.ndarray]:
    return df, table_to_bins(df, schema)


REAL = _table(np.random.default_rng(0), 400)
HOLDOUT = _table(np.random.default_rng(1), 100)
NORMAL = _table(np.random.default_rng(2), 400)


def _constant(df: pd.DataFrame, **values) -> pd.DataFrame:
    return df.assign(**values).astype(df.dtypes.to_dict())


SYNTHETIC = {
    # every column one value (what ε = 1e-9 gives for most columns)
    "one value per column": _constant(
        NORMAL, age=40, income=1000.0, score=0.5, edu="mid", job="b", flag="no"
    ),
    # the nominal target collapsed to one category
    "nominal target one category": _constant(NORMAL, flag="no"),
    # a constant continuous column beside columns that vary
    "continuous column constant": _constant(NORMAL, score=0.25),
    "two rows (the pipeline's minimum)": NORMAL.iloc[:2].reset_index(drop=True),
    "one row": NORMAL.iloc[:1].reset_index(drop=True),
}


def _checks(synthetic: pd.DataFrame, target: str, schema: Schema = SCHEMA, real=REAL, holdout=HOLDOUT):
    """What the post-release tasks compute, in their order; every result strict JSON."""
    real_b, syn_b, hold_b = _binned(real, schema), _binned(synthetic, schema), _binned(holdout, schema)
    rng = np.random.default_rng(5)
    values = gate_metrics(*real_b, *syn_b, schema, list(BOUNDS), rng)
    plan = plan_budget("zcdp", 1.0, 1e-6, {**fg.STAGE_WEIGHTS, GATES_STAGE: 0.05})
    gates = [
        g.as_dict()
        for g in decide(measure_gates(values, len(real), plan.stage(GATES_STAGE), rng=rng), BOUNDS)
    ]
    utility = utility_report(*real_b, *syn_b, schema, target=target, real_test=holdout, rng=rng)
    linkage = linkage_report(
        *real_b, *syn_b, schema, keeps_row_order=len(synthetic) == len(real), holdout=hold_b, rng=rng
    )
    for report in (utility, linkage, flat_metrics(utility, linkage)):
        json.dumps(report, allow_nan=False)  # raises on NaN / inf
    document = _document(plan, len(synthetic))
    page = render_report(real_b[1], syn_b[1], schema, utility, linkage, gates, document)
    assert "could not be drawn" not in page
    return values, utility, linkage, page


def _document(plan, rows: int, measurements=()) -> dict:
    return {
        "release_id": "degenerate",
        "mechanism": {"name": "factor_gauss"},
        "privacy": {"ledger": account(plan, list(measurements)), "synthetic_rows": rows},
    }


def _off_diagonal(matrix: list[list[float | None]], i: int) -> list[float | None]:
    return [v for j, v in enumerate(matrix[i]) if j != i]


@pytest.mark.parametrize("case", list(SYNTHETIC))
@pytest.mark.parametrize("target", ["flag", "score"])
def test_every_check_survives_a_degenerate_synthetic_table(case, target):
    values, utility, linkage, _ = _checks(SYNTHETIC[case], target)
    assert all(np.isfinite(v) for v in values.values())  # the gates' metrics stay defined
    assert 0.0 <= linkage["exact_match_rate"] <= 1.0
    assert linkage["dcr_synthetic_to_real"]["rows"] == min(len(SYNTHETIC[case]), 2000)
    assert utility["tvd_1way"]["mean"] is not None and utility["wasserstein_scaled"]


def test_one_value_per_column_makes_every_association_undefined_not_zero():
    """Spearman's ρ and Cramér's V of a column with one value are 0/0: null, out of the
    mean; the mean itself is then undefined (the old code raised IndexError here)."""
    _, utility, _, page = _checks(SYNTHETIC["one value per column"], "flag")
    corr = utility["corr_diff"]
    assert corr["mean"] is None and corr["undefined_pairs"] == corr["pairs"] == 15
    assert all(v is None for row in corr["synthetic"] for v in row)
    assert all(v is not None for row in corr["real"] for v in row)  # the real side varies
    assert "undefined" in page


def test_a_constant_column_leaves_the_other_associations_measured():
    """Only pairs with the constant column are undefined: scipy's spearmanr gives one NaN
    for the whole matrix when any column is constant, which the old code turned into 0
    for every pair."""
    syn = SYNTHETIC["continuous column constant"]
    _, utility, _, _ = _checks(syn, "flag")
    a = utility["corr_diff"]["synthetic"]
    j = SCHEMA.names.index("score")
    assert all(v is None for v in _off_diagonal(a, j))
    # age and income vary: their ρ is measured, and equals scipy's on the pair
    expected = spearmanr(syn["age"], syn["income"]).statistic
    assert a[0][1] == pytest.approx(expected) and a[0][1] != 0.0
    assert utility["corr_diff"]["undefined_pairs"] == 5  # score with each of the 5 others


def test_a_one_class_target_makes_tstr_undefined_with_its_reason():
    _, utility, _, page = _checks(SYNTHETIC["nominal target one category"], "flag")
    tstr = utility["tstr"]
    assert tstr["tstr"] is None and tstr["ratio"] is None and tstr["trtr"] is not None
    assert "one class" in tstr["undefined"]["tstr"]
    j = SCHEMA.names.index("flag")
    assert all(v is None for v in _off_diagonal(utility["corr_diff"]["synthetic"], j))
    assert "undefined: the synthetic training rows" in page


def test_one_synthetic_row_leaves_pmse_undefined_with_its_reason():
    """Cross-validated propensity scores need 2 rows of each side (2 folds)."""
    _, utility, _, page = _checks(SYNTHETIC["one row"], "flag")
    pmse = utility["pmse"]
    assert pmse["pmse"] is None and "at least 2 rows" in pmse["undefined"]
    assert "undefined: cross-validated" in page


def test_two_synthetic_rows_give_a_pmse():
    _, utility, _, _ = _checks(SYNTHETIC["two rows (the pipeline's minimum)"], "flag")
    assert 0.0 <= utility["pmse"]["pmse"] <= 1.0 and utility["pmse"]["folds"] == 2


def test_checks_on_the_mechanism_output_at_epsilon_1e_minus_9(tmp_path):
    """The real mechanism (``FactorGauss.fit`` with a plan from ``plan_budget``) at
    ε = 1e-9, then the post-release tasks' own bodies (``.fn``: their ``advisory``
    wrapper turns an exception into ``{"error": ...}``, which must not appear)."""
    rng = np.random.default_rng(3)
    rows = small_rows(1_000, rng)
    plan = plan_budget("zcdp", 1e-9, 1e-6, fg.STAGE_WEIGHTS)
    syn_rows, measurements, _ = run(fg.FactorGauss(), rows, plan, fg.FactorGaussParams(), rng)
    real = bins_to_table(rows.bins, SMALL, rng=rng, unit=rows.unit)
    synthetic = rows_to_table(syn_rows, SMALL, rng=rng)
    assert (synthetic.nunique() == 1).sum() >= 2  # degenerate: columns with one value
    real_b, syn_b = _binned(real, SMALL), _binned(synthetic, SMALL)
    hold_b = _binned(real.iloc[:200].reset_index(drop=True), SMALL)
    with disable_run_logger():
        utility = check_utility.fn(real_b, syn_b, SMALL, "flag", hold_b, tmp_path, rng)
        linkage = check_linkage.fn(real_b, syn_b, SMALL, False, hold_b, tmp_path, rng)
        page = write_report.fn(
            real_b,
            syn_b,
            SMALL,
            utility,
            linkage,
            [],
            _document(plan, len(synthetic), measurements),
            tmp_path,
        ).read_text()
    assert "error" not in utility and "error" not in linkage
    assert utility["corr_diff"]["undefined_pairs"] > 0
    for name in ("utility.json", "linkage.json"):
        json.loads((tmp_path / name).read_text(), parse_constant=pytest.fail)  # no NaN in the files
    assert "could not be drawn" not in page and "undefined" in page
    values = gate_metrics(*real_b, *syn_b, SMALL, list(GATEABLE), rng)
    assert all(np.isfinite(v) for v in values.values())
