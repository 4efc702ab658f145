"""``spectral_anonymization``: exact invariants of SA_P, SA_J, SA_O, the sphere sampler
against the literal Haar matrix, match rates against their exact laws, Theorems 1–2
(targets and a Monte Carlo check), record linkage and the four pipeline stages."""

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms import spectral as sa
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import design
from dprelease.mechanisms.schema import Continuous, Schema
from tests.mechanisms.small import SMALL, small_rows

ALL = [sa.SpectralParams("P"), sa.SpectralParams("J"), sa.SpectralParams("O"), sa.SpectralParams("O", True)]
IDS = ["P", "J", "O-sphere", "O-haar"]


def _normal(n: int, sigma: np.ndarray, rng: np.random.Generator, mu: float = 3.0) -> np.ndarray:
    """Rows iid N_p(μ1, Σ)."""
    return mu + rng.standard_normal((n, len(sigma))) @ np.linalg.cholesky(sigma).T


def _run(x: np.ndarray, params: sa.SpectralParams, rng: np.random.Generator) -> np.ndarray:
    spec = sa.spectrum(x)
    return sa.reconstruct(spec, sa.transform_columns(spec.u, params, rng))


SIGMA3 = np.array([[2.0, 0.6, 0.2], [0.6, 1.0, -0.3], [0.2, -0.3, 0.5]])


# ---------------------------------------------------------------- parameters and metadata


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"method": "Q"}, "method"), ({"haar": "yes"}, "haar"), ({"method": "P", "haar": True}, "haar")],
)
def test_bad_params_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=rf"params\.{name} "):
        sa.SpectralParams(**kwargs)


def test_anonymize_validates_the_method(rng):
    with pytest.raises(ValueError, match=r"params\.method "):
        sa.anonymize(np.zeros((3, 2)), "Q", rng)


@pytest.mark.parametrize("params", ALL, ids=IDS)
def test_not_dp_always_has_defects_and_spends_nothing(params):
    found = sa.defects(params)
    assert found and "no DP guarantee" in found[0]
    assert sa.Spectral().stage_weights(Schema((Continuous("x", 0.0, 1.0),)), params) == {}
    assert sa.Spectral().notions == ("pure",) and sa.Spectral().keeps_row_order
    assert sa.SpectralParams().method == "O" and sa.SpectralParams().sampler == "sphere"


# ---------------------------------------------------------------- exact invariants


@pytest.mark.parametrize("params", ALL, ids=IDS)
def test_spectral_variances_are_exact_and_the_p_mean_too(params, rng):
    """‖(X_A − 1x̄ᵀ)v_k‖² = d_k² for all A (‖T u_k‖ = 1); P keeps x̄ (1ᵀPu = 0), so its
    covariance trace (divisor n) is Σd_k²/n; for J and O the trace is that minus
    ‖x̄_A − x̄‖² (the mean moves and is not re-centred)."""
    x = _normal(60, SIGMA3, rng)
    spec = sa.spectrum(x)
    x_a = _run(x, params, rng)
    mean = x.mean(axis=0)
    np.testing.assert_allclose(np.sum(((x_a - mean) @ spec.v) ** 2, axis=0), spec.d**2, rtol=1e-10)
    shift = x_a.mean(axis=0) - mean
    trace = np.trace(np.cov(x_a.T, bias=True))
    np.testing.assert_allclose(trace, np.sum(spec.d**2) / 60 - shift @ shift, rtol=1e-10)
    if params.method == "P":
        np.testing.assert_allclose(shift, 0.0, atol=1e-12)
    else:
        assert np.linalg.norm(shift) > 1e-3
    off = spec.v.T @ np.cov(x_a.T, bias=True) @ spec.v  # cross terms u_kᵀT_kᵀT_l u_l ≠ 0
    assert np.abs(off[np.triu_indices(3, 1)]).min() > 1e-6


@pytest.mark.parametrize("params", ALL, ids=IDS)
def test_rank_deficient_data_use_only_the_nonzero_components(params, rng):
    """Collinear columns (x₃ = x₁ − 2x₂) and n < p: only r = rank(HX) components exist;
    the output stays in x̄ + span(V), so the null direction w of HX has Xw constant."""
    x = _normal(40, SIGMA3[:2, :2], rng)
    x = np.column_stack([x, x[:, 0] - 2 * x[:, 1]])
    spec = sa.spectrum(x)
    assert spec.rank == 2 and spec.u.shape == (40, 2)
    x_a = _run(x, params, rng)
    w = np.array([1.0, -2.0, -1.0])
    np.testing.assert_allclose(x_a @ w, x.mean(axis=0) @ w, atol=1e-10)
    wide = rng.standard_normal((3, 5))
    assert sa.spectrum(wide).rank == 2
    assert _run(wide, params, rng).shape == (3, 5)
    np.testing.assert_allclose(_run(np.ones((4, 2)), params, rng), 1.0)  # rank 0: every row is x̄


