"""Where a release's randomness comes from: the noise source and the named streams.

* A ``VettedRNG`` (``noise_rngs(None, k)``, the default for a release): every DP noise
  draw goes through OpenDP's samplers (``VETTED_SAMPLER_NOTE``), exact discrete Laplace /
  Gaussian noise on the finest float lattice in rational arithmetic, only the final sum
  rounded, so the float attacks of Mironov (2012) do not apply. The generator itself
  (seeded from OS entropy) serves the non-noise draws (sampling, permutations).
* A plain ``np.random.Generator`` (``--insecure-seed``, every seeded test): numpy's
  textbook samplers (``NUMPY_SAMPLER_NOTE``), reproducible from the seed, the guarantee
  holding for idealised real arithmetic.

``release_streams`` names a release's independent streams (``Streams``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from types import ModuleType
from typing import Literal

import numpy as np

from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.rowkeys import RowKeys

__all__ = [
    "NUMPY_SAMPLER_NOTE",
    "VETTED_SAMPLER_NOTE",
    "Streams",
    "VettedRNG",
    "is_vetted",
    "noise_rngs",
    "opendp",
    "release_streams",
    "sampler_note",
    "vetted_float_noise",
]


NUMPY_SAMPLER_NOTE = (
    "noise drawn with numpy's floating-point normal/laplace samplers (integer counts: a "
    "difference of numpy geometric draws) from a seeded generator; the guarantee is for "
    "idealised real arithmetic (see Mironov 2012 on floating-point leakage)"
)

VETTED_SAMPLER_NOTE = (
    "noise drawn with OpenDP {version}'s vetted samplers (make_laplace / make_gaussian, "
    "feature 'contrib'): each value, exact on the float lattice 2^-1074, gets exact discrete "
    "Laplace or discrete Gaussian noise on that lattice (integer counts: exact discrete "
    "Laplace) added in rational arithmetic from OpenSSL's CSPRNG, and only the sum is rounded "
    "to the nearest double (post-processing); OpenDP's privacy map at each recorded scale "
    "and sensitivity was checked to be within the ledger's epsilon or rho. The sensitivities "
    "are derived for real arithmetic; float rounding in computing the statistics themselves "
    "is not covered"
)


class VettedRNG(np.random.Generator):
    """A numpy ``Generator`` whose DP noise, drawn by the primitives in this module, comes
    from OpenDP's vetted samplers (OS-entropy CSPRNG, exact arithmetic) instead of numpy's.

    Every other use (``standard_normal``, ``permutation``, ``random`` …, i.e. the
    post-processing a mechanism does) is numpy's, on the wrapped bit generator. Calling
    ``rng.normal`` / ``rng.laplace`` directly is numpy's textbook sampler: DP noise must go
    through ``gaussian_mechanism``, ``laplace_mechanism`` or ``discrete_laplace_noise``.
    Copies, pickles and ``spawn`` children stay ``VettedRNG`` (numpy's would not).
    """

    def __reduce__(
        self,
    ) -> tuple[Callable[[np.random.BitGenerator], np.random.Generator], tuple[np.random.BitGenerator], None]:
        return (type(self), (self.bit_generator,), None)


def noise_rngs(insecure_seed: int | None, k: int) -> list[np.random.Generator]:
    """``k`` independent generators for a release's stages.

    ``insecure_seed=None``: ``VettedRNG``s on PCG64 streams spawned from a fresh OS-entropy
    ``SeedSequence`` (the DP noise itself comes from OpenDP, which ignores the stream).
    A seed: plain ``np.random.default_rng`` generators from ``SeedSequence(seed).spawn(k)``,
    numpy's samplers, reproducible bit for bit (and not fit for publication).
    """
    if insecure_seed is None:
        return [VettedRNG(np.random.PCG64(s)) for s in np.random.SeedSequence().spawn(k)]
    return [np.random.default_rng(s) for s in np.random.SeedSequence(insecure_seed).spawn(k)]


@dataclass(frozen=True)
class Streams:
    """The named random streams of one release (independent generators): the four
    synthesis steps, the holdout split, the gates' noise, the advisory checks and the
    value grid (``mechanisms.value_grid``).
    ``row_keys``: the streaming engines' per-row keys, drawn from ``holdout`` once."""

    encode: np.random.Generator
    estimate: np.random.Generator
    sample: np.random.Generator
    decode: np.random.Generator
    holdout: np.random.Generator
    gates: np.random.Generator
    checks: np.random.Generator
    grid: np.random.Generator

    @functools.cached_property
    def row_keys(self) -> RowKeys:
        """The keys of the streaming engines' per-row draws (``mechanisms.rowkeys``), drawn
        from ``holdout`` on first use and the same ever after: ``mechanism: auto`` counts a
        streaming release's fitted rows with them before the reserve, and its passes hold
        out those very rows. The memory engine never draws them (its holdout permutes)."""
        return RowKeys.draw(self.holdout)


def release_streams(insecure_seed: int | None) -> Streams:
    """A release's named streams: ``noise_rngs`` in a fixed order (so a seeded release
    draws the same numbers as before the streams had names)."""
    order = ("encode", "estimate", "sample", "decode", "holdout", "checks", "gates", "grid")
    return Streams(**dict(zip(order, noise_rngs(insecure_seed, len(order)), strict=True)))


def is_vetted(rng: np.random.Generator) -> bool:
    return isinstance(rng, VettedRNG)


def sampler_note(rng: np.random.Generator) -> str:
    """The bundle's sentence for the noise source ``rng`` selects."""
    if is_vetted(rng):
        return VETTED_SAMPLER_NOTE.format(version=version("opendp"))
    return NUMPY_SAMPLER_NOTE


@functools.cache
def opendp() -> ModuleType:
    """OpenDP's prelude with the 'contrib' feature on (its noise constructors require it;
    nothing else is enabled). Imported on first vetted draw: seeded runs never load it."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


_MAX_ULPS = 64


def vetted_float_noise(
    value: np.ndarray, kind: Literal["laplace", "gaussian"], scale: float, sensitivity: float, share: float
) -> tuple[np.ndarray, float]:
    """``value`` + OpenDP noise of ``scale``, and the scale used: the smallest double ≥
    ``scale`` whose OpenDP privacy map at ``sensitivity`` is ≤ ``share`` (ε for Laplace
    on L1, ρ for Gaussian on L2). OpenDP's map rounds up, so this is ``scale`` or an ulp
    or two above it, never below.

    Sensitivity: ``sensitivity``, the calling mechanism's Δ₁ or Δ₂.
    Noise: OpenDP's ``make_laplace`` / ``make_gaussian`` at the returned scale: exact
    discrete Laplace / Gaussian on the lattice 2^-1074, only the sum rounded.
    Privacy: OpenDP's own map at that scale and sensitivity is ≤ ``share``.
    Reference: Canonne–Kamath–Steinke 2020; Mironov 2012 (why not float samplers).
    """
    if not np.all(np.isfinite(value)):
        # OpenDP maps a non-finite float to 0 or the largest double before adding noise.
        raise ValueError("a value to be measured must be finite")
    dp = opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(value.size))
    if kind == "laplace":
        metric, make = dp.l1_distance(T=float), dp.m.make_laplace
    else:
        metric, make = dp.l2_distance(T=float), dp.m.make_gaussian
    for _ in range(_MAX_ULPS):
        meas = make(domain, metric, scale)
        if meas.map(float(sensitivity)) <= share:
            break
        scale = math.nextafter(scale, math.inf)
    else:  # pragma: no cover - OpenDP's map is within an ulp or two of ours
        raise BudgetError(f"OpenDP's {kind} map exceeds {share} at every scale tried")
    noisy = meas(value.ravel().tolist()) if value.size else []
    return np.asarray(noisy, dtype=float).reshape(value.shape), scale
