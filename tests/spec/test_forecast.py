"""``spec.forecast``: the demo spec at ε = 1e-9 is refused before any noise, at ε = 1 it is
neither refused nor warned about; a 442-row table with 64-bin columns at ε = 1 is warned
about; the forecast takes a spec and n only, reads no data, and its noise is what the
flow's own tasks draw under the flow's plan."""

import copy
import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.forecast import MAX_EPSILON
from dprelease.spec import ReleaseSpec, forecast
from dprelease.spec.sections import PrivacySpec
from tests.helpers import DEMO_SPEC, adult_rows
from tests.wiring import Probe, flow_stages, probing, rows_of

ADULT_ROWS = 32_561  # the demo's rows; 26,049 fitted after its 20 % holdout


def _spec(raw: dict, **privacy) -> ReleaseSpec:
    raw = copy.deepcopy(raw)
    raw["privacy"].update(privacy)
    # a data file that does not exist: the forecast must never open it
    raw["dataset"] = {"name": "nowhere", "path": "does-not-exist.csv"}
    return ReleaseSpec.model_validate({**raw, "base_dir": Path("/nonexistent")})


def _at_least(message: str) -> float:
    return float(re.search(r"at least ([0-9.e+-]+)", message).group(1))


def test_demo_at_epsilon_1e_minus_9_is_refused_with_the_epsilon_that_would_do():
    f = forecast(_spec(DEMO_SPEC, epsilon=1e-9), ADULT_ROWS)
    assert f.refuse is not None and "marginals" in f.refuse and "privacy.epsilon" in f.refuse
    assert all(h.sd >= ADULT_ROWS for h in f.histograms)
    x = _at_least(f.refuse)
    assert forecast(_spec(DEMO_SPEC, epsilon=x), ADULT_ROWS).refuse is None
    assert forecast(_spec(DEMO_SPEC, epsilon=0.9 * x), ADULT_ROWS).refuse is not None


@pytest.mark.parametrize("n", [ADULT_ROWS, 26_049])
def test_demo_at_epsilon_1_is_neither_refused_nor_warned(n):
    f = forecast(_spec(DEMO_SPEC), n)
    assert f.refuse is None and f.warnings == []
    assert len(f.histograms) == 15 and all(h.sd < 40 for h in f.histograms)


def _diabetes_like() -> dict:
    """442 rows, ten real-valued columns on 64 public bins each (the diabetes data's shape)."""
    features = ("age", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
    schema: dict = {name: {"type": "continuous", "bounds": [-0.2, 0.2]} for name in features}
    schema["sex"] = {"type": "nominal", "categories": ["f", "m"]}
    schema["progression"] = {"type": "continuous", "bounds": [25, 346]}
    return {"dataset": {"name": "x", "path": "x.csv"}, "schema": schema, "privacy": {"epsilon": 1.0}}


def test_a_442_row_table_at_epsilon_1_with_64_bins_is_warned_about():
    """factor_gauss merges the 64 declared bins into k = ⌊2·442·0.25/E|e|⌋ groups
    (``mechanisms.resolution``; E|e| = σ√(2/π), σ = 1/√(ρ/11) for the marginals' ρ), so
    the noise no longer swamps the histograms, but the marginals are coarse: the warning
    says so, and names the ε that keeps a quarter."""
    spec = _spec(_diabetes_like())
    f = forecast(spec, 442)
    assert f.refuse is None and len(f.warnings) == 1
    warning = f.warnings[0]
    (bmi,) = [h for h in f.histograms if h.column == "bmi"]
    assert bmi.bins == math.floor(2 * 442 * 0.25 / bmi.mean_abs) < 16
    assert f"'bmi' on {bmi.bins} of 64" in warning and "'sex'" not in warning  # 2 declared bins: kept
    x = _at_least(warning)
    assert x > 1.0 and forecast(_spec(_diabetes_like(), epsilon=x), 442).warnings == []


def test_the_largest_epsilon_tried_is_the_specs_largest():
    (le,) = [m.le for m in PrivacySpec.model_fields["epsilon"].metadata if hasattr(m, "le")]
    assert MAX_EPSILON == le


def test_the_forecast_takes_a_spec_and_n_and_no_table():
    assert list(inspect.signature(forecast).parameters) == ["spec", "n"]
    spec = _spec(DEMO_SPEC, epsilon=1e-9)
    assert not spec.data_path.exists()  # forecast above and here never needed it
    unknown = forecast(spec, None)  # n not counted yet: nothing to forecast
    assert unknown.refuse is None and unknown.warnings == [] and len(unknown.histograms) == 15


@pytest.mark.parametrize("epsilon", [1.0, 1e-9])
def test_forecast_noise_is_what_the_flows_tasks_draw(tmp_path, epsilon):
    """The flow's plan (``tasks.budget``: ``plan_budget`` with the spec's accountant, δ and
    ``stage_weights``, gates included) and its encode task: each histogram's noise equals
    the forecast's."""
    spec = _spec(DEMO_SPEC, epsilon=epsilon)
    p = spec.privacy
    plan = plan_budget(p.accountant, p.epsilon, p.delta, spec.stage_weights())
    schema = spec.public_schema()
    table = adult_rows(300)
    table = table.replace({c: {"": tok} for c, tok in spec.missing_tokens().items()})
    with probing(Probe()) as probe:
        measured = flow_stages("factor_gauss", schema, plan, spec.mechanism_params())(rows_of(table, schema))
    drawn = {m.name: noise for m, noise in zip(measured, probe.noise, strict=True)}
    f = forecast(spec, 300)
    assert [h.column for h in f.histograms] == schema.names
    for h in f.histograms:
        assert (h.mechanism, h.scale) == drawn[f"histogram[{h.column}]"]
    assert np.isfinite([h.sd for h in f.histograms]).all()


def test_a_declared_bins_column_the_noise_swamps_is_warned_about_with_what_the_rule_keeps():
    """Issue 33: declared ``bins`` switch off factor_gauss's merging (the steward's choice,
    kept), so the 442-row table's bmi stays on 256 cells; the forecast says the noise swamps
    them and how many the merge rule (``resolution.group_count``) would keep."""
    raw = _diabetes_like()
    raw["schema"]["bmi"]["bins"] = 256
    f = forecast(_spec(raw), 442)
    (bmi,) = [h for h in f.histograms if h.column == "bmi"]
    assert bmi.bins == 256  # kept as declared
    k = math.floor(2 * 442 * 0.25 / bmi.mean_abs)
    (warning,) = [w for w in f.warnings if w.startswith("column 'bmi'")]
    assert "column 'bmi': bins: 256 keeps 256 cells; at privacy.epsilon 1 and n = 442 fitted rows" in warning
    assert warning.endswith(f"the merge rule would keep {k}; remove bins to let it merge")
    assert not any(w.startswith("column 'age'") for w in f.warnings)  # merged by the rule: no such warning
