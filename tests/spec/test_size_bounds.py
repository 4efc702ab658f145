"""Issue 38, defects 3 and 8: the spec bounds every field the rehearsal or the release could
fail on, so that the refusal names the field. A period length the spec accepts gives a
window (and its label) at any time the ledger can meet; ``synthetic_rows`` has a hard cap."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from dprelease.mechanisms.periods import Period
from dprelease.spec import SpecError, load_spec
from dprelease.spec.release import MAX_SYNTHETIC_ROWS
from dprelease.spec.sections import MAX_PERIOD_YEARS
from tests.helpers import DEMO_SPEC
from tests.properties import property_settings

# the times a ledger meets: now, and the last instant of the dates a release can name
TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2261, 12, 31)).map(
    lambda t: t.replace(tzinfo=UTC)
)


def _load(tmp_path, **changes):
    doc = copy.deepcopy(DEMO_SPEC)
    doc["dataset"] = {"name": "adult", "path": "data.csv"}
    for key, value in changes.items():
        doc[key] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_spec(path)


@pytest.mark.property
@property_settings(60)
@given(st.integers(1, 9999), st.sampled_from("DWMY"), TIMES)
@example(8030, "Y", datetime(2026, 11, 29, tzinfo=UTC))  # issue 38: "year 11969 is out of range"
@example(101, "Y", datetime(2026, 11, 29, tzinfo=UTC))
def test_a_period_the_spec_accepts_has_a_window_at_every_time(tmp_path_factory, count, unit, at):
    length = f"P{count}{unit}"
    privacy = {"epsilon": 1.0, "delta": 1e-6, "period": {"length": length, "epsilon": 2.0}}
    try:
        spec = _load(tmp_path_factory.mktemp("p"), privacy=privacy)
    except SpecError as e:
        assert "spec field 'privacy.period.length'" in str(e), str(e)
        assert f"must be at most {MAX_PERIOD_YEARS} years" in str(e) and "lifetime_epsilon" in str(e)
        return
    budget = spec.privacy.period_budget
    assert budget is not None and budget.length == Period(count, unit)
    start, end = budget.length.window(at)  # never "year ... is out of range"
    assert start <= at < end
    assert budget.length.label(at)


def test_a_century_is_the_longest_period(tmp_path):
    def privacy(length: str) -> dict:
        return {"epsilon": 1.0, "delta": 1e-6, "period": {"length": length, "epsilon": 2.0}}

    for length in ("P100Y", "P1200M", "P5217W", "P9999D"):
        _load(tmp_path, privacy=privacy(length))
    for length in ("P101Y", "P1201M", "P5218W"):
        with pytest.raises(SpecError, match="must be at most 100 years"):
            _load(tmp_path, privacy=privacy(length))


def test_synthetic_rows_has_a_hard_cap_that_names_the_field(tmp_path):
    assert _load(tmp_path, synthetic_rows=MAX_SYNTHETIC_ROWS).synthetic_rows == MAX_SYNTHETIC_ROWS
    with pytest.raises(SpecError) as e:
        _load(tmp_path, synthetic_rows=10**12)  # issue 38: it passed validate, then MemoryError after ε = 1
    assert "spec field 'synthetic_rows'" in str(e.value)
    assert "synthetic_rows (1e+12) must be at most 1e+09" in str(e.value)


def test_aim_refuses_a_column_no_candidate_marginal_can_hold(tmp_path):
    """Issue 38: aim's rehearsal of a 10,000-category column peaked at 7.8 GB, then its release
    spent and ran past 600 s. Such a column fits in no candidate marginal (at most 10,000
    cells) with any other column: the spec is refused naming it and what to do."""
    codes = {"type": "nominal", "categories": [f"c{i}" for i in range(10_000)]}
    with pytest.raises(SpecError) as e:
        _load(
            tmp_path, schema={**DEMO_SPEC["schema"], "code": codes}, mechanism={"name": "aim", "params": {}}
        )
    assert "aim cannot model column 'code' (10,000 cells) with any other" in str(e.value)
    assert "Merge its categories to at most 5,000" in str(e.value) and "factor_gauss" in str(e.value)
    codes["categories"] = codes["categories"][:5_000]
    _load(tmp_path, schema={**DEMO_SPEC["schema"], "code": codes}, mechanism={"name": "aim", "params": {}})
    auto = _load(
        tmp_path,
        schema={**DEMO_SPEC["schema"], "code": codes | {"categories": [str(i) for i in range(9000)]}},
        mechanism={"name": "auto", "params": {}},
    )
    assert auto.auto_candidates() == ("factor_gauss",)  # auto leaves aim out
