"""``ron_gauss`` public parameters, the budget split and the paper variant's defects."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dprelease.mechanisms.accounting import StageBudget

__all__ = [
    "CLASS_COUNT_SHARE",
    "CLASS_SIZE_DEFECT",
    "LEMMA4_DEFECT",
    "LEMMA5_DEFECT",
    "RonGaussParams",
    "defects",
    "stage_weights",
]


LEMMA4_DEFECT = (
    "Lemma 4: Δ₁ = 2√p/n is below the true entrywise L1 sensitivity of the p×p second moment, "
    "≥ p/n (vvᵀ vs 0, v = 1/√p) and √2·p/n for even p; exceeded for every p ≥ 3: not ε-DP"
)
LEMMA5_DEFECT = (
    "Lemma 5: Δ₁ = (2√p + 4a√p + a²)/n reuses Lemma 4's term 2√p/n for the x̃x̃ᵀ block (true ≥ p/n, "
    "√2·p/n for even p); pairs changing the (p+1)² matrix by more exist from p = 7 (a = 1): not ε-DP"
)
CLASS_SIZE_DEFECT = (
    "Alg 5 / Thm 5: the class sizes n_c are computed from the data but used without noise (divisors "
    "of μ_c, Σ_c and their noise scales, and the synthetic class sizes)"
)
CLASS_COUNT_SHARE = 0.1
_ZERO = 1e-300
_LABEL_BOUND = 1.0  # the pipeline's regression label y = 2·unit − 1 lies in [−1, 1]


@dataclass(frozen=True)
class RonGaussParams:
    """Public hyperparameters. ``label`` names the schema column held out as y (regression:
    continuous; classification: nominal or ordinal; checked by ``check``). ``dims`` None
    means ``default_dims``. ``projection`` None means haar (corrected) / uniform_qr
    (paper); ``normalise`` None means public (corrected) / record (paper)."""

    variant: str = "corrected"
    task: str = "unsupervised"
    label: str | None = None
    dims: int | None = None
    projection: str | None = None
    normalise: str | None = None

    def __post_init__(self) -> None:
        for name, allowed in (
            ("variant", ("corrected", "paper")),
            ("task", ("unsupervised", "regression", "classification")),
            ("projection", ("haar", "uniform_qr", None)),
            ("normalise", ("public", "record", None)),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"params.{name} ({getattr(self, name)!r}) must be one of {allowed}")
        if self.dims is not None and (isinstance(self.dims, bool) or not isinstance(self.dims, int)):
            raise ValueError(f"params.dims ({self.dims!r}) must be an integer >= 1 or None")
        if self.dims is not None and self.dims < 1:
            raise ValueError(f"params.dims ({self.dims}) must be an integer >= 1 or None")

    @property
    def projection_kind(self) -> str:
        return self.projection or ("haar" if self.variant == "corrected" else "uniform_qr")

    @property
    def normalise_mode(self) -> str:
        return self.normalise or ("public" if self.variant == "corrected" else "record")


def stage_weights(task: str, variant: str, weights: tuple[float, float] = (0.3, 0.7)) -> dict[str, float]:
    """Budget split: ``weights`` = (ε_μ : ε_Σ), the paper's 0.3 : 0.7 by default. Corrected
    classification first gives ``CLASS_COUNT_SHARE`` to the class counts (0.1 / 0.27 / 0.63
    by default); the paper variant measures no counts (it uses the true n_c)."""
    mean, cov = (w / math.fsum(weights) for w in weights)
    if task == "classification" and variant == "corrected":
        rest = 1.0 - CLASS_COUNT_SHARE
        return {"class_counts": CLASS_COUNT_SHARE, "mean": rest * mean, "covariance": rest * cov}
    return {"mean": mean, "covariance": cov}


def defects(params: RonGaussParams) -> list[str]:
    """Why the parameters do not give a DP release (empty for the corrected variant)."""
    if params.variant == "corrected":
        return []
    found = [LEMMA5_DEFECT if params.task == "regression" else LEMMA4_DEFECT]
    return [*found, CLASS_SIZE_DEFECT] if params.task == "classification" else found


def _require_pure(variant: str, part: StageBudget) -> None:
    if variant == "paper" and part.rho is not None:
        raise ValueError(
            "params.variant ('paper') is pure ε-DP only (its sensitivities are L1): "
            "set privacy.accountant: pure"
        )
