"""The noise source is a property of the rng: ``VettedRNG`` → OpenDP's samplers, a plain
numpy Generator → numpy's (seeded, reproducible).

OpenDP's noise cannot be seeded, so its distribution tests are one-sample
Kolmogorov–Smirnov tests at significance α = 1e-4 (a correct sampler fails one with
probability 1e-4). Each also runs a positive control: the same sample against the
distribution at 1.2× the scale must be rejected at the same α. The sample sizes are chosen
so that the control's expected KS distance is ≥ 5 standard errors beyond the critical value
(Laplace n = 20 000: distance 0.034 vs critical 0.016; Gaussian n = 12 000: 0.044 vs 0.020).
"""

import copy
import math
import pickle

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms import primitives as p
from dprelease.mechanisms import private_pca as pp
from dprelease.mechanisms.accounting import StageBudget

ALPHA = 1e-4


def _opendp_map(kind: str, scale: float, sensitivity: float) -> float:
    dp = p.opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if kind == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale).map(sensitivity)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale).map(sensitivity)


@pytest.fixture
def vetted() -> p.VettedRNG:
    return p.noise_rngs(None, 1)[0]


def test_vetted_laplace_distribution(vetted):
    n, loc = 20_000, 3.25
    m = p.laplace_mechanism(np.full(n, loc), l1_sensitivity=2.0, epsilon=0.8, rng=vetted, name="x", stage="s")
    assert m.mechanism == "laplace" and m.value.shape == (n,) and m.value.dtype == float
    assert stats.kstest(m.value, stats.laplace(loc, m.scale).cdf).pvalue > ALPHA
    assert stats.kstest(m.value, stats.laplace(loc, 1.2 * m.scale).cdf).pvalue < ALPHA


