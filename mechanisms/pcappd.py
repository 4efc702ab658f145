"""``pcappd``: DP-PCA data publishing (the seed paper's Alg A, "PCA-based PPDP
mechanism"; proofs ``docs/proofs/pcappd_lda_ppd.md``). Output row i is computed
from input row i (``keeps_row_order``).

Rows x ∈ [0, 1]^p of the public-box design (p₁ numeric coordinates, p₂ one-hot blocks;
``mechanisms.publishing``). Stages (ledger names; the paper's ε/2 + ε/2):

1. ``moments`` (0.5): (Σx, triu(Σxxᵀ)) jointly, Laplace b = Δ/ε_moments; then
   (post-processing) the mean m and U_k, the top-k eigenvectors of D = M − mmᵀ.
2. ``rows`` (0.5): Y = (X − 1mᵀ)U_k plus i.i.d. Laplace per entry, b = Δ_rows/ε_rows;
   then X̂ = ỸU_kᵀ + 1mᵀ, decoded (paper step 7; post-processing).

Pure ε-DP only (replace-one, n public): the two Laplace releases compose sequentially.

The steps are the methods of ``PCAPPD``. In one call:
``PCAPPD().fit(rows, schema, plan, PCAPPDParams(components=k), m=n, rng=rng)`` with
``plan = accounting.plan_budget("pure", ε, 0, stage_weights(schema, params))``;
``Fit.stages[0].state`` is an ``Encoded`` (the design rows: confidential),
``Fit.stages[1].state`` a ``PrincipalAxes`` (m and U_k), ``Fit.stages[2].state`` the raw X̂
(an array, design coordinates, before step 7).

Paper defects (variant ``corrected`` fixes them; ``paper`` keeps them, and its moments
record carries a defect when it bites), one line each:

* the categorical sensitivity s is too small (p₁ ≥ 1, p₂ ≥ 2): the exact
  ``publishing.moment_sensitivity`` instead;
* Lemma 2's rows sensitivity √(kp) is valid but loose: √(k(p₁+2p₂)) (``rows_sensitivity``).

Derivations and the privacy argument: ``docs/proofs/pcappd_lda_ppd.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.design import design
from dprelease.mechanisms.primitives import Measurement, laplace_mechanism
from dprelease.mechanisms.publishing import (
    Layout,
    layout,
    mirror,
    moment_sensitivity,
    paper_moment_sensitivity,
    upper,
)
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import Facts, MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "PCAPPD",
    "Encoded",
    "PCAPPDParams",
    "PrincipalAxes",
    "check",
    "defects",
    "moment_statistic",
    "principal_axes",
    "reconstruct",
    "release_moments",
    "release_rows",
    "rows_sensitivity",
    "sensitivities",
    "stage_weights",
]

Variant = Literal["corrected", "paper"]

SENSITIVITY_DEFECT = (
    "Alg A's categorical sensitivity s = (p₁+2p₂) + [(p₁+p₂)(p₁+p₂+1) + p₂(p₂+1)]/2 is below the exact "
    "maximum (numerics near 1 in both records change the numeric × dummy entries); it bites for "
    "p₁ ≥ 1, p₂ ≥ 2 (on {0, 1} numerics once p₂ > (p₁+3)/2; (5, 5): 91⅔ vs 85, (3, 6): 90 vs 81): not ε-DP"
)


@dataclass(frozen=True)
class PCAPPDParams:
    """Public hyperparameters. ``variant``: ``corrected`` (DP) or ``paper`` (the printed
    sensitivities; not DP with nominal columns). ``components``: k, public (the paper's
    grid is 1..10)."""

    variant: Variant = "corrected"
    components: int = 3

    def __post_init__(self) -> None:
        if self.variant not in ("corrected", "paper"):
            raise ValueError(f"params.variant ({self.variant!r}) must be 'corrected' or 'paper'")
        k = self.components
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"params.components ({k!r}) must be an integer >= 1")


def defects(params: PCAPPDParams) -> list[str]:
    """Why the parameters are not DP: empty for ``corrected``. ``paper`` lists the
    categorical sensitivity unconditionally (only params are seen here); it bites when
    the schema has p₁ ≥ 1 numeric and p₂ ≥ 2 nominal columns."""
    return [] if params.variant == "corrected" else [SENSITIVITY_DEFECT]


def stage_weights(schema: Schema, params: PCAPPDParams) -> dict[str, float]:
    """The paper's ε/2 + ε/2."""
    return {"moments": 0.5, "rows": 0.5}


