"""``mechanism: auto`` in the spec: what it accepts and refuses at load time (before any
data is read), and ``ReleaseSpec.resolve`` on the public n; ``engines.inputs.resolve_mechanism``
counts the input's rows for it (CSV and Parquet) and opens nothing for a named mechanism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprelease.engines.inputs import resolve_mechanism
from dprelease.mechanisms.auto import MIN_AIM_ROWS
from dprelease.spec import SpecError, load_spec
from tests.helpers import TOY_SCHEMA, write_spec

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
    chosen = spec.resolve(10**8)
    assert chosen.mechanism.name == "factor_gauss" and "needs zcdp" in chosen.auto_choice.reason


def test_an_unresolved_auto_has_no_plan(tmp_path):
    spec = _spec(tmp_path, mechanism={"name": "auto"})
    with pytest.raises(SpecError, match="chosen from the public row count"):
        spec.stage_weights()


def test_resolve_picks_by_the_public_n_and_the_schema(tmp_path):
    spec = _spec(tmp_path, schema=MOSTLY_CATEGORICAL, mechanism={"name": "auto", "params": {"target": "c"}})
    big = spec.resolve(MIN_AIM_ROWS)
    small = spec.resolve(MIN_AIM_ROWS - 1)
    assert big.mechanism.name == "aim" and big.mechanism.params == {"target": "c", "batch": 4}
    assert small.mechanism.name == "factor_gauss" and small.mechanism.params == {"target": "c"}
    assert set(big.stage_weights()) >= {"marginals", "select", "measure"}  # aim's plan, now it is chosen
    assert big.public_dict()["mechanism"] == {"name": "aim", "params": {"target": "c", "batch": 4}}
    assert spec.auto_choice is None and small.resolve(5) is small
    half = _spec(tmp_path, mechanism={"name": "auto"}).resolve(10**7)  # x and k: 2 of 4 continuous
    assert half.mechanism.name == "factor_gauss" and half.auto_choice.continuous == 2


@pytest.mark.parametrize(
    ("fmt", "engine"), [("csv", "memory"), ("parquet", "memory"), ("csv", "local"), ("parquet", "local")]
)
def test_resolve_mechanism_counts_the_rows_and_the_holdout(tmp_path, fmt, engine):
    """n read as the release's engine reads it: the memory engine's reader, the streaming
    engines' chunks."""
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
    assert chosen.auto_choice.n_fitted == rows - 10 and chosen.mechanism.name == "factor_gauss"


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
