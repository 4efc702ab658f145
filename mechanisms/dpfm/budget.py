"""``dpfm``'s budget: the stage weights (DPFM1 and the paper's other splits, for
``accounting.plan_budget``) and ``_release``, the one call through which every noisy dpfm
statistic is measured."""

from __future__ import annotations

import dataclasses

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.dpfm.params import DPFMParams, _kinds
from dprelease.mechanisms.primitives import Measurement, measure_stage
from dprelease.mechanisms.schema import Ordinal, Schema

__all__ = ["DPFM1", "stage_weights"]


DPFM1 = (1 / 3, 1 / 3, 1 / 3)
"""The paper's default (ε₁, ε₂, ε₃) shares: loadings, scores, thresholds ⅓ each."""


def stage_weights(
    schema: Schema, params: DPFMParams, shares: tuple[float, float, float] | None = None
) -> dict[str, float]:
    """The stage weights for ``accounting.plan_budget``. Default (DPFM1): ε₁ = ε₂ = ε₃ = ε/3;
    without ordinal columns ε₃ is reassigned (½ / ½). ``shares``: the paper's other splits
    (DPFM2–4) as (ε₁, ε₂, ε₃) ∝ (loadings, scores, thresholds); without ordinal columns
    the thresholds' share is dropped, so ε₁ and ε₂ keep their ratio.

    >>> from dprelease.mechanisms.schema import Continuous, Nominal
    >>> no_ordinal = Schema((Continuous("x", 0.0, 1.0), Nominal("b", ("n", "y"))))
    >>> stage_weights(no_ordinal, DPFMParams(), shares=(1 / 6, 4 / 6, 1 / 6))
    {'loadings': 0.16666666666666666, 'scores': 0.6666666666666666}
    """
    if shares is None:
        if _kinds(schema, Ordinal):
            return {"thresholds": 1 / 3, "loadings": 1 / 3, "scores": 1 / 3}
        return {"loadings": 0.5, "scores": 0.5}
    loadings, scores, thresholds = shares
    split = {"thresholds": thresholds, "loadings": loadings, "scores": scores}
    if not _kinds(schema, Ordinal):
        del split["thresholds"]
    return split


def _paper_notion(params: DPFMParams, notion: str) -> None:
    if params.variant == "paper" and notion != "pure":
        raise ValueError(
            "params.variant ('paper') is pure ε-DP (Laplace) as printed and has no zCDP form; "
            "set privacy.accountant: pure"
        )


def _part(plan: BudgetPlan | None, name: str) -> StageBudget | None:
    return None if plan is None else plan.stage(name)


def _release(
    value: np.ndarray,
    part: StageBudget | None,
    *,
    l1: float,
    l2: float,
    name: str,
    rng: np.random.Generator,
    defect: str | None = None,
) -> tuple[np.ndarray, Measurement | None]:
    """``measure_stage`` with the stage's part (Gaussian under zCDP, Laplace under pure), or the
    exact value and no record when ``part`` is None (the ε = ∞ ablation).

    Sensitivity: the caller's ``l1`` / ``l2`` (``threshold_sensitivity``,
    ``loadings_sensitivity``, ``scores_sensitivity``).
    Noise: Laplace b = Δ₁/ε or Gaussian σ = Δ₂/√(2ρ) per entry (``measure_stage``).
    Privacy: the stage's ε-DP or ρ-zCDP; a ``defect`` (paper variant) marks the record
    as not DP.
    Reference: Zhang, Xu, Tang, Qu, Alg. 1–2 (Laplace); the Gaussian form is ours.
    """
    if part is None:
        return np.asarray(value, dtype=float), None
    m = measure_stage(value, part, l2_sensitivity=l2, l1_sensitivity=l1, rng=rng, name=name)
    if defect is not None:
        m = dataclasses.replace(m, defect=defect)
    return m.value, m
