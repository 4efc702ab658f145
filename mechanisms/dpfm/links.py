"""``dpfm`` link functions (5)–(8): rows to the latent X* (encoding) and the synthetic
latent back to mixed rows (decoding). Post-processing of the thresholds and the public
parameters; the paper variant records its data-derived codes ``unprotected``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from dprelease.mechanisms.dpfm.params import DPFMParams, _kinds, _widths, encoded_width
from dprelease.mechanisms.dpfm.thresholds import _ordinal_bins, cumulative_frequencies
from dprelease.mechanisms.latent import LatentCode, from_latent, to_latent
from dprelease.mechanisms.primitives import Measurement, unprotected
from dprelease.mechanisms.schema import Continuous, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

__all__ = ["Code", "decode_latent", "encode_rows", "make_code", "probit_latent"]


_U_FLOOR = 1e-12
_T_MIN = 1e-12


@dataclass(frozen=True)
class Code:
    """Parameters of the link functions. Continuous: y* = (u − center)/spread.
    Ordinal: ``encode_cdfs`` for z* (τ = Φ⁻¹(f)), ``decode_cdfs`` f̃ for eq. (8).
    Rows: coordinates clipped to [−clip, clip] (None: no clipping) and divided by
    ``row_scale``."""

    center: np.ndarray
    spread: np.ndarray
    encode_cdfs: tuple[np.ndarray, ...]
    decode_cdfs: tuple[np.ndarray, ...]
    clip: float | None
    row_scale: float


def make_code(
    rows: MixedRows, schema: Schema, thresholds: tuple[np.ndarray, ...], params: DPFMParams
) -> tuple[Code, tuple[Measurement, ...]]:
    """The link functions. corrected: public center ½ and spread 1/√12 on [0, 1] (so
    y* = √12(u − ½)), τ̃ from the private f̃ for both encoding and decoding, κ and κ√p*.
    paper: the data's mean and SD and the raw frequencies (both ``unprotected``
    records), f̃ from Alg. 2 only for decoding, no clipping or row scaling."""
    cont = _kinds(schema, Continuous)
    if params.variant == "corrected":
        k = len(cont)
        code = Code(
            np.full(k, 0.5),
            np.full(k, 1 / math.sqrt(12)),
            thresholds,
            thresholds,
            float(params.clip),
            float(params.clip) * math.sqrt(encoded_width(schema)),
        )
        return code, ()
    u = _unit(rows, schema)[:, cont]
    center, spread = u.mean(axis=0), u.std(axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    bins, levels = _ordinal_bins(rows, schema)
    raw = cumulative_frequencies(bins, levels)
    cuts = np.cumsum([L - 1 for L in levels])[:-1]
    encode_cdfs = tuple(np.concatenate([[0.0], f, [1.0]]) for f in np.split(raw, cuts)) if levels else ()
    records = []
    if cont:
        records.append(
            unprotected(
                np.concatenate([center, spread]),
                name="continuous_mean_sd",
                stage="encoding",
                defect="continuous columns normalised with the data's mean and SD",
            )
        )
    if levels:
        records.append(
            unprotected(
                raw,
                name="raw_cumulative_frequencies",
                stage="encoding",
                defect="encoding thresholds τ from the raw ordinal frequencies",
            )
        )
    return Code(center, spread, encode_cdfs, thresholds, None, 1.0), tuple(records)


def _unit(rows: MixedRows, schema: Schema) -> np.ndarray:
    if _kinds(schema, Continuous) and rows.unit is None:
        raise ValueError("rows.unit must hold the continuous columns' public-scale values")
    return rows.unit if rows.unit is not None else np.full(rows.bins.shape, np.nan)


def probit_latent(u: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Link (6), zero-mean multinomial probit: category u ∈ {0..M−1} → (n, M−1) latent.

    u = 0: every coordinate N(0, 1) truncated to (−∞, 0). u = l ≥ 1: draw N(0, I)
    conditioned on max > 0 and argmax = l exactly: the max t has P(t ≤ s | t > 0) =
    (Φ(s)^{M−1} − 2^{−(M−1)})/(1 − 2^{−(M−1)}), so t = Φ⁻¹(U^{1/(M−1)}) with
    U ~ Unif(2^{−(M−1)}, 1); the other coordinates are N(0, 1) truncated to (−∞, t),
    drawn as Φ⁻¹(V·Φ(t)). t is kept ≥ 10⁻¹² so decoding (0 if max ≤ 0, else argmax)
    returns u for every draw.

    The number of draws is data-free: one U per row (rows with u = 0 leave theirs
    unused) and k V's per row, so row i's latent depends only on u_i and its own
    uniforms, never on how many other rows are positive. Otherwise replacing one record
    (0 ↔ l ≥ 1) would shift the draws of every later row, and the encodings of the
    unchanged rows of neighbouring tables would no longer be coupled.
    """
    k = m - 1
    pos = u > 0
    lo = 0.5**k
    t = np.zeros(len(u))
    draw = rng.random(len(u))
    t[pos] = np.maximum(ndtri((lo + (1 - lo) * draw[pos]) ** (1 / k)), _T_MIN)
    t = np.minimum(t, ndtri(1 - _U_FLOOR))
    out = ndtri(np.maximum(rng.random((len(u), k)) * ndtr(t)[:, None], _U_FLOOR))
    out[pos, u[pos] - 1] = t[pos]
    return out


