"""``private_pca``: DP synthetic data near a private low-dimensional affine subspace.

He, Strohmer, Vershynin, Zhu, *Differentially private low-dimensional synthetic data
from high-dimensional datasets* (Algorithms 1–5, §6). Rows x ∈ [0, 1]^d (the public-box
design matrix, ``mechanisms.design``); replace-one neighbours, n public. Pure ε-DP: the
three stages compose (adaptively), ε = ε₁ + ε₂ + ε₃.

In one call: ``PrivatePCA().fit(rows, schema, plan, params, m=m, rng=rng)`` with ``plan =
accounting.plan_budget("pure", ε, 0, PrivatePCA().stage_weights(schema, params))``. A
numeric matrix in [0, 1]^d is a schema of d ``Continuous`` columns with bounds [0, 1] (its
design is the matrix itself; the output's ``unit`` is Y). The steps are the methods of
``PrivatePCA``; their states are ``Encoded`` (X and the
noisy covariance), ``Measured`` (``Fit.stages[1].state``: the released ``projection`` and
the measured tree or grid, ``counts``) and ``Lifted`` (the synthetic design rows Y).

Stages (ledger names, default weights ⅓ each, Alg 1's ε/3 split):

1. ``covariance`` (Alg 2, ε₁): the centred covariance M plus a symmetric Laplace matrix
   (``subspace``).
2. ``mean`` (Alg 3, ε₂): the mean plus Laplace noise. Then, as post-processing, V̂ = the
   top-d' eigenvectors of M̂, R = √d + ‖X̄_priv‖₂, d' given or by the §6 rule.
3. ``measure`` (ε₃): PMM (Alg 4, ``pmm``): discrete-Laplace counts of a = V̂ᵀ(x − X̄_priv)
   in every level of a binary partition of [−R, R]^{d'}; or PSMM (Alg 5, ``psmm``;
   ``subroutine`` "psmm", or "auto" with d' ≥ 3): discrete-Laplace counts on a grid and a
   bounded-Lipschitz LP. Then, as post-processing: points in the cells, lifted back with
   the same private mean and clipped to [0, 1]^d (``stages``).

Paper defects (variant ``"corrected"`` fixes them; ``"paper"`` keeps them and marks its
measurements with a ``defect``), one line each:

* Alg 4's σ_j are not normalised (the tree costs ε·S, S > 1): rescaled so Σ_j Δ/σ_j = ε₃.
* Alg 4 counts with sensitivity 1 (add/remove); under replace-one each level's is 2; the
  root count n is public and used without noise.
* Alg 5's Lap_Z(1/ε₃) on the grid counts has sensitivity 1; replace-one needs Lap_Z(2/ε₃).
* Prop 3.3's proof's Lap(1/(εn)) on the mean is a typo for Alg 3's Lap(d/(ε₂n)) (both
  variants use Alg 3).
* §6's singular values of the indefinite M̂: algebraic eigenvalues instead, for d' and V̂.

Derivations, the defects in full, the underspecified choices and the PSMM cell cap:
``docs/proofs/private_pca.md``. Noise comes from the primitives (OpenDP's vetted samplers
unless the release uses ``--insecure-seed``; ``sampler_note``).
"""

from __future__ import annotations

from dprelease.mechanisms.private_pca.params import (
    MAX_DEPTH,
    PSMM_MAX_CELLS,
    STAGE_WEIGHTS,
    PrivatePCAParams,
)
from dprelease.mechanisms.private_pca.pmm import (
    LevelPlan,
    NoisyTree,
    allocate,
    consistent_counts,
    default_depth,
    discrete_laplace,
    leaf_points,
    level_counts,
    level_plan,
    measure_tree,
    paper_defects,
    pmm,
    pmm_points,
)
from dprelease.mechanisms.private_pca.psmm import (
    NoisyGrid,
    SubroutineChoice,
    choose_subroutine,
    closest_probability,
    grid_counts,
    measure_grid,
    psmm,
    psmm_delta,
    psmm_delta_for_cells,
    psmm_grid,
    psmm_grid_size,
    psmm_points,
    psmm_sample,
    psmm_scale,
    round_measure,
)
from dprelease.mechanisms.private_pca.stages import (
    Encoded,
    Lifted,
    Measured,
    PrivatePCA,
    sensitivities,
)
from dprelease.mechanisms.private_pca.subspace import (
    Projection,
    adaptive_dims,
    covariance,
    covariance_sensitivity,
    lift,
    noisy_covariance,
    private_covariance,
    private_mean,
    private_projection,
    project,
    top_eigenvectors,
)
from dprelease.mechanisms.private_pca.subspace import _triangle as _triangle

__all__ = [
    "MAX_DEPTH",
    "PSMM_MAX_CELLS",
    "STAGE_WEIGHTS",
    "Encoded",
    "LevelPlan",
    "Lifted",
    "Measured",
    "NoisyGrid",
    "NoisyTree",
    "PrivatePCA",
    "PrivatePCAParams",
    "Projection",
    "SubroutineChoice",
    "adaptive_dims",
    "allocate",
    "choose_subroutine",
    "closest_probability",
    "consistent_counts",
    "covariance",
    "covariance_sensitivity",
    "default_depth",
    "discrete_laplace",
    "grid_counts",
    "leaf_points",
    "level_counts",
    "level_plan",
    "lift",
    "measure_grid",
    "measure_tree",
    "noisy_covariance",
    "paper_defects",
    "pmm",
    "pmm_points",
    "private_covariance",
    "private_mean",
    "private_projection",
    "project",
    "psmm",
    "psmm_delta",
    "psmm_delta_for_cells",
    "psmm_grid",
    "psmm_grid_size",
    "psmm_points",
    "psmm_sample",
    "psmm_scale",
    "round_measure",
    "sensitivities",
    "top_eigenvectors",
]
