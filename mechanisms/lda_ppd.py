"""``lda_ppd``: DP-LDA data publishing (the seed paper's Alg B, "LDA-based PPDP
mechanism"; proofs ``docs/proofs/pcappd_lda_ppd.md``) for a declared target column,
generalised from 2 to L classes.

Features x ∈ [0, 1]^p: the public-box design of the other columns (p₁ numeric
coordinates, p₂ one-hot blocks; ``mechanisms.publishing``); class y. Stages (ledger
names):

1. ``class_counts`` (corrected only, weight 0.05): ñ_c = n_c + Lap(2/ε).
2. ``moments`` (0.95; paper 1): the class sums S_c and Q = triu(Σ_all xxᵀ) jointly,
   Laplace b = Δ/ε_moments; then μ_c = S̃_c / max(ñ_c, 1), M = mirror(Q̃)/n and the class
   shares (post-processing).
3. greedy synthesis of m fresh rows matching them, decoded (post-processing,
   ``synthesize``).

Pure ε-DP only (replace-one, n public): two Laplace releases composed sequentially.

In one call: ``LDAPPD().fit(rows, schema, plan, LDAPPDParams(target=...), m=m,
rng=rng)`` with ``plan = accounting.plan_budget("pure", ε, 0, stage_weights(schema,
params))``; ``Fit.stages[1].state`` is the ``LDAModel``, ``Fit.stages[2].state`` the
``Synthesized`` greedy rows (design coordinates of the features) and their classes.

Where the paper is wrong (variant ``corrected``; ``paper`` reproduces it, its records
carry defects), one line each:

* the categorical Δ is too small: the exact ``publishing.class_moment_sensitivity``;
* n₁, n₂ are used without noise: private ñ_c, in their own stage;
* 2 classes only: a record changing class moves between two class sums whatever L is,
  so Δ does not depend on L.

Derivations, the privacy argument and the greedy synthesis's open choices:
``docs/proofs/pcappd_lda_ppd.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.linalg import blas

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.design import Design, design
from dprelease.mechanisms.marginals import histogram, histogram_sensitivity, project_to_simplex
from dprelease.mechanisms.primitives import Measurement, laplace_mechanism, unprotected
from dprelease.mechanisms.publishing import (
    Layout,
    class_moment_sensitivity,
    layout,
    mirror,
    paper_class_moment_sensitivity,
    upper,
)
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import Facts, MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "CLASS_COUNT_SHARE",
    "LDAPPD",
    "Encoded",
    "LDAModel",
    "LDAPPDParams",
    "Synthesized",
    "build_model",
    "check",
    "class_statistic",
    "defects",
    "release_class_counts",
    "release_moments",
    "sensitivities",
    "stage_weights",
    "synthesize",
    "weighted_median",
]

Variant = Literal["corrected", "paper"]
CLASS_COUNT_SHARE = 0.05
SENSITIVITY_DEFECT = (
    "Alg B's categorical Δ = 2(p₁+p₂) + [(p₁+p₂+1)(p₁+p₂) + p₂(p₂+1)]/2 is below the exact maximum "
    "(numerics near 1 in both records change the numeric × dummy entries of Q); e.g. (p₁, p₂) = (5, 5): "
    "100 vs 90, (3, 6): 96 vs 84: not ε-DP"
)
CLASS_SIZE_DEFECT = (
    "Alg B uses the true class sizes n_c without noise (divisors of μ_c, synthetic class sizes)"
)


@dataclass(frozen=True)
class LDAPPDParams:
    """Public hyperparameters. ``variant``: ``corrected`` (DP) or ``paper`` (not DP).
    ``target``: the class column (nominal or ordinal; ``check``)."""

    variant: Variant = "corrected"
    target: str | None = None

    def __post_init__(self) -> None:
        if self.variant not in ("corrected", "paper"):
            raise ValueError(f"params.variant ({self.variant!r}) must be 'corrected' or 'paper'")


def defects(params: LDAPPDParams) -> list[str]:
    """Why the parameters are not DP: empty for ``corrected``. ``paper``: the class sizes
    always; the categorical Δ listed unconditionally (only params are seen here), it
    bites when g(p₁, p₂+1) > p₁ (``publishing.class_moment_sensitivity``)."""
    return [] if params.variant == "corrected" else [CLASS_SIZE_DEFECT, SENSITIVITY_DEFECT]


def stage_weights(schema: Schema, params: LDAPPDParams) -> dict[str, float]:
    """Corrected: ``class_counts`` 0.05, ``moments`` 0.95. Paper: ``moments`` 1 (the
    counts are used without noise)."""
    if params.variant == "paper":
        return {"moments": 1.0}
    return {"class_counts": CLASS_COUNT_SHARE, "moments": 1.0 - CLASS_COUNT_SHARE}


def _target_index(schema: Schema, params: LDAPPDParams) -> int:
    """The column index of ``target``; ValueError (naming the parameter) when it names none."""
    if params.target is None or params.target not in schema.names:
        raise ValueError(f"params.target ({params.target!r}) must name a schema column: {schema.names}")
    return schema.names.index(params.target)


def check(schema: Schema, params: LDAPPDParams) -> None:
    """``target`` names a nominal or ordinal column and leaves at least one feature."""
    if isinstance(schema.columns[_target_index(schema, params)], Continuous):
        raise ValueError(
            f"params.target ({params.target!r}) must be a nominal or ordinal column, not continuous"
        )
    if len(schema) < 2:
        raise ValueError(f"params.target ({params.target!r}) must leave at least one feature column")


# ---------------------------------------------------------------- releases (Alg B steps 1-2)


def class_statistic(x: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """(S_1, …, S_L, triu(Σ_all xxᵀ)) concatenated: Lp + p(p+1)/2 entries."""
    sums = np.eye(n_classes)[y].T @ x
    return np.concatenate([sums.ravel(), upper(x)])


def release_class_counts(
    y: np.ndarray, n_classes: int, epsilon: float | None, *, rng: np.random.Generator, stage: str
) -> Measurement:
    """Corrected (``epsilon`` given): ñ = histogram + Lap(2/ε)^L. Paper (``epsilon``
    None): the true n_c, recorded ``unprotected``.

    Sensitivity: Δ₁ = 2 (a histogram under replace-one, ``histogram_sensitivity``).
    Noise: Laplace b = 2/ε per class.
    Privacy: ε-DP (stage ``class_counts``); the paper variant's exact counts are not DP.
    Reference: the seed paper's Alg B (n₁, n₂, used there without noise).
    Corrected: the class sizes are measured, in their own stage.
    """
    counts = histogram(y, n_classes)
    if epsilon is None:
        return unprotected(counts, name="class_counts", stage=stage, defect=CLASS_SIZE_DEFECT)
    return laplace_mechanism(
        counts,
        l1_sensitivity=histogram_sensitivity("l1"),
        epsilon=epsilon,
        rng=rng,
        name="class_counts",
        stage=stage,
    )


def release_moments(
    x: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    lay: Layout,
    epsilon: float,
    variant: Variant,
    *,
    rng: np.random.Generator,
    stage: str,
) -> Measurement:
    """``class_statistic`` + Lap(Δ/ε): the class sums and triu(Σ_all xxᵀ), jointly.

    Sensitivity: corrected, Δ = ``class_moment_sensitivity`` (exact, any L, attained).
    Paper: its Δ (``paper_class_moment_sensitivity``).
    Noise: Laplace b = Δ/ε per entry.
    Privacy: ε-DP (stage ``moments``); the paper variant's record carries a defect when
    its Δ is below the exact maximum (not DP).
    Reference: the seed paper's Alg B step 1.
    Corrected: the paper's categorical Δ is too small; the exact maximum instead.
    """
    exact = class_moment_sensitivity(lay.p1, lay.p2)
    delta = exact if variant == "corrected" else paper_class_moment_sensitivity(lay.p1, lay.p2)
    m = laplace_mechanism(
        class_statistic(x, y, n_classes),
        l1_sensitivity=delta,
        epsilon=epsilon,
        rng=rng,
        name="class_moments",
        stage=stage,
    )
    if delta < exact:
        m = dataclasses.replace(
            m,
            defect=(
                f"Alg B's categorical Δ = {delta:g} is below the exact maximum {exact:.6g} for "
                f"(p₁, p₂) = ({lay.p1}, {lay.p2}): not ε-DP"
            ),
        )
    return m


@dataclass(frozen=True)
class LDAModel:
    """The released model (post-processing of the measurements): class means μ_c (L, p),
    second moment M (p, p, symmetric), class shares π (L,), the layout."""

    means: np.ndarray = field(repr=False)
    second: np.ndarray = field(repr=False)
    shares: np.ndarray
    layout: Layout
    measurements: tuple[Measurement, ...]


def build_model(counts: Measurement, moments: Measurement, n: int, lay: Layout) -> LDAModel:
    """Alg B step 2's divisions: μ_c = S̃_c / max(ñ_c, 1), M = mirror(Q̃)/n; π = ñ/n
    projected onto the simplex (``project_to_simplex``)."""
    n_classes, p = len(counts.value), lay.width
    sums = moments.value[: n_classes * p].reshape(n_classes, p)
    means = sums / np.maximum(counts.value, 1.0)[:, None]
    second = mirror(moments.value[n_classes * p :], p) / n
    return LDAModel(means, second, project_to_simplex(counts.value / n), lay, (counts, moments))


# ---------------------------------------------------------------- greedy synthesis (step 3)


def weighted_median(r: np.ndarray, w: np.ndarray) -> float:
    """A minimiser of Σ wᵢ|z − rᵢ| (w ≥ 0, Σw > 0): the smallest rₖ (in sorted order) with
    cumulative weight ≥ Σw/2. Exact: there Σ_{r<z} w < Σw/2 and Σ_{r>z} w ≤ Σw/2, so the
    left slope is ≤ 0 ≤ the right slope of the convex objective. Σ|aᵢz − bᵢ| is this with
    rᵢ = bᵢ/aᵢ, wᵢ = |aᵢ|; clipping the minimiser to [0, 1] minimises it over [0, 1]."""
    order = r.argsort()
    cw = w.take(order).cumsum()
    return float(r[order[cw.searchsorted(0.5 * cw[-1])]])


def _set_block(w: np.ndarray, d: np.ndarray, e: np.ndarray, b: slice, outside: np.ndarray) -> None:
    """Try each level l of the block (O(Kp), vectorised): the terms that depend on it are
    |1 − E_l| vs |E_l| (mean), |1 − D_ll| vs |D_ll| (diagonal) and Σ_{j∉B}|w_j − D_lj| vs
    |D_lj| (off-diagonal; within the block the products are 0 whatever the level). Set
    the level with the least cost."""
    sub = d[b]
    cost = (np.abs(w - sub) - np.abs(sub)) @ outside
    eb, diag = e[b], sub[:, b].diagonal()
    cost += np.abs(1.0 - eb) - np.abs(eb) + np.abs(1.0 - diag) - np.abs(diag)
    w[b] = 0.0
    w[b.start + int(cost.argmin())] = 1.0


def synthesize(model: LDAModel, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy synthesis (the paper's "Sampling"; post-processing). Returns m rows in
    design coordinates (numerics in [0, 1], one-hot blocks) and their classes.

    Row j: class c = argmax(jπ_c − t_c); then with D = t·M − Σ_prev yyᵀ and
    E = t_cμ_c − Σ_prev,c y (t, t_c counting row j) the row y minimises, feature by
    feature, Σ|E_i − y_i| + Σ_{i≤j}|D_ij − y_iy_j|. Numeric feature i: the terms are
    |z − E_i|, |z·w_i − D_ii| (z² linearised with w_i = the noisy mean) and |w_j z − D_ij|
    for j ≠ i (w_j the chosen value or the noisy mean): the exact minimiser over [0, 1] is
    the weighted median of D_ij/w_j and E_i (weights w_j and 1), clipped
    (``weighted_median``). Cost O(p² + p·p₁ log p) per row (running sums; O(mp²) in all).

    Known limits (of the paper's greedy, not of privacy): deterministic given the model;
    once a row's earlier features are set, the off-diagonal ratios and the mean term sit
    near μ_i and outweigh the linearised diagonal, so later numerics collapse towards the
    class mean (within-class variance lost; categoricals keep their proportions). M is
    pooled over classes, so with many class-dependent numerics the class means drift
    (noise-free, 30 numerics: 0.05-0.09 at m = 1,000-20,000, while mixed schemas stay
    within ~10⁻³).
    """
    lay = model.layout
    p, n_classes = lay.width, len(model.shares)
    anchor = np.clip(model.means, 0.0, 1.0)
    inv_anchor = np.divide(1.0, anchor, out=np.zeros_like(anchor), where=anchor > 0)
    # [:, :p] = D (symmetric, column-major so BLAS updates it in place), [:, p] = E for the row's class
    resid = np.zeros((p, p + 1), order="F")
    mean_resid = np.zeros((n_classes, p))
    a, inv = np.ones(p + 1), np.ones(p + 1)  # weights [w; 1] and 1/weight (0 where the weight is 0)
    w = a[:p]
    blocks, numeric = lay.blocks, lay.numeric
    outside = [np.ones(p) for _ in blocks]
    for mask, b in zip(outside, blocks, strict=True):
        mask[b] = 0.0
    counts = np.zeros(n_classes)
    rows, labels = np.empty((m, p)), np.empty(m, dtype=np.int64)
    for j in range(m):
        c = int(np.argmax((j + 1) * model.shares - counts))
        counts[c] += 1
        mean_resid[c] += model.means[c]
        resid[:, :p] += model.second
        resid[:, p] = mean_resid[c]
        w[:], inv[:p] = anchor[c], inv_anchor[c]
        for mask, b in zip(outside, blocks, strict=True):
            _set_block(w, resid[:, :p], resid[:, p], b, mask)
            inv[b] = w[b]  # 1/1 or 0
        for i in numeric:
            # ratios b/a; a weight-0 term gets ratio 0 and never decides the median
            z = min(1.0, max(0.0, weighted_median(resid[i] * inv, a)))
            w[i] = z
            inv[i] = 1.0 / z if z > 0 else 0.0
        mean_resid[c] -= w
        blas.dger(-1.0, w, w, a=resid[:, :p], overwrite_a=True)  # D −= wwᵀ
        rows[j], labels[j] = w, c
    return rows, labels


