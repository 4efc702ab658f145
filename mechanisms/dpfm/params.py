"""``dpfm`` public parameters, the defects of the paper variant and the encoded width."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from dprelease.mechanisms.schema import Nominal, Schema

__all__ = ["FACTOR_THRESHOLD", "DPFMParams", "Variant", "defects", "encoded_width"]


Variant = Literal["corrected", "paper"]
FACTOR_THRESHOLD = 0.8  # c of eq. (3), the paper's value


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


def _check(schema: Schema, params: DPFMParams) -> None:
    p_star = encoded_width(schema)
    if params.factors is not None and params.factors > p_star:
        raise ValueError(f"params.factors ({params.factors}) must be <= the encoded width p* ({p_star})")
