"""``dpfm``: sensitivities by brute force, the paper's privacy defects shown (sorted noise,
unbounded rows), audits, link functions, the ε = ∞ ablation, the noise level at finite ε
and the four pipeline stages."""

import itertools
import math

import numpy as np
import pytest
from scipy.stats import rankdata

from dprelease.mechanisms import dpfm
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.primitives import laplace_mechanism
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows
from tests.mechanisms.audit_tools import audit
from tests.mechanisms.small import SMALL, run, small_rows

CONT = [Continuous(f"x{k}", -4.0, 4.0) for k in range(3)]
SIM = Schema(
    (
        *CONT,
        Ordinal("o1", ("a", "b", "c")),
        Ordinal("o2", ("a", "b", "c")),
        Ordinal("o3", ("a", "b")),
        Nominal("m1", ("a", "b", "c", "d")),
        Nominal("m2", ("a", "b")),
        Nominal("y", ("no", "yes")),
    )
)


def _simulate(n: int, rng: np.random.Generator) -> MixedRows:
    """The paper's setting I shape, smaller: AR-1 (ρ = .95) continuous columns, uniform
    ordinal and nominal columns, a logistic label (balanced here) driven by x0, o1, m1."""
    cov = 0.95 ** np.abs(np.subtract.outer(np.arange(3), np.arange(3)))
    x = np.clip(rng.multivariate_normal(np.zeros(3), cov, size=n), -4, 4)
    o = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 3, n), rng.integers(0, 2, n)])
    m = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 2, n)])
    eta = 2.0 * x[:, 0] + (o[:, 0] - 1) + (m[:, 0] == 2)
    y = rng.random(n) < 1 / (1 + np.exp(-eta))
    unit = np.full((n, len(SIM)), np.nan)
    bins = np.column_stack([*(c.to_bins(x[:, k]) for k, c in enumerate(CONT)), o, m, y]).astype(np.int32)
    for k, c in enumerate(CONT):
        unit[:, k] = c.to_unit(x[:, k])
    return MixedRows(bins, unit)


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """ROC-AUC by the Mann–Whitney rank sum."""
    r, n1 = rankdata(score), int(y.sum())
    return (r[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * (len(y) - n1))


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"variant": "literal"}, "variant"),
        ({"factors": None}, "factors"),
        ({"factors": 0}, "factors"),
        ({"factors": True}, "factors"),
        ({"factors": 2.0}, "factors"),
        ({"clip": 0.0}, "clip"),
        ({"clip": math.inf}, "clip"),
        ({"calibrate": "yes"}, "calibrate"),
    ],
)
def test_bad_params_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=rf"params\.{name} "):
        dpfm.DPFMParams(**kwargs)


def test_factors_none_is_refused_in_corrected_with_the_reason():
    with pytest.raises(ValueError, match=r"eq\. \(3\).*not private"):
        dpfm.DPFMParams(factors=None)


def test_check_refuses_more_factors_than_the_encoded_width():
    assert dpfm.encoded_width(SIM) == 3 + 3 + 3 + 1 + 1
    dpfm.DPFM().check(SIM, dpfm.DPFMParams(factors=11))
    with pytest.raises(ValueError, match=r"params\.factors \(12\) must be <= the encoded width p\* \(11\)"):
        dpfm.DPFM().check(SIM, dpfm.DPFMParams(factors=12))


def test_defects_and_defaults():
    assert dpfm.defects(dpfm.DPFMParams()) == []
    paper = dpfm.DPFMParams(variant="paper", factors=None)
    found = dpfm.defects(paper)
    assert len(found) == 6 and any("eq. 3" in d for d in found) and any("sorts" in d for d in found)
    assert "r chosen from raw eigenvalues (eq. 3)" not in dpfm.defects(dpfm.DPFMParams(variant="paper"))
    assert dpfm.DPFMParams().calibrated and not paper.calibrated
    assert dpfm.DPFMParams(variant="paper", calibrate=True).calibrated