def encode_rows(rows: MixedRows, schema: Schema, code: Code, *, rng: np.random.Generator) -> np.ndarray:
    """X* (n, p*), columns in schema order (a nominal column takes M − 1 coordinates).

    Continuous y* = (u − center)/spread (identity link (5) on the normalised scale);
    ordinal z* = Φ⁻¹(Unif(f_z, f_{z+1})), i.e. N(0, 1) truncated to [τ_z, τ_{z+1})
    (link (7)); nominal ``probit_latent``. Then clip to [−κ, κ] and divide by κ√p*, so
    ‖x*ᵢ‖₂ ≤ √(p*κ²)/(κ√p*) = 1 (corrected).
    """
    unit = _unit(rows, schema)
    blocks, c, o = [], 0, 0
    for j, col in enumerate(schema.columns):
        if isinstance(col, Continuous):
            blocks.append(((unit[:, j] - code.center[c]) / code.spread[c])[:, None])
            c += 1
        elif isinstance(col, Ordinal):
            cdf = code.encode_cdfs[o]
            latent = LatentCode((cdf,), (np.arange(col.n_bins),))
            blocks.append(to_latent(rows.bins[:, [j]], latent, rng.random((len(rows), 1))))
            o += 1
        else:
            blocks.append(probit_latent(rows.bins[:, j], col.n_bins, rng))
    x = np.hstack(blocks)
    if code.clip is not None:
        x = np.clip(x, -code.clip, code.clip)
    return x / code.row_scale


# ---------------------------------------------------------------- decoding (links (6)-(8))


def _rank_levels(z: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """Calibrated ordinal decoding: the k-th smallest of n values (k = 0..n−1) gets the
    level l with f̃_l ≤ (k + ½)/n < f̃_{l+1}, so each level's share is f̃_{l+1} − f̃_l
    within 1/n."""
    rank = np.empty(len(z), dtype=int)
    rank[np.argsort(z, kind="stable")] = np.arange(len(z))
    level = np.searchsorted(cdf, (rank + 0.5) / len(z), side="right") - 1
    return np.clip(level, 0, len(cdf) - 2)


def decode_latent(latent: np.ndarray, schema: Schema, code: Code, params: DPFMParams) -> MixedRows:
    """X̃* → mixed rows (post-processing). Continuous u = y*·spread + center clipped to
    [0, 1] (corrected: y/√12 + ½), bins via ``Continuous.to_bins(from_unit(u))``.
    Ordinal: by rank to match f̃ (``calibrate``), else eq. (8), level l iff
    τ̃_l ≤ z̃* < τ̃_{l+1}. Nominal (6): 0 if max ≤ 0, else 1 + argmax."""
    n = latent.shape[0]
    bins = np.empty((n, len(schema)), dtype=np.int32)
    unit = np.full((n, len(schema)), np.nan)
    start, c, o = 0, 0, 0
    for j, (col, width) in enumerate(zip(schema.columns, _widths(schema), strict=True)):
        block = latent[:, start : start + width]
        start += width
        if isinstance(col, Continuous):
            unit[:, j] = np.clip(block[:, 0] * code.spread[c] + code.center[c], 0.0, 1.0)
            bins[:, j] = col.to_bins(col.from_unit(unit[:, j]))
            c += 1
        elif isinstance(col, Ordinal):
            cdf = code.decode_cdfs[o]
            o += 1
            if params.calibrated:
                bins[:, j] = _rank_levels(block[:, 0], cdf)
            else:
                bins[:, j] = from_latent(block, LatentCode((cdf,), (np.arange(col.n_bins),)))[:, 0]
        else:
            bins[:, j] = np.where(block.max(axis=1) > 0, 1 + block.argmax(axis=1), 0)
    return MixedRows(bins, unit)