@pytest.mark.parametrize("params", [ALL[0], ALL[1], ALL[3]], ids=["P", "J", "O-haar"])
def test_svd_signs_do_not_matter(params, rng):
    """A joint flip (u_k, v_k) → (−u_k, −v_k) gives the same output for the same draws
    T_k (the sphere sampler ignores u_k; its law is symmetric)."""
    spec = sa.spectrum(_normal(30, SIGMA3, rng))
    flip = np.array([1.0, -1.0, -1.0])
    flipped = sa.Spectrum(spec.mean, spec.u * flip, spec.d, spec.v * flip)
    seed = int(rng.integers(2**32))
    a = sa.reconstruct(spec, sa.transform_columns(spec.u, params, np.random.default_rng(seed)))
    b = sa.reconstruct(flipped, sa.transform_columns(flipped.u, params, np.random.default_rng(seed)))
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_o_depends_on_the_data_only_through_mean_singular_values_and_v(rng):
    """X and X' = 1x̄ᵀ + U'DVᵀ with another U' (orthonormal, ⊥ 1) have the same (x̄, D, V):
    O-SA (sphere) gives the same output for the same rng; P and J do not."""
    n = 50
    x = _normal(n, SIGMA3, rng)
    spec = sa.spectrum(x)
    basis = np.linalg.qr(np.column_stack([np.ones(n), rng.standard_normal((n, 3))]))[0][:, 1:]
    x2 = spec.mean + (basis * spec.d) @ spec.v.T
    spec2 = sa.spectrum(x2)
    np.testing.assert_allclose(spec2.d, spec.d, rtol=1e-12)
    assert np.abs(spec2.u - spec.u).max() > 0.1
    seed = int(rng.integers(2**32))
    for params in ALL[:3]:
        a = sa.anonymize(x, params.method, np.random.default_rng(seed))
        b = sa.anonymize(x2, params.method, np.random.default_rng(seed))
        assert np.allclose(a, b, atol=1e-9) == (params.method == "O")


# ---------------------------------------------------------------- the O sampler


def _sphere_coordinate_ks(y: np.ndarray) -> float:
    """KS p-value of the first coordinate against its law on S^{n−1}:
    (y₁ + 1)/2 ~ Beta((n−1)/2, (n−1)/2)."""
    a = (y.shape[1] - 1) / 2
    return stats.kstest((y[:, 0] + 1) / 2, stats.beta(a, a).cdf).pvalue


@pytest.mark.parametrize(
    "u", [np.eye(4)[0], np.array([1.0, -1.0, 0.0, 0.0]) / np.sqrt(2)], ids=["e1", "perp1"]
)
def test_sphere_and_haar_samplers_have_the_same_law(u, rng):
    """T u for Haar T (QR with the sign fix) and g/‖g‖ both follow the uniform law on
    S^{n−1} (n = 4, 3000 draws): a KS test of one coordinate against Beta(3/2, 3/2) and
    E[yyᵀ] = I/n (sd(y_i y_j) ≤ 1/4 as E y_i⁴ = 3/(n(n + 2)) = 1/8, so 4 SE ≤ 1/√R).
    Without the sign fix the QR's Q is not Haar and the test fails decisively."""
    n, reps = 4, 3000
    haar = np.array([sa.haar_orthogonal(n, rng) @ u for _ in range(reps)])
    params = sa.SpectralParams("O")
    sphere = np.array([sa.transform_columns(u[:, None], params, rng)[:, 0] for _ in range(reps)])
    for y in (haar, sphere):
        np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, rtol=1e-12)
        assert _sphere_coordinate_ks(y) > 1e-4
        np.testing.assert_allclose(y.T @ y / reps, np.eye(n) / n, atol=1 / np.sqrt(reps))
    assert stats.ks_2samp(haar[:, 1], sphere[:, 1]).pvalue > 1e-4
    unfixed = np.linalg.qr(rng.standard_normal((reps, n, n)))[0] @ u
    assert _sphere_coordinate_ks(unfixed) < 1e-6


def test_haar_matrix_is_orthogonal(rng):
    q = sa.haar_orthogonal(7, rng)
    np.testing.assert_allclose(q.T @ q, np.eye(7), atol=1e-12)


# ---------------------------------------------------------------- record linkage


def test_linkage_counts_distances_matches_and_correct_links():
    x = np.array([[0.0, 0.0], [3.0, 4.0], [10.0, 0.0]])
    x_a = np.array([[3.0, 4.0], [0.0, 0.0], [10.0, 1.0]])  # rows 0, 1 copy other rows
    euc, match, correct = sa.linkage(x_a, x)
    assert euc == pytest.approx(1 / 3) and match == pytest.approx(2 / 3) and correct == pytest.approx(1 / 3)
    assert sa.linkage(x + 5e-7, x)[1:] == (1.0, 1.0)
    assert sa.linkage(x + 1e-6, x)[1] == 0.0


