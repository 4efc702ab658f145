"""The mechanisms a release spec can name (``mechanism.name``)."""

from __future__ import annotations

from dprelease.mechanisms import (
    aim,
    dpfm,
    factor_gauss,
    lda_ppd,
    mst,
    pcappd,
    private_pca,
    ron_gauss,
    spectral,
)
from dprelease.mechanisms.synthesizer import Synthesizer

__all__ = ["MECHANISMS"]

MECHANISMS: dict[str, Synthesizer] = {
    m.SYNTHESIZER.name: m.SYNTHESIZER
    for m in (factor_gauss, aim, mst, dpfm, ron_gauss, private_pca, pcappd, lda_ppd, spectral)
}
