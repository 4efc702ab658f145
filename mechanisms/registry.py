"""The mechanisms a release spec can name (``mechanism.name``): one instance each, in the
order ``dprelease mechanisms`` lists them. A new mechanism is its class and its instance here."""

from __future__ import annotations

from typing import Any

from dprelease.mechanisms.aim import AIM
from dprelease.mechanisms.dpfm import DPFM
from dprelease.mechanisms.factor_gauss import FactorGauss
from dprelease.mechanisms.lda_ppd import LDAPPD
from dprelease.mechanisms.mst import MST
from dprelease.mechanisms.pcappd import PCAPPD
from dprelease.mechanisms.private_pca import PrivatePCA
from dprelease.mechanisms.ron_gauss import RonGauss
from dprelease.mechanisms.spectral import Spectral
from dprelease.mechanisms.synthesizer import Synthesizer

__all__ = ["MECHANISMS", "registry"]

# Any, here only: each mechanism has its own parameter and state types, which a lookup by a
# spec's name cannot know; a caller passes it the parameters the same entry's params_type built.
Registered = Synthesizer[Any, Any, Any, Any]


def registry(*mechanisms: Registered) -> dict[str, Registered]:
    """The mechanisms by ``name``, in the order given; ValueError when two share a name."""
    named: dict[str, Registered] = {}
    for m in mechanisms:
        if m.name in named:
            raise ValueError(f"two mechanisms are named {m.name!r}")
        named[m.name] = m
    return named


MECHANISMS = registry(
    FactorGauss(),
    AIM(),
    MST(),
    DPFM(),
    RonGauss(),
    PrivatePCA(),
    PCAPPD(),
    LDAPPD(),
    Spectral(),
)
