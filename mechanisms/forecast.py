"""Will a budget give a usable table? A forecast from public facts only, before any noise
is drawn: the noise on each count histogram a mechanism publishes over public bins
(``Synthesizer.histograms``, computed by the calibration its steps use) against n, the
fitted rows (public under replace-one). It reads no data and spends nothing.

A histogram's count c (0 ≤ c ≤ n) is published as c + e, e Gaussian of s.d. σ or
Laplace of scale b (s.d. √2·b); ``sd`` is that s.d., ``mean_abs`` = E|e| (σ·√(2/π) or b).

* **Refuse** when sd ≥ n. One count of any two tables differs by at most n, so with sd ≥
  n even a bin holding all n rows and an empty bin publish overlapping counts: total
  variation 2Φ(n/(2σ)) − 1 ≤ 2Φ(½) − 1 ≈ 0.38 (Gaussian), 1 − e^(−n/(2b)) ≤
  1 − e^(−1/√2) ≈ 0.51 (Laplace). The histograms, and the synthetic table drawn from
  them, are then essentially independent of the data.
* **Warn** when a column's expected L1 error E‖e‖₁/n = K·E|e|/n (K bins) of the
  normalised histogram exceeds 0.5, i.e. the noise alone moves, on average, a quarter
  of the mass (L1 = 2·TV). This is the raw noise before the mechanism's post-processing
  (e.g. the projection onto the simplex), which can lower it: a forecast, not a bound.
* **Warn** when a column is modelled on at most a quarter of its declared cells
  (``COARSE``): a mechanism that merges cells against noise (``mechanisms.resolution``)
  keeps the error above down, but its marginals are then coarse.
* **Warn** when a continuous column declares ``bins`` (which a merging step keeps as
  declared: the steward's choice) and the merge rule (``resolution.group_count``) would
  keep fewer of them for this noise and n, i.e. K·E|e|/n > 2τ = ``WARN_L1`` over its K
  interval cells: the message says how many the rule would keep and to remove ``bins``.

Each message names the ε that removes it: the smallest ``privacy.epsilon`` (same δ,
accountant and stage weights) at which the condition no longer holds, found by
bisection on log ε over the caller's ``noise_at`` (σ falls as ε grows) and rounded *up*
to two significant digits, so "at least X" stays true; none if even ``MAX_EPSILON`` (the
spec's largest ε) does not. Mechanisms that publish no such histogram (the moments and
projections of ``ron_gauss``'s other tasks, ``dpfm``, ``private_pca``) get no forecast:
no refusal, no warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dprelease.mechanisms.resolution import group_count
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import HistogramNoise

__all__ = [
    "COARSE",
    "MAX_EPSILON",
    "WARN_L1",
    "Forecast",
    "expected_l1",
    "histogram_forecast",
    "swamped_bins",
]

COARSE = 0.25  # share of its declared cells below which a merged column is warned about
WARN_L1 = 0.5  # expected L1 error of a normalised histogram above which a column is warned about
MAX_EPSILON = 100.0  # the largest privacy.epsilon a spec may ask for (spec.sections.PrivacySpec)
_REL_TOL = 1e-3  # the bisection's relative precision on ε (the message rounds to 2 digits)

NoiseAt = Callable[[float], Sequence[HistogramNoise]]


@dataclass(frozen=True)
class Forecast:
    """``refuse``: why the budget cannot give a usable table and what ε would (None: go
    on). ``warnings``: columns whose histograms the noise will blur badly, and the ε that
    would not. ``histograms``: the noise on each published histogram at the spec's ε."""

    refuse: str | None
    warnings: list[str] = field(default_factory=list)
    histograms: tuple[HistogramNoise, ...] = ()


def expected_l1(h: HistogramNoise, n: int) -> float:
    """E‖e‖₁/n = K·E|e|/n: the expected L1 error the noise adds to the normalised
    histogram (c + e)/n over K bins.

    >>> round(expected_l1(HistogramNoise("s", "x", 64, "gaussian", 30.0), 442), 3)
    3.466
    """
    return h.bins * h.mean_abs / n


