"""Issue 19, ``missing: allowed``: a continuous column's missing value is one more cell,
the lowest, of its public layout. It is never merged, decodes to NaN, and every noisy
statistic that counts it (the marginal, the latent moments, the ``refine`` tables) keeps
its recorded Δ on neighbours that move a record into or out of it, through the stages'
own code path."""

import numpy as np
import pandas as pd
import pytest

from dprelease.checks.linkage import gower_features, nearest
from dprelease.checks.utility import association_matrix, wasserstein_scaled
from dprelease.engines.tables import bins_to_table, table_to_bins
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.resolution import column_groups
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from tests.wiring import compare, flow_stages, rows_of

INCOME = Continuous("income", 0, 1000, atoms=(0.0,), missing=True)
SCHEMA = Schema((INCOME, Continuous("age", 18, 90, integer=True, missing=True), Nominal("work", ("e", "o"))))
PARAMS = fg.FactorGaussParams(target="work")


def test_the_missing_cell_is_the_lowest_decodes_to_nan_and_is_never_merged(rng):
    x = np.array([np.nan, 0.0, 3.5, 999.0])
    cells = INCOME.to_bins(x)
    assert cells[0] == 0 and INCOME.cell_labels()[0] == "missing" and INCOME.n_bins == 64 + 1 + 1
    out = INCOME.from_bins(cells, rng.random(4))
    assert np.isnan(out[0]) and out[1] == 0.0 and np.all(np.isfinite(out[1:]))
    groups = column_groups(INCOME, n=100, mean_abs_noise=50.0)
    assert groups[-1] + 1 < INCOME.n_bins and np.sum(groups == groups[0]) == 1  # merged, missing alone
    age = SCHEMA.columns[1]  # a cell per integer: the integers shift up by one
    np.testing.assert_array_equal(age.to_bins(np.array([np.nan, 18, 90])), [0, 1, 73])
    np.testing.assert_array_equal(age.from_bins(np.array([0, 1, 73]), np.full(3, 0.5)), [np.nan, 18, 90])


def test_a_table_round_trips_with_its_missing_cells(rng):
    df = pd.DataFrame({"income": [np.nan, 10.0, 0.0], "age": [40.0, np.nan, 90.0], "work": ["e", "o", "e"]})
    bins = table_to_bins(df, SCHEMA)
    back = bins_to_table(bins, SCHEMA, rng=rng)
    pd.testing.assert_series_equal(back["income"].isna(), df["income"].isna())
    assert back["age"].dtype == float and back["age"].isna().tolist() == [False, True, False]


def _table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "income": np.where(rng.random(n) < 0.3, np.nan, rng.uniform(0, 1000, n)),
            "age": np.where(rng.random(n) < 0.2, np.nan, rng.integers(18, 91, n)).astype(float),
            "work": rng.choice(["e", "o"], n),
        }
    )


def _run(notion: str):
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.stage_weights(SCHEMA, PARAMS))
    stages = flow_stages("factor_gauss", SCHEMA, plan, PARAMS)
    return lambda table: stages(rows_of(table, SCHEMA))


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_moving_a_record_into_the_missing_cells_stays_within_every_recorded_sensitivity(notion):
    """Random tables, and the worst case: a record with both values present and at the
    top of their ranges replaced by one missing both (every histogram and pair table moves
    one unit between two cells; the row bound caps the moment change)."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        d = _table(rng, int(rng.integers(8, 40)))
        d2 = d.copy()
        d2.loc[0] = [np.nan, np.nan, "o"]
        d.loc[0] = [1000.0, 90.0, "e"]
        changes = compare(_run(notion), d, d2)
        assert {c.name for c in changes} >= {"histogram[income]", "pair[income,work]", "pair[age,work]"}
        for c in changes:
            assert c.within, c
            if c.name.startswith(("histogram", "pair")):
                assert c.observed == pytest.approx(c.recorded, rel=1e-12), c  # attained


def test_the_checks_measure_missing_values_without_nan():
    """Gower: a missing value is at distance 1 from a present one and 0 from another
    missing one; Wasserstein on present values; Spearman ranks a missing value lowest."""
    real = pd.DataFrame({"income": [np.nan, 500.0], "age": [40.0, 50.0], "work": ["e", "e"]})
    syn = pd.DataFrame({"income": [np.nan, 100.0], "age": [40.0, 50.0], "work": ["e", "e"]})
    q, nominal = gower_features(syn, table_to_bins(syn, SCHEMA), SCHEMA)
    r, _ = gower_features(real, table_to_bins(real, SCHEMA), SCHEMA)
    dist, idx = nearest(q, r, nominal)
    np.testing.assert_allclose(dist, [0.0, 0.4 / 3], rtol=1e-6)
    np.testing.assert_array_equal(idx, [0, 1])
    present = pd.DataFrame({"income": [500.0], "age": [50.0], "work": ["e"]})
    q1, _ = gower_features(present, table_to_bins(present, SCHEMA), SCHEMA)
    d, _ = nearest(q1, r[[0]], nominal)  # income present vs missing: 1; age 10/72 apart
    assert d[0] == pytest.approx((1.0 + 10 / 72) / 3, rel=1e-6)
    w = wasserstein_scaled(real, syn, SCHEMA)
    assert w["income"] == pytest.approx(0.4) and w["age"] == 0.0
    assert "income" not in wasserstein_scaled(real, syn, SCHEMA, complete_only=True)
    rho = association_matrix(table_to_bins(real, SCHEMA), real, SCHEMA)
    assert rho[0, 1] == pytest.approx(1.0)  # missing income (lowest) with the lower age
