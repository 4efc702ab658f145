"""``factor_gauss``'s stage 1 and the private code it yields: one noisy histogram per
column over public groups (``cells_for``: the declared cells, a continuous column's
intervals merged into as many groups as n and the noise call for), post-processed into
private CDFs and the private placement of a group's rows in its cells (``Code``). The
forecasts read the same noise from public facts (``marginal_noise``).

The privacy argument: ``docs/proofs/factor_gauss.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.axes import axes_of
from dprelease.mechanisms.latent import LatentCode, latent_code
from dprelease.mechanisms.marginals import histogram_sensitivity, private_distribution
from dprelease.mechanisms.primitives import Measurement, measure_stage, stage_noise
from dprelease.mechanisms.refine import Pairs
from dprelease.mechanisms.resolution import Cells, resolve
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import HistogramNoise

__all__ = [
    "Code",
    "cells_for",
    "code_from_marginals",
    "marginal_noise",
    "mean_abs_noise",
    "measure_marginals",
]


@dataclass(frozen=True)
class Code:
    """The private code of every column: its ``cells`` (public groups, private placement
    inside a group) and the ``latent`` CDFs over the groups."""

    latent: LatentCode
    cells: Cells
    pairs: Pairs | None = None


def _histogram_noise(stage_part: StageBudget, p: int) -> list[tuple[Literal["gaussian", "laplace"], float]]:
    """(mechanism, scale) of each of the p histograms' counts, as ``measure_marginals``
    draws them."""
    return [
        stage_noise(
            part, l2_sensitivity=histogram_sensitivity("l2"), l1_sensitivity=histogram_sensitivity("l1")
        )
        for part in stage_part.split(p)
    ]


def mean_abs_noise(mechanism: str, scale: float) -> float:
    """E|noise| per count: σ√(2/π) (Gaussian) or b (Laplace)."""
    return scale * math.sqrt(2 / math.pi) if mechanism == "gaussian" else scale


def cells_for(schema: Schema, stage_part: StageBudget, n: int) -> Cells:
    """Stage 1's public cells (``resolution.resolve``) for n rows and the E|noise| its
    ``stage_part`` puts on each count."""
    return resolve(schema, n, [mean_abs_noise(*noise) for noise in _histogram_noise(stage_part, len(schema))])


def code_from_marginals(marginals: list[Measurement], n: int, schema: Schema, cells: Cells) -> Code:
    """Post-processing of stage 1: private CDFs over the groups (nominal columns by private
    frequency) and the private placement of a group's rows in its declared cells."""
    distributions = [private_distribution(m, n) for m in marginals]
    return Code(
        latent_code(distributions, [c.kind == "nominal" for c in schema.columns]),
        cells.with_private(schema, distributions),
    )


def measure_marginals(
    counts: list[np.ndarray],
    names: list[str],
    stage_part: StageBudget,
    cells: Cells,
    *,
    rng: np.random.Generator,
) -> list[Measurement]:
    """Stage 1's noise: one noisy histogram per column, from its exact counts over the
    column's public groups ``cells`` (each histogram's axis).

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per histogram (replace-one moves one count between two
    bins; ``marginals.histogram_sensitivity``).
    Noise: the stage split evenly over the p columns (``StageBudget.split``): Gaussian
    σ = √2/√(2ρ/p) under zCDP, Laplace b = 2p/ε under pure DP.
    Privacy: Σⱼ ρⱼ ≤ ρ₁ (zCDP composition) or Σⱼ εⱼ ≤ ε₁ (basic composition).
    Reference: ours (no paper); ``docs/proofs/factor_gauss.md``.
    """
    return [
        measure_stage(
            np.asarray(counts[j], dtype=float),
            part,
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=f"histogram[{names[j]}]",
            axes=axes_of(cells, names, [j]),
        )
        for j, part in enumerate(stage_part.split(len(names)))
    ]


def marginal_noise(schema: Schema, params: object, plan: BudgetPlan, n: int | None) -> list[HistogramNoise]:
    """Stage 1's noise per histogram, from public facts, as ``measure_marginals`` draws it:
    the stage split evenly over the p columns (``StageBudget.split``), each count at
    Δ₂ = √2 / Δ₁ = 2 (``histogram_sensitivity``) calibrated by ``primitives.stage_noise``:
    σ = √2/√(2ρ₁/p) (zCDP) or b = 2p/ε₁ (pure), over the column's groups for n rows
    (``cells_for``; the declared cells while n is not known). Independent of the data."""
    stage_part = plan.stage("marginals")
    groups = schema.n_bins if n is None else cells_for(schema, stage_part, n).n_groups
    noise = _histogram_noise(stage_part, len(schema))
    return [
        HistogramNoise("marginals", c.name, k, *m, declared=c.n_bins)
        for c, k, m in zip(schema.columns, groups, noise, strict=True)
    ]