def test_stage_weights_reassign_the_threshold_budget_without_ordinal_columns():
    w = dpfm.stage_weights(SIM, dpfm.DPFMParams())
    assert w == pytest.approx({"thresholds": 1 / 3, "loadings": 1 / 3, "scores": 1 / 3})
    no_ordinal = Schema((CONT[0], Nominal("b", ("n", "y"))))
    assert dpfm.stage_weights(no_ordinal, dpfm.DPFMParams()) == {"loadings": 0.5, "scores": 0.5}
    dpfm3 = dpfm.stage_weights(no_ordinal, dpfm.DPFMParams(), shares=(1 / 6, 4 / 6, 1 / 6))  # without ε₃
    plan = plan_budget("pure", 3.0, 0.0, dpfm3)
    assert [s.stage for s in plan.stages] == ["loadings", "scores"]
    assert plan.stage("scores").epsilon == pytest.approx(2.4)
    assert dpfm.stage_weights(SIM, dpfm.DPFMParams(), shares=dpfm.DPFM1) == w


# ---------------------------------------------------------------- sensitivities


@pytest.mark.parametrize(("levels", "max_n"), [([2, 4], 4), ([3, 4], 4), ([4, 4], 3)])
def test_cumulative_frequency_sensitivity_by_enumeration(levels, max_n):
    """All data sets (multisets) of size n ≤ 4 (≤ 3 for 4 × 4 levels, to stay fast) over
    two ordinal columns, all replace-one neighbours: the joint change never exceeds the
    code's Δ and attains it."""
    records = list(itertools.product(*(range(L) for L in levels)))
    for n in range(1, max_n + 1):
        sets = list(itertools.combinations_with_replacement(range(len(records)), n))
        f = {s: dpfm.cumulative_frequencies(np.array([records[i] for i in s]), levels) for s in sets}
        worst_l1 = worst_l2 = 0.0
        for s in sets:
            for pos, new in itertools.product(range(n), range(len(records))):
                other = tuple(sorted((*s[:pos], new, *s[pos + 1 :])))
                d = f[s] - f[other]
                worst_l1, worst_l2 = max(worst_l1, np.abs(d).sum()), max(worst_l2, np.linalg.norm(d))
        assert worst_l1 == pytest.approx(dpfm.threshold_sensitivity(levels, n, "l1"))
        assert worst_l2 == pytest.approx(dpfm.threshold_sensitivity(levels, n, "l2"))
        assert worst_l1 == pytest.approx(sum(L - 1 for L in levels) / n)
        # the paper's per-column Δ (Lemma 7) is below the joint change once p₂ = 2
        assert worst_l1 > (max(levels) - 1) / n


@pytest.mark.parametrize("p_star", [3, 11, 31])
def test_eigenvector_sensitivity_is_the_sphere_diameter(p_star, rng):
    """Random unit pairs stay below 2√p*; the flat vector and its negation attain it, and
    so do real neighbouring data sets whose top eigenvector flips."""
    a = rng.normal(size=(2000, p_star))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    assert np.abs(a[:1000] - a[1000:]).sum(axis=1).max() <= 2 * math.sqrt(p_star)
    flat = np.full(p_star, 1 / math.sqrt(p_star))
    assert np.abs(flat - (-flat)).sum() == pytest.approx(dpfm.loadings_sensitivity(p_star, 1, "l1"))
    assert np.linalg.norm(2 * flat) == pytest.approx(dpfm.loadings_sensitivity(p_star, 1, "l2"))
    assert dpfm.loadings_sensitivity(p_star, 4, "l1") == pytest.approx(8 * math.sqrt(p_star))
    assert dpfm.loadings_sensitivity(p_star, 4, "l2") == pytest.approx(4.0)
    # two rows: a tie between e₁ and the flat direction, broken by the replaced row
    x = np.vstack([np.eye(p_star)[0] * 0.7, flat * 0.7])
    v1 = dpfm.top_eigenvectors(np.vstack([x, flat]), 1)[0][:, 0]
    v2 = dpfm.top_eigenvectors(np.vstack([x, np.eye(p_star)[0]]), 1)[0][:, 0]
    assert min(np.abs(v1 - v2).sum(), np.abs(v1 + v2).sum()) > 0.5  # a large, data-dependent jump
    assert np.abs(v1 - v2).sum() <= 2 * math.sqrt(p_star)