def check(schema: Schema, params: PCAPPDParams) -> None:
    """k must not exceed the design width p."""
    p = design(schema).width
    if params.components > p:
        raise ValueError(f"params.components ({params.components}) must be at most the design width ({p})")


def moment_statistic(x: np.ndarray) -> np.ndarray:
    """(S₁, triu(S₂)) = (Σx, triu(Σxxᵀ)) concatenated: p + p(p+1)/2 entries."""
    return np.concatenate([x.sum(axis=0), upper(x)])


def release_moments(
    x: np.ndarray, lay: Layout, epsilon: float, variant: Variant, *, rng: np.random.Generator, stage: str
) -> Measurement:
    """Alg A step 2: ``moment_statistic`` + Lap(Δ/ε)^{p+p(p+1)/2} at this stage's ε
    (the paper's Lap(2s/ε) with ε/2 here).

    Sensitivity: corrected, Δ = ``moment_sensitivity`` (exact, attained). Paper: Δ = s
    (``paper_moment_sensitivity``).
    Noise: Laplace b = Δ/ε per entry.
    Privacy: ε-DP (stage ``moments``); the paper variant's record carries a defect when
    s is below the exact maximum (not DP).
    Reference: the seed paper's Alg A step 2 and "How to deal with categorical variables".
    Corrected: the paper's s is too small for p₁ ≥ 1, p₂ ≥ 2; the exact maximum instead.
    """
    exact = moment_sensitivity(lay.p1, lay.p2)
    delta = exact if variant == "corrected" else paper_moment_sensitivity(lay.p1, lay.p2)
    m = laplace_mechanism(
        moment_statistic(x), l1_sensitivity=delta, epsilon=epsilon, rng=rng, name="moments", stage=stage
    )
    if delta < exact:
        m = dataclasses.replace(
            m,
            defect=(
                f"Alg A's categorical sensitivity s = {delta:g} is below the exact maximum {exact:.6g} "
                f"for (p₁, p₂) = ({lay.p1}, {lay.p2}): not ε-DP"
            ),
        )
    return m