def _round_up(x: float) -> float:
    """x rounded up to two significant digits."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    up = math.ceil(x / unit) * unit
    return up if up >= x else up + unit


def _threshold(ok: Callable[[float], bool], epsilon: float) -> float | None:
    """The smallest ε' in (epsilon, MAX_EPSILON] with ``ok(ε')``, rounded up to two
    significant digits; None when ``ok(MAX_EPSILON)`` fails. ``ok`` must be monotone
    (false, then true, as ε grows) and false at ``epsilon``."""
    if not ok(MAX_EPSILON):
        return None
    lo, hi = epsilon, MAX_EPSILON
    while hi > lo * (1 + _REL_TOL):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return _round_up(hi)


def _raise_to(x: float | None, what: str) -> str:
    if x is None:
        return (
            f"no privacy.epsilon up to {MAX_EPSILON:g} brings {what}: supply more rows or give the "
            "stage a larger allocation weight"
        )
    return f"raise privacy.epsilon to at least {x:.2g} to bring {what}"


def histogram_forecast(
    noise_at: NoiseAt, epsilon: float, n: int | None, schema: Schema | None = None
) -> Forecast:
    """The forecast at ``epsilon`` for n fitted rows (module docstring): ``noise_at(ε)``
    gives the noise on every published histogram under the plan for ε (the same δ,
    accountant and weights). ``n`` None (not known yet): no refusal, no warning. With the
    public ``schema``, declared ``bins`` the noise swamps are warned about too."""
    if n is not None and n < 1:
        raise ValueError(f"n ({n}) must be the number of fitted rows, at least 1")
    noise = tuple(noise_at(epsilon))
    if n is None or not noise:
        return Forecast(None, [], noise)

    def everywhere(test: Callable[[HistogramNoise], bool]) -> Callable[[float], bool]:
        return lambda eps: all(test(h) for h in noise_at(eps))

    refuse = None
    loud = [h for h in noise if h.sd >= n]
    if loud:
        stages = ", ".join(f"'{s}'" for s in sorted({h.stage for h in loud}))
        x = _threshold(everywhere(lambda h: h.sd < n), epsilon)
        refuse = (
            f"privacy.epsilon {epsilon:g} is too small for n = {n} fitted rows: the noise on each count "
            f"of the histograms of stage {stages} has s.d. {max(h.sd for h in loud):.3g} ≥ n, so the "
            "published histograms, and the synthetic table drawn from them, would be essentially "
            f"independent of the data; {_raise_to(x, 'the noise s.d. below n')}"
        )
    warnings = []
    blurred = [h for h in noise if expected_l1(h, n) > WARN_L1]
    if blurred:
        x = _threshold(everywhere(lambda h: expected_l1(h, n) <= WARN_L1), epsilon)
        columns = ", ".join(f"'{h.column}' {expected_l1(h, n):.2g} ({h.bins} bins)" for h in blurred)
        warnings.append(
            f"at privacy.epsilon {epsilon:g} and n = {n} fitted rows the noise (s.d. "
            f"{max(h.sd for h in blurred):.3g} per count) gives an expected L1 error of the published "
            f"normalised histogram above {WARN_L1:g} for {columns}; "
            f"{_raise_to(x, f'every one under {WARN_L1:g}')}, or supply more rows"
        )
    coarse = [h for h in noise if _coarse(h)]
    if coarse:
        x = _threshold(everywhere(lambda h: not _coarse(h)), epsilon)
        columns = ", ".join(f"'{h.column}' on {h.bins} of {h.declared}" for h in coarse)
        warnings.append(
            f"at privacy.epsilon {epsilon:g} and n = {n} fitted rows the noise allows only coarse "
            f"marginals: {columns} declared cells are modelled; "
            f"{_raise_to(x, f'every column to {COARSE:.0%} of its declared cells')}, or supply more rows"
        )
    if schema is not None:
        warnings += swamped_bins(noise, schema, epsilon, n)
    return Forecast(refuse, warnings, noise)


def _coarse(h: HistogramNoise) -> bool:
    return h.declared is not None and h.bins < COARSE * h.declared


def swamped_bins(noise: Sequence[HistogramNoise], schema: Schema, epsilon: float, n: int) -> list[str]:
    """One warning per continuous column with declared ``bins`` or edges that a merging step
    (``HistogramNoise.declared`` set) keeps, where the merge rule would keep only
    k = ``group_count(n, E|e|, bins)`` < bins interval cells. Public facts only."""
    declared = {
        c.name: c
        for c in schema.columns
        if isinstance(c, Continuous) and (c.intervals is not None or c.cuts is not None)
    }
    out, seen = [], set()
    for h in noise:
        c = declared.get(h.column)
        if c is None or h.declared is None or c.name in seen:
            continue
        seen.add(c.name)
        k = group_count(n, h.mean_abs, c.n_intervals)
        if k < c.n_intervals:
            field, fix = (
                (f"bins: {c.intervals} keeps", "remove bins")
                if c.cuts is None
                else ("edges keep", "declare fewer edges")
            )
            out.append(
                f"column '{c.name}': {field} {c.n_intervals} cells; at privacy.epsilon "
                f"{epsilon:g} and n = {n} fitted rows the noise swamps them (E|e| {h.mean_abs:.3g} per "
                f"count, expected L1 error {c.n_intervals * h.mean_abs / n:.2g} > {WARN_L1:g}): the merge "
                f"rule would keep {k}; {fix} to let it merge"
            )
    return out
