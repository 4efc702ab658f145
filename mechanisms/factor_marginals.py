"""``factor_gauss``'s stage 1 and the private code it yields: one noisy histogram per
column over public groups (``cells_for``: the declared cells, a continuous column's
intervals merged into as many groups as n and the noise call for), post-processed into
private CDFs and the private placement of a group's rows in its cells (``Code``). The
forecasts read the same noise from public facts (``marginal_noise``).

The privacy argument: ``docs/proofs/factor_gauss.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.axes import Axis, axes_of
from dprelease.mechanisms.latent import LatentCode, latent_code
from dprelease.mechanisms.marginals import histogram_sensitivity, private_distribution
from dprelease.mechanisms.primitives import Measurement, measure_stage, stage_noise
from dprelease.mechanisms.refine import Pairs
from dprelease.mechanisms.resolution import Cells, cut_points, mass_groups, resolve
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import HistogramNoise, Sensitivity

__all__ = [
    "CUT_SHARE",
    "MIN_CUT_GROUPS",
    "Code",
    "Cuts",
    "Layout",
    "OneWay",
    "cells_for",
    "check_cuts",
    "code_from_one_way",
    "cut_columns",
    "layout",
    "marginal_noise",
    "mean_abs_noise",
    "measure_one_way",
    "one_way_sensitivities",
]

Cuts = Literal["quantiles", "equal"]
"""Where a merged column's groups lie: ``quantiles`` (near-equal private mass, from a noisy
histogram over the declared cells, ``measure_one_way``) or ``equal`` (near-equal numbers of
declared cells: equal widths, public)."""


def check_cuts(cuts: str) -> None:
    """``params.cuts`` is one of ``Cuts``'s values (ValueError naming them otherwise)."""
    if cuts not in get_args(Cuts):
        raise ValueError(f"params.cuts ({cuts!r}) must be one of {', '.join(get_args(Cuts))}")


MIN_CUT_GROUPS = 4
"""The fewest groups the public rule must give a merged column for its cuts to be placed by
private mass: with two or three groups (PSID1976's 602 rows at ε = 0.3) the noisy histogram
of a quarter of an already small share placed them worse than equal widths did on every
figure (``BENCHMARKS.md``), so such a column keeps equal widths and spends nothing on cuts."""
CUT_SHARE = 0.25
"""The share of a cut column's one-way part spent on its histogram over the declared cells;
its histogram over the groups keeps the rest (σ grows by √(1/0.75) ≈ 1.15 under zCDP)."""


@dataclass(frozen=True)
class Code:
    """The private code of every column: its ``cells`` (public groups, private placement
    inside a group) and the ``latent`` CDFs over the groups."""

    latent: LatentCode
    cells: Cells
    pairs: Pairs | None = None


def _histogram_noise(parts: list[StageBudget]) -> list[tuple[Literal["gaussian", "laplace"], float]]:
    """(mechanism, scale) of each histogram's counts at its part, as ``measure_one_way``
    draws them."""
    return [
        stage_noise(
            part, l2_sensitivity=histogram_sensitivity("l2"), l1_sensitivity=histogram_sensitivity("l1")
        )
        for part in parts
    ]


def mean_abs_noise(mechanism: str, scale: float) -> float:
    """E|noise| per count: σ√(2/π) (Gaussian) or b (Laplace)."""
    return scale * math.sqrt(2 / math.pi) if mechanism == "gaussian" else scale


def cells_for(schema: Schema, stage_part: StageBudget, n: int) -> Cells:
    """Stage 1's public cells (``resolution.resolve``) for n rows and the E|noise| its
    ``stage_part`` puts on each count."""
    noise = _histogram_noise(stage_part.split(len(schema)))
    return resolve(schema, n, [mean_abs_noise(*m) for m in noise])


def code_from_one_way(one_way: OneWay, schema: Schema) -> Code:
    """Post-processing of stage 1: private CDFs over the groups (nominal columns by private
    frequency) and the cells with the private placement of a group's rows in its cells."""
    nominal = [c.kind == "nominal" for c in schema.columns]
    return Code(latent_code(list(one_way.cells.probs), nominal), one_way.cells)


