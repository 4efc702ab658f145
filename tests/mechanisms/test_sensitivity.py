"""Sensitivities checked by brute force on small domains (privacy-testing note §2).

Replace-one neighbours, n public. For an additive statistic T(D) = (1/n)Σφ(x_i) the
change is (φ(x) − φ(x'))/n, so pairs of points suffice; for histograms we also
enumerate whole data sets and all their neighbours.
"""

import itertools
import math

import numpy as np
import pytest

from dprelease.mechanisms.factor_model import bound_rows, second_moment_sensitivity
from dprelease.mechanisms.marginals import histogram, histogram_sensitivity


def _neighbours(data: tuple[int, ...], k: int):
    for i, v in itertools.product(range(len(data)), range(k)):
        if v != data[i]:
            yield (*data[:i], v, *data[i + 1 :])


@pytest.mark.parametrize(("k", "n"), [(2, 1), (3, 3), (4, 4), (5, 3)])
def test_histogram_sensitivity_by_enumeration(k, n):
    worst_l1 = worst_l2 = 0.0
    for data in itertools.product(range(k), repeat=n):
        h = histogram(np.array(data), k)
        for other in _neighbours(data, k):
            d = h - histogram(np.array(other), k)
            worst_l1 = max(worst_l1, np.abs(d).sum())
            worst_l2 = max(worst_l2, np.sqrt((d**2).sum()))
    assert worst_l1 == histogram_sensitivity("l1") == 2.0
    assert worst_l2 == pytest.approx(histogram_sensitivity("l2")) and worst_l2 == pytest.approx(math.sqrt(2))


def _upper(z: np.ndarray) -> np.ndarray:
    """Upper triangles (with diagonal) of z zᵀ for each row of z."""
    p = z.shape[1]
    iu = np.triu_indices(p)
    return (z[:, :, None] * z[:, None, :])[:, iu[0], iu[1]]


@pytest.mark.parametrize("p", [2, 3])
def test_second_moment_sensitivity_on_a_grid(p):
    """Every pair of grid points, mapped through the same clip and row bound the
    mechanism uses: the worst change never exceeds the code's Δ and, in L2, attains it."""
    clip, bound, n = 4.0, math.sqrt(p), 7
    axis = np.linspace(-2.5, 2.5, 11)
    z = bound_rows(np.array(list(itertools.product(axis, repeat=p))), clip, bound)
    u = _upper(z) / n
    diff = u[:, None, :] - u[None, :, :]
    worst_l2 = np.sqrt((diff**2).sum(-1)).max()
    worst_l1 = np.abs(diff).sum(-1).max()
    assert worst_l2 <= second_moment_sensitivity(n, bound, p, "l2") * (1 + 1e-12)
    assert worst_l2 == pytest.approx(second_moment_sensitivity(n, bound, p, "l2"))  # B·e1 vs B·e2
    assert worst_l1 <= second_moment_sensitivity(n, bound, p, "l1") * (1 + 1e-12)
    # the looser triangle-inequality values are valid too
    assert worst_l2 <= 2 * bound**2 / n and worst_l1 <= (p + 1) * bound**2 / n


@pytest.mark.parametrize("p", [4, 8, 15])
def test_second_moment_sensitivity_against_a_maximiser(p, rng):
    """A many-restart search over pairs on the sphere ‖z‖ = B (a lower bound on the true
    Δ) must stay below the proven upper bounds the code uses."""
    bound, n = math.sqrt(p), 100
    best_l1 = best_l2 = 0.0
    for _ in range(20):
        z = rng.normal(size=(800, p))
        z *= bound / np.linalg.norm(z, axis=1, keepdims=True)
        u = _upper(z) / n
        a, b = u[:400], u[400:]
        d = a[:, None, :] - b[None, :, :]
        best_l1 = max(best_l1, np.abs(d).sum(-1).max())
        best_l2 = max(best_l2, np.sqrt((d**2).sum(-1)).max())
    assert best_l2 <= second_moment_sensitivity(n, bound, p, "l2")
    assert best_l1 <= second_moment_sensitivity(n, bound, p, "l1")
    # the search is not vacuous: it gets within a factor 2 of the bounds
    assert best_l2 > 0.5 * second_moment_sensitivity(n, bound, p, "l2")


def test_bound_rows_enforces_the_norm(rng):
    z = rng.normal(scale=3, size=(1000, 6))
    out = bound_rows(z, 4.0, math.sqrt(6))
    assert np.all(np.abs(out) <= 4.0)
    assert np.all(np.linalg.norm(out, axis=1) <= math.sqrt(6) * (1 + 1e-12))
    small = np.full((1, 6), 0.1)
    np.testing.assert_array_equal(bound_rows(small, 4.0, math.sqrt(6)), small)
