"""``spectral_anonymization``: spectral anonymization SA_A, A ∈ {P, J, O}. NOT DP.

Perkonoja & Virta, *Asymptotic utility of spectral anonymization*, PSD 2024 (LNCS,
pp. 51–66). P-SA is the original method of Lasko & Vinterbo (IEEE TKDE 22(3), 2009);
J-SA and O-SA are new in that paper. For a data matrix X (n × p): the thin SVD of the
centred data HX = UDVᵀ, each left singular vector u_k replaced by T_k u_k with an
independent T_k (P a uniform permutation, J uniform signs, O Haar-uniform orthogonal;
O by the exact O(n) sphere sampler unless ``haar``), and X_A = U₀DVᵀ + 1x̄ᵀ with the
original mean.

Stages: none in the ledger (no privacy parameter, no budget, no measurement); encode
(the public-box design), estimate (the SVD), sample (the column transforms) and decode
are plain computations. ``defects`` always lists why it is not DP. Output row i is
computed from input row i (``keeps_row_order``).

The algorithm, the exactness of the sphere sampler, the exact invariants and the theory
(Theorems 1–2): ``docs/proofs/spectral.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.spatial import KDTree

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.design import design
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.synthesizer import Facts, MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "Anonymized",
    "Encoded",
    "Spectral",
    "SpectralParams",
    "Spectrum",
    "anonymize",
    "commutation_matrix",
    "defects",
    "eigen_root",
    "g0",
    "g_sa",
    "haar_orthogonal",
    "linkage",
    "mean_target",
    "reconstruct",
    "spectrum",
    "stage_weights",
    "transform_columns",
]

Method = Literal["P", "J", "O"]
MATCH_DELTA = 1e-6  # δ of the paper's match rate (§3.2)


@dataclass(frozen=True)
class SpectralParams:
    """``method``: P (permutations), J (sign changes) or O (Haar orthogonal), one
    independent draw per left singular vector. ``haar``: O only; draw the paper's full
    n × n Haar matrix per column (O(n³)) instead of the equivalent O(n) sphere sampler."""

    method: Method = "O"
    haar: bool = False

    def __post_init__(self) -> None:
        if self.method not in ("P", "J", "O"):
            raise ValueError(f"params.method ({self.method!r}) must be 'P', 'J' or 'O'")
        if not isinstance(self.haar, bool):
            raise ValueError(f"params.haar ({self.haar!r}) must be true or false")
        if self.haar and self.method != "O":
            raise ValueError(
                f"params.haar (True) must be false with method {self.method!r}: the Haar sampler is for O-SA"
            )

    @property
    def sampler(self) -> str:
        """Public name of the column transform."""
        if self.method == "O":
            return "haar" if self.haar else "sphere"
        return "permutation" if self.method == "P" else "signs"


def defects(params: SpectralParams) -> list[str]:
    """Why the mechanism is not DP: always non-empty (it has no privacy parameter)."""
    base = (
        "spectral anonymization has no privacy parameter and no DP guarantee "
        "(Perkonoja & Virta 2024 evaluate it by record linkage only)"
    )
    specific = {
        "P": "P-SA keeps the mean exactly and copies an original record exactly with probability "
        "about n^(1-p) per row",
        "J": "J-SA copies its own input record exactly with probability 2^(-p) per row",
        "O": "O-SA output is a random function of the exact mean, singular values and right "
        "singular vectors of the data",
    }
    return [base, specific[params.method]]


def stage_weights(schema: Schema, params: SpectralParams) -> dict[str, float]:
    """No ledger stages: nothing is measured and no budget is spent."""
    return {}


# ---------------------------------------------------------------- the algorithm


@dataclass(frozen=True)
class Spectrum:
    """x̄ (p,), U (n, r), d (r,) > 0 and V (p, r) of HX = UDVᵀ, r = rank(HX)."""

    mean: np.ndarray = field(repr=False)
    u: np.ndarray = field(repr=False)
    d: np.ndarray = field(repr=False)
    v: np.ndarray = field(repr=False)

    @property
    def rank(self) -> int:
        return int(self.d.size)


def spectrum(x: np.ndarray) -> Spectrum:
    """Thin SVD of the centred data, HX = UDVᵀ, keeping the r components with
    d_k > d_max·max(n, p)·eps (numpy's ``matrix_rank`` rule); a zero component carries no
    data (its u_k is arbitrary). Signs: the largest |v_jk| of each column is made positive
    (jointly with u_k, which leaves UDVᵀ unchanged)."""
    x = np.asarray(x, dtype=float)
    mean = x.mean(axis=0)
    u, d, vt = np.linalg.svd(x - mean, full_matrices=False)
    tol = (d[0] if d.size else 0.0) * max(x.shape) * np.finfo(float).eps
    r = int(np.sum(d > tol))
    u, d, v = u[:, :r], d[:r], vt[:r].T
    sign = np.where(v[np.argmax(np.abs(v), axis=0), np.arange(r)] < 0, -1.0, 1.0)
    return Spectrum(mean, u * sign, d, v * sign)


def haar_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-uniform n × n orthogonal matrix: Q·diag(sign diag R) from the QR of an n × n
    standard Gaussian matrix (Stewart 1980; Mezzadri 2007 on the sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def transform_columns(u: np.ndarray, params: SpectralParams, rng: np.random.Generator) -> np.ndarray:
    """U₀ = [T₁u₁ | … | T_r u_r] with independent T_k.

    P: each column permuted by its own uniform permutation. J: entries times iid ±1.
    O (sphere): column k = g_k/‖g_k‖, g_k ~ N(0, I_n), the law of T_k u_k for Haar T_k
    (u_k is not used). O (haar): T_k u_k with T_k = ``haar_orthogonal(n)``.
    """
    n, r = u.shape
    if params.method == "P":
        rows = rng.permuted(np.tile(np.arange(n), (r, 1)), axis=1).T
        return u[rows, np.arange(r)]
    if params.method == "J":
        return u * (2 * rng.integers(0, 2, size=(n, r)) - 1)
    if params.haar:
        out = np.empty((n, r))
        for k in range(r):
            out[:, k] = haar_orthogonal(n, rng) @ u[:, k]
        return out
    g = rng.standard_normal((n, r))
    return g / np.linalg.norm(g, axis=0)


def reconstruct(spec: Spectrum, u0: np.ndarray) -> np.ndarray:
    """X_A = U₀DVᵀ + 1x̄ᵀ with the original x̄."""
    return (u0 * spec.d) @ spec.v.T + spec.mean


def anonymize(x: np.ndarray, method: Method, rng: np.random.Generator, haar: bool = False) -> np.ndarray:
    """SA_A of a real (n, p) matrix (for benchmarks): ``reconstruct`` ∘ ``transform_columns``
    ∘ ``spectrum``."""
    spec = spectrum(x)
    return reconstruct(spec, transform_columns(spec.u, SpectralParams(method, haar), rng))


def linkage(x_a: np.ndarray, x: np.ndarray, delta: float = MATCH_DELTA) -> tuple[float, float, float]:
    """Distance-based record linkage of §3.2 (after Domingo-Ferrer & Torra 2004), all
    columns, original units, Euclidean. d_i = min_j ‖x_{A,i} − x_j‖₂ over *all* original
    rows j (a k-d tree, O(n log n) for small p). Returns EUC = mean_i d_i, the match rate
    (1/n)Σ_i 1[d_i < δ] (the paper's "correctly linked": a copy of *any* original row) and
    the classic correct-link rate (1/n)Σ_i 1[argmin_j = i]."""
    dist, nearest = KDTree(np.asarray(x, dtype=float)).query(np.asarray(x_a, dtype=float), k=1)
    return float(dist.mean()), float(np.mean(dist < delta)), float(np.mean(nearest == np.arange(len(dist))))


# ---------------------------------------------------------------- theory targets


def commutation_matrix(p: int) -> np.ndarray:
    """K_pp (p² × p²): K vec(A) = vec(Aᵀ) for p × p A, vec stacking columns
    (vec(A)[jp + i] = A_ij)."""
    i, j = np.divmod(np.arange(p * p), p)
    k = np.zeros((p * p, p * p))
    k[i * p + j, j * p + i] = 1.0
    return k


def eigen_root(sigma: np.ndarray) -> np.ndarray:
    """R = OΛ^{1/2} from Σ = OΛOᵀ (the paper's Σ^{1/2}; not the symmetric root, which
    gives a different (R⊗R)V_p(R⊗R)ᵀ). Column signs of O cancel in every target."""
    lam, o = np.linalg.eigh(np.asarray(sigma, dtype=float))
    if lam[0] < -1e-12 * max(1.0, lam[-1]):
        raise ValueError("sigma must be positive semi-definite")
    return o * np.sqrt(np.clip(lam, 0.0, None))


def g0(sigma: np.ndarray) -> np.ndarray:
    """G₀ = (R⊗R)(I + K_pp)(R⊗R)ᵀ: the limiting covariance of √n vec(S − Σ) for normal
    data (Tyler 1982); equal to (I + K_pp)(Σ⊗Σ)."""
    r = eigen_root(sigma)
    p = r.shape[0]
    rr = np.kron(r, r)
    return rr @ (np.eye(p * p) + commutation_matrix(p)) @ rr.T


def g_sa(sigma: np.ndarray) -> np.ndarray:
    """G_SA = (R⊗R)(2I + 2K_pp − 2V_p)(R⊗R)ᵀ, V_p = diag vec I_p: the limiting covariance of
    √n vec(S_A − Σ) for A ∈ {P, J, O} (Theorem 2; distinct eigenvalues)."""
    r = eigen_root(sigma)
    p = r.shape[0]
    rr = np.kron(r, r)
    middle = 2 * np.eye(p * p) + 2 * commutation_matrix(p) - 2 * np.diag(np.eye(p).ravel(order="F"))
    return rr @ middle @ rr.T


def mean_target(sigma: np.ndarray, method: Literal["original", "P", "J", "O"]) -> np.ndarray:
    """Limiting covariance of √n(x̄_A − μ) (Theorem 1): Σ for the original data and P,
    2Σ for J and O."""
    sigma = np.asarray(sigma, dtype=float)
    if method not in ("original", "P", "J", "O"):
        raise ValueError(f"method ({method!r}) must be 'original', 'P', 'J' or 'O'")
    return 2 * sigma if method in ("J", "O") else sigma.copy()


# ---------------------------------------------------------------- the four pipeline stages


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the rows in the public-box design, ``x`` (n, p)."""

    x: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class Anonymized:
    """The sample step's state: X_A (n, p) in design coordinates, row i from input row i."""

    x: np.ndarray = field(repr=False)


class Spectral(Synthesizer[SpectralParams, Encoded, Spectrum, Anonymized]):
    """spectral anonymization (Lasko-Vinterbo P-SA; Perkonoja-Virta J-SA, O-SA): independent
    permutation / sign change / Haar rotation of each left singular vector of the centred
    design matrix; NOT differentially private; one output row per input row

    spectral_anonymization's four steps (the module's docstring states them; nothing is
    measured). n = 1 runs but the centred matrix is zero (rank 0): the output row is the
    input record; n <= p is fine: the thin SVD keeps the r <= n - 1 nonzero components."""

    name = "spectral_anonymization"
    notions = ("pure",)
    spends = {}
    keeps_row_order = True

    stage_weights = staticmethod(stage_weights)

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: SpectralParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        x = design(schema).encode(rows)
        return Stage(Encoded(x), facts={"design_width": x.shape[1]})

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: SpectralParams, rng: np.random.Generator
    ) -> Stage[Spectrum]:
        spec = spectrum(state.x)
        return Stage(spec, facts={"rank_used": spec.rank})

    def sample(
        self, state: Spectrum, params: SpectralParams, m: int, rng: np.random.Generator
    ) -> Stage[Anonymized]:
        n = state.u.shape[0]
        if m != n:
            raise ValueError(
                f"spectral_anonymization releases exactly one row per input row (asked for {m}, input {n}); "
                "remove synthetic_rows from the spec"
            )
        x_a = reconstruct(state, transform_columns(state.u, params, rng))
        return Stage(Anonymized(x_a), facts={"method": params.method, "sampler": params.sampler})

    def decode(
        self, state: Anonymized, schema: Schema, params: SpectralParams, rng: np.random.Generator
    ) -> MixedRows:
        return design(schema).decode(state.x)

    def sensitivities(
        self, schema: Schema, params: SpectralParams, n: int, facts: Facts | None = None
    ) -> dict[str, Sensitivity]:
        return {}  # measures nothing: not DP

    defects = staticmethod(defects)