def test_j_copies_each_row_with_probability_two_to_the_minus_p(rng):
    """J-SA returns x_i exactly iff all p signs of row i are +1: per data set the match
    count is Binomial(n, 2^{−p}); 10 data sets of n = 1000, p = 3 pool to
    Binomial(10⁴, 1/8), SD 33. A copy is of row i itself, so correct links ≥ matches."""
    n, reps = 1000, 10
    count = 0
    for _ in range(reps):
        x = _normal(n, SIGMA3, rng)
        _, match, correct = sa.linkage(sa.anonymize(x, "J", rng), x)
        count += round(match * n)
        assert correct >= match
    expected, sd = n * reps / 8, np.sqrt(n * reps * (1 / 8) * (7 / 8))
    assert abs(count - expected) < 4 * sd


def test_p_matches_are_the_fixed_points_of_a_random_permutation(rng):
    """P-SA (p = 2) copies x_j into row i iff π₁(i) = π₂(i) = j: the match count is the
    number of fixed points of π₂⁻¹π₁, mean 1 and variance 1 (so the rate ≈ n^{1−p});
    400 data sets give a mean within 4/√400 of 1. O-SA never copies a row."""
    n, reps = 50, 400
    sigma = np.diag([2.0, 1.0])
    counts, o_matches = [], 0.0
    for _ in range(reps):
        x = _normal(n, sigma, rng)
        counts.append(round(sa.linkage(sa.anonymize(x, "P", rng), x)[1] * n))
        o_matches += sa.linkage(sa.anonymize(x, "O", rng), x)[1]
    assert abs(np.mean(counts) - 1.0) < 4 / np.sqrt(reps)
    assert abs(np.var(counts) - 1.0) < 0.5
    assert o_matches == 0.0
    x = _normal(30, sigma, rng)
    assert sa.linkage(sa.anonymize(x, "O", rng, haar=True), x)[1] == 0.0


# ---------------------------------------------------------------- theory targets


def test_commutation_matrix(rng):
    p = 3
    k = sa.commutation_matrix(p)
    a, b = rng.standard_normal((p, p)), rng.standard_normal((p, p))
    np.testing.assert_array_equal(k @ a.ravel(order="F"), a.T.ravel(order="F"))
    np.testing.assert_array_equal(k @ k, np.eye(p * p))
    np.testing.assert_allclose(k @ np.kron(a, b) @ k, np.kron(b, a), atol=1e-14)


def test_targets_match_the_paper_for_p_2():
    """Eq. (2) with O = I: G₀ has 2λ₁², 2λ₂² and λ₁λ₂ in the cross block; G_SA has 2λ₁λ₂."""
    l1, l2 = 3.0, 1.5
    sigma = np.diag([l1, l2])
    c = l1 * l2
    np.testing.assert_allclose(
        sa.g0(sigma), [[2 * l1**2, 0, 0, 0], [0, c, c, 0], [0, c, c, 0], [0, 0, 0, 2 * l2**2]], atol=1e-12
    )
    np.testing.assert_allclose(
        sa.g_sa(sigma),
        [[2 * l1**2, 0, 0, 0], [0, 2 * c, 2 * c, 0], [0, 2 * c, 2 * c, 0], [0, 0, 0, 2 * l2**2]],
        atol=1e-12,
    )
    np.testing.assert_array_equal(sa.mean_target(sigma, "original"), sigma)
    np.testing.assert_array_equal(sa.mean_target(sigma, "P"), sigma)
    np.testing.assert_array_equal(sa.mean_target(sigma, "J"), 2 * sigma)
    np.testing.assert_array_equal(sa.mean_target(sigma, "O"), 2 * sigma)


def test_targets_rotate_with_sigma_and_need_the_eigen_root():
    """G₀ = (I + K)(Σ⊗Σ) for any root; G_SA is (O⊗O)G_SA(Λ)(O⊗O)ᵀ for Σ = OΛOᵀ, which the
    symmetric root Σ^{1/2} would not give (the V_p term depends on the root)."""
    lam, o = np.linalg.eigh(SIGMA3)
    oo = np.kron(o, o)
    np.testing.assert_allclose(
        sa.g0(SIGMA3), (np.eye(9) + sa.commutation_matrix(3)) @ np.kron(SIGMA3, SIGMA3), atol=1e-12
    )
    np.testing.assert_allclose(sa.g_sa(SIGMA3), oo @ sa.g_sa(np.diag(lam)) @ oo.T, atol=1e-12)
    sym = o @ np.diag(np.sqrt(lam)) @ o.T
    rr = np.kron(sym, sym)
    v_term = rr @ np.diag(np.eye(3).ravel(order="F")) @ rr.T
    wrong = 2 * sa.g0(SIGMA3) - 2 * v_term
    assert np.abs(wrong - sa.g_sa(SIGMA3)).max() > 0.1


