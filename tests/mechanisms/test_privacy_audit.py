"""Black-box privacy-loss audits (privacy-testing note §3) of the two noisy statistics
``factor_gauss`` releases, run through the real mechanism functions on the Δ-maximising
neighbouring pair, with positive controls (deliberately under-noised copies) showing the
audit has the power to catch a violation. A pass is a lower bound, never a proof: the
exact sensitivity tests in test_sensitivity.py are what rule out small under-estimates.
"""

import math

import numpy as np
import pytest

from dprelease.mechanisms.accounting import zcdp_epsilon, zcdp_rho
from dprelease.mechanisms.factor_model import second_moment_sensitivity
from dprelease.mechanisms.marginals import histogram, histogram_sensitivity
from dprelease.mechanisms.primitives import gaussian_mechanism, laplace_mechanism
from tests.mechanisms.audit_tools import audit


def _histogram_pair():
    """D and D' differ by one record moved from bin 0 to bin 1 (replace-one)."""
    data = np.array([0, 0, 1, 2, 3, 3, 3, 5])
    other = data.copy()
    other[0] = 1
    return histogram(data, 6), histogram(other, 6)


@pytest.mark.parametrize(("l1_used", "should_pass"), [(histogram_sensitivity("l1"), True), (1.0, False)])
def test_laplace_histogram_audit(l1_used, should_pass, rng):
    """Claimed ε = 1 with Δ₁ = 2. The control uses the add/remove Δ₁ = 1 under replace-one,
    whose true ε is 2: the audit must see it."""
    t, tp = _histogram_pair()
    eps = 1.0

    def release(which, n, g):
        value = np.tile(tp if which else t, (n, 1))
        return laplace_mechanism(value, l1_sensitivity=l1_used, epsilon=eps, rng=g, name="h", stage="s").value

    b = l1_used / eps
    lb = audit(release, lambda z: np.sum(np.abs(z - tp) - np.abs(z - t), axis=1) / b, 0.0, rng)
    if should_pass:
        assert lb <= eps
    else:
        assert lb > eps + 0.3


@pytest.mark.parametrize(("l2_factor", "should_pass"), [(1.0, True), (0.25, False)])
def test_gaussian_second_moment_audit(l2_factor, should_pass, rng):
    """Rows z = B·e₁ vs z' = B·e₂ (the L2 maximiser), p = 4, n = 50, ρ for a claimed
    (ε = 1, δ = 1e-5). The control uses a quarter of the sensitivity (16× the true ρ)."""
    p, n, delta = 4, 50, 1e-5
    rho = zcdp_rho(1.0, delta)
    bound = math.sqrt(p)
    rest = np.random.default_rng(0).normal(size=(n - 1, p))
    rest *= np.minimum(1, bound / np.linalg.norm(rest, axis=1, keepdims=True))
    iu = np.triu_indices(p)

    def moments(last):
        z = np.vstack([rest, last])
        return (z.T @ z / n)[iu]

    e1, e2 = np.eye(p)[0] * bound, np.eye(p)[1] * bound
    t, tp = moments(e1), moments(e2)
    sens = second_moment_sensitivity(n, bound, p, "l2")
    assert np.linalg.norm(t - tp) == pytest.approx(sens)  # the pair attains Δ₂
    claimed = zcdp_epsilon(rho, delta)

    def release(which, m, g):
        value = np.tile(tp if which else t, (m, 1))
        return gaussian_mechanism(
            value, l2_sensitivity=l2_factor * sens, rho=rho, rng=g, name="s", stage="m"
        ).value

    lb = audit(release, lambda z: (z - tp) @ (t - tp), delta, rng)
    if should_pass:
        assert lb <= claimed
    else:
        assert lb > claimed + 0.5
