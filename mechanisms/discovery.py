"""Stage ``schema``: a draft schema's bounds and category sets discovered under DP
(``dprelease discover``), for a steward who has no codebook to copy them from.

**Bounds: private quantiles** (a private selection over candidates, as Smith 2011 and
OpenDP's ``make_private_quantile``). The candidates are a public grid of round
numbers (``GRID``: 0 and ±{1.0, 1.1, …, 9.9}·10^k, k = −3…9), never the data's values.
A candidate c is a lower q-quantile when #{x < c} ≤ q·n ≤ #{x ≤ c} and scores minus its
distance to that (``bound_utilities``; with ties, so that an atom such as 92 % zeros is its
own quantile); the upper bound mirrors it with #{x > c} and #{x ≥ c}. Replacing one record
moves each count by at most 1, so Δu = 1, and choosing by report noisy max with
exponential noise of scale 2/ε (``noisy_max``: permute-and-flip, ε-DP like the exponential
mechanism and at least as accurate) is ε-DP. The level q (``quantile_level``) comes from
public n and ε: every candidate beyond the data scores −q·n, and one trailing the best by g
is chosen with probability ≤ e^{−εg/2}, so with q·n = 4·ln|G|/ε their total probability is
at most |G|·e^{−2 ln|G|} = 1/|G| against a candidate at the quantile (q kept between 0.1 %
and 5 %; at the 5 % cap n is too small for ε and the draft says so). About q·n values lie
beyond each bound; the draft declares ``out_of_bounds: clip`` for them.

**Categories and atoms: Laplace partition selection** (Korolova et al. 2009; Desfontaines
et al. 2022; ``partition_selection``). Each category seen in a nominal column, and each
exact finite value seen in a numeric one (an *atom*: e.g. a score exactly 0 in 23 % of the
rows), gets count + Lap(b), b = 2/ε, and is published when that exceeds the threshold
max(τ, s·n), τ = 1 + b·ln(1/δ); s is 0 for categories and the public least share of an
atom (``ATOM_SHARE``) for atoms, n the public row count, so the threshold is public and
≥ τ. Replacing one record lowers one label's count by 1 and raises another's by 1: on the
labels both tables hold, the counts' L1 change is ≤ 2, so the noisy counts are ε-DP; a
label only one table holds has count 1 there and is published with probability
P(1 + Lap(b) > max(τ, s·n)) ≤ ½·e^{−(τ−1)/b} = δ/2, at most two such labels: (ε, δ)-DP.
Only the sorted set of labels is published, not the counts.

**Cost.** ε is split evenly over the columns; a numeric column spends a third of its share
on each bound and a third on its atoms, or, with atoms off (least share s = 0), half on
each bound. δ is split evenly over the partition selections (a nominal column's categories,
a numeric column's atoms); with none the stage is pure ε-DP (δ = 0). The stage is
(ε, δ)-DP (basic composition of the columns' shares); under zCDP composition a pure ε-DP
step is ε²/2-zCDP and the partition selections' δ is set aside (δ-approximate zCDP, Bun &
Steinke 2016, Def. 8.1): ``lifetime.compose_lifetime``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan, StageBudget
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.primitives import Measurement, laplace_mechanism
from dprelease.mechanisms.randomness import is_vetted, opendp

__all__ = [
    "ATOM_SHARE",
    "GRID",
    "DiscoveredAtoms",
    "DiscoveredBounds",
    "DiscoveredCategories",
    "bound_utilities",
    "discover_atoms",
    "discover_categories",
    "discover_numeric",
    "discovery_plan",
    "noisy_max",
    "partition_selection",
    "private_bounds",
    "quantile_level",
]

STAGE = "schema"
MAX_LEVEL = 0.05
MANTISSAS = np.round(np.arange(10, 100) / 10, 1)  # 1.0, 1.1, …, 9.9
_POSITIVE = np.array([float(f"{m}e{k}") for k in range(-3, 10) for m in MANTISSAS])
GRID = np.concatenate([-_POSITIVE[::-1], [0.0], _POSITIVE])
"""The public candidates of a bound: numbers of two significant digits from −9.9·10⁹ to
9.9·10⁹ (2,341 of them; steps of 1–10 % of the value, so that some candidate lies near
each quantile and the tails, where every candidate scores −q·n, stay unlikely)."""
ATOM_SHARE = 0.05
"""A least share of the rows for an atom (``discover_atoms``; ``init --atom-share 0.05``,
off by default: atoms cost the bounds accuracy, below): only a value
that many rows take is worth a cell of its own (a score exactly 0 in 23 % of the rows, a
capital gain of 0 in 92 %), and fewer than 1/0.05 = 20 values hold more. The floor s·n is
public (s is, and n is public under replace-one), so it only raises the partition
selection's threshold: τ still bounds a value one record holds, δ/2. The atoms take a third
of a numeric column's share, so its bounds need about 1.5 times the ε for the same accuracy;
a least share of 0 turns them off (``discover_numeric``)."""


def discovery_plan(epsilon: float, delta: float, *, selections: int = 1) -> BudgetPlan:
    """The plan of a discovery: one stage ``schema`` of ε, under pure DP with the δ of its
    ``selections`` partition selections (a nominal column's categories, a numeric column's
    atoms), which needs δ > 0; with none, the plan is pure ε (δ = 0 whatever ``delta``:
    nothing would spend it)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"--epsilon ({epsilon}) must be a finite number > 0")
    if not 0 <= delta < 1:
        raise ValueError(f"--delta ({delta}) must be in [0, 1)")
    if selections and not delta > 0:
        raise ValueError(
            f"--delta ({delta}) must be > 0 when categories or atoms are discovered: they are "
            "found by partition selection, (epsilon, delta)-DP; pass e.g. --delta 1e-07 (with "
            "continuous/integer columns only, --atom-share 0 turns the atoms off and needs no delta)"
        )
    return BudgetPlan(
        "pure", epsilon, delta if selections else 0.0, None, (StageBudget(STAGE, 1.0, None, epsilon),)
    )