@pytest.mark.parametrize(("p_star", "r"), [(5, 1), (7, 3), (12, 4)])
def test_score_sensitivity_for_bounded_rows(p_star, r, rng):
    """Rows with ‖x‖₂ ≤ 1, a fixed orthonormal Ṽ: ‖(x − x')Ṽ‖₁ ≤ 2√r ≤ 2r, attained by
    x = −x' = Ṽs/√r; L2 ≤ 2."""
    v = np.linalg.qr(rng.normal(size=(p_star, r)))[0]
    x = rng.normal(size=(4000, p_star))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    d = (x[:2000] - x[2000:]) @ v
    assert np.abs(d).sum(axis=1).max() <= dpfm.scores_sensitivity(r, "l1")
    assert np.linalg.norm(d, axis=1).max() <= dpfm.scores_sensitivity(r, "l2")
    best = v @ np.where(rng.random(r) < 0.5, -1.0, 1.0) / math.sqrt(r)
    assert np.linalg.norm(best) == pytest.approx(1.0)
    assert np.abs(2 * best @ v).sum() == pytest.approx(dpfm.scores_sensitivity(r, "l1"))
    assert dpfm.scores_sensitivity(r, "l1") == pytest.approx(2 * math.sqrt(r))
    assert dpfm.scores_sensitivity(r, "l1", "paper") == 2 * r >= 2 * math.sqrt(r)


def test_without_row_bounds_the_score_change_is_unbounded(rng):
    """The paper normalises with the data's mean and SD and never bounds rows: one record
    at the top of the scale among n − 1 at the bottom gets y* = √(n−1), so its scores
    change grows with n past Lemma 6's 2r. The corrected encoding keeps ‖x*ᵢ‖₂ ≤ 1."""
    schema = Schema((Continuous("x", 0.0, 1.0), Nominal("b", ("n", "y"))))
    r, v = 1, np.array([[1.0], [0.0]])
    changes = []
    for n in (10, 100, 1000):
        unit = np.column_stack([np.zeros(n), np.full(n, np.nan)])
        unit[-1, 0] = 1.0
        rows = MixedRows(np.column_stack([(unit[:, 0] > 0.5), np.zeros(n)]).astype(np.int32), unit)
        for params in (dpfm.DPFMParams(variant="paper"), dpfm.DPFMParams()):
            code, _ = dpfm.make_code(rows, schema, (), params)
            x = dpfm.encode_rows(rows, schema, code, rng=rng)
            if params.variant == "paper":
                assert x[-1, 0] == pytest.approx(math.sqrt(n - 1))
                changes.append(np.abs((x[-1] - x[0]) @ v).sum())
            else:
                assert np.linalg.norm(x, axis=1).max() <= 1 + 1e-12
    assert changes == sorted(changes) and changes[-1] > 10 * dpfm.scores_sensitivity(r, "l1", "paper")


# ---------------------------------------------------------------- Alg. 2 and its fix


N_TINY, EPS3 = 10, 1.0
F_EMPTY = np.array([0.0, 0.5, 0.5, 1.0])  # L = 3, counts (5, 0, 5)
F_ONE = np.array([0.0, 0.4, 0.5, 1.0])  # one record moved into the empty level: (4, 1, 5)


def test_sorted_noise_gives_an_event_of_vanishing_probability_under_the_neighbour(rng):
    """Sorted noise keeps every gap of f + e at least the level's frequency, so a released
    gap below δ needs the noise spread s = e_max − e_min > 0.1/δ − 1 when the level holds
    one record (P ≤ 4·exp(−(0.1/δ − 1)/(2b)) ≈ 10⁻²⁵ here) but only a small middle
    spacing when it is empty. δ → 0 drives the ratio, hence the privacy loss, to ∞."""
    b, delta, runs = 2 / (N_TINY * EPS3), 0.004, 200_000
    gap = lambda f: np.diff(dpfm.sorted_noise_cdf(np.tile(f, (runs, 1)), b, rng)[:, 1:3], axis=1)  # noqa: E731
    hits_empty, hits_one = int(np.sum(gap(F_EMPTY) < delta)), int(np.sum(gap(F_ONE) < delta))
    assert runs * 4 * math.exp(-(0.1 / delta - 1) / (2 * b)) < 1e-15
    assert hits_one == 0 and hits_empty > 1000


