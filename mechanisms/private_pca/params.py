"""``private_pca`` public parameters: the variants, subroutines, budget weights and caps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["MAX_DEPTH", "PSMM_MAX_CELLS", "STAGE_WEIGHTS", "PrivatePCAParams", "Subroutine", "Variant"]


Variant = Literal["corrected", "paper"]
Subroutine = Literal["pmm", "psmm", "auto"]
STAGE_WEIGHTS = {"covariance": 1 / 3, "mean": 1 / 3, "measure": 1 / 3}
MAX_DEPTH = 24
"""Public cap on the PMM depth r (2^r leaves, ≈ 2^{r+1} counts in memory)."""
PSMM_MAX_CELLS = 400
"""Public cap on the PSMM grid size |L| (the BL LP has up to |L|² transport variables).
With the paper's δ, |L| ≈ 75–105·ε₃n for d = 10, d' = 3, so PSMM fits only very small ε₃n."""


@dataclass(frozen=True)
class PrivatePCAParams:
    """Public hyperparameters. ``dims`` (d') None: the §6 rule on the noisy covariance;
    ``depth`` (r) None: ⌈log₂(ε₃n)⌉ clamped to [1, ``MAX_DEPTH``] (PMM only);
    ``subroutine``: "pmm" (Alg 4), "psmm" (Alg 5; error if its grid exceeds
    ``PSMM_MAX_CELLS``) or "auto" (PSMM when d' ≥ 3 and the grid fits, else PMM);
    ``psmm_cells`` None: the paper's δ; else a public target |L| ≤ ``PSMM_MAX_CELLS``
    that coarsens δ (``psmm_delta_for_cells``; never finer than the paper's δ)."""

    variant: Variant = "corrected"
    dims: int | None = None
    depth: int | None = None
    subroutine: Subroutine = "pmm"
    psmm_cells: int | None = None

    def __post_init__(self) -> None:
        if self.variant not in ("corrected", "paper"):
            raise ValueError(f"params.variant ({self.variant!r}) must be 'corrected' or 'paper'")
        if self.dims is not None and not (_is_int(self.dims) and self.dims >= 1):
            raise ValueError(f"params.dims ({self.dims!r}) must be an integer >= 1")
        if self.depth is not None and not (_is_int(self.depth) and 1 <= self.depth <= MAX_DEPTH):
            raise ValueError(f"params.depth ({self.depth!r}) must be an integer in [1, {MAX_DEPTH}]")
        if self.subroutine not in ("pmm", "psmm", "auto"):
            raise ValueError(f"params.subroutine ({self.subroutine!r}) must be 'pmm', 'psmm' or 'auto'")
        if self.psmm_cells is not None and not (
            _is_int(self.psmm_cells) and 2 <= self.psmm_cells <= PSMM_MAX_CELLS
        ):
            raise ValueError(
                f"params.psmm_cells ({self.psmm_cells!r}) must be an integer in [2, {PSMM_MAX_CELLS}]"
            )


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)