# ---------------------------------------------------------------- the four pipeline stages


def _features(schema: Schema, params: LDAPPDParams) -> tuple[Design, int]:
    j = _target_index(schema, params)
    return design(Schema(schema.columns[:j] + schema.columns[j + 1 :])), j


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the features in design coordinates ``x`` (n, p), the
    classes ``y`` (n,), the features' layout and the class counts' record."""

    x: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    layout: Layout
    counts: Measurement


@dataclass(frozen=True)
class Synthesized:
    """The sample step's state: the greedy rows in design coordinates of the features
    ``x`` (m, p) and their classes ``labels`` (m,) (``synthesize``)."""

    x: np.ndarray = field(repr=False)
    labels: np.ndarray = field(repr=False)


def sensitivities(
    schema: Schema, params: LDAPPDParams, n: int, facts: Facts | None = None
) -> dict[str, Sensitivity]:
    """Every statistic lda_ppd measures (corrected; pure ε, L1 only), from the public
    layout of the features: the class counts (histogram, Δ₁ = 2) and the class sums with
    the second moment (``class_moment_sensitivity``, exact for any number of classes)."""
    lay = layout(_features(schema, params)[0])
    return {
        "class_counts": Sensitivity("class_counts", histogram_sensitivity("l1"), None, tight=True),
        "class_moments": Sensitivity("moments", class_moment_sensitivity(lay.p1, lay.p2), None, tight=True),
    }


def _encode(
    rows: MixedRows, schema: Schema, plan: BudgetPlan, params: LDAPPDParams, rng: np.random.Generator
) -> Stage[Encoded]:
    """Features and classes; the class counts (corrected: noisy, stage ``class_counts``;
    paper: exact, ``unprotected`` in stage ``moments``)."""
    if plan.notion != "pure":
        raise ValueError("lda_ppd is pure ε-DP (Laplace) only: set privacy.accountant: pure")
    check(schema, params)
    features, j = _features(schema, params)
    keep = [k for k in range(len(schema)) if k != j]
    x = features.encode(MixedRows(rows.bins[:, keep], None if rows.unit is None else rows.unit[:, keep]))
    y = rows.bins[:, j].astype(np.int64)
    n_classes = schema.columns[j].n_bins
    if params.variant == "paper":
        counts = release_class_counts(y, n_classes, None, rng=rng, stage="moments")
    else:
        eps = plan.stage("class_counts").pure_epsilon
        counts = release_class_counts(y, n_classes, eps, rng=rng, stage="class_counts")
    lay = layout(features)
    facts = {"numeric_coordinates": lay.p1, "nominal_columns": lay.p2, "design_width": lay.width}
    return Stage(Encoded(x, y, lay, counts), (counts,), facts)


def _estimate(
    encoded: Encoded, plan: BudgetPlan, params: LDAPPDParams, rng: np.random.Generator
) -> Stage[LDAModel]:
    """The class sums and second moment (stage ``moments``), then the model (post-processing)."""
    n_classes = len(encoded.counts.value)
    moments = release_moments(
        encoded.x,
        encoded.y,
        n_classes,
        encoded.layout,
        plan.stage("moments").pure_epsilon,
        params.variant,
        rng=rng,
        stage="moments",
    )
    model = build_model(encoded.counts, moments, len(encoded.y), encoded.layout)
    facts = {"moment_sensitivity": moments.sensitivity, "class_shares": [float(s) for s in model.shares]}
    return Stage(model, (moments,), facts)


def _decode(state: Synthesized, schema: Schema, params: LDAPPDParams) -> MixedRows:
    """The greedy rows' features decoded, the class column put back at its place."""
    features, j = _features(schema, params)
    rows = features.decode(state.x)
    return MixedRows(
        np.insert(rows.bins, j, state.labels, axis=1), np.insert(rows.require_unit(), j, np.nan, axis=1)
    )


class LDAPPD(Synthesizer[LDAPPDParams, Encoded, LDAModel, Synthesized]):
    """DP-LDA publishing (Alg B): private class counts, noisy class sums and second moment,
    greedy synthesis of fresh rows matching them

    lda_ppd's four steps (the module's docstring states the stages, their Δ and noise)."""

    name = "lda_ppd"
    notions = ("pure",)
    spends = {"encode": ("class_counts",), "estimate": ("moments",)}

    stage_weights = staticmethod(stage_weights)

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: LDAPPDParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        return _encode(rows, schema, plan, params, rng)

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: LDAPPDParams, rng: np.random.Generator
    ) -> Stage[LDAModel]:
        return _estimate(state, plan, params, rng)

    def sample(
        self, state: LDAModel, params: LDAPPDParams, m: int, rng: np.random.Generator
    ) -> Stage[Synthesized]:
        return Stage(Synthesized(*synthesize(state, m)))

    def decode(
        self, state: Synthesized, schema: Schema, params: LDAPPDParams, rng: np.random.Generator
    ) -> MixedRows:
        return _decode(state, schema, params)

    sensitivities = staticmethod(sensitivities)
    defects = staticmethod(defects)
    check = staticmethod(check)