def _tile(t, tp):
    return lambda which, n: np.tile(tp if which else t, (n, 1))


@pytest.mark.parametrize(("kind", "should_pass"), [("sorted", False), ("iid", True), ("iid_half", False)])
def test_threshold_audits(kind, should_pass, rng):
    """Claimed ε₃ = 1, n = 10, L = 3. ``sorted``: the paper's Alg. 2 with its per-column
    Δ = (L−1)/n; the event is a small released gap of the empty level. ``iid``: the
    corrected release with Δ₁ = Σ(L−1)/n on the pair that attains it (a record moved from
    level 0 to 2), Neyman–Pearson score. ``iid_half``: positive control with Δ/2."""
    if kind == "sorted":
        tile = _tile(F_EMPTY, F_ONE)
        b = 2 / (N_TINY * EPS3)
        lb = audit(
            lambda w, n, g: dpfm.sorted_noise_cdf(tile(w, n), b, g), lambda z: z[:, 1] - z[:, 2], 0.0, rng
        )
    else:
        levels = [3]
        t = dpfm.cumulative_frequencies(np.array([[0] * 5 + [2] * 5]).T, levels)
        tp = dpfm.cumulative_frequencies(np.array([[0] * 4 + [2] * 6]).T, levels)
        delta1 = dpfm.threshold_sensitivity(levels, N_TINY, "l1") * (0.5 if kind == "iid_half" else 1.0)
        assert np.abs(t - tp).sum() == pytest.approx(dpfm.threshold_sensitivity(levels, N_TINY, "l1"))
        tile = _tile(t, tp)

        def release(which, n, g):
            noisy = laplace_mechanism(
                tile(which, n), l1_sensitivity=delta1, epsilon=EPS3, rng=g, name="f", stage="t"
            )
            return noisy.value

        lb = audit(
            release, lambda z: np.sum(np.abs(z - tp) - np.abs(z - t), axis=1) * EPS3 / delta1, 0.0, rng
        )
    if should_pass:
        assert lb <= EPS3
    else:
        assert lb > EPS3 + (2.0 if kind == "sorted" else 0.5)


def test_corrected_thresholds_are_monotone_cdfs(rng):
    """Heavy noise (ε₃ = 0.05) still yields non-decreasing f̃ in [0, 1] with f̃₀ = 0 and
    f̃_L = 1; one joint record with Δ₁ = Σ(Lⱼ−1)/n and b = Δ₁/ε₃."""
    rows = _simulate(50, rng)
    plan = plan_budget("pure", 0.15, 0.0, dpfm.stage_weights(SIM, dpfm.DPFMParams()))
    cdfs, (m,) = dpfm.measure_thresholds(rows, SIM, plan.stage("thresholds"), dpfm.DPFMParams(), rng=rng)
    assert [len(c) for c in cdfs] == [4, 4, 3]
    for c in cdfs:
        assert c[0] == 0.0 and c[-1] == 1.0 and np.all(np.diff(c) >= 0)
    assert m.sensitivity == pytest.approx(5 / 50) and m.scale == pytest.approx(m.sensitivity / m.epsilon)
    assert m.defect is None and m.value.shape == (5,)
    zplan = plan_budget("zcdp", 1.0, 1e-6, dpfm.stage_weights(SIM, dpfm.DPFMParams()))
    _, (mz,) = dpfm.measure_thresholds(rows, SIM, zplan.stage("thresholds"), dpfm.DPFMParams(), rng=rng)
    assert mz.mechanism == "gaussian" and mz.sensitivity == pytest.approx(math.sqrt(5) / 50)


def test_monotone_cdf_post_processing():
    np.testing.assert_allclose(dpfm.monotone_cdf(np.array([0.5, 0.3, 1.4])), [0, 0.4, 0.4, 1, 1])
    np.testing.assert_allclose(dpfm.monotone_cdf(np.array([-0.2])), [0, 0, 1])


# ---------------------------------------------------------------- link functions


