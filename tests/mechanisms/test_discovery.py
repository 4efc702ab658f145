"""Issue 19, ``schema`` discovery (``mechanisms.discovery``): each statistic's Δ as the
stage really passes it to the noise, on worst-case neighbours; the exponential mechanism's
law; the partition selection's δ measured; the (ε, δ) charge in the lifetime composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dprelease.mechanisms import discovery as disc
from dprelease.mechanisms.accounting import StageBudget, zcdp_epsilon, zcdp_rho
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.lifetime import Charge, compose_lifetime, headroom
from dprelease.mechanisms.randomness import VettedRNG
from tests.wiring import Probe, probing


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


def _exact_counts(values: np.ndarray, **kw) -> tuple[dict[float, float], disc.DiscoveredAtoms]:
    """The exact counts ``discover_atoms`` hands to the noise (read with the noise off,
    ``tests.wiring.Probe``), keyed by the column's distinct finite values in order."""
    with probing(Probe()) as probe:
        found = disc.discover_atoms(values, _budget(1.0), 1e-6, "x", rng=np.random.default_rng(0), **kw)
    (exact,) = probe.exact
    x = np.asarray(values, dtype=float)
    labels = np.unique(x[np.isfinite(x)])
    assert exact.shape == labels.shape
    return dict(zip(labels.tolist(), exact.tolist(), strict=True)), found


def test_atom_counts_move_by_at_most_their_recorded_sensitivity_on_worst_case_neighbours(rng):
    """Δ₁ = 2 as ``discover_atoms`` records it (and b = 2/ε), bounding the L1 change of the
    exact counts it passes to the noise, over the union of values, when one record is
    replaced by a new value, a held one, a missing or an infinite one; attained."""
    worst = 0.0
    for _ in range(20):
        x = np.where(rng.random(300) < 0.4, 0.0, np.round(rng.normal(50, 20, 300)))
        d, found = _exact_counts(x)
        assert (found.measurement.sensitivity, found.measurement.scale) == (2.0, pytest.approx(2.0))
        for new in (0.0, 50.0, 0.5, -1e9, np.nan, np.inf, -np.inf):
            y = x.copy()
            y[rng.integers(len(y))] = new
            d2, _ = _exact_counts(y)
            change = sum(abs(d.get(v, 0.0) - d2.get(v, 0.0)) for v in d.keys() | d2.keys())
            assert change <= 2.0
            worst = max(worst, change)
    assert worst == 2.0


def test_a_value_one_record_holds_is_published_with_probability_at_most_delta_over_two():
    """A value only one neighbour holds has count 1: it passes max(τ, s·n) ≥ τ with
    probability ≤ ½·e^{−(τ−1)/b} = δ/2. Measured with the floor s·n below τ (so the bound is
    attained): 10,000 runs at ε = 1, δ = 0.2 publish it with frequency 0.1 (4 binomial
    standard errors); the threshold is the formula's."""
    x = np.r_[np.zeros(1000), 7.0]
    rng = np.random.default_rng(5)
    runs = 10_000
    found = [disc.discover_atoms(x, _budget(1.0), 0.2, "x", share=1e-9, rng=rng) for _ in range(runs)]
    assert {f.threshold for f in found} == {found[0].measurement.scale * math.log(5) + 1}
    assert found[0].threshold == pytest.approx(1 + 2 * math.log(5))
    hits = sum(7.0 in f.atoms for f in found)
    assert abs(hits / runs - 0.1) <= 4 * math.sqrt(0.1 * 0.9 / runs)
    assert all(f.atoms[0] == 0.0 for f in found)
    floor = disc.discover_atoms(x, _budget(1.0), 0.2, "x", rng=rng).threshold
    assert floor == disc.ATOM_SHARE * len(x)  # s·n above τ: the threshold is the floor


def test_a_value_below_the_least_share_is_never_published_even_without_noise():
    """n = 100,000, noise off: 0 (30 %) is an atom; 7 (4.9 %) and 8 (exactly 5 %, not more)
    are not, though their counts are far above τ; missing and infinite values (6 % each
    way) never are."""
    n = 100_000
    held = [(0.0, 30_000), (7.0, 4_900), (8.0, 5_000), (np.nan, 9_000), (np.inf, 6_000), (-np.inf, 6_000)]
    x = np.concatenate([np.full(k, v) for v, k in held])
    x = np.r_[x, np.arange(n - len(x), dtype=float) + 0.5]  # each of the rest held once
    counts, found = _exact_counts(x)
    assert counts[7.0] > found.measurement.scale * math.log(1e6) + 1  # above τ: only the share keeps it out
    assert found.atoms == (0.0,) and found.threshold == 0.05 * n
    assert found.measurement.value.size == 1  # the record keeps the published atoms' counts only