def quantile_level(n: int, epsilon: float) -> float:
    """q with q·n = 4·ln|G|/ε, kept in [0.001, ``MAX_LEVEL``]: a function of public n and
    ε only."""
    return min(MAX_LEVEL, max(0.001, 4 * math.log(len(GRID)) / (epsilon * n)))


@dataclass(frozen=True)
class DiscoveredBounds:
    lower: float
    upper: float
    level: float
    measurements: tuple[Measurement, Measurement]


@dataclass(frozen=True)
class DiscoveredCategories:
    categories: tuple[str, ...]
    threshold: float
    measurement: Measurement


@dataclass(frozen=True)
class DiscoveredAtoms:
    """The atoms found (sorted), the threshold their noisy counts passed, the least share
    ``share`` in it, and the measurement (its value: the atoms' noisy counts, in order,
    kept for the ledger's record and never published)."""

    atoms: tuple[float, ...]
    threshold: float
    share: float
    measurement: Measurement


def noisy_max(utility: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    """The index of the largest score plus exponential noise of scale 2Δu/ε (Δu = 1):
    report noisy max with exponential noise, i.e. permute-and-flip (McKenna & Sheldon 2020;
    Ding et al. 2021), ε-DP for scores of sensitivity Δu and never less accurate in
    expectation than the exponential mechanism. A candidate whose score trails the best by
    g is chosen only if its noise exceeds g: probability ≤ e^{−εg/2}. A ``VettedRNG`` draws
    it with OpenDP's ``make_noisy_max`` (its own privacy map checked ≤ ε), a plain
    generator with numpy's exponential sampler (the same law)."""
    scale = 2.0 / epsilon
    if is_vetted(rng):
        dp = opendp()
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        for _ in range(64):  # OpenDP's map rounds up: the smallest scale whose map is ≤ ε
            chooser = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=scale)
            if chooser.map(1.0) <= epsilon:
                return int(chooser([float(v) for v in utility]))
            scale = math.nextafter(scale, math.inf)
        raise BudgetError(f"OpenDP's noisy max costs more than epsilon {epsilon!r} at scale {scale!r}")
    return int(np.argmax(utility + rng.exponential(scale, len(utility))))