def test_probit_latent_is_a_standard_normal_mixture(rng):
    """With P(u = 0) = 2^−k and P(u = l) = (1 − 2^−k)/k (k = M − 1), the link (6) applied
    to N(0, I_k) gives exactly these probabilities, so the encoded vectors must be N(0, I):
    mean and covariance within 5 standard errors (≈ 5/√n, 5√2/√n on the diagonal)."""
    m, n = 4, 40_000
    k = m - 1
    probs = np.array([0.5**k, *([(1 - 0.5**k) / k] * k)])
    u = rng.choice(m, size=n, p=probs)
    z = dpfm.probit_latent(u, m, rng)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=5 / math.sqrt(n))
    np.testing.assert_allclose(np.cov(z.T), np.eye(k), atol=5 * math.sqrt(2 / n))
    decoded = np.where(z.max(axis=1) > 0, 1 + z.argmax(axis=1), 0)
    np.testing.assert_array_equal(decoded, u)


def test_encoding_with_exact_thresholds_decodes_to_the_input(rng):
    """Noise-free f (ε = ∞ thresholds) and no projection: decoding X* returns every
    ordinal level and nominal category exactly (κ = 50: nothing is clipped) and the
    continuous values up to rounding; so the marginal frequencies are reproduced."""
    rows = _simulate(500, rng)
    params = dpfm.DPFMParams(clip=50.0, calibrate=False)
    cdfs, measured = dpfm.measure_thresholds(rows, SIM, None, params, rng=rng)
    assert measured == ()
    code, _ = dpfm.make_code(rows, SIM, cdfs, params)
    x = dpfm.encode_rows(rows, SIM, code, rng=rng)
    back = dpfm.decode_latent(x * code.row_scale, SIM, code, params)
    np.testing.assert_array_equal(back.bins[:, 3:], rows.bins[:, 3:])
    np.testing.assert_allclose(back.unit[:, :3], rows.unit[:, :3], atol=1e-12)
    assert np.isnan(back.unit[:, 3:]).all()
    # the default κ = 3 clips only the tails of z*: the ordinal levels still survive
    code3, _ = dpfm.make_code(rows, SIM, cdfs, dpfm.DPFMParams(calibrate=False))
    x3 = dpfm.encode_rows(rows, SIM, code3, rng=rng)
    assert np.linalg.norm(x3, axis=1).max() <= 1 + 1e-12
    back3 = dpfm.decode_latent(x3 * code3.row_scale, SIM, code3, dpfm.DPFMParams(calibrate=False))
    np.testing.assert_array_equal(back3.bins[:, 3:6], rows.bins[:, 3:6])


def test_calibrated_decoding_follows_the_private_frequencies(rng):
    """Any latent values: level shares match f̃ within 1/n (rank assignment), and the
    order of the latent values is kept."""
    n = 301
    cdf = np.array([0.0, 0.13, 0.13, 0.6, 1.0])
    schema = Schema((Ordinal("o", ("a", "b", "c", "d")),))
    code = dpfm.Code(np.zeros(0), np.zeros(0), (cdf,), (cdf,), 3.0, 1.0)
    z = rng.normal(0, 0.1, size=(n, 1))
    got = dpfm.decode_latent(z, schema, code, dpfm.DPFMParams()).bins[:, 0]
    np.testing.assert_allclose(np.bincount(got, minlength=4) / n, np.diff(cdf), atol=1 / n)
    assert np.all(np.diff(got[np.argsort(z[:, 0])]) >= 0)
    # uncalibrated: N(0, 1) thresholds on a shrunken latent put nearly everything in the middle
    raw = dpfm.decode_latent(z, schema, code, dpfm.DPFMParams(calibrate=False)).bins[:, 0]
    assert np.mean(raw == 2) > 0.9


# ---------------------------------------------------------------- utility: ε = ∞ vs finite ε


