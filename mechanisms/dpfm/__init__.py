"""``dpfm``: DP mixed-type data through a latent factor model (Zhang, Xu, Tang, Qu; JMLR).

The paper (its Algorithm 3) encodes each row into a latent vector x*ᵢ with link
functions (5)–(7), releases noisy top-r eigenvectors of X*ᵀX* (Alg. 1, ε₁) and noisy
factor scores X*Ṽ (ε₂), rebuilds X̃* = W̃Ṽᵀ, and decodes ordinal columns with noisy
cumulative frequencies (Alg. 2, ε₃). Output row i is computed from input row i.

Two variants (``DPFMParams.variant``):

* ``corrected`` (default, DP): the paper's algorithm with every privacy defect fixed;
  pure ε-DP (Laplace) or ρ-zCDP (Gaussian). Ledger stages ``thresholds`` (ordinal
  cumulative frequencies, only if the schema has ordinal columns), ``loadings``,
  ``scores``; they compose (adaptively) to Σε or Σρ.
* ``paper`` (NOT DP; for reproducing the paper's tables only): the algorithm as printed.
  Every step that breaks DP is recorded, as an ``unprotected`` value or a measurement
  with a ``defect``, and listed by ``defects``.

Paper defects and what ``corrected`` does (numbers refer to the digest
``notes/seeds/000-latent-factor.md``, section 5):

1. Continuous columns are "normalized", in practice with the data's mean and SD (not
   private; point 2). We use the public scale: y* = √12(u − ½), u ∈ [0, 1] the value on the column's
   public working scale (variance 1 for a uniform column).
2. Encoding thresholds τ come from raw ordinal frequencies (point 3), so one record moves
   every row's z*. We run Alg. 2 first and encode with the private τ̃.
3. Alg. 2 adds *sorted* Laplace noise (point 4). The gaps of f + e are then at least the
   true level frequencies, a data-dependent constraint: an empty level can have a tiny
   released gap, a level holding one record essentially never (unbounded privacy loss).
   We add i.i.d. noise and post-process (isotonic regression, clip, f₀ = 0, f_L = 1).
4. Alg. 2 gives every ordinal column the full ε₃ (point 5), which composes to p₂ε₃. We
   release all columns jointly with Δ₁ = Σⱼ(Lⱼ−1)/n under one ε₃.
5. Lemma 6's Δ = 2r for the scores assumes ‖x*ᵢ‖₂ ≤ 1, never enforced (point 2). We clip
   coordinates to [−κ, κ] and divide rows by κ√p* (so ‖x*ᵢ‖₂ ≤ 1), and rescale the
   output by κ√p* (post-processing).
6. r is chosen by eq. (3) from the raw eigenvalues, and ω ∝ eigenvalues is offered for
   the budget split of B (point 3). r is a public parameter; ω_i = 1/r.
7. Lemma 6's Δ₁ = 2r is valid but loose: ‖(x − x')Ṽ‖₁ ≤ √r‖(x − x')Ṽ‖₂ ≤ 2√r. The
   corrected variant uses 2√r.
8. The paper decodes ordinal z̃* with N(0, 1) thresholds although projection shrinks and
   noise inflates the latent scale (point 7). With ``calibrate`` (default in corrected)
   levels are assigned by rank so the proportions follow f̃ (post-processing).

Privacy of the corrected variant (replace-one neighbours, n public): the thresholds are a
Laplace/Gaussian release of bounded sensitivity. Given them, X* row i depends only on
record i and fresh encoding randomness, and ‖x*ᵢ‖₂ ≤ 1 for *every* draw, so the
sensitivities below hold for any coupling of the two encodings of the changed record
(conditioning on all encoding randomness, each bound holds pointwise, hence the mixture
is DP too). The loadings bound is data-free; the scores bound holds for the released
(fixed) Ṽ. The output X̃* = W̃Ṽᵀ and its decoding (public code, f̃) are post-processing
of the three releases; row i of the output is x*ᵢṼṼᵀ plus noise, so it is DP but must
not be read as a fresh draw (``keeps_row_order``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.optimize import isotonic_regression
from scipy.special import ndtr, ndtri

from mechanisms.accounting import BudgetPlan, StageBudget, plan_budget
from mechanisms.latent import LatentCode, from_latent, to_latent
from mechanisms.primitives import Measurement, measure_stage, unprotected
from mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from mechanisms.synthesizer import MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "FACTOR_THRESHOLD",
    "SYNTHESIZER",
    "Code",
    "DPFMParams",
    "Encoded",
    "budget_plan",
    "choose_factors",
    "cumulative_frequencies",
    "decode_latent",
    "defects",
    "encode_rows",
    "encoded_width",
    "fit_transform",
    "loadings_sensitivity",
    "make_code",
    "measure_thresholds",
    "monotone_cdf",
    "private_loadings",
    "private_scores",
    "probit_latent",
    "reconstruct",
    "scores_sensitivity",
    "sensitivities",
    "sorted_noise_cdf",
    "stage_weights",
    "threshold_sensitivity",
    "top_eigenvectors",
]

Variant = Literal["corrected", "paper"]
FACTOR_THRESHOLD = 0.8  # c of eq. (3), the paper's value
_U_FLOOR = 1e-12
_T_MIN = 1e-12


@dataclass(frozen=True)
class DPFMParams:
    """Public hyperparameters.

    ``variant``: ``corrected`` (DP) or ``paper`` (literal, not DP). ``factors``: r, public;
    ``None`` (paper only) picks r by eq. (3) with c = 0.8 from the raw eigenvalues.
    ``clip``: κ, coordinates clipped to [−κ, κ] and rows divided by κ√p* (corrected
    only; the paper does not bound rows). ``calibrate``: decode ordinal columns by rank so
    their proportions follow f̃; ``None`` means True for corrected, False for paper.
    """

    variant: Variant = "corrected"
    factors: int | None = 2
    clip: float = 3.0
    calibrate: bool | None = None

    def __post_init__(self) -> None:
        if self.variant not in ("corrected", "paper"):
            raise ValueError(f"params.variant ({self.variant!r}) must be 'corrected' or 'paper'")
        if self.factors is None and self.variant == "corrected":
            raise ValueError(
                "params.factors (None) must be an integer >= 1 with variant 'corrected': the paper "
                "picks r by eq. (3) from the raw eigenvalues, which is not private"
            )
        if self.factors is not None and (
            isinstance(self.factors, bool) or not isinstance(self.factors, int) or self.factors < 1
        ):
            raise ValueError(f"params.factors ({self.factors!r}) must be an integer >= 1")
        if isinstance(self.clip, bool) or not (
            isinstance(self.clip, int | float) and math.isfinite(self.clip) and self.clip > 0
        ):
            raise ValueError(f"params.clip ({self.clip!r}) must be a finite number > 0")
        if self.calibrate is not None and not isinstance(self.calibrate, bool):
            raise ValueError(f"params.calibrate ({self.calibrate!r}) must be true, false or null")

    @property
    def calibrated(self) -> bool:
        return self.variant == "corrected" if self.calibrate is None else self.calibrate


def defects(params: DPFMParams) -> list[str]:
    """Why the parameter choice is not DP: empty for ``corrected``."""
    if params.variant == "corrected":
        return []
    out = [
        "continuous columns normalised with the data's mean and SD, without noise",
        "encoding thresholds τ from the raw ordinal frequencies, without noise",
        "Alg. 2 sorts the Laplace noise: data-dependent support, unbounded privacy loss",
        "Alg. 2 spends the full ε₃ on each ordinal column: p₂ columns compose to p₂·ε₃",
        "encoded rows are not bounded: Lemma 6's score sensitivity 2r assumes ‖x*ᵢ‖₂ ≤ 1",
    ]
    if params.factors is None:
        out.append("r chosen from raw eigenvalues (eq. 3)")
    return out


def _kinds(schema: Schema, kind: type) -> list[int]:
    return [j for j, c in enumerate(schema.columns) if isinstance(c, kind)]


def _widths(schema: Schema) -> list[int]:
    """Latent coordinates per column: 1 (continuous, ordinal) or M − 1 (nominal)."""
    return [c.n_bins - 1 if isinstance(c, Nominal) else 1 for c in schema.columns]


def encoded_width(schema: Schema) -> int:
    """p* = p₁ + p₂ + Σⱼ(Mⱼ − 1)."""
    return sum(_widths(schema))


def stage_weights(schema: Schema, params: DPFMParams) -> dict[str, float]:
    """DPFM1: ε₁ = ε₂ = ε₃ = ε/3; without ordinal columns ε₃ is reassigned (½ / ½)."""
    if _kinds(schema, Ordinal):
        return {"thresholds": 1 / 3, "loadings": 1 / 3, "scores": 1 / 3}
    return {"loadings": 0.5, "scores": 0.5}


def _check(schema: Schema, params: DPFMParams) -> None:
    p_star = encoded_width(schema)
    if params.factors is not None and params.factors > p_star:
        raise ValueError(f"params.factors ({params.factors}) must be <= the encoded width p* ({p_star})")


def _release(
    value: np.ndarray,
    budget: StageBudget | None,
    *,
    l1: float,
    l2: float,
    name: str,
    rng: np.random.Generator,
    defect: str | None = None,
) -> tuple[np.ndarray, Measurement | None]:
    """``measure`` with the stage's share (Gaussian under zCDP, Laplace under pure), or the
    exact value and no record when ``budget`` is None (the ε = ∞ ablation)."""
    if budget is None:
        return np.asarray(value, dtype=float), None
    m = measure_stage(value, budget, l2_sensitivity=l2, l1_sensitivity=l1, rng=rng, name=name)
    if defect is not None:
        m = dataclasses.replace(m, defect=defect)
    return m.value, m


# ---------------------------------------------------------------- thresholds (Alg. 2)


def cumulative_frequencies(bins: np.ndarray, levels: list[int]) -> np.ndarray:
    """Interior cumulative frequencies of every ordinal column, concatenated:
    f_{j,l} = (1/n)Σᵢ 1(z_ij < l) for l = 1..Lⱼ−1 (f₀ = 0 and f_L = 1 are public).
    ``bins``: (n, p₂) level indices; ``levels``: Lⱼ."""
    n = bins.shape[0]
    parts = [np.cumsum(np.bincount(bins[:, j], minlength=L))[:-1] / n for j, L in enumerate(levels)]
    return np.concatenate(parts) if parts else np.zeros(0)


def threshold_sensitivity(levels: list[int], n: int, norm: Literal["l1", "l2"]) -> float:
    """Replace-one sensitivity of ``cumulative_frequencies`` (all columns jointly).

    A record moving from level a to b in column j changes f_{j,l} = (1/n)#{z < l} by
    ±1/n exactly for min(a, b) < l ≤ max(a, b): |a − b| ≤ Lⱼ − 1 entries. One record
    moves in every column at once, so Δ₁ = Σⱼ(Lⱼ−1)/n and Δ₂ = √(Σⱼ(Lⱼ−1))/n, both
    attained by moving the record from level 0 to Lⱼ−1 in every column. (Lemma 7 gives
    (Lⱼ−1)/n per column; Alg. 2 then spends ε₃ on each column.)
    """
    total = sum(L - 1 for L in levels)
    return total / n if norm == "l1" else math.sqrt(total) / n


def monotone_cdf(noisy_interior: np.ndarray) -> np.ndarray:
    """Post-processing of one column's noisy f̃₁..f̃_{L−1}: isotonic (non-decreasing)
    least-squares fit, clipped to [0, 1], with f₀ = 0 and f_L = 1 appended."""
    fitted = isotonic_regression(noisy_interior, increasing=True).x if noisy_interior.size else noisy_interior
    return np.concatenate([[0.0], np.clip(fitted, 0.0, 1.0), [1.0]])


def sorted_noise_cdf(f_full: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """The paper's Alg. 2 (NOT DP), batched over leading axes of ``f_full`` (…, L+1):
    e = L+1 i.i.d. Lap(scale) sorted ascending, g = f + e, f̃ = (g − min g)/(max g − min g).

    Defect: since f and e are both non-decreasing, every gap g_{l+1} − g_l is at least the
    level frequency f_{l+1} − f_l; a released gap of (almost) 0 is reachable only if the
    level is empty, so one record changes the output's support (unbounded privacy loss).
    """
    g = f_full + np.sort(rng.laplace(0.0, scale, size=np.shape(f_full)), axis=-1)
    lo, hi = g.min(axis=-1, keepdims=True), g.max(axis=-1, keepdims=True)
    return (g - lo) / (hi - lo)


def _ordinal_bins(rows: MixedRows, schema: Schema) -> tuple[np.ndarray, list[int]]:
    cols = _kinds(schema, Ordinal)
    return rows.bins[:, cols], [schema.columns[j].n_bins for j in cols]


def measure_thresholds(
    rows: MixedRows,
    schema: Schema,
    budget: StageBudget | None,
    params: DPFMParams,
    *,
    rng: np.random.Generator,
) -> tuple[tuple[np.ndarray, ...], tuple[Measurement, ...]]:
    """Stage ``thresholds``: the private cumulative frequencies f̃ (each (Lⱼ+1,), f̃₀ = 0,
    f̃_L = 1) of every ordinal column; τ̃ = Φ⁻¹(f̃).

    corrected: all interior frequencies released at once with i.i.d. noise, Δ from
    ``threshold_sensitivity`` (Laplace b = Δ₁/ε₃, or Gaussian σ = Δ₂/√(2ρ₃)), then
    ``monotone_cdf``. paper: Alg. 2 per column (``sorted_noise_cdf``), noise
    Lap((Lⱼ−1)/(nε₃)) for each column; one ledger row claims ε₃ for all of them.
    ``budget`` None: exact frequencies, no record.
    """
    bins, levels = _ordinal_bins(rows, schema)
    if not levels:
        return (), ()
    n = bins.shape[0]
    cuts = np.cumsum([L - 1 for L in levels])[:-1]
    f = cumulative_frequencies(bins, levels)
    if params.variant == "paper":
        return _paper_thresholds(np.split(f, cuts), levels, n, budget, rng)
    noisy, m = _release(
        f,
        budget,
        l1=threshold_sensitivity(levels, n, "l1"),
        l2=threshold_sensitivity(levels, n, "l2"),
        name="ordinal_cumulative_frequencies",
        rng=rng,
    )
    return tuple(monotone_cdf(part) for part in np.split(noisy, cuts)), (() if m is None else (m,))


def _paper_thresholds(
    interiors: list[np.ndarray], levels: list[int], n: int, budget: StageBudget | None, rng
) -> tuple[tuple[np.ndarray, ...], tuple[Measurement, ...]]:
    fulls = [np.concatenate([[0.0], part, [1.0]]) for part in interiors]
    if budget is None:
        return tuple(fulls), ()
    eps = budget.epsilon
    out = tuple(sorted_noise_cdf(f, (L - 1) / (n * eps), rng) for f, L in zip(fulls, levels, strict=True))
    worst = max(levels) - 1
    m = Measurement(
        "ordinal_cumulative_frequencies",
        budget.stage,
        np.concatenate(out),
        "laplace",
        worst / n,
        "l1",
        worst / (n * eps),
        None,
        eps,
        defect=(
            f"Alg. 2 sorts the Laplace noise (unbounded privacy loss); each of the {len(levels)} "
            f"ordinal columns uses ε₃ = {eps:.6g} with noise Lap((Lⱼ−1)/(nε₃)), composing to "
            f"p₂·ε₃ = {len(levels) * eps:.6g}, not the ε₃ claimed here"
        ),
    )
    return out, (m,)


# ---------------------------------------------------------------- encoding (links (5)-(7))


@dataclass(frozen=True)
class Code:
    """Parameters of the link functions. Continuous: y* = (u − center)/spread.
    Ordinal: ``encode_cdfs`` for z* (τ = Φ⁻¹(f)), ``decode_cdfs`` f̃ for eq. (8).
    Rows: coordinates clipped to [−clip, clip] (None: no clipping) and divided by
    ``row_scale``."""

    center: np.ndarray
    spread: np.ndarray
    encode_cdfs: tuple[np.ndarray, ...]
    decode_cdfs: tuple[np.ndarray, ...]
    clip: float | None
    row_scale: float


def make_code(
    rows: MixedRows, schema: Schema, thresholds: tuple[np.ndarray, ...], params: DPFMParams
) -> tuple[Code, tuple[Measurement, ...]]:
    """The link functions. corrected: public center ½ and spread 1/√12 on [0, 1] (so
    y* = √12(u − ½)), τ̃ from the private f̃ for both encoding and decoding, κ and κ√p*.
    paper: the data's mean and SD and the raw frequencies (both ``unprotected``
    records), f̃ from Alg. 2 only for decoding, no clipping or row scaling."""
    cont = _kinds(schema, Continuous)
    if params.variant == "corrected":
        k = len(cont)
        code = Code(
            np.full(k, 0.5),
            np.full(k, 1 / math.sqrt(12)),
            thresholds,
            thresholds,
            float(params.clip),
            float(params.clip) * math.sqrt(encoded_width(schema)),
        )
        return code, ()
    u = _unit(rows, schema)[:, cont]
    center, spread = u.mean(axis=0), u.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    bins, levels = _ordinal_bins(rows, schema)
    raw = cumulative_frequencies(bins, levels)
    cuts = np.cumsum([L - 1 for L in levels])[:-1]
    encode_cdfs = tuple(np.concatenate([[0.0], f, [1.0]]) for f in np.split(raw, cuts)) if levels else ()
    records = []
    if cont:
        records.append(
            unprotected(
                np.concatenate([center, spread]),
                name="continuous_mean_sd",
                stage="encoding",
                defect="continuous columns normalised with the data's mean and SD",
            )
        )
    if levels:
        records.append(
            unprotected(
                raw,
                name="raw_cumulative_frequencies",
                stage="encoding",
                defect="encoding thresholds τ from the raw ordinal frequencies",
            )
        )
    return Code(center, spread, encode_cdfs, thresholds, None, 1.0), tuple(records)


def _unit(rows: MixedRows, schema: Schema) -> np.ndarray:
    if _kinds(schema, Continuous) and rows.unit is None:
        raise ValueError("rows.unit must hold the continuous columns' public-scale values")
    return rows.unit if rows.unit is not None else np.full(rows.bins.shape, np.nan)


def probit_latent(u: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Link (6), zero-mean multinomial probit: category u ∈ {0..M−1} → (n, M−1) latent.

    u = 0: every coordinate N(0, 1) truncated to (−∞, 0). u = l ≥ 1: draw N(0, I)
    conditioned on max > 0 and argmax = l exactly: the max t has P(t ≤ s | t > 0) =
    (Φ(s)^{M−1} − 2^{−(M−1)})/(1 − 2^{−(M−1)}), so t = Φ⁻¹(U^{1/(M−1)}) with
    U ~ Unif(2^{−(M−1)}, 1); the other coordinates are N(0, 1) truncated to (−∞, t),
    drawn as Φ⁻¹(V·Φ(t)). t is kept ≥ 10⁻¹² so decoding (0 if max ≤ 0, else argmax)
    returns u for every draw.

    The number of draws is data-free: one U per row (rows with u = 0 leave theirs
    unused) and k V's per row, so row i's latent depends only on u_i and its own
    uniforms, never on how many other rows are positive. Otherwise replacing one record
    (0 ↔ l ≥ 1) would shift the draws of every later row, and the encodings of the
    unchanged rows of neighbouring tables would no longer be coupled.
    """
    k = m - 1
    pos = u > 0
    lo = 0.5**k
    t = np.zeros(len(u))
    draw = rng.random(len(u))
    t[pos] = np.maximum(ndtri((lo + (1 - lo) * draw[pos]) ** (1 / k)), _T_MIN)
    t = np.minimum(t, ndtri(1 - _U_FLOOR))
    out = ndtri(np.maximum(rng.random((len(u), k)) * ndtr(t)[:, None], _U_FLOOR))
    out[pos, u[pos] - 1] = t[pos]
    return out


