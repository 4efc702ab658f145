"""``dpfm``: DP mixed-type data through a latent factor model (Zhang, Xu, Tang, Qu; JMLR).

The paper (its Algorithm 3) encodes each row into a latent vector x*ᵢ with link
functions (5)–(7), releases noisy top-r eigenvectors of X*ᵀX* (Alg. 1, ε₁) and noisy
factor scores X*Ṽ (ε₂), rebuilds X̃* = W̃Ṽᵀ, and decodes ordinal columns with noisy
cumulative frequencies (Alg. 2, ε₃). Output row i is computed from input row i.

Stages (ledger names; default weights ⅓ each, DPFM1; ½ / ½ without ordinal columns):

1. ``thresholds`` (Alg. 2, only with ordinal columns): the ordinal cumulative
   frequencies, jointly, with i.i.d. noise (``thresholds``).
2. encoding (post-processing): rows → X* through the links with the private thresholds,
   clipped and scaled so ‖x*ᵢ‖₂ ≤ 1 (``links``).
3. ``loadings`` (Alg. 1 step 2): noisy top-r eigenvectors Ṽ (``factors``).
4. ``scores`` (Alg. 1 step 3): noisy factor scores X*Ṽ; then X̃* = W̃Ṽᵀ, decoded
   (post-processing).

Pure ε-DP (Laplace) or ρ-zCDP (Gaussian); the stages compose (adaptively) to Σε or Σρ.

The steps are the methods of ``DPFM``; their states are
``Encoded`` (X* and its code), ``Factored`` (with the released Ṽ) and ``Latent`` (X̃*).
In one call: ``DPFM().fit(rows, schema, plan, params, m=n, rng=rng)`` with ``plan =
accounting.plan_budget(notion, ε, δ, stage_weights(schema, params))``; the paper's DPFM2–4
splits are ``stage_weights(schema, params, shares=(ε₁, ε₂, ε₃))``. ``internals(fit)``
reads the latent matrix and the exact loadings for diagnostics; ``fit_without_noise`` is
the ε = ∞ ablation (not private, not a release).
Variant ``corrected`` (default) is DP; ``paper`` (NOT DP, pure only) runs the algorithm
as printed and records every defect (an ``unprotected`` value or a ``defect``).

Paper defects and the correction, one line each (the paper's
section 5; proofs ``docs/proofs/dpfm.md``):

1. continuous columns normalised with the data's mean and SD → the public scale √12(u − ½);
2. encoding thresholds from raw ordinal frequencies → Alg. 2 first, encode with τ̃;
3. Alg. 2 sorts its Laplace noise (unbounded loss) → i.i.d. noise, isotonic post-processing;
4. Alg. 2 spends ε₃ per ordinal column → all columns jointly under one ε₃;
5. Lemma 6 assumes ‖x*ᵢ‖₂ ≤ 1, never enforced → clip to [−κ, κ], divide by κ√p*;
6. r by eq. (3) and ω ∝ eigenvalues from raw data → r public, ω_i = 1/r;
7. Lemma 6's Δ₁ = 2r is loose → 2√r;
8. N(0, 1) thresholds on a shrunk/inflated latent → levels by rank (``calibrate``).

The defects in full and the privacy argument: ``docs/proofs/dpfm.md``.
"""

from __future__ import annotations

from dprelease.mechanisms.dpfm.budget import DPFM1, stage_weights
from dprelease.mechanisms.dpfm.factors import (
    choose_factors,
    loadings_sensitivity,
    private_loadings,
    private_scores,
    reconstruct,
    scores_sensitivity,
    top_eigenvectors,
)
from dprelease.mechanisms.dpfm.links import Code, decode_latent, encode_rows, make_code, probit_latent
from dprelease.mechanisms.dpfm.params import FACTOR_THRESHOLD, DPFMParams, defects, encoded_width
from dprelease.mechanisms.dpfm.stages import (
    DPFM,
    Encoded,
    Factored,
    Internals,
    Latent,
    fit_without_noise,
    internals,
    sensitivities,
)
from dprelease.mechanisms.dpfm.thresholds import (
    cumulative_frequencies,
    measure_thresholds,
    monotone_cdf,
    sorted_noise_cdf,
    threshold_sensitivity,
)

__all__ = [
    "DPFM",
    "DPFM1",
    "FACTOR_THRESHOLD",
    "Code",
    "DPFMParams",
    "Encoded",
    "Factored",
    "Internals",
    "Latent",
    "choose_factors",
    "cumulative_frequencies",
    "decode_latent",
    "defects",
    "encode_rows",
    "encoded_width",
    "fit_without_noise",
    "internals",
    "loadings_sensitivity",
    "make_code",
    "measure_thresholds",
    "monotone_cdf",
    "private_loadings",
    "private_scores",
    "probit_latent",
    "reconstruct",
    "scores_sensitivity",
    "sensitivities",
    "sorted_noise_cdf",
    "stage_weights",
    "threshold_sensitivity",
    "top_eigenvectors",
]
