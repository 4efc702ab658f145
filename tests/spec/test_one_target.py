"""One target (issue 40): ``checks.target`` is the mechanism's target too, where the
mechanism takes one and its params name none. Following spec.md's example set only the
checks' key, and a factor_gauss release silently lost its refine stage (TSTR AUC .59 against
.90). Held for every mechanism and every column of the demo schema: the plan a spec reserves
is the plan of the spec with the target written out."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from dprelease.mechanisms.auto import AUTO
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import SpecError, load_spec
from tests.helpers import DEMO_SPEC, write_spec
from tests.properties import property_settings

TAKING = sorted(
    n for n, m in MECHANISMS.items() if "target" in {f.name for f in dataclasses.fields(m.params_type)}
)
CATEGORICAL = sorted(n for n, c in DEMO_SPEC["schema"].items() if c["type"] in ("nominal", "ordinal"))
CONTINUOUS = sorted(n for n, c in DEMO_SPEC["schema"].items() if c["type"] == "continuous")


def test_the_mechanisms_that_take_a_target_are_known():
    assert {"factor_gauss", "aim"} <= set(TAKING)


def _load(folder, mechanism: str, params: dict, target: str):
    """The spec, or the refusal's message."""
    notions = ("zcdp", "pure") if mechanism == AUTO else MECHANISMS[mechanism].notions
    privacy = {"epsilon": 1.0, "delta": 1e-6, "accountant": "zcdp"}
    if "zcdp" not in notions:
        privacy = {"epsilon": 1.0, "delta": 0.0, "accountant": "pure"}
    path = write_spec(
        folder, mechanism={"name": mechanism, "params": params}, checks={"target": target}, privacy=privacy
    )
    try:
        return load_spec(path)
    except SpecError as e:
        return str(e).split("\n", 1)[1]  # the reason, without the file's name


@property_settings(40)
@given(mechanism=st.sampled_from([*TAKING, AUTO]), target=st.sampled_from(CATEGORICAL + CONTINUOUS))
def test_a_spec_naming_only_the_checks_target_is_the_spec_naming_both(tmp_path_factory, mechanism, target):
    """Left out of the params, the target is the checks' (a nominal or ordinal one: a
    mechanism's target is a class column); the spec loads, plans and refuses exactly as the
    spec with the target written out; ``target: null`` keeps it off."""
    implied = _load(tmp_path_factory.mktemp("s"), mechanism, {}, target)
    written = _load(
        tmp_path_factory.mktemp("s"), mechanism, {"target": target} if target in CATEGORICAL else {}, target
    )
    if isinstance(implied, str) or isinstance(written, str):
        assert implied == written
        return
    assert implied.mechanism.params == written.mechanism.params
    if mechanism != AUTO:
        assert implied.budget_plan() == written.budget_plan()  # the same stages and shares
    off = _load(tmp_path_factory.mktemp("s"), mechanism, {"target": None}, target)
    assert isinstance(off, str) or off.mechanism.params["target"] is None


def test_spec_mds_example_keeps_its_refine_stage(tmp_path):
    """spec.md's example: factor_gauss with empty params and checks.target: income."""
    spec = load_spec(
        write_spec(tmp_path, mechanism={"name": "factor_gauss", "params": {}}, checks={"target": "income"})
    )
    assert spec.mechanism_params().target == "income"
    assert "refine" in {s.stage for s in spec.budget_plan().stages}