def encode_rows(rows: MixedRows, schema: Schema, code: Code, *, rng: np.random.Generator) -> np.ndarray:
    """X* (n, p*), columns in schema order (a nominal column takes M − 1 coordinates).

    Continuous y* = (u − center)/spread (identity link (5) on the normalised scale);
    ordinal z* = Φ⁻¹(Unif(f_z, f_{z+1})), i.e. N(0, 1) truncated to [τ_z, τ_{z+1})
    (link (7)); nominal ``probit_latent``. Then clip to [−κ, κ] and divide by κ√p*, so
    ‖x*ᵢ‖₂ ≤ √(p*κ²)/(κ√p*) = 1 (corrected).
    """
    unit = _unit(rows, schema)
    blocks, c, o = [], 0, 0
    for j, col in enumerate(schema.columns):
        if isinstance(col, Continuous):
            blocks.append(((unit[:, j] - code.center[c]) / code.spread[c])[:, None])
            c += 1
        elif isinstance(col, Ordinal):
            cdf = code.encode_cdfs[o]
            latent = LatentCode((cdf,), (np.arange(col.n_bins),))
            blocks.append(to_latent(rows.bins[:, [j]], latent, rng.random((len(rows), 1))))
            o += 1
        else:
            blocks.append(probit_latent(rows.bins[:, j], col.n_bins, rng))
    x = np.hstack(blocks)
    if code.clip is not None:
        x = np.clip(x, -code.clip, code.clip)
    return x / code.row_scale