def test_eps_infinity_keeps_the_label_association_and_finite_eps_loses_it(rng):
    """The ε = ∞ ablation (no noise, rank-r reconstruction) keeps the label: row-aligned
    agreement well above chance and latent ROC-AUC ≫ ½ (0.96 in a 20-rep sweep). At
    ε = 5 the loadings are essentially random and the scores drown in noise: AUC ≈ ½
    (per-rep s.d. ≈ 0.04 at n = 200, so ±0.05 on a mean of 10 is > 3.5 s.e.)."""
    aucs = {math.inf: [], 5.0: []}
    agree = []
    params = dpfm.DPFMParams(factors=5)
    plan = plan_budget("pure", 5.0, 0.0, dpfm.stage_weights(SIM, params))
    for _ in range(10):
        rows = _simulate(200, rng)
        y = rows.bins[:, -1]
        for eps in aucs:
            if math.isinf(eps):
                fit = dpfm.fit_without_noise(rows, SIM, params, rng=rng)
            else:
                fit = dpfm.DPFM().fit(rows, SIM, plan, params, m=len(rows), rng=rng)
            aucs[eps].append(_auc(dpfm.internals(fit).latent[:, -1], y))
            if math.isinf(eps):
                out = fit.rows
                assert fit.measurements == ()
                chance = np.mean(y) * np.mean(out.bins[:, -1]) + np.mean(1 - y) * np.mean(1 - out.bins[:, -1])
                agree.append(np.mean(out.bins[:, -1] == y) - chance)
    assert np.mean(aucs[math.inf]) > 0.9 and np.mean(agree) > 0.25
    assert abs(np.mean(aucs[5.0]) - 0.5) < 0.05


def test_finite_eps_loadings_are_a_random_subspace(rng):
    """Subspace overlap ‖ṼᵀV‖²_F / r: 1 without noise; at ε₁ = 5/3 it equals r/p*, the
    value for a Haar-random Ṽ (s.d. ≈ √2/p* per draw; 300 draws → s.e. 0.004, tol 0.02):
    b = 2√p*·r/ε₁ ≈ 8 against entries of size 1/√p* ≈ 0.3."""
    rows = _simulate(200, rng)
    thresholds, _ = dpfm.measure_thresholds(rows, SIM, None, dpfm.DPFMParams(), rng=rng)
    code, _ = dpfm.make_code(rows, SIM, thresholds, dpfm.DPFMParams())
    x = dpfm.encode_rows(rows, SIM, code, rng=rng)
    r, p_star = 2, x.shape[1]
    v, _ = dpfm.top_eigenvectors(x, r)
    exact, _ = dpfm.private_loadings(v, None, rng=rng)
    assert np.sum((exact.T @ v) ** 2) / r == pytest.approx(1.0)
    budget = plan_budget("pure", 5.0, 0.0, dpfm.stage_weights(SIM, dpfm.DPFMParams())).stage("loadings")
    overlaps = [np.sum((dpfm.private_loadings(v, budget, rng=rng)[0].T @ v) ** 2) / r for _ in range(300)]
    assert np.mean(overlaps) == pytest.approx(r / p_star, abs=0.02)


# ---------------------------------------------------------------- the four stages


@pytest.mark.parametrize("notion", ["pure", "zcdp"])
def test_four_stages_release_one_valid_row_per_input_row(notion, rng):
    rows = small_rows(120, rng)
    params = dpfm.DPFMParams(factors=3)
    weights = dpfm.DPFM().stage_weights(SMALL, params)
    plan = plan_budget(notion, 2.0, 1e-6 if notion == "zcdp" else 0.0, weights)
    out, ms, facts = run(dpfm.DPFM(), rows, plan, params, rng)
    assert out.bins.shape == rows.bins.shape
    assert np.all(out.bins >= 0) and np.all(out.bins < np.array(SMALL.n_bins))
    cont = out.unit[:, :2]
    assert np.all((cont >= 0) & (cont <= 1)) and np.isnan(out.unit[:, 2:]).all()
    for j in (0, 1):
        col = SMALL.columns[j]
        np.testing.assert_array_equal(out.bins[:, j], col.to_bins(col.from_unit(out.unit[:, j])))
    assert [m.stage for m in ms] == ["thresholds", "loadings", "scores"]
    assert all(m.defect is None for m in ms)
    key = "rho" if notion == "zcdp" else "epsilon"
    for m in ms:
        assert getattr(m, key) <= getattr(plan.stage(m.stage), key)
    assert ms[1].value.shape == (dpfm.encoded_width(SMALL), 3) and ms[2].value.shape == (120, 3)
    zcdp = notion == "zcdp"
    expected = (
        [math.sqrt(3) / 120, 2 * math.sqrt(3), 2.0] if zcdp else [3 / 120, 6 * math.sqrt(6), 2 * math.sqrt(3)]
    )
    assert [m.norm for m in ms] == ["l2" if zcdp else "l1"] * 3
    assert [m.sensitivity for m in ms] == pytest.approx(expected)
    assert facts["factors_used"] == 3 and facts["encoded_width"] == 6 and facts["clip"] == 3.0
    assert list(facts["ordinal_cumulative_frequencies"]) == ["edu"]