@dataclass(frozen=True)
class OneWay:
    """The one-way stage's output: the ``cells`` (groups, with the private placement in
    them and the private group distributions), one noisy histogram per column over its
    groups (``marginals``), the noisy histograms over the declared cells that placed the
    cuts (``cuts``, one per column cut by private mass), the cut points (public:
    post-processing) and the exact group counts (``coarse``: confidential, never published)."""

    cells: Cells
    marginals: tuple[Measurement, ...]
    cuts: tuple[Measurement, ...] = ()
    cut_points: dict[str, list[float]] = field(default_factory=dict)
    coarse: tuple[np.ndarray, ...] = field(default=(), repr=False)

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        """Every noisy statistic of the stage, in the order drawn."""
        return (*self.cuts, *self.marginals)

    @property
    def facts(self) -> dict[str, dict[str, list[float]]]:
        """For ``release.json``: the cut points of each column cut by private mass."""
        return {"cuts": self.cut_points} if self.cut_points else {}


def cut_columns(schema: Schema, public: Cells, cuts: Cuts) -> list[int]:
    """The columns whose groups are placed by private mass (``cuts="quantiles"``): those
    the public rule merges (fewer groups than cells; ``resolution.resolve``) into at least
    ``MIN_CUT_GROUPS`` groups. Public."""
    if cuts == "equal":
        return []
    return [
        j
        for j, (c, k) in enumerate(zip(schema.columns, public.n_groups, strict=True))
        if MIN_CUT_GROUPS <= k < c.n_bins
    ]


@dataclass(frozen=True)
class Layout:
    """The one-way stage's public plan for n rows: the public ``cells`` (how many groups each
    column gets), the ``cut`` columns, each column's histogram part and each cut column's
    cuts part."""

    cells: Cells
    cut: list[int]
    parts: list[StageBudget]
    cut_parts: dict[int, StageBudget]


def layout(schema: Schema, stage_part: StageBudget, n: int, cuts: Cuts) -> Layout:
    """Public facts only. The stage split evenly over the p columns (``StageBudget.split``);
    the columns the public rule merges (``cells_for``) are cut by private mass unless
    ``cuts="equal"``; a cut column's part goes ``CUT_SHARE`` to its cuts and the rest to its
    histogram, whose number of groups the rule then takes from that histogram's own noise
    (fewer or as many: the forecast's L1 threshold holds for what is published)."""
    p = len(schema)
    public = cells_for(schema, stage_part, n)
    cut = cut_columns(schema, public, cuts)
    parts = stage_part.split(p)
    cut_parts = {}
    for j in cut:
        cut_parts[j], parts[j] = parts[j].split_by([CUT_SHARE, 1 - CUT_SHARE])
    if cut:
        public = resolve(schema, n, [mean_abs_noise(*m) for m in _histogram_noise(parts)])
    return Layout(public, cut, parts, cut_parts)