# ---------------------------------------------------------------- loadings (Alg. 1 step 2)


def top_eigenvectors(x: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """V (p*, r): eigenvectors of the uncentred X*ᵀX* for the r largest eigenvalues, and
    all eigenvalues ν in decreasing order."""
    nu, vec = np.linalg.eigh(x.T @ x)
    return vec[:, ::-1][:, :r], nu[::-1]


def choose_factors(
    nu: np.ndarray, n: int, params: DPFMParams, stage: str
) -> tuple[int, str, tuple[Measurement, ...]]:
    """r: the public ``params.factors``, or (paper, factors None) eq. (3):
    r = min{k : Σ_{j≤k}ν_j / Σ_{j≤q}ν_j > c}, q = min(n, p*), c = 0.8, restricted to
    1 ≤ k < q as printed (so r ≤ max(1, q − 1)); recorded as ``unprotected``."""
    if params.factors is not None:
        return params.factors, "given in the spec (public)", ()
    q = min(n, nu.size)
    ratio = np.cumsum(nu[:q]) / np.sum(nu[:q])
    r = int(min(np.argmax(ratio > FACTOR_THRESHOLD) + 1, max(1, q - 1)))
    record = unprotected(
        np.array([r]), name="factors_eq3", stage=stage, defect="r chosen from raw eigenvalues (eq. 3)"
    )
    return r, f"eq. (3) with c = {FACTOR_THRESHOLD} on the raw eigenvalues (not private)", (record,)


def loadings_sensitivity(p_star: int, r: int, norm: Literal["l1", "l2"]) -> float:
    """Sensitivity of V (p*, r) with unit columns, all r columns jointly.

    Eigenvectors of neighbouring data sets can be *any* two unit vectors (sign flips,
    near-ties), so the bound is the diameter of the sphere: ‖μ − μ'‖₂ ≤ 2 and
    ‖μ − μ'‖₁ ≤ √p*‖μ − μ'‖₂ ≤ 2√p* (Lemma 5; attained by μ' = −μ with all |μ_k| = 1/√p*).
    Jointly: Δ₁ = 2√p*·r, Δ₂ = 2√r. Laplace b = 2√p*·r/ε₁ is the paper's
    Lap(2√p*/ε₁ᵢ) with ω_i = 1/r (ε₁ᵢ = ε₁/r); the paper's ω ∝ ν is not private.
    """
    return 2 * math.sqrt(p_star) * r if norm == "l1" else 2 * math.sqrt(r)


def private_loadings(
    v: np.ndarray, budget: StageBudget | None, *, rng: np.random.Generator
) -> tuple[np.ndarray, Measurement | None]:
    """Ṽ = the r left singular vectors (thin SVD) of V + B, B with the noise of
    ``loadings_sensitivity`` (Alg. 1 step 2). Ṽ is post-processing of V + B."""
    p_star, r = v.shape
    noisy, m = _release(
        v,
        budget,
        l1=loadings_sensitivity(p_star, r, "l1"),
        l2=loadings_sensitivity(p_star, r, "l2"),
        name="top_eigenvectors",
        rng=rng,
    )
    return np.linalg.svd(noisy, full_matrices=False)[0], m


# ---------------------------------------------------------------- scores (Alg. 1 step 3)


def scores_sensitivity(r: int, norm: Literal["l1", "l2"], variant: Variant = "corrected") -> float:
    """Sensitivity of W = X*Ṽ (n, r) for fixed orthonormal Ṽ and rows ‖x*ᵢ‖₂ ≤ 1.

    Replace-one changes one row by (x − x')Ṽ; ‖(x − x')Ṽ‖₂ ≤ ‖x − x'‖₂ ≤ 2 (Ṽ has
    orthonormal columns), so Δ₂ = 2 and Δ₁ ≤ √r·Δ₂ = 2√r, attained by x = −x' = Ṽs/√r
    with s ∈ {±1}^r. The paper (Lemma 6) uses 2r: valid but loose; variant ``paper``
    uses it.
    """
    if norm == "l2":
        return 2.0
    return 2.0 * r if variant == "paper" else 2.0 * math.sqrt(r)


def private_scores(
    x: np.ndarray, v_tilde: np.ndarray, budget: StageBudget | None, params: DPFMParams, *, rng
) -> tuple[np.ndarray, Measurement | None]:
    """W̃ = X*Ṽ + C (Alg. 1 step 3), C with the noise of ``scores_sensitivity``. The
    paper variant's rows are unbounded, so its record carries a defect (stating no
    data-derived number: the defect text is published in the ledger)."""
    r = v_tilde.shape[1]
    defect = None
    if params.variant == "paper":
        defect = "Lemma 6's Δ = 2r assumes ‖x*ᵢ‖₂ ≤ 1, which the paper never enforces (rows are unbounded)"
    return _release(
        x @ v_tilde,
        budget,
        l1=scores_sensitivity(r, "l1", params.variant),
        l2=scores_sensitivity(r, "l2", params.variant),
        name="factor_scores",
        rng=rng,
        defect=defect,
    )


def reconstruct(w_tilde: np.ndarray, v_tilde: np.ndarray, code: Code) -> np.ndarray:
    """X̃* = W̃Ṽᵀ·κ√p* (Alg. 1 step 4, back on the latent scale; post-processing)."""
    return (w_tilde @ v_tilde.T) * code.row_scale


# ---------------------------------------------------------------- decoding (links (6)-(8))


def _rank_levels(z: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """Calibrated ordinal decoding: the k-th smallest of n values (k = 0..n−1) gets the
    level l with f̃_l ≤ (k + ½)/n < f̃_{l+1}, so each level's share is f̃_{l+1} − f̃_l
    within 1/n."""
    rank = np.empty(len(z), dtype=int)
    rank[np.argsort(z, kind="stable")] = np.arange(len(z))
    level = np.searchsorted(cdf, (rank + 0.5) / len(z), side="right") - 1
    return np.clip(level, 0, len(cdf) - 2)


def decode_latent(latent: np.ndarray, schema: Schema, code: Code, params: DPFMParams) -> MixedRows:
    """X̃* → mixed rows (post-processing). Continuous u = y*·spread + center clipped to
    [0, 1] (corrected: y/√12 + ½), bins via ``Continuous.to_bins(from_unit(u))``.
    Ordinal: by rank to match f̃ (``calibrate``), else eq. (8), level l iff
    τ̃_l ≤ z̃* < τ̃_{l+1}. Nominal (6): 0 if max ≤ 0, else 1 + argmax."""
    n = latent.shape[0]
    bins = np.empty((n, len(schema)), dtype=np.int32)
    unit = np.full((n, len(schema)), np.nan)
    start, c, o = 0, 0, 0
    for j, (col, width) in enumerate(zip(schema.columns, _widths(schema), strict=True)):
        block = latent[:, start : start + width]
        start += width
        if isinstance(col, Continuous):
            unit[:, j] = np.clip(block[:, 0] * code.spread[c] + code.center[c], 0.0, 1.0)
            bins[:, j] = col.to_bins(col.from_unit(unit[:, j]))
            c += 1
        elif isinstance(col, Ordinal):
            cdf = code.decode_cdfs[o]
            o += 1
            if params.calibrated:
                bins[:, j] = _rank_levels(block[:, 0], cdf)
            else:
                bins[:, j] = from_latent(block, LatentCode((cdf,), (np.arange(col.n_bins),)))[:, 0]
        else:
            bins[:, j] = np.where(block.max(axis=1) > 0, 1 + block.argmax(axis=1), 0)
    return MixedRows(bins, unit)


def sensitivities(schema: Schema, params: DPFMParams, n: int, facts=None) -> dict[str, Sensitivity]:
    """Every statistic dpfm measures (corrected), from public facts: the ordinal
    cumulative frequencies when the schema has ordinal columns (``threshold_sensitivity``,
    attained), the top-r eigenvectors (``loadings_sensitivity``, p* = ``encoded_width``)
    and the factor scores (``scores_sensitivity``). r is the public ``params.factors``."""
    levels = [schema.columns[j].n_bins for j in _kinds(schema, Ordinal)]
    r, p_star = params.factors, encoded_width(schema)
    out = {
        "top_eigenvectors": Sensitivity(
            "loadings", loadings_sensitivity(p_star, r, "l1"), loadings_sensitivity(p_star, r, "l2")
        ),
        "factor_scores": Sensitivity("scores", scores_sensitivity(r, "l1"), scores_sensitivity(r, "l2")),
    }
    if levels:
        out["ordinal_cumulative_frequencies"] = Sensitivity(
            "thresholds",
            threshold_sensitivity(levels, n, "l1"),
            threshold_sensitivity(levels, n, "l2"),
            tight=True,
        )
    return out


# ---------------------------------------------------------------- whole algorithm


def _paper_notion(params: DPFMParams, notion: str) -> None:
    if params.variant == "paper" and notion != "pure":
        raise ValueError(
            "params.variant ('paper') is pure ε-DP (Laplace) as printed and has no zCDP form; "
            "set privacy.accountant: pure"
        )


def budget_plan(
    schema: Schema,
    epsilon: float,
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3),
    notion: Literal["pure", "zcdp"] = "pure",
    delta: float = 0.0,
) -> BudgetPlan:
    """The plan for (ε₁, ε₂, ε₃) ∝ ``weights`` (DPFM1 = ⅓ each; DPFM2–4 in the paper);
    without ordinal columns ε₃'s share is reassigned proportionally to ε₁ and ε₂."""
    w1, w2, w3 = weights
    split = {"thresholds": w3, "loadings": w1, "scores": w2}
    if not _kinds(schema, Ordinal):
        del split["thresholds"]
    return plan_budget(notion, epsilon, delta, split)


@dataclass(frozen=True)
class Encoded:
    """Confidential encoded rows X* (the encode stage's state) and their link code."""

    x: np.ndarray = field(repr=False)
    code: Code


def _budget(plan: BudgetPlan | None, name: str) -> StageBudget | None:
    return None if plan is None else plan.stage(name)


def _encode(
    rows: MixedRows, schema: Schema, plan: BudgetPlan | None, params: DPFMParams, rng
) -> tuple[Encoded, tuple[Measurement, ...]]:
    """Thresholds first (corrected: the encoding uses them), then the link code and X*."""
    _check(schema, params)
    budget = _budget(plan, "thresholds") if _kinds(schema, Ordinal) else None  # no ordinal: no stage
    thresholds, measured = measure_thresholds(rows, schema, budget, params, rng=rng)
    code, records = make_code(rows, schema, thresholds, params)
    return Encoded(encode_rows(rows, schema, code, rng=rng), code), (*records, *measured)


def _estimate(
    encoded: Encoded, plan: BudgetPlan | None, params: DPFMParams, rng
) -> tuple[np.ndarray, np.ndarray, str, tuple[Measurement, ...]]:
    """r, then Ṽ from the noisy top-r eigenvectors; also the exact V (confidential)."""
    x = encoded.x
    v_all, nu = top_eigenvectors(x, x.shape[1])
    r, note, records = choose_factors(nu, x.shape[0], params, "loadings")
    v_tilde, m = private_loadings(v_all[:, :r], _budget(plan, "loadings"), rng=rng)
    return v_tilde, v_all[:, :r], note, (*records, *(() if m is None else (m,)))


def _sample(
    encoded: Encoded, v_tilde: np.ndarray, plan: BudgetPlan | None, params: DPFMParams, rng
) -> tuple[np.ndarray, tuple[Measurement, ...]]:
    w, m = private_scores(encoded.x, v_tilde, _budget(plan, "scores"), params, rng=rng)
    return reconstruct(w, v_tilde, encoded.code), (() if m is None else (m,))


def _public_cdfs(schema: Schema, code: Code) -> dict[str, list[float]]:
    names = [schema.columns[j].name for j in _kinds(schema, Ordinal)]
    return {name: [float(v) for v in cdf] for name, cdf in zip(names, code.decode_cdfs, strict=True)}


def fit_transform(
    rows: MixedRows,
    schema: Schema,
    *,
    epsilon: float,
    params: DPFMParams,
    rng: np.random.Generator,
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3),
    notion: Literal["pure", "zcdp"] = "pure",
    delta: float = 0.0,
) -> tuple[MixedRows, tuple[Measurement, ...], dict]:
    """Algorithm 3 in one call (for benchmarks): n synthetic rows, row i from input row i.

    ``weights`` are (ε₁, ε₂, ε₃) shares (loadings, scores, thresholds); ``notion`` "zcdp"
    needs ``delta``. ``epsilon = math.inf`` is the non-private ε = ∞ ablation: no noise
    anywhere and no measurements. ``info``: factors r and how chosen, p*, κ (None for the
    paper), f̃ per ordinal column, the synthetic latent X̃* (n, p*), Ṽ, and the exact V
    (``exact_loadings``: confidential, for diagnostics such as the subspace overlap
    ‖ṼᵀV‖²_F/r only).
    """
    _paper_notion(params, notion)
    plan = None if epsilon == math.inf else budget_plan(schema, epsilon, weights, notion, delta)
    encoded, m_enc = _encode(rows, schema, plan, params, rng)
    v_tilde, v_exact, note, m_est = _estimate(encoded, plan, params, rng)
    latent, m_smp = _sample(encoded, v_tilde, plan, params, rng)
    info = {
        "factors": v_tilde.shape[1],
        "factors_note": note,
        "encoded_width": encoded.x.shape[1],
        "clip": encoded.code.clip,
        "cumulative_frequencies": _public_cdfs(schema, encoded.code),
        "latent": latent,
        "loadings": v_tilde,
        "exact_loadings": v_exact,
    }
    measurements = () if plan is None else (*m_enc, *m_est, *m_smp)
    return decode_latent(latent, schema, encoded.code, params), measurements, info


