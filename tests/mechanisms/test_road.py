"""The road from a plan's part to the noise draw (``accounting.BudgetPlan``'s docstring):
``measure_stage`` hands its part's share to ``_perturb`` itself, with no wrapper between,
and a stage whose statistics take adaptive shares slices its part with ``StageBudget.take``."""

import math
import sys

import numpy as np
import pytest

from dprelease.mechanisms import primitives
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.errors import BudgetError


@pytest.mark.parametrize(("notion", "delta", "kind"), [("zcdp", 1e-6, "gaussian"), ("pure", 0.0, "laplace")])
def test_measure_stage_draws_through_perturb_itself(monkeypatch, notion, delta, kind):
    """One dispatch: the frame that calls ``_perturb`` is ``measure_stage``'s, and it hands
    over the part's share, the Δ of the accountant's norm and the textbook scale (rounded up)."""
    part = plan_budget(notion, 1.0, delta, {"s": 1.0}).stage("s").split(2)[0]
    calls = []

    def probe(value, kind, scale, sensitivity, share, rng):
        calls.append((sys._getframe(1).f_code.co_name, kind, scale, sensitivity, share))
        return value, scale

    monkeypatch.setattr(primitives, "_perturb", probe)
    m = primitives.measure_stage(
        np.zeros(3), part, l2_sensitivity=2.0, l1_sensitivity=3.0, rng=np.random.default_rng(0), name="x"
    )
    sensitivity = 2.0 if kind == "gaussian" else 3.0
    textbook = 2.0 / math.sqrt(2 * part.share) if kind == "gaussian" else 3.0 / part.share  # Δ₂/√(2ρ), Δ₁/ε
    assert m.scale == math.nextafter(textbook, math.inf)
    assert calls == [("measure_stage", kind, m.scale, sensitivity, part.share)]
    assert (m.mechanism, m.sensitivity, m.stage, m.rho, m.epsilon) == (
        kind,
        sensitivity,
        "s",
        part.rho,
        part.epsilon,
    )


@pytest.mark.parametrize(("notion", "delta"), [("zcdp", 1e-6), ("pure", 0.0)])
def test_take_slices_a_stage_in_its_notion(notion, delta):
    """A slice keeps the stage's name and notion, carries the share asked for, weighs its
    fraction of the stage, and is refused above the stage's share or at 0."""
    stage = plan_budget(notion, 1.0, delta, {"measure": 2.0, "other": 2.0}).stage("measure")
    part = stage.take(stage.share / 4)
    assert (part.stage, part.share, part.weight) == ("measure", stage.share / 4, stage.weight / 4)
    assert (part.rho is None, part.epsilon is None) == (stage.rho is None, stage.epsilon is None)
    for bad in (0.0, stage.share * 2):
        with pytest.raises(BudgetError, match="slice"):
            stage.take(bad)