def test_monte_carlo_agrees_with_theorems_1_and_2(rng):
    """n = 200, p = 2, Σ = diag(2, 1), 1500 data sets. var √n x̄_A: P equals the original
    (Σ); J and O have exactly (2 − 1/n)Σ for normal data (x̄ + (1/n)Σ_k d_k v_k·1ᵀT_k u_k
    with E(1ᵀT_k u_k)² = 1, independent of x̄), → 2Σ. var √n S_A: 2λ₁², 2λ₁λ₂ = 4 (twice
    the original 2), 2λ₂². Tolerance: 4 Monte Carlo SEs of each variance, se =
    sd((y − ȳ)²)/√R, plus 5% for the O(1/n) finite-sample bias of the S terms."""
    n, reps = 200, 1500
    sigma = np.diag([2.0, 1.0])
    mu = 3.0
    methods = ["original", "P", "J", "O"]
    means = {m: np.empty((reps, 2)) for m in methods}
    covs = {m: np.empty((reps, 4)) for m in methods}
    for r in range(reps):
        x = _normal(n, sigma, rng, mu)
        for m in methods:
            y = x if m == "original" else sa.anonymize(x, m, rng)
            means[m][r] = np.sqrt(n) * (y.mean(axis=0) - mu)
            covs[m][r] = np.sqrt(n) * (np.cov(y.T, bias=True) - sigma).ravel(order="F")

    def check(samples: np.ndarray, target: np.ndarray, slack: float) -> None:
        centred = (samples - samples.mean(axis=0)) ** 2
        se = centred.std(axis=0) / np.sqrt(reps)
        assert np.all(np.abs(centred.mean(axis=0) - target) < 4 * se + slack * target), (
            centred.mean(axis=0),
            target,
        )

    for m in methods:
        exact = sa.mean_target(sigma, m) * (1 - 1 / (2 * n) if m in ("J", "O") else 1.0)
        check(means[m], np.diag(exact), 0.0)
        cov_target = sa.g0(sigma) if m == "original" else sa.g_sa(sigma)
        check(covs[m][:, [0, 1, 3]], np.diag(cov_target)[[0, 1, 3]], 0.05)
    np.testing.assert_allclose(means["P"], means["original"], atol=1e-10)


# ---------------------------------------------------------------- the four pipeline stages


def _stages(rows, params, rng, m=None):
    s = sa.Spectral()
    plan = plan_budget("pure", 1.0, 0.0, s.stage_weights(SMALL, params))
    enc = s.encode(rows, SMALL, plan, params, rng)
    est = s.estimate(enc.state, plan, params, rng)
    smp = s.sample(est.state, params, len(rows) if m is None else m, rng)
    out = s.decode(smp.state, SMALL, params, rng)
    return out, smp.state.x, (enc, est, smp)


@pytest.mark.parametrize("params", ALL, ids=IDS)
def test_four_stages_release_one_valid_row_per_input_row(params, rng):
    """Design width 8; the two one-hot blocks each lose a centred dimension, so rank 6.
    The output lies in x̄ + span(V), so every one-hot block of every row still sums to 1."""
    rows = small_rows(60, rng)
    out, latent, stages = _stages(rows, params, rng)
    assert all(st.measurements == () for st in stages)
    facts = {k: v for st in stages for k, v in st.facts.items()}
    assert facts == {"design_width": 8, "rank_used": 6, "method": params.method, "sampler": params.sampler}
    assert out.bins.shape == rows.bins.shape
    assert np.all(out.bins >= 0) and np.all(out.bins < np.array(SMALL.n_bins))
    assert np.all((out.unit[:, :2] >= 0) & (out.unit[:, :2] <= 1)) and np.isnan(out.unit[:, 2:]).all()
    for j in (0, 1):
        col = SMALL.columns[j]
        np.testing.assert_array_equal(out.bins[:, j], col.to_bins(col.from_unit(out.unit[:, j])))
    for block in design(SMALL).blocks[3:]:
        np.testing.assert_allclose(latent[:, block].sum(axis=1), 1.0, atol=1e-10)
    if params.method == "P":
        np.testing.assert_allclose(latent.mean(axis=0), design(SMALL).encode(rows).mean(axis=0), atol=1e-12)


def test_sample_refuses_a_different_row_count(rng):
    with pytest.raises(ValueError, match=r"exactly one row per input row.*remove synthetic_rows"):
        _stages(small_rows(30, rng), sa.SpectralParams(), rng, m=31)