# ---------------------------------------------------------------- the four pipeline stages


def _encode_stage(rows: MixedRows, schema: Schema, plan: BudgetPlan, params: DPFMParams, rng) -> Stage:
    _paper_notion(params, plan.notion)
    encoded, measurements = _encode(rows, schema, plan, params, rng)
    facts = {
        "encoded_width": encoded.x.shape[1],
        "clip": encoded.code.clip,
        "ordinal_cumulative_frequencies": _public_cdfs(schema, encoded.code),
    }
    return Stage((encoded, plan), measurements, facts)


def _estimate_stage(state: tuple[Encoded, BudgetPlan], plan: BudgetPlan, params: DPFMParams, rng) -> Stage:
    encoded, _ = state
    v_tilde, _, note, measurements = _estimate(encoded, plan, params, rng)
    facts = {"factors_used": v_tilde.shape[1], "factors_note": note}
    return Stage((encoded, v_tilde, plan), measurements, facts)


def _sample_stage(state: tuple[Encoded, np.ndarray, BudgetPlan], params: DPFMParams, m: int, rng) -> Stage:
    encoded, v_tilde, plan = state
    n = encoded.x.shape[0]
    if m != n:
        raise ValueError(
            f"dpfm releases exactly one row per fitted input row (asked for {m}, fitted {n}); "
            "remove synthetic_rows from the spec"
        )
    latent, measurements = _sample(encoded, v_tilde, plan, params, rng)
    return Stage((latent, encoded.code), measurements)


def _decode_stage(state: tuple[np.ndarray, Code], schema: Schema, params: DPFMParams, rng) -> MixedRows:
    latent, code = state
    return decode_latent(latent, schema, code, params)


SYNTHESIZER = Synthesizer(
    name="dpfm",
    summary=(
        "latent factor model (Zhang-Xu-Tang-Qu): private ordinal thresholds, noisy top-r "
        "eigenvectors and noisy factor scores; one output row per input row"
    ),
    notions=("pure", "zcdp"),
    params_type=DPFMParams,
    stage_weights=stage_weights,
    defects=defects,
    keeps_row_order=True,
    spends={"encode": ("thresholds",), "estimate": ("loadings",), "sample": ("scores",)},
    encode=_encode_stage,
    estimate=_estimate_stage,
    sample=_sample_stage,
    decode=_decode_stage,
    sensitivities=sensitivities,
    check=_check,
)