def measure_one_way(
    counts: Sequence[np.ndarray],
    n: int,
    schema: Schema,
    stage_part: StageBudget,
    cuts: Cuts,
    *,
    rng: np.random.Generator,
) -> OneWay:
    """Stage 1's noise, from the fitted rows' exact histograms over the declared cells (in
    memory, or summed over chunks): per column one noisy histogram over its groups. The
    groups are the public rule's (``layout``); with ``cuts="quantiles"`` a column the rule
    merges into k groups is first measured over its declared cells (``cuts[c]``) and its k
    groups are placed at the quantiles of that noisy histogram
    (``resolution.mass_groups``, post-processing). A group's rows are placed in its cells
    by the piecewise-linear density through the groups' private densities, as for public
    groups (placing them by the noisy histogram over the cells was measured worse: its noise
    makes spikes, ``BENCHMARKS.md``).

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per histogram, over groups or cells (replace-one moves one
    count between two bins; ``marginals.histogram_sensitivity``).
    Noise: the stage split evenly over the p columns (``StageBudget.split``); a cut column's
    part split ``CUT_SHARE`` : 1 − ``CUT_SHARE`` between its two histograms. Gaussian
    σ = √2/√(2ρ) at each part's ρ under zCDP, Laplace b = 2/ε under pure DP.
    Privacy: the parts sum to at most the stage's share (zCDP or basic composition); the
    groups of a cut column are post-processing of ``cuts[c]``, so its histogram is measured
    on groups fixed before it, as on public ones (adaptive composition).
    Reference: ours; private quantiles read off a noisy histogram's CDF, cells adapted to
    the data as PrivTree's (Zhang et al. 2016); ``docs/proofs/factor_gauss.md``.
    """
    names, p = schema.names, len(schema)
    plan = layout(schema, stage_part, n, cuts)
    groups: list[np.ndarray] = list(plan.cells.groups)
    measured, points = [], {}
    for j in plan.cut:
        column = schema.columns[j]
        assert isinstance(column, Continuous)  # merged, so continuous (``resolution.mergeable``)
        axis = Axis(names[j], np.arange(column.n_bins))
        m = _histogram(counts[j], plan.cut_parts[j], f"cuts[{names[j]}]", axis, rng)
        measured.append(m)
        groups[j] = mass_groups(column, private_distribution(m, n), plan.cells.n_groups[j])
        points[names[j]] = cut_points(column, groups[j])
    cells = Cells(tuple(groups))
    coarse = cells.coarse_counts(list(counts))
    marginals = [
        _histogram(coarse[j], plan.parts[j], f"histogram[{names[j]}]", axes_of(cells, names, [j])[0], rng)
        for j in range(p)
    ]
    distributions = [private_distribution(m, n) for m in marginals]
    return OneWay(
        cells.with_private(schema, distributions),
        tuple(marginals),
        tuple(measured),
        points,
        tuple(coarse),
    )


def _histogram(
    counts: np.ndarray, part: StageBudget, name: str, axis: Axis, rng: np.random.Generator
) -> Measurement:
    return measure_stage(
        np.asarray(counts, dtype=float),
        part,
        l2_sensitivity=histogram_sensitivity("l2"),
        l1_sensitivity=histogram_sensitivity("l1"),
        rng=rng,
        name=name,
        axes=(axis,),
    )


def one_way_sensitivities(schema: Schema, facts: Mapping[str, Any] | None) -> dict[str, Sensitivity]:
    """Stage 1's statistics, from public facts: one histogram per column and, for each
    column cut by private mass (``facts["cuts"]``), its histogram over the declared cells;
    each Δ₁ = 2, Δ₂ = √2, attained by any record moving bins."""
    h1, h2 = histogram_sensitivity("l1"), histogram_sensitivity("l2")
    out = {f"histogram[{c}]": Sensitivity("marginals", h1, h2, tight=True) for c in schema.names}
    for c in (facts or {}).get("cuts", {}):
        out[f"cuts[{c}]"] = Sensitivity("marginals", h1, h2, tight=True)
    return out


class HasCuts(Protocol):
    """A synthesizer's parameters that choose where merged groups lie."""

    @property
    def cuts(self) -> Cuts:
        """Where a merged column's groups lie."""
        ...


def marginal_noise(schema: Schema, params: HasCuts, plan: BudgetPlan, n: int | None) -> list[HistogramNoise]:
    """Stage 1's noise per histogram over the groups, from public facts, as
    ``measure_one_way`` draws it: the stage split evenly over the p columns
    (``StageBudget.split``), a cut column's part less its ``CUT_SHARE``, each count at
    Δ₂ = √2 / Δ₁ = 2 (``histogram_sensitivity``) calibrated by ``primitives.stage_noise``:
    σ = √2/√(2ρⱼ) (zCDP) or b = 2/εⱼ (pure), over the column's groups for n rows
    (``cells_for``; the declared cells while n is not known). Independent of the data."""
    stage_part = plan.stage("marginals")
    if n is None:
        groups, parts = schema.n_bins, stage_part.split(len(schema))
    else:
        public = layout(schema, stage_part, n, params.cuts)
        groups, parts = public.cells.n_groups, public.parts
    return [
        HistogramNoise("marginals", c.name, k, *m, declared=c.n_bins)
        for c, k, m in zip(schema.columns, groups, _histogram_noise(parts), strict=True)
    ]
