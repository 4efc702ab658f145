"""The mechanisms a release spec can name (``mechanism.name``)."""

from __future__ import annotations

from mechanisms import dpfm, factor_gauss, private_pca, ron_gauss, spectral
from mechanisms.synthesizer import Synthesizer

__all__ = ["MECHANISMS"]

MECHANISMS: dict[str, Synthesizer] = {
    s.name: s
    for s in (
        factor_gauss.SYNTHESIZER,
        dpfm.SYNTHESIZER,
        ron_gauss.SYNTHESIZER,
        private_pca.SYNTHESIZER,
        spectral.SYNTHESIZER,
    )
}