def principal_axes(noisy: np.ndarray, n: int, p: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Alg A steps 3-4 (post-processing): m = S̃₁/n, M = mirror(S̃₂)/n, D = M − mmᵀ;
    U_k (p, k) = eigenvectors of D for the k algebraically largest eigenvalues
    (``eigh``), largest first. Returns (m, U_k)."""
    mean = noisy[:p] / n
    d = mirror(noisy[p:], p) / n - np.outer(mean, mean)
    _, vectors = np.linalg.eigh(d)
    return mean, vectors[:, ::-1][:, :k]


def rows_sensitivity(lay: Layout, k: int, variant: Variant) -> float:
    """L1 sensitivity of one row of (X − 1mᵀ)U_k for a fixed orthonormal U_k (p, k).

    Lemma 2: ‖(x−x')U_k‖₁ ≤ √k‖(x−x')U_k‖₂ ≤ √k‖x−x'‖₂. Corrected: ‖x−x'‖₂² =
    Σ(uᵢ−vᵢ)² + 2d ≤ p₁ + 2p₂ (a changed block contributes two unit entries), so
    Δ = √(k(p₁+2p₂)). It is attained: with u = 1, v = 0 and every category changed,
    ‖x−x'‖₂ = √(p₁+2p₂), and U_k whose columns each have inner product ‖x−x'‖₂/√k with
    x−x' makes both inequalities equalities; the noisy D can give any orthonormal U_k, so
    no smaller Δ holds for the released one. Paper: √(kp), p the design width (valid, as
    p₁ + 2p₂ ≤ p, but loose).
    """
    return float(np.sqrt(k * (lay.p1 + 2 * lay.p2 if variant == "corrected" else lay.width)))


def release_rows(
    x: np.ndarray,
    mean: np.ndarray,
    axes: np.ndarray,
    lay: Layout,
    epsilon: float,
    variant: Variant,
    *,
    rng: np.random.Generator,
    stage: str,
) -> Measurement:
    """Alg A step 5: Ỹ = (X − 1mᵀ)U_k + Lap(Δ_rows/ε)^{n×k}.

    Sensitivity: Δ_rows = ``rows_sensitivity`` for the released m and U_k: one record
    changes one row, by (xᵢ − xᵢ')U_k (m cancels); √(k(p₁+2p₂)), attained.
    Noise: Laplace b = Δ_rows/ε per entry.
    Privacy: ε-DP (stage ``rows``; parallel over rows), composed sequentially with
    ``moments``.
    Reference: the seed paper's Alg A step 5 and Lemma 2.
    Corrected: Lemma 2's √(kp) is valid but loose; √(k(p₁+2p₂)) (paper variant: √(kp)).
    """
    return laplace_mechanism(
        (x - mean) @ axes,
        l1_sensitivity=rows_sensitivity(lay, axes.shape[1], variant),
        epsilon=epsilon,
        rng=rng,
        name="component_scores",
        stage=stage,
    )


def reconstruct(scores: np.ndarray, mean: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Alg A step 6: X̂ = ỸU_kᵀ + 1mᵀ (design coordinates, before step 7)."""
    return scores @ axes.T + mean


# ---------------------------------------------------------------- the four pipeline stages


def sensitivities(
    schema: Schema, params: PCAPPDParams, n: int, facts: Facts | None = None
) -> dict[str, Sensitivity]:
    """Every statistic pcappd measures (corrected; pure ε, L1 only), from the public
    layout: the moments (``moment_sensitivity``, exact) and the component scores
    (``rows_sensitivity`` with k = ``params.components``, attained). Neither depends on n
    (sums, one row per record)."""
    lay = layout(design(schema))
    return {
        "moments": Sensitivity("moments", moment_sensitivity(lay.p1, lay.p2), None, tight=True),
        "component_scores": Sensitivity(
            "rows", rows_sensitivity(lay, params.components, "corrected"), None, tight=True
        ),
    }


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the rows X in design coordinates (confidential) and the
    design's public layout (p₁, p₂)."""

    x: np.ndarray = field(repr=False)
    layout: Layout


@dataclass(frozen=True)
class PrincipalAxes:
    """The estimate step's state: the encoded rows, the released mean m (p,) and U_k
    (p, k) (post-processing of the noisy moments), and the plan, whose ``rows`` stage the
    sample step spends."""

    encoded: Encoded
    mean: np.ndarray = field(repr=False)
    axes: np.ndarray = field(repr=False)
    plan: BudgetPlan


class PCAPPD(Synthesizer[PCAPPDParams, Encoded, PrincipalAxes, np.ndarray]):
    """DP-PCA publishing (Alg A): noisy first and second moments, top-k eigenvectors, noisy
    component scores of each row projected back; one output row per input row

    pcappd's four steps (the module's docstring states the stages, their Δ and noise);
    the sample step's state is the raw X̂ (n, p), before step 7."""

    name = "pcappd"
    notions = ("pure",)
    spends = {"estimate": ("moments",), "sample": ("rows",)}
    keeps_row_order = True

    stage_weights = staticmethod(stage_weights)
    defects = staticmethod(defects)
    check = staticmethod(check)

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: PCAPPDParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        if plan.notion != "pure":
            raise ValueError("pcappd is pure ε-DP (Laplace) only: set privacy.accountant: pure")
        check(schema, params)
        d = design(schema)
        lay = layout(d)
        facts: dict[str, object] = {
            "numeric_coordinates": lay.p1,
            "nominal_columns": lay.p2,
            "design_width": lay.width,
            "components": params.components,
        }
        return Stage(Encoded(d.encode(rows), lay), (), facts)

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: PCAPPDParams, rng: np.random.Generator
    ) -> Stage[PrincipalAxes]:
        lay = state.layout
        moments = release_moments(
            state.x, lay, plan.stage("moments").pure_epsilon, params.variant, rng=rng, stage="moments"
        )
        mean, axes = principal_axes(moments.value, state.x.shape[0], lay.width, params.components)
        facts: dict[str, object] = {"moment_sensitivity": moments.sensitivity}
        return Stage(PrincipalAxes(state, mean, axes, plan), (moments,), facts)

    def sample(
        self, state: PrincipalAxes, params: PCAPPDParams, m: int, rng: np.random.Generator
    ) -> Stage[np.ndarray]:
        encoded, mean, axes = state.encoded, state.mean, state.axes
        n = encoded.x.shape[0]
        if m != n:
            raise ValueError(
                f"pcappd releases exactly one row per fitted input row (asked for {m}, fitted {n}); "
                "remove synthetic_rows from the spec"
            )
        eps = state.plan.stage("rows").pure_epsilon
        scores = release_rows(
            encoded.x, mean, axes, encoded.layout, eps, params.variant, rng=rng, stage="rows"
        )
        facts: dict[str, object] = {"rows_sensitivity": scores.sensitivity}
        return Stage(reconstruct(scores.value, mean, axes), (scores,), facts)

    def decode(
        self, state: np.ndarray, schema: Schema, params: PCAPPDParams, rng: np.random.Generator
    ) -> MixedRows:
        """Step 7 via ``Design.decode``: argmax per block, numerics clipped, de-normalised."""
        return design(schema).decode(state)

    sensitivities = staticmethod(sensitivities)
