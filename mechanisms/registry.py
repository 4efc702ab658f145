"""The mechanisms a release spec can name, with their stages and privacy notions."""

from __future__ import annotations

from dataclasses import dataclass

from mechanisms import factor_gauss

__all__ = ["MECHANISMS", "MechanismInfo"]


@dataclass(frozen=True)
class MechanismInfo:
    name: str
    summary: str
    notions: tuple[str, ...]
    stage_weights: dict[str, float]
    params_type: type
    keeps_row_order: bool


MECHANISMS: dict[str, MechanismInfo] = {
    "factor_gauss": MechanismInfo(
        name="factor_gauss",
        summary=(
            "private marginals + private latent second moment -> factor model -> "
            "fresh Gaussian rows decoded through the private marginals"
        ),
        notions=("zcdp", "pure"),
        stage_weights=factor_gauss.STAGE_WEIGHTS,
        params_type=factor_gauss.FactorGaussParams,
        keeps_row_order=False,
    ),
}