def bound_utilities(sorted_values: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
    """The scores of every ``GRID`` candidate as the lower and as the upper bound, for the
    rank t = q·n (n public): c is a lower q-quantile when #{x < c} ≤ t ≤ #{x ≤ c}, scored
    −(how far it misses that); the upper bound mirrors it with #{x > c} and #{x ≥ c}. Each
    count moves by at most 1 when one record is replaced, and at most one of the two misses
    is non-zero on either table, so each score moves by at most 1 (Δu = 1; tested on worst
    cases)."""
    x = sorted_values
    below, upto = np.searchsorted(x, GRID, side="left"), np.searchsorted(x, GRID, side="right")
    above, from_ = len(x) - upto, len(x) - below
    lower = -(np.maximum(below - t, 0) + np.maximum(t - upto, 0))
    upper = -(np.maximum(above - t, 0) + np.maximum(t - from_, 0))
    return lower, upper


def private_bounds(
    values: np.ndarray, part: StageBudget, name: str, *, integer: bool, rng: np.random.Generator
) -> DiscoveredBounds:
    """A column's [lower, upper] from two private quantiles on ``GRID`` (``part``'s ε
    split evenly between them). The level q and the rank t = q·n use the public row count
    n = len(values); missing values (NaN) are left out of the counts, and their number,
    which is not public, enters nothing but the scores (a record turning missing moves
    each count by at most 1: Δu = 1 still). An integer column's bounds are rounded
    outward (post-processing)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    x = np.sort(x[~np.isnan(x)])
    half = part.pure_epsilon / 2
    q = quantile_level(max(n, 1), half)
    picks = [noisy_max(u, half, rng) for u in bound_utilities(x, q * n)]
    lo, hi = sorted(GRID[picks])
    if lo == hi:  # the same round number twice: widen to its neighbours (post-processing)
        i = int(np.searchsorted(GRID, lo))
        lo, hi = GRID[max(i - 1, 0)], GRID[min(i + 1, len(GRID) - 1)]
    if integer:
        lo, hi = math.floor(lo), math.ceil(hi)
    scale = 2 / half
    made = tuple(
        Measurement(f"bound[{name},{side}]", STAGE, np.array([v]), "noisy_max", 1.0, "l1", scale, None, half)
        for side, v in (("lower", lo), ("upper", hi))
    )
    return DiscoveredBounds(float(lo), float(hi), q, made)  # type: ignore[arg-type]


def partition_selection(
    labels: np.ndarray,
    counts: np.ndarray,
    epsilon: float,
    delta: float,
    floor: float,
    name: str,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, Measurement]:
    """Laplace partition selection (Korolova et al. 2009; Desfontaines et al. 2022): the
    ``labels`` (each seen once in the data, with its ``counts``) whose count + Lap(b),
    b = Δ₁/ε with Δ₁ = 2, exceeds the threshold max(τ, ``floor``), τ = 1 + b·ln(1/δ) (b as
    drawn), sorted; the threshold; the measurement. Replacing one record moves two counts
    by 1 (L1 ≤ 2): ε-DP on the labels both tables hold; a label one table holds has count
    1 and passes with probability ≤ ½·e^{−(τ−1)/b} = δ/2 when ``floor`` is public:
    (ε, δ)-DP. The measurement keeps the published labels' noisy counts only: the number
    of labels seen in the data is not published (nor its size as a dimension)."""
    m = laplace_mechanism(
        counts.astype(float), l1_sensitivity=2.0, epsilon=epsilon, rng=rng, name=name, stage=STAGE
    )
    threshold = max(1 + m.scale * math.log(1 / delta), floor)
    keep = m.value > threshold
    order = np.argsort(labels[keep], kind="stable")
    return labels[keep][order], threshold, dataclasses.replace(m, value=m.value[keep][order])


def discover_categories(
    values: np.ndarray, part: StageBudget, delta: float, name: str, *, rng: np.random.Generator
) -> DiscoveredCategories:
    """The categories of a column whose noisy count (Laplace, b = 2/ε) exceeds
    τ = 1 + b·ln(1/δ), sorted (``partition_selection``); missing values are not a category.
    The labels stay Python strings (numpy's fixed-width text would drop trailing NULs,
    publishing '' for '\x00' and merging 'a\x00' into 'a')."""
    kept = np.asarray([v for v in values if isinstance(v, str) and v != ""], dtype=object)
    labels, counts = np.unique(kept, return_counts=True)
    found, threshold, m = partition_selection(
        labels, counts, part.pure_epsilon, delta, 0.0, f"categories[{name}]", rng
    )
    return DiscoveredCategories(tuple(str(c) for c in found), threshold, m)


def discover_atoms(
    values: np.ndarray,
    part: StageBudget,
    delta: float,
    name: str,
    *,
    share: float = ATOM_SHARE,
    rng: np.random.Generator,
) -> DiscoveredAtoms:
    """The atoms of a numeric column: the exact values whose noisy count exceeds both
    τ = 1 + b·ln(1/δ), b = 2/ε, and ``share``·n, n = len(values) the public row count
    (``partition_selection`` with the public floor share·n). Sensitivity: replacing one
    record moves two values' counts by 1 (Δ₁ = 2); noise Lap(2/ε); a value one neighbour
    holds is published with probability ≤ δ/2: (ε, δ)-DP. Missing and infinite values are
    never atoms (left out of the counts); −0.0 counts as 0.0, so the sign of a published
    zero tells nothing of the data. Only the sorted atoms are published, never counts."""
    x = np.asarray(values, dtype=float)
    finite = x[np.isfinite(x)] + 0.0  # −0.0 + 0.0 is 0.0
    labels, counts = np.unique(finite, return_counts=True)
    found, threshold, m = partition_selection(
        labels, counts, part.pure_epsilon, delta, share * len(x), f"atoms[{name}]", rng
    )
    return DiscoveredAtoms(tuple(float(v) for v in found), threshold, share, m)


def discover_numeric(
    values: np.ndarray,
    part: StageBudget,
    delta: float,
    name: str,
    *,
    integer: bool,
    share: float = ATOM_SHARE,
    rng: np.random.Generator,
) -> tuple[DiscoveredBounds, DiscoveredAtoms | None]:
    """A numeric column's bounds (``private_bounds``, two thirds of ``part``: a third on
    each bound) and atoms (``discover_atoms``, the last third, and all of ``delta``). With
    ``share`` 0 the atoms are off (None): the bounds get the whole ``part``, half on each,
    and ``delta`` is not spent."""
    if share == 0:
        return private_bounds(values, part, name, integer=integer, rng=rng), None
    for_bounds, for_atoms = part.split_by([2.0, 1.0])
    bounds = private_bounds(values, for_bounds, name, integer=integer, rng=rng)
    return bounds, discover_atoms(values, for_atoms, delta, name, share=share, rng=rng)
