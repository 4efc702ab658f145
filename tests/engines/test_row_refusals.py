"""Tables too small, refused before any noise by ``engines.inputs.check_rows`` (n is
public under replace-one, so the messages may quote it): fewer fitted rows than the
mechanism needs (``min_rows``, the holdout counted), too few rows for the post-release
checks, and δ ≥ 1/n. The tiny tables run at ε = 100 (``LARGE``), where the budget
forecast (``spec.forecast``, tests/spec/test_forecast.py) does not refuse them: at ε = 1
the noise on two rows' histograms has s.d. ≥ n. The empty table is the validation task's
(tests/tasks/test_validate_input.py); the CLI's exit code is in
tests/flows/test_hostile_release.py."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dprelease.engines.inputs import InputValidationError, check_rows
from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import load_spec
from tests.helpers import adult_rows, write_spec

PURE = {"epsilon": 1.0, "delta": 0.0, "accountant": "pure"}
LARGE = {"epsilon": 100.0, "delta": 1e-6}
MECHANISM_CASES = [
    ("factor_gauss", {}, LARGE),
    ("dpfm", {}, PURE),
    ("ron_gauss", {}, PURE),
    ("ron_gauss", {"task": "classification", "label": "income"}, {**PURE, "epsilon": 100.0}),
    ("ron_gauss", {"task": "regression", "label": "age"}, PURE),
    ("private_pca", {}, PURE),
    ("pcappd", {}, PURE),
    ("lda_ppd", {"target": "income"}, PURE),
    ("spectral_anonymization", {"method": "P"}, {**PURE, "allow_non_dp": True}),
]


def _adult_spec(tmp_path, name="factor_gauss", params=None, privacy=None, **overrides):
    spec = write_spec(
        tmp_path,
        privacy=privacy or LARGE,
        mechanism={"name": name, "params": params or {}},
        **{"checks": {"enabled": False}, **overrides},
    )
    return load_spec(spec)


def _run_four_stages(spec, n: int, seed: int = 0) -> pd.DataFrame:
    """encode → estimate → sample → decode on n real rows, without Prefect."""
    from dprelease.engines.tables import rows_to_table
    from dprelease.mechanisms.accounting import plan_budget

    schema, params, synth = spec.public_schema(), spec.mechanism_params(), MECHANISMS[spec.mechanism.name]
    p = spec.privacy
    plan = plan_budget(p.accountant, p.epsilon, p.delta, spec.stage_weights())
    df = adult_rows(n, seed=seed)
    for c in schema.columns:
        if c.kind == "continuous":
            df[c.name] = df[c.name].astype(float)
    rng = np.random.default_rng(seed)
    bins = table_to_bins(df, schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoded = synth.encode(table_to_rows(df, bins, schema), schema, plan, params, rng)
        moments = synth.estimate(encoded.state, plan, params, rng)
        sampled = synth.sample(moments.state, params, n, rng)
        return rows_to_table(synth.decode(sampled.state, schema, params, rng), schema, rng=rng)


@pytest.mark.parametrize(
    ("name", "params", "privacy"), MECHANISM_CASES, ids=lambda v: v if isinstance(v, str) else None
)
def test_min_rows_per_mechanism(name, params, privacy, tmp_path):
    """n = min_rows − 1 is refused before any noise, naming the mechanism and the rule;
    n = min_rows runs the mechanism's four stages."""
    spec = _adult_spec(tmp_path, name, params, privacy)
    need = MECHANISMS[name].min_rows(spec.public_schema(), spec.mechanism_params())
    assert need == 2  # what the code needs: private_pca's covariance; one row has no spread
    with pytest.raises(
        InputValidationError, match=rf"mechanism {name} needs at least {need} fitted rows \(min_rows\)"
    ):
        check_rows(spec, need - 1)
    check_rows(spec, need)
    for seed in range(3):
        assert len(_run_four_stages(spec, need, seed)) == need


def test_private_pca_really_needs_two_rows(tmp_path):
    """The minimum is what the code requires: one row fails inside private_pca."""
    spec = _adult_spec(tmp_path, "private_pca", {}, PURE)
    with pytest.raises(ValueError, match="n >= 2"):
        _run_four_stages(spec, 1)


def test_holdout_counts_against_min_rows(tmp_path):
    """min_rows applies to the fitted rows, n − ⌊h·n⌋, as in the flow's holdout split."""
    spec = _adult_spec(tmp_path, checks={"enabled": False, "holdout_fraction": 0.5})
    check_rows(spec, 3)  # ⌊1.5⌋ = 1 held out, 2 fitted: enough
    with pytest.raises(InputValidationError) as err:  # 1 held out, 1 fitted
        check_rows(spec, 2)
    message = str(err.value)
    assert "needs at least 2 fitted rows (min_rows); the input has 2 rows, 1 fitted" in message
    assert "held out by checks.holdout_fraction 0.5" in message and "lower checks.holdout_fraction" in message


def test_checks_need_rows(tmp_path):
    """The post-release checks need 2 fitted and 2 synthetic rows and a non-empty holdout;
    refused before any noise rather than failing after it."""
    spec = _adult_spec(tmp_path, checks={"target": "income", "holdout_fraction": 0.2})
    with pytest.raises(
        InputValidationError, match=re.escape("checks.holdout_fraction (0.2) keeps no row out of 4")
    ):
        check_rows(spec, 4)
    check_rows(spec, 5)
    spec = _adult_spec(tmp_path, checks={"target": "income"}, synthetic_rows=1)
    with pytest.raises(
        InputValidationError, match=re.escape("synthetic_rows (1): the post-release checks need")
    ):
        check_rows(spec, 100)
    spec = _adult_spec(tmp_path, synthetic_rows=1)  # checks disabled: one synthetic row is fine
    check_rows(spec, 100)


@pytest.mark.parametrize(
    ("delta", "n", "refused"),
    [
        (0.01, 100, True),  # δ = 1/n
        (0.01, 5000, True),  # more rows make 1/n smaller
        (0.01, 99, False),
        (1e-6, 10**6, True),
        (1e-6, 10**6 + 1, True),
        (1e-6, 999_999, False),
    ],
)
def test_delta_at_least_one_over_n(delta, n, refused, tmp_path):
    spec = _adult_spec(tmp_path, privacy={"epsilon": 1.0, "delta": delta})
    if not refused:
        check_rows(spec, n)
        return
    with pytest.raises(InputValidationError) as err:
        check_rows(spec, n)
    message = str(err.value)
    assert f"privacy.delta ({delta:g}) must be below 1/n = {1 / n:.3g} for the n = {n} input rows" in message
    assert "publish a whole record in the clear" in message
    assert f"privacy.delta ≤ 1/(10 n) = {1 / (10 * n):.3g}" in message and "Nothing was spent" in message


def test_pure_dp_has_no_delta_to_check(tmp_path):
    check_rows(_adult_spec(tmp_path, privacy={**PURE, "epsilon": 100.0}), 2)
