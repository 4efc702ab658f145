"""The gates' forecast (``mechanisms.gate_forecast``, ``spec.forecast.gate_forecasts``): on
Adult, through each mechanism's own fit and the checks' own metrics, the tvd_1way forecast
is above the metric and the tvd_2way floor below it; a gate whose floor is over its bound
is warned about by ``dprelease validate`` before any budget, and the release it then runs
is indeed stopped by that gate (issue 40: validate passed, the release spent ε = 1 and a
gate stopped it, nothing forecast it)."""

import copy
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dprelease.checks.gates import GateError
from dprelease.checks.utility import tvd_1way, tvd_2way
from dprelease.cli.main import app
from dprelease.engines.inputs import read_input
from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.flows.release import release
from dprelease.mechanisms.gate_forecast import GateForecast
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import ReleaseSpec
from dprelease.spec.forecast import gate_forecasts
from tests.helpers import DEMO_DIR, DEMO_SPEC, adult_rows, cli_text, write_spec


def _demo(mechanism: str, epsilon: float) -> ReleaseSpec:
    raw = copy.deepcopy(DEMO_SPEC)
    raw["privacy"]["epsilon"] = epsilon
    if mechanism != "factor_gauss":
        raw["mechanism"] = {"name": mechanism}
    return ReleaseSpec.model_validate({**raw, "base_dir": DEMO_DIR})


@pytest.mark.parametrize(("mechanism", "epsilon"), [("factor_gauss", 0.3), ("factor_gauss", 1.0)])
def test_the_forecast_bounds_the_metric_from_the_right_side(mechanism, epsilon):
    spec = _demo(mechanism, epsilon)
    schema = spec.public_schema()
    data, _ = read_input(spec)
    n = len(data)
    got = {g.gate: g for g in gate_forecasts(spec, n)}
    bins = table_to_bins(data, schema)
    synth = MECHANISMS[mechanism]
    fit = synth.fit(
        table_to_rows(data, bins, schema),
        schema,
        spec.budget_plan(),
        spec.mechanism_params(),
        m=n,
        rng=np.random.default_rng(0),
    )
    one = tvd_1way(bins, fit.rows.bins, schema)["mean"]
    two = tvd_2way(bins, fit.rows.bins, schema, np.random.default_rng(0))["mean"]
    assert got["tvd_1way"].side == "at most" and one <= got["tvd_1way"].value, (one, got["tvd_1way"])
    assert got["tvd_2way"].side == "at least" and two >= got["tvd_2way"].value, (two, got["tvd_2way"])
    assert got["wasserstein_max"].value is None
    print(
        f"{mechanism} at {epsilon}: tvd_1way {one:.4f} of {got['tvd_1way'].value:.4f}, "
        f"tvd_2way {two:.4f} over {got['tvd_2way'].value:.4f}"
    )


def test_the_chance_is_the_gate_noise_at_the_forecast():
    g = GateForecast("tvd_2way", None, 0.1, 0.1, "at least", 0.01)
    assert g.chance == pytest.approx(0.5) and g.likely_to_fail
    assert not GateForecast("tvd_2way", None, 0.1, 0.07, "at least", 0.01).likely_to_fail
    assert not GateForecast("tvd_1way", None, 0.1, 0.2, "at most", 0.01).likely_to_fail  # an upper estimate


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_validate_warns_of_a_gate_the_floor_fails_and_the_release_is_stopped_by_it(tmp_path: Path):
    gates = {"tvd_1way": {"max": 0.2}, "tvd_2way": {"max": 0.01}}
    spec = write_spec(tmp_path, adult_rows(3000), checks={"target": "income", "gates": gates})
    got = CliRunner().invoke(app, ["validate", str(spec)])
    text = cli_text(got.output)
    assert got.exit_code == 0, text
    assert "forecast: gate tvd_1way (max 0.2), noise s.d. " in text
    assert "warning: gate tvd_2way will likely stop the release after its budget is spent" in text
    assert "against checks.gates.tvd_2way.max 0.01" in text
    assert "gate tvd_1way will likely" not in text
    with pytest.raises(GateError, match="tvd_2way"):  # the gate stopped it, as forecast (exit 3)
        release(str(spec), str(tmp_path / "out"), insecure_seed=1)
