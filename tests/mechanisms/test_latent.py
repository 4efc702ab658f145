import numpy as np
import pytest
from scipy.stats import multivariate_normal

from dprelease.mechanisms.factor_model import bound_rows
from dprelease.mechanisms.latent import (
    from_latent,
    hermite_coefficients,
    latent_code,
    latent_correlation,
    to_latent,
)


def _exact_code(bins, n_bins, nominal):
    dists = [np.bincount(bins[:, j], minlength=k) / len(bins) for j, k in enumerate(n_bins)]
    return latent_code(dists, nominal)


def test_encode_decode_without_noise_reproduces_every_row(rng):
    n_bins = [2, 5, 40, 7]
    probs = [rng.dirichlet(np.ones(k)) for k in n_bins]
    bins = np.column_stack([rng.choice(k, size=5000, p=p) for k, p in zip(n_bins, probs, strict=True)])
    code = _exact_code(bins, n_bins, [True, False, False, True])
    z = to_latent(bins, code, rng.random(bins.shape))
    np.testing.assert_allclose(z.mean(0), 0, atol=4 / np.sqrt(5000))  # z ~ N(0, 1) per column
    np.testing.assert_array_equal(from_latent(z, code), bins)


def test_marginals_survive_the_default_clip_and_row_bound(rng):
    """With c = 4 and B = √p, only rows pushed across a bin edge change; the marginals
    move by at most the mass the clip and row scaling can displace."""
    n_bins = [3, 16, 64]
    bins = np.column_stack([rng.integers(0, k, size=20000) for k in n_bins])
    code = _exact_code(bins, n_bins, [False] * 3)
    z = bound_rows(to_latent(bins, code, rng.random(bins.shape)), 4.0, np.sqrt(3))
    back = from_latent(z, code)
    for j, k in enumerate(n_bins):
        before = np.bincount(bins[:, j], minlength=k) / len(bins)
        after = np.bincount(back[:, j], minlength=k) / len(bins)
        moved = np.mean(np.linalg.norm(to_latent(bins, code, rng.random(bins.shape)), axis=1) > np.sqrt(3))
        assert 0.5 * np.abs(before - after).sum() <= moved


def test_nominal_categories_are_ordered_by_private_frequency():
    code = latent_code([np.array([0.1, 0.6, 0.3])], [True])
    np.testing.assert_array_equal(code.orders[0], [1, 2, 0])
    np.testing.assert_allclose(code.cdfs[0], [0, 0.6, 0.9, 1.0])


def test_hermite_coefficients_of_a_median_binary_column():
    """s(Z) = ±√(2/π) for a median split: d₁ = Var(s) = 2/π and even terms vanish."""
    d = hermite_coefficients(latent_code([np.array([0.5, 0.5])], [False]))[0]
    assert d[0] == pytest.approx(2 / np.pi)
    np.testing.assert_allclose(d[1::2], 0, atol=1e-12)
    # Parseval: Σₖ dₖ² → Var(s); a step's dₖ² decays like k^(-3/2), so K = 40 misses ~8 %
    assert 0.9 * 2 / np.pi < np.sum(d**2) <= 2 / np.pi


@pytest.mark.parametrize("r", [-0.8, -0.3, 0.0, 0.4, 0.6, 0.9])
def test_latent_correlation_inverts_the_exact_binary_relation(r):
    """Median-split binaries: E[s₁s₂] = (2/π)·(2/π)·arcsin(r) (Sheppard); inverting must
    give r back up to the truncation of the series."""
    d = hermite_coefficients(latent_code([np.array([0.5, 0.5])] * 2, [False, False]))
    observed = (2 / np.pi) ** 2 * np.arcsin(r)
    got = latent_correlation(np.array([[1, observed], [observed, 1]]), d)[0, 1]
    assert got == pytest.approx(r, abs=0.01)


def test_latent_correlation_recovers_r_from_sampled_scores(rng):
    """Coarse columns cut from a bivariate normal with r = 0.6: the jittered scores
    correlate far below r; the inversion recovers r within sampling error
    (s.d. of a correlation ≈ (1 − r²)/√n, times ≈ 1/a⁴ ≤ 2.5 for these cuts)."""
    r, n = 0.6, 200_000
    x = multivariate_normal([0, 0], [[1, r], [r, 1]]).rvs(n, random_state=rng)
    bins = np.column_stack([(x[:, 0] > 0), np.digitize(x[:, 1], [-1.0, 0.3])]).astype(np.int32)
    code = _exact_code(bins, [2, 3], [False, False])
    z = to_latent(bins, code, rng.random(bins.shape))
    observed = np.corrcoef(z.T)
    assert observed[0, 1] < 0.45  # badly shrunk without the correction
    got = latent_correlation(observed, hermite_coefficients(code))[0, 1]
    tol = 5 * 2.5 * (1 - r**2) / np.sqrt(n) + 0.01  # 5 s.d. plus series truncation
    assert got == pytest.approx(r, abs=tol)