def test_a_published_zero_does_not_carry_the_sign_of_a_records_negative_zero():
    """A −0.0 among the zeros counts as 0.0; the published atom is +0.0 whatever the order."""
    x = np.r_[-0.0, np.zeros(999)]
    found = disc.discover_atoms(x, _budget(1.0), 1e-6, "x", rng=np.random.default_rng(0))
    assert found.atoms == (0.0,) and math.copysign(1.0, found.atoms[0]) == 1.0


def test_a_numeric_column_spends_a_third_of_its_share_on_each_bound_and_on_its_atoms():
    x = np.r_[np.zeros(3_000), np.random.default_rng(1).uniform(1, 100, 7_000)]
    bounds, atoms = disc.discover_numeric(
        x, _budget(0.9), 1e-6, "x", integer=False, rng=np.random.default_rng(0)
    )
    made = [*bounds.measurements, atoms.measurement]
    assert [m.name for m in made] == ["bound[x,lower]", "bound[x,upper]", "atoms[x]"]
    assert [m.epsilon for m in made] == [pytest.approx(0.3)] * 3 and math.fsum(m.epsilon for m in made) <= 0.9
    assert atoms.atoms == (0.0,) and bounds.lower == 0.0


def test_with_atoms_off_a_numeric_column_spends_half_its_share_on_each_bound():
    """``share`` 0 (``--atom-share 0``): no atoms, and the bounds are ``private_bounds`` on
    the column's whole share, ε/2 each, drawn exactly as before atoms were discovered."""
    x = np.r_[np.zeros(3_000), np.random.default_rng(1).uniform(1, 100, 7_000)]
    bounds, atoms = disc.discover_numeric(
        x, _budget(0.9), 1e-6, "x", integer=False, share=0.0, rng=np.random.default_rng(0)
    )
    assert atoms is None
    assert [(m.name, m.epsilon) for m in bounds.measurements] == [
        ("bound[x,lower]", 0.45),
        ("bound[x,upper]", 0.45),
    ]
    alone = disc.private_bounds(x, _budget(0.9), "x", integer=False, rng=np.random.default_rng(0))
    assert (bounds.lower, bounds.upper, bounds.level) == (alone.lower, alone.upper, alone.level)


def test_discovery_needs_a_delta_only_when_a_partition_selection_runs():
    """δ is spent by the partition selections (categories, atoms): with one, δ = 0 is
    refused naming --delta; with none the plan is pure ε (δ = 0, whatever δ given)."""
    with pytest.raises(ValueError, match=r"--delta \(0.0\) must be > 0 when categories or atoms"):
        disc.discovery_plan(1.0, 0.0, selections=2)
    assert disc.discovery_plan(1.0, 1e-7, selections=2).delta == 1e-7
    assert disc.discovery_plan(1.0, 0.0, selections=0).delta == 0.0
    pure = disc.discovery_plan(0.3, 1e-7, selections=0)
    assert pure.delta == 0.0
    release = Charge("zcdp", 0.02, 0.9, 1e-6)
    spend = compose_lifetime([Charge("pure", None, pure.epsilon, pure.delta), release], 1e-6)
    assert spend.zcdp == (zcdp_epsilon(0.3**2 / 2 + 0.02, 1e-6), 1e-6)  # converted at δ_L: nothing set aside
    with pytest.raises(ValueError, match=r"--delta \(-1e-07\) must be in \[0, 1\)"):
        disc.discovery_plan(1.0, -1e-7, selections=0)


def test_categories_keep_their_spelling_trailing_nuls_included():
    """Issue 38: the labels went through numpy's fixed-width text, which drops trailing
    NULs: '\x00' was published as '' and 'a\x00' counted as 'a'. Each keeps its spelling
    and its own count."""
    values = np.array(["a", "a\x00", "\x00", "b"] * 50, dtype=object)
    found = disc.discover_categories(values, _budget(20.0), 1e-6, "c", rng=np.random.default_rng(0))
    assert found.categories == ("\x00", "a", "a\x00", "b")
    assert np.allclose(found.measurement.value, 50, atol=2)