def test_sample_refuses_a_different_row_count(rng):
    rows = small_rows(40, rng)
    params = dpfm.DPFMParams()
    plan = plan_budget("pure", 1.0, 0.0, dpfm.DPFM().stage_weights(SMALL, params))
    with pytest.raises(ValueError, match=r"exactly one row per fitted input row.*remove synthetic_rows"):
        run(dpfm.DPFM(), rows, plan, params, rng, m=41)
    assert dpfm.DPFM().keeps_row_order


def test_paper_variant_is_pure_only_and_records_its_defects(rng):
    rows = small_rows(80, rng)
    params = dpfm.DPFMParams(variant="paper", factors=None)
    weights = dpfm.DPFM().stage_weights(SMALL, params)
    with pytest.raises(ValueError, match=r"set privacy\.accountant: pure"):
        run(dpfm.DPFM(), rows, plan_budget("zcdp", 1.0, 1e-6, weights), params, rng)
    out, ms, facts = run(dpfm.DPFM(), rows, plan_budget("pure", 1.0, 0.0, weights), params, rng)
    assert len(out) == 80
    names = {m.name: m for m in ms}
    assert set(names) == {
        "continuous_mean_sd",
        "raw_cumulative_frequencies",
        "ordinal_cumulative_frequencies",
        "factors_eq3",
        "top_eigenvectors",
        "factor_scores",
    }
    assert names["factors_eq3"].mechanism == "none" and names["factors_eq3"].value[0] == facts["factors_used"]
    assert "sorts" in names["ordinal_cumulative_frequencies"].defect
    assert names["factor_scores"].sensitivity == 2 * facts["factors_used"]
    assert names["top_eigenvectors"].defect is None
    assert facts["clip"] is None and "eq. (3)" in facts["factors_note"]


def test_fit_in_one_call_with_the_paper_budget_split(rng):
    """DPFM2 = (⅔, ⅙, ⅙)ε for (ε₁, ε₂, ε₃), passed as stage weights to ``plan_budget``;
    ``DPFM.fit`` in one call: the ledger's ε sum to ε; ``internals`` reads the
    latent matrix, Ṽ and the exact (orthonormal) V."""
    rows = small_rows(60, rng)
    params = dpfm.DPFMParams()
    plan = plan_budget("pure", 3.0, 0.0, dpfm.stage_weights(SMALL, params, shares=(4 / 6, 1 / 6, 1 / 6)))
    fit = dpfm.DPFM().fit(rows, SMALL, plan, params, m=60, rng=rng)
    eps = {m.stage: m.epsilon for m in fit.measurements}
    assert eps == pytest.approx({"loadings": 2.0, "scores": 0.5, "thresholds": 0.5})
    assert math.fsum(eps.values()) <= 3.0
    inner = dpfm.internals(fit)
    assert inner.latent.shape == (60, 6) and inner.loadings.shape == (6, 2) and len(fit.rows) == 60
    v = inner.exact_loadings
    np.testing.assert_allclose(v.T @ v, np.eye(2), atol=1e-12)


def test_fit_without_noise_is_the_pipeline_without_noise(rng):
    """The ε = ∞ ablation runs the pipeline's steps with no plan: no measurements, the
    pipeline's facts, n rows, and exact loadings (Ṽ = V up to sign: overlap 1)."""
    rows = small_rows(60, rng)
    fit = dpfm.fit_without_noise(rows, SMALL, dpfm.DPFMParams(), rng=rng)
    assert fit.measurements == () and len(fit.rows) == 60
    assert fit.facts["factors_used"] == 2 and fit.facts["encoded_width"] == 6
    assert set(fit.facts["ordinal_cumulative_frequencies"]) == {"edu"}
    inner = dpfm.internals(fit)
    assert np.sum((inner.loadings.T @ inner.exact_loadings) ** 2) / 2 == pytest.approx(1.0)
