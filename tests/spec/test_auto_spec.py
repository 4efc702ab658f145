"""``mechanism: auto`` in the spec: what it accepts and refuses at load time (before any
data is read), and ``ReleaseSpec.resolve`` on the public n; ``engines.inputs.resolve_mechanism``
counts the input's rows for it (CSV and Parquet) and opens nothing for a named mechanism.
Before the choice, the ledger's pre-check judges ``ReleaseSpec.ledger_plan``: whatever the
rule then chooses fits where that plan fits (``test_the_pre_check_decides_for_every_candidate``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.engines.inputs import resolve_mechanism
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.auto import MIN_AIM_ROWS
from dprelease.mechanisms.lifetime import Charge, compose_lifetime
from dprelease.spec import SpecError, load_spec
from tests.helpers import TOY_SCHEMA, record_release, write_spec
from tests.properties import property_settings

MOSTLY_CATEGORICAL = {name: c for name, c in TOY_SCHEMA.items() if name != "k"}  # 1 of 3 continuous

PURE = {"epsilon": 1.0, "delta": 0.0, "accountant": "pure"}


def _spec(tmp_path, **overrides):
    return load_spec(write_spec(tmp_path, **{"checks": {}, "schema": TOY_SCHEMA, **overrides}))


def test_auto_takes_only_a_target(tmp_path):
    spec = _spec(tmp_path, mechanism={"name": "auto", "params": {"target": "c"}})
    assert spec.auto_candidates() == ("factor_gauss", "aim")
    with pytest.raises(SpecError, match=r"mechanism.*params \['rounds'\] are not parameters of auto"):
        _spec(tmp_path, mechanism={"name": "auto", "params": {"rounds": 3}})
    with pytest.raises(SpecError, match="'auto' or one of"):
        _spec(tmp_path, mechanism={"name": "aimm"})


def test_auto_refuses_an_allocation_and_a_target_neither_candidate_takes(tmp_path):
    with pytest.raises(SpecError, match="allocation names the stages of one mechanism"):
        _spec(tmp_path, mechanism={"name": "auto"}, allocation={"marginals": 1.0})
    with pytest.raises(SpecError, match="neither can run this spec") as e:
        _spec(tmp_path, mechanism={"name": "auto", "params": {"target": "x"}})
    assert "factor_gauss (" in str(e.value) and "aim (" in str(e.value)


def test_a_pure_accountant_leaves_factor_gauss_alone(tmp_path):
    spec = _spec(tmp_path, mechanism={"name": "auto"}, privacy=PURE)
    assert spec.auto_candidates() == ("factor_gauss",)
    chosen = spec.resolve(10**8, rows=10**8)
    assert chosen.mechanism.name == "factor_gauss" and "needs zcdp" in chosen.auto_choice.reason


def test_an_unresolved_auto_has_no_plan(tmp_path):
    spec = _spec(tmp_path, mechanism={"name": "auto"})
    with pytest.raises(SpecError, match="chosen from the public row count"):
        spec.stage_weights()


def test_resolve_picks_by_the_public_n_and_the_schema(tmp_path):
    spec = _spec(tmp_path, schema=MOSTLY_CATEGORICAL, mechanism={"name": "auto", "params": {"target": "c"}})
    big = spec.resolve(MIN_AIM_ROWS, rows=MIN_AIM_ROWS)
    small = spec.resolve(MIN_AIM_ROWS - 1, rows=MIN_AIM_ROWS)
    assert big.mechanism.name == "aim" and big.mechanism.params == {"target": "c", "batch": 4}
    assert small.mechanism.name == "factor_gauss" and small.mechanism.params == {"target": "c"}
    assert set(big.stage_weights()) >= {"marginals", "select", "measure"}  # aim's plan, now it is chosen
    assert big.public_dict()["mechanism"] == {"name": "aim", "params": {"target": "c", "batch": 4}}
    assert spec.auto_choice is None and small.resolve(5, rows=5) is small
    half = _spec(tmp_path, mechanism={"name": "auto"}).resolve(
        10**7, rows=10**7
    )  # x and k: 2 of 4 continuous
    assert half.mechanism.name == "factor_gauss" and half.auto_choice.continuous == 2


@pytest.mark.parametrize(
    ("fmt", "engine"), [("csv", "memory"), ("parquet", "memory"), ("csv", "local"), ("parquet", "local")]
)
def test_resolve_mechanism_counts_the_rows_and_the_holdout(tmp_path, fmt, engine):
    """n counted without parsing a value (a CSV file's lines, a Parquet footer); without a
    release's row keys, the fitted rows are the memory engine's n − ⌊f·n⌋ on every engine
    (a streaming release passes its keys: tests/engines/test_public_rows.py)."""
    rows = 40
    df = pd.DataFrame({"x": [0.5] * rows, "k": [3] * rows, "c": ["a"] * rows, "o": ["lo"] * rows})
    path = tmp_path / f"data.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    spec = _spec(
        tmp_path,
        mechanism={"name": "auto"},
        dataset={"name": "toy", "path": path.name},
        checks={"holdout_fraction": 0.25},
        engine={"name": engine, "chunk_rows": 1_000},
    )
    chosen = resolve_mechanism(spec)
    assert (chosen.auto_choice.rows, chosen.auto_choice.n_fitted) == (rows, rows - 10)
    assert chosen.mechanism.name == "factor_gauss"


def test_a_named_mechanism_opens_no_file(tmp_path):
    spec = _spec(tmp_path, dataset={"name": "toy", "path": "absent.csv"})
    assert resolve_mechanism(spec) is spec


def test_the_choice_reads_the_row_count_and_nothing_else(tmp_path):
    """Two inputs of the same n with different values: the same choice and the same facts
    (the rule is a function of public facts: n, ε, δ, the schema)."""
    rng = np.random.default_rng(0)
    choices = []
    for k, values in enumerate([np.zeros(50), rng.random(50)]):
        folder = tmp_path / str(k)
        folder.mkdir()
        df = pd.DataFrame({"x": values, "k": [k] * 50, "c": ["ab"[k]] * 50, "o": ["lo", "hi"][k:][:1] * 50})
        df.to_csv(folder / "data.csv", index=False)
        choices.append(resolve_mechanism(_spec(folder, mechanism={"name": "auto"})).auto_choice)
    assert choices[0] == choices[1] and choices[0].n_fitted == 50


def _charge(plan):
    return Charge(plan.notion, plan.spent_rho, plan.spent_epsilon, plan.delta)


@pytest.mark.property
@given(
    epsilon=st.floats(0.05, 5.0),
    earlier=st.floats(0.01, 5.0),
    gates=st.booleans(),
    target=st.sampled_from(["factor_gauss", "aim"]),
    ulps=st.integers(-2, 2),
)
@property_settings(25)
def test_the_pre_check_decides_for_every_candidate(tmp_path_factory, epsilon, earlier, gates, target, ulps):
    """The ledger's pre-check judges ``ledger_plan`` before n is known: if it admits the
    release, whichever candidate the rule then chooses is admitted too, also when the
    lifetime budget sits within a few ulps of one candidate's charge (the candidates'
    charges differ only in how their stage shares were rounded down). So a refusal never
    depends on n, and the pre-check can come before the rows are counted."""
    folder = tmp_path_factory.mktemp("precheck")
    checks = {"enabled": True, "gates": {"tvd_1way": {"max": 0.5}}} if gates else {"enabled": False}
    privacy = {"epsilon": epsilon, "delta": 1e-6}
    auto = {"schema": MOSTLY_CATEGORICAL, "mechanism": {"name": "auto"}, "checks": checks}
    base = _spec(folder, privacy=privacy, **auto)
    chosen = {"factor_gauss": base.resolve(1, rows=1), "aim": base.resolve(10**7, rows=10**7)}
    assert [s.mechanism.name for s in chosen.values()] == list(chosen)
    previous = plan_budget("zcdp", earlier, 1e-6, {"a": 1.0})
    lifetime = compose_lifetime([_charge(previous), _charge(chosen[target].budget_plan())], 1e-6).epsilon
    for _ in range(abs(ulps)):
        lifetime = math.nextafter(lifetime, math.inf if ulps > 0 else 0.0)
    if lifetime < epsilon:
        return  # the spec itself refuses a lifetime below its epsilon
    spec = _spec(folder, privacy={**privacy, "lifetime_epsilon": lifetime}, **auto)
    plans = [s.budget_plan() for s in chosen.values()]
    assert spec.ledger_plan().spent_rho == max(p.spent_rho for p in plans)
    with Ledger(f"sqlite:///{folder / 'ledger.db'}") as led:
        record_release(led, "earlier", plan=previous, lifetime=spec.privacy.lifetime, dataset="toy")
        facts = {"dataset": "toy", "release_id": "next", "lifetime": spec.privacy.lifetime}
        pre = led.refusal(plan=spec.ledger_plan(), not_dp=spec.mechanism_defects(), **facts)
        after = [led.refusal(plan=p, **facts) for p in plans]
    assert pre is not None or after == [None, None], (pre, after)
