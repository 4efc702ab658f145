"""Shared maths of the component-analysis publishers ``pcappd`` (the paper's DP-PCA
publishing, Alg A) and ``lda_ppd`` (DP-LDA publishing, Alg B): the layout of a public-box
design row, the moment statistics and their exact replace-one L1 sensitivities.

A row x = (u, a) ∈ [0, 1]^p has p₁ *numeric* coordinates u ∈ [0, 1]^{p₁} and p₂
*one-hot blocks* a (one per nominal column, K ≥ 2 coordinates). The paper's categorical
sensitivity is wrong (it assumes the worst record flips every numeric 0 → 1; numerics
that stay near 1 change the numeric × dummy entries more): the exact maxima
(``moment_sensitivity``, ``class_moment_sensitivity``) exceed it whenever p₁ ≥ 1 and
p₂ ≥ 2. The argument and the proofs: ``docs/proofs/pcappd_lda_ppd.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.design import Design

__all__ = [
    "Layout",
    "class_moment_sensitivity",
    "layout",
    "mirror",
    "moment_sensitivity",
    "paper_class_moment_sensitivity",
    "paper_moment_sensitivity",
    "upper",
]


@dataclass(frozen=True)
class Layout:
    """Widths of the design's columns in order: 1 for a numeric coordinate (continuous or
    ordinal), K ≥ 2 for a one-hot block of a nominal column with K categories."""

    widths: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.widths or any(
            isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in self.widths
        ):
            raise ValueError(f"layout widths ({self.widths!r}) must be integers >= 1")

    @property
    def width(self) -> int:
        """p, the number of design coordinates."""
        return sum(self.widths)

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(int(s) for s in np.cumsum((0, *self.widths[:-1])))

    @property
    def numeric(self) -> tuple[int, ...]:
        """Coordinates of the numeric columns."""
        return tuple(s for s, w in zip(self.starts, self.widths, strict=True) if w == 1)

    @property
    def blocks(self) -> tuple[slice, ...]:
        """Slices of the one-hot blocks."""
        return tuple(slice(s, s + w) for s, w in zip(self.starts, self.widths, strict=True) if w > 1)

    @property
    def p1(self) -> int:
        return len(self.numeric)

    @property
    def p2(self) -> int:
        return len(self.blocks)


def layout(design_or_widths: Design | Sequence[int]) -> Layout:
    """The layout of a ``Design`` (one width per schema column) or of explicit widths."""
    if isinstance(design_or_widths, Design):
        return Layout(tuple(b.stop - b.start for b in design_or_widths.blocks))
    return Layout(tuple(int(w) for w in design_or_widths))


def upper(x: np.ndarray) -> np.ndarray:
    """triu(Σᵢ xᵢxᵢᵀ) with the diagonal, row-major: p(p+1)/2 entries."""
    iu = np.triu_indices(x.shape[1])
    return (x.T @ x)[iu]


def mirror(u: np.ndarray, p: int) -> np.ndarray:
    """The symmetric p×p matrix whose upper triangle (with diagonal, row-major) is u."""
    iu = np.triu_indices(p)
    s = np.zeros((p, p))
    s[iu] = u
    return s + np.triu(s, 1).T


def _numeric_gain(p1: int, c: float) -> float:
    """max over σ ∈ [0, p₁] of cσ − (p₁+1)σ²/(2p₁): at σ* = cp₁/(p₁+1) if inside, else at
    an end (0 when c ≤ 0 or p₁ = 0; σ = p₁ when σ* ≥ p₁)."""
    if p1 == 0 or c <= 0:
        return 0.0
    if c >= p1 + 1:
        return c * p1 - (p1 + 1) * p1 / 2
    return c * c * p1 / (2 * (p1 + 1))


def moment_sensitivity(p1: int, p2: int) -> float:
    """Exact replace-one L1 sensitivity of (Σx, triu(Σxxᵀ)) (Alg A step 2):

        Δ = p₁(p₁+3)/2 + p₁p₂ + g(p₁, p₂−1) + p₂(p₂+3),

    g(p₁, c) = max_{0≤σ≤p₁} cσ − (p₁+1)σ²/(2p₁) (``_numeric_gain``).

    Proof. The change x = (u, a) → x' = (v, b) with d changed blocks has L1 norm
    Σ|uᵢ−vᵢ| + 2d (sums) + Σ_{i≤j}|uᵢuⱼ − vᵢvⱼ| (numeric pairs)
    + Σᵢ[(p₂−d)|uᵢ−vᵢ| + d(uᵢ+vᵢ)] (numeric × dummy: one entry per unchanged block, two
    per changed one) + 2d (dummy diagonal) + 2[C(p₂,2) − C(p₂−d,2)] (dummy pairs in
    different blocks: one −1 and one +1 when either block changed; within a block the
    products are 0). Every term grows with d (|uᵢ−vᵢ| ≤ uᵢ+vᵢ), so d = p₂; the dummy-only
    part is then 4p₂ + p₂(p₂−1) = p₂(p₂+3). With Mᵢ = max(uᵢ, vᵢ), mᵢ = min(uᵢ, vᵢ):
    |uᵢ−vᵢ| = Mᵢ−mᵢ, uᵢ+vᵢ = Mᵢ+mᵢ, and |uᵢuⱼ − vᵢvⱼ| ≤ MᵢMⱼ − mᵢmⱼ (since
    min(uᵢuⱼ, vᵢvⱼ) ≥ mᵢmⱼ and uᵢuⱼ + vᵢvⱼ ≤ MᵢMⱼ + mᵢmⱼ by rearrangement), with equality
    at u = M, v = m. The bound Σ(Mᵢ−mᵢ) + Σ_{i≤j}(MᵢMⱼ − mᵢmⱼ) + p₂Σ(Mᵢ+mᵢ) grows in every
    Mᵢ, so M = 1: p₁(p₁+3)/2 + p₁p₂ + (p₂−1)σ − [σ² + Σmᵢ²]/2 with σ = Σmᵢ, and
    Σmᵢ² ≥ σ²/p₁ (equal mᵢ = σ/p₁). Maximising over σ gives g. Attained by u = 1,
    v = (σ*/p₁)·1, every category changed; so Δ is the maximum, not just a bound.

    The paper's s (``paper_moment_sensitivity``) is the value at v = 0: below Δ by
    g(p₁, p₂−1) > 0 whenever p₁ ≥ 1 and p₂ ≥ 2. For p₂ = 0 both are p + p(p+1)/2.
    """
    return p1 * (p1 + 3) / 2 + p1 * p2 + _numeric_gain(p1, p2 - 1) + p2 * (p2 + 3)


def paper_moment_sensitivity(p1: int, p2: int) -> float:
    """Alg A's s (the paper's categorical formula; p + p(p+1)/2 when p₂ = 0):
    (p₁ + 2p₂) + [(p₁+p₂)(p₁+p₂+1) + p₂(p₂+1)]/2. Too small (``moment_sensitivity``)."""
    return (p1 + 2 * p2) + ((p1 + p2) * (p1 + p2 + 1) + p2 * (p2 + 1)) / 2


def class_moment_sensitivity(p1: int, p2: int) -> float:
    """Exact replace-one L1 sensitivity of (S_1, …, S_L, triu(Σ_all xxᵀ)), S_c = Σ_{y=c} x
    (Alg B step 1, any L ≥ 2):

        Δ = (p₂+1)p₁ + p₁(p₁+1)/2 + g(p₁, p₂+1) + p₂(p₂+3).

    Proof. A record changing class moves x out of one class sum and x' into another:
    ‖x‖₁ + ‖x'‖₁ = Σ(uᵢ+vᵢ) + 2p₂; a record keeping its class changes one sum by
    ‖x−x'‖₁ ≤ ‖x‖₁ + ‖x'‖₁ (entries ≥ 0), so the class change is the worst. The second
    moment is ``moment_sensitivity``'s S2 part: at d = p₂ changed blocks it is
    Σ_{i≤j}|uᵢuⱼ − vᵢvⱼ| + p₂Σ(uᵢ+vᵢ) + p₂(p₂+1). Total:
    (p₂+1)Σ(uᵢ+vᵢ) + Σ_{i≤j}|uᵢuⱼ − vᵢvⱼ| + p₂(p₂+3); the same Mᵢ/mᵢ argument puts
    M = 1 and leaves (p₂+1)(p₁+σ) + p₁(p₁+1)/2 − [σ² + σ²/p₁]/2 to maximise over σ.
    Attained by u = 1, v = (σ*/p₁)·1, every category and the class changed.

    The paper's Δ (``paper_class_moment_sensitivity``) exceeds this by p₁ − g(p₁, p₂+1):
    valid (loose) for numerics only, too small once g > p₁, e.g. for p₂ ≥ p₁ as soon as
    p₂ > (p₁+1)/2.
    """
    return (p2 + 1) * p1 + p1 * (p1 + 1) / 2 + _numeric_gain(p1, p2 + 1) + p2 * (p2 + 3)


def paper_class_moment_sensitivity(p1: int, p2: int) -> float:
    """Alg B's Δ (its categorical formula; 2p + p(p+1)/2 when p₂ = 0):
    2(p₁+p₂) + [(p₁+p₂+1)(p₁+p₂) + p₂(p₂+1)]/2. Too small (``class_moment_sensitivity``)."""
    return 2 * (p1 + p2) + ((p1 + p2 + 1) * (p1 + p2) + p2 * (p2 + 1)) / 2
