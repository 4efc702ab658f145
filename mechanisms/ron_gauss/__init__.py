"""``ron_gauss``: RON-Gauss (Chanyaswad, Liu, Mittal, PoPETs 2019): a random orthonormal
(RON) projection of bounded, privately centred rows and a private Gaussian model of the
projection (Alg 3), of the projection and a real label (Alg 4) or one Gaussian per class
(Alg 5), sampled and mapped back to the schema's columns.

Stages (ledger names; default weights 0.3 / 0.7, the paper's ε_μ = 0.3ε, ε_Σ = 0.7ε; for
classification 0.1 / 0.27 / 0.63):

1. ``class_counts`` (classification only): noisy class counts ñ_c (``centring``).
2. ``mean`` (Alg 1): rows of the public-box design (the label held out) scaled into the
   unit ball, the private mean μ (per-class sums for Alg 5), rows centred by it and
   bounded again (``centring``).
3. ``covariance`` (Alg 2, Eq. 2–3): a data-independent W, x̃ = Wᵀx̄, and the noisy second
   moment of x̃, of [x̃; y], or per class (``moments``).
4. sampling and decoding (post-processing): Σ repaired to PSD, x̃ ~ N(0, Σ),
   x̂ = μ + Wx̃, decoded, the label back in its column (``model``, ``stages``).

Pure ε-DP (Laplace) or ρ-zCDP (Gaussian); replace-one neighbours, n public; the stages
compose (adaptively) to Σε_i or Σρ_i.

The steps are the methods of ``RonGauss``. In one call:
``RonGauss().fit(rows, schema, plan, params, m=m, rng=rng)`` with ``plan =
accounting.plan_budget(notion, ε, δ, RonGauss().stage_weights(schema, params))`` (another
ε_μ : ε_Σ split: ``stage_weights(task, variant, weights)``). A numeric matrix in a public
box [a, b]^m is a schema of m ``Continuous`` columns with those bounds (the design is then
(x − a)/(b − a), with row bound √m). ``Fit.stages[0].state`` is an ``Encoded`` (the
centred rows: confidential), ``Fit.stages[1].state`` the ``RonGaussModel`` (``project``
maps test rows into its R^p), ``Fit.stages[2].state`` a ``Sample``.

Where the paper is wrong (variant ``"corrected"`` fixes it; ``"paper"`` reproduces it,
is pure-DP only, and its measurements carry a ``defect``), one line each:

* Lemma 4 / 5's Δ₁ for the second moment is too small from p = 3: a proven Δ on the upper triangle.
* iid noise on all p² entries gives an asymmetric, indefinite Σ: symmetrised, eigenvalues clipped at 0.
* Alg 5 / Thm 5 use the class sizes n_c without noise: measured ñ_c, noisy sums divided by them.
* Alg 2's QR of U(0, 1) entries is not Haar: Gaussian entries with the sign fix (no privacy effect).
* Alg 5 step 1(c) reads as a fresh W per class: one shared W.
* Alg 1 puts rows on the unit sphere (norms lost): divide by the public bound, clip to the ball.
* p tuned on the real data (non-private): Meckes' rule, public (``default_dims``).

The defects in full and the privacy argument: ``docs/proofs/ron_gauss.md``.
"""

from __future__ import annotations

from dprelease.mechanisms.ron_gauss.centring import Centred, centre, class_sums, mean_sensitivity
from dprelease.mechanisms.ron_gauss.centring import _bounded as _bounded
from dprelease.mechanisms.ron_gauss.centring import _recentred as _recentred
from dprelease.mechanisms.ron_gauss.model import (
    RonGaussModel,
    build_model,
    project,
    psd_repair,
    reconstruct,
    sample_projected,
)
from dprelease.mechanisms.ron_gauss.moments import (
    covariance_sensitivity,
    default_dims,
    haar_projection,
    measure_covariance,
    moment_statistic,
    uniform_qr_projection,
)
from dprelease.mechanisms.ron_gauss.params import (
    CLASS_COUNT_SHARE,
    CLASS_SIZE_DEFECT,
    LEMMA4_DEFECT,
    LEMMA5_DEFECT,
    RonGaussParams,
    defects,
    stage_weights,
)
from dprelease.mechanisms.ron_gauss.stages import Encoded, RonGauss, Sample, check, sensitivities

__all__ = [
    "CLASS_COUNT_SHARE",
    "CLASS_SIZE_DEFECT",
    "LEMMA4_DEFECT",
    "LEMMA5_DEFECT",
    "Centred",
    "Encoded",
    "RonGauss",
    "RonGaussModel",
    "RonGaussParams",
    "Sample",
    "build_model",
    "centre",
    "check",
    "class_sums",
    "covariance_sensitivity",
    "default_dims",
    "defects",
    "haar_projection",
    "mean_sensitivity",
    "measure_covariance",
    "moment_statistic",
    "project",
    "psd_repair",
    "reconstruct",
    "sample_projected",
    "sensitivities",
    "stage_weights",
    "uniform_qr_projection",
]
