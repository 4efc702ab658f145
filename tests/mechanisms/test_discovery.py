"""Issue 19, ``schema`` discovery (``mechanisms.discovery``): each statistic's Δ as the
stage really passes it to the noise, on worst-case neighbours; the exponential mechanism's
law; the partition selection's δ measured; the (ε, δ) charge in the lifetime composition."""

import math

import numpy as np
import pytest
from scipy import stats

from mechanisms import discovery as disc
from mechanisms.accounting import Charge, StageBudget, compose_lifetime, headroom, zcdp_epsilon, zcdp_rho
from mechanisms.errors import BudgetError
from mechanisms.randomness import VettedRNG


def _budget(epsilon: float) -> StageBudget:
    return StageBudget("schema", 1.0, None, epsilon)


def _neighbours(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Tables with atoms and ties, and the same tables with one record replaced by an
    extreme, a tie or a value inside a gap."""
    out = []
    for _ in range(30):
        x = np.where(rng.random(n) < 0.4, 0.0, np.round(rng.normal(50, 20, n)))
        for new in (-1e9, 1e9, 0.0, 50.0, float(x[0] + 0.5)):
            y = x.copy()
            y[rng.integers(n)] = new
            out.append((np.sort(x), np.sort(y)))
    return out


def test_each_bound_score_moves_by_at_most_its_recorded_sensitivity(rng):
    """Δu = 1 as recorded by ``private_bounds`` (the measurement it passes on), bounding
    the change of every candidate's score on 150 neighbour pairs, and attained."""
    recorded = disc.private_bounds(np.arange(200.0), _budget(1.0), "x", integer=False, rng=rng)
    assert {m.sensitivity for m in recorded.measurements} == {1.0}
    assert {m.scale for m in recorded.measurements} == {2 / 0.5}  # exp(ε·u/(2Δu)) with ε = 1/2 each
    worst = 0.0
    for x, y in _neighbours(rng, 200):
        q = disc.quantile_level(200, 0.5)
        for u, v in zip(disc.bound_utilities(x, q * 200), disc.bound_utilities(y, q * 200), strict=True):
            worst = max(worst, float(np.max(np.abs(u - v))))
    assert worst == pytest.approx(1.0)


def test_numpys_noisy_max_has_the_law_of_openDPs():
    """The seeded path (numpy's exponential noise) and the vetted path (OpenDP's
    ``make_noisy_max``) choose with the same law: 5,000 draws each, χ² homogeneity."""
    utility = np.array([0.0, -1.0, -2.0, -4.0, -8.0])
    seeded = np.random.default_rng(11)
    vetted = VettedRNG(np.random.PCG64(12))
    counts = [
        np.bincount([disc.noisy_max(utility, 1.5, g) for _ in range(5_000)], minlength=5)
        for g in (seeded, vetted)
    ]
    assert stats.chi2_contingency(np.array(counts)).pvalue > 1e-3


def test_noisy_max_privacy_loss_stays_within_epsilon_on_worst_case_scores():
    """Audit: scores u and u' with ‖u − u'‖∞ = Δu = 1 (the best loses 1, every other gains
    1); each index's frequency over 400,000 draws satisfies p ≤ e^ε·p' up to 5 binomial
    standard errors, in both directions."""
    eps, draws = 1.0, 400_000
    u = np.array([0.0, -0.5, -1.0, -3.0])
    v = u + np.array([-1.0, 1.0, 1.0, 1.0])
    rng = np.random.default_rng(2)

    def freq(scores: np.ndarray) -> np.ndarray:
        noisy = scores + rng.exponential(2 / eps, (draws, len(scores)))
        return np.bincount(np.argmax(noisy, axis=1), minlength=len(scores)) / draws

    p, q = freq(u), freq(v)
    for a, b in ((p, q), (q, p)):
        se = np.sqrt(a * (1 - a) / draws) + math.e**eps * np.sqrt(b * (1 - b) / draws)
        assert np.all(a <= math.e**eps * b + 5 * se), (a, b)


def test_bounds_land_within_the_mechanisms_rank_error():
    """With probability ≥ 1 − e^{−t} the chosen candidate's score is within 2(ln|G| + t)/ε
    of the best (a candidate trailing by g needs noise above g: e^{−εg/2}); t = ln 1000,
    20 seeds, n = 20,000 normal values (the best candidate misses by ≤ 30 ranks: the grid's
    0.1 steps hold ≤ 0.002 of them)."""
    x = np.sort(np.random.default_rng(3).normal(0, 1, 20_000))
    eps_half = 0.5
    slack = 2 * (math.log(len(disc.GRID)) + math.log(1000)) / eps_half + 30
    q = disc.quantile_level(len(x), eps_half)
    for seed in range(20):
        b = disc.private_bounds(x, _budget(2 * eps_half), "x", integer=False, rng=np.random.default_rng(seed))
        assert abs(np.searchsorted(x, b.lower) - q * len(x)) <= slack
        assert abs(len(x) - np.searchsorted(x, b.upper, side="right") - q * len(x)) <= slack


def test_the_published_level_uses_the_public_n_not_the_number_of_missing_values():
    """The level q is published: it must come from n (public) and ε only. Two tables of the
    same n, one with a fifth of its values missing, publish the same level."""
    x = np.random.default_rng(4).normal(50, 10, 5_000)
    holes = x.copy()
    holes[::5] = np.nan
    levels = {
        disc.private_bounds(v, _budget(0.5), "x", integer=False, rng=np.random.default_rng(0)).level
        for v in (x, holes)
    }
    assert levels == {disc.quantile_level(5_000, 0.25)}


def test_an_atom_is_its_own_lower_bound_and_integers_round_outward():
    x = np.concatenate([np.zeros(9_000), np.random.default_rng(1).uniform(1, 5_000, 1_000)])
    for seed in range(10):
        b = disc.private_bounds(x, _budget(1.0), "gain", integer=True, rng=np.random.default_rng(seed))
        assert b.lower == 0 and b.upper == math.ceil(b.upper) and b.upper > 100


def test_partition_selection_records_its_sensitivity_and_publishes_no_count_of_unseen():
    values = np.array(["a"] * 500 + ["b"] * 300 + ["rare"] + [None, ""], dtype=object)
    found = disc.discover_categories(values, _budget(1.0), 1e-6, "c", rng=np.random.default_rng(0))
    m = found.measurement
    assert (m.mechanism, m.sensitivity, m.norm) == ("laplace", 2.0, "l1")
    assert m.scale == pytest.approx(2.0) and found.threshold == pytest.approx(1 + 2 * math.log(1e6))
    assert found.categories == ("a", "b")
    assert m.value.size == len(found.categories)  # the number of categories seen is not recorded


def test_a_category_held_by_one_record_is_published_with_probability_delta_over_two():
    """The δ of the partition selection, measured: 10,000 runs at ε = 1, δ = 0.2 publish
    the singleton with frequency δ/2 = 0.1 (4 binomial standard errors: 0.012)."""
    values = np.array(["common"] * 1000 + ["alone"], dtype=object)
    rng = np.random.default_rng(5)
    runs = 10_000
    found = (disc.discover_categories(values, _budget(1.0), 0.2, "c", rng=rng) for _ in range(runs))
    hits = sum("alone" in f.categories for f in found)
    assert abs(hits / runs - 0.1) <= 4 * math.sqrt(0.1 * 0.9 / runs)


def test_an_approximate_pure_charge_sets_its_delta_aside_in_zcdp_composition():
    """(ε, δ) discovery then a zCDP release: ρ = ε²/2 + ρ_release converts at δ_L − δ."""
    found = Charge("pure", None, 0.3, 1e-7)
    release = Charge("zcdp", 0.02, 0.9, 1e-6)
    spend = compose_lifetime([found, release], 1e-6)
    assert spend.epsilon == pytest.approx(zcdp_epsilon(0.3**2 / 2 + 0.02, 1e-6 - 1e-7))
    assert spend.zcdp == (spend.epsilon, 1e-6)
    room = headroom([found], (5.0, 1e-6))
    nxt = Charge("zcdp", zcdp_rho(room.epsilon, 1e-6), room.epsilon, 1e-6)
    after = compose_lifetime([found, nxt], 1e-6)
    assert after.rule.startswith("zCDP") and after.epsilon <= 5.0
    with pytest.raises(BudgetError, match="schema discovery set aside delta 1e-06"):
        compose_lifetime([Charge("pure", None, 0.3, 1e-6), release], 1e-6)