def test_vetted_gaussian_distribution(vetted):
    n, loc = 12_000, -1.5
    m = p.gaussian_mechanism(
        np.full((n // 4, 4), loc), l2_sensitivity=math.sqrt(2), rho=0.05, rng=vetted, name="x", stage="s"
    )
    assert m.mechanism == "gaussian" and m.value.shape == (n // 4, 4)
    z = m.value.ravel()
    assert stats.kstest(z, stats.norm(loc, m.scale).cdf).pvalue > ALPHA
    assert stats.kstest(z, stats.norm(loc, 1.2 * m.scale).cdf).pvalue < ALPHA


@pytest.mark.parametrize(
    ("kind", "sensitivity", "budget"),
    [
        ("laplace", 1.0, 0.3),
        ("laplace", 2 / 26049, 1e-3),
        ("gaussian", math.sqrt(2), 0.01),
        ("gaussian", 1.0, 0.1),
    ],
)
def test_vetted_records_the_scale_it_used(vetted, kind, sensitivity, budget):
    """The recorded scale is ≥ the textbook one and OpenDP's own map at it is within budget."""
    if kind == "laplace":
        m = p.laplace_mechanism(
            np.zeros(3), l1_sensitivity=sensitivity, epsilon=budget, rng=vetted, name="x", stage="s"
        )
        assert m.scale >= p.laplace_scale(sensitivity, budget) >= sensitivity / budget
    else:
        m = p.gaussian_mechanism(
            np.zeros(3), l2_sensitivity=sensitivity, rho=budget, rng=vetted, name="x", stage="s"
        )
        assert m.scale >= p.gaussian_sigma(sensitivity, budget) >= sensitivity / math.sqrt(2 * budget)
    assert _opendp_map(kind, m.scale, sensitivity) <= budget
    assert m.sensitivity == sensitivity and (m.epsilon if kind == "laplace" else m.rho) == budget


def test_vetted_gaussian_rounds_the_scale_up_when_opendp_needs_it(vetted):
    """At Δ₂ = 1, ρ = 0.046 OpenDP's (rounded-up) map at our σ is a hair above ρ: the
    mechanism moves σ up by an ulp and records that σ, not the textbook one."""
    sigma = p.gaussian_sigma(1.0, 0.046)
    assert _opendp_map("gaussian", sigma, 1.0) > 0.046
    m = p.gaussian_mechanism(np.zeros(2), l2_sensitivity=1.0, rho=0.046, rng=vetted, name="x", stage="s")
    assert m.scale == math.nextafter(sigma, math.inf)
    assert _opendp_map("gaussian", m.scale, 1.0) <= 0.046


def test_vetted_measure_stage_and_shapes(vetted):
    """``measure_stage`` picks Laplace for a pure part; scalars and empty vectors keep their shape."""
    part = StageBudget("s", 1.0, None, 1.0)
    m = p.measure_stage(2.0, part, l2_sensitivity=1.0, l1_sensitivity=1.0, rng=vetted, name="x")
    assert m.mechanism == "laplace" and np.shape(m.value) == ()
    e = p.gaussian_mechanism(np.zeros((0, 3)), l2_sensitivity=1.0, rho=1.0, rng=vetted, name="x", stage="s")
    assert e.value.shape == (0, 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_vetted_rejects_non_finite_values(vetted, bad):
    """OpenDP would silently replace a non-finite input; we refuse it instead."""
    with pytest.raises(ValueError, match="finite"):
        p.laplace_mechanism(
            np.array([1.0, bad]), l1_sensitivity=1.0, epsilon=1.0, rng=vetted, name="x", stage="s"
        )


def test_vetted_discrete_laplace_is_integer_with_the_right_variance(vetted):
    """Lap_Z(σ) has variance 2e^{−1/σ}/(1 − e^{−1/σ})² (17.8 at σ = 3; 25.8 at 1.2σ). The
    sample variance's relative s.e. is ≈ √(5/n) = 1.6 % at n = 20 000; 7 % is > 4 s.e."""
    n, sigma = 20_000, 3.0
    z = pp.discrete_laplace(sigma, (n // 2, 2), vetted)
    assert z.shape == (n // 2, 2) and np.issubdtype(z.dtype, np.integer)
    q = math.exp(-1 / sigma)
    var = 2 * q / (1 - q) ** 2
    assert abs(z.mean()) < 4 * math.sqrt(var / n)
    assert abs(z.var() / var - 1) < 0.07
    assert pp.discrete_laplace(sigma, 0, vetted).shape == (0,)


def test_vetted_private_pca_counts_stay_integer(vetted):
    tree = pp.measure_tree(np.random.default_rng(0).uniform(-1, 1, (200, 2)), 1.5, 1.0, 3, vetted)
    assert all(np.issubdtype(m.value.dtype, np.integer) for m in tree.measurements)


def test_seeded_generator_keeps_numpys_samplers_bit_for_bit():
    """A plain Generator draws exactly what it drew before this change, every time."""
    x = np.arange(6.0).reshape(2, 3)

    def run(seed):
        g = np.random.default_rng(seed)
        a = p.gaussian_mechanism(x, l2_sensitivity=1.0, rho=0.5, rng=g, name="a", stage="s")
        b = p.laplace_mechanism(x, l1_sensitivity=2.0, epsilon=0.5, rng=g, name="b", stage="s")
        return a, b, pp.discrete_laplace(2.0, (4,), g)

    a1, b1, c1 = run(11)
    a2, b2, c2 = run(11)
    assert np.array_equal(a1.value, a2.value) and np.array_equal(b1.value, b2.value)
    assert np.array_equal(c1, c2)
    g = np.random.default_rng(11)
    assert np.array_equal(a1.value, x + g.normal(0.0, p.gaussian_sigma(1.0, 0.5), size=x.shape))
    assert np.array_equal(b1.value, x + g.laplace(0.0, p.laplace_scale(2.0, 0.5), size=x.shape))
    q = -math.expm1(-1 / 2.0)
    assert np.array_equal(c1, g.geometric(q, (4,)) - g.geometric(q, (4,)))
    assert a1.scale == p.gaussian_sigma(1.0, 0.5) and b1.scale == p.laplace_scale(2.0, 0.5)


def test_noise_rngs_seeded_is_todays_spawn():
    rngs = p.noise_rngs(5, 6)
    assert len(rngs) == 6 and all(type(r) is np.random.Generator for r in rngs)
    old = [np.random.default_rng(s) for s in np.random.SeedSequence(5).spawn(6)]
    for r, o in zip(rngs, old, strict=True):
        assert np.array_equal(r.random(4), o.random(4))
    assert p.sampler_note(rngs[0]) == p.NUMPY_SAMPLER_NOTE


def test_noise_rngs_unseeded_are_vetted_and_independent():
    a, b = p.noise_rngs(None, 3), p.noise_rngs(None, 3)
    assert all(isinstance(r, p.VettedRNG) and isinstance(r, np.random.Generator) for r in a)
    first = {float(r.random()) for r in a + b}
    assert len(first) == 6  # distinct streams within and across calls (OS entropy)
    note = p.sampler_note(a[0])
    assert "OpenDP" in note and "2^-1074" in note and note != p.NUMPY_SAMPLER_NOTE


def test_vetted_rng_stays_vetted_when_copied_pickled_or_spawned(vetted):
    for other in (copy.deepcopy(vetted), pickle.loads(pickle.dumps(vetted)), *vetted.spawn(2)):
        assert isinstance(other, p.VettedRNG)
    twin = copy.deepcopy(vetted)
    assert np.array_equal(twin.random(3), vetted.random(3))  # post-processing draws: numpy's
