"""``private_pca`` (He–Strohmer–Vershynin–Zhu): sensitivities by enumeration, the PMM
budget (corrected vs the paper's literal scales), a privacy-loss audit of the PMM counts,
consistency, the noise-free limit, the §6 rule and the four stages on a mixed schema."""

import itertools
import math

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from dprelease.mechanisms import private_pca as pp
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows
from tests.mechanisms.audit_tools import audit


def _neighbour_table(n_points: int, n: int):
    """All multisets of size n over ``n_points`` points (as sorted index tuples) and, for
    each, the indices of its replace-one neighbours (one element swapped for another)."""
    sets = list(itertools.combinations_with_replacement(range(n_points), n))
    index = {s: i for i, s in enumerate(sets)}
    pairs = set()
    for i, s in enumerate(sets):
        for pos, v in itertools.product(range(n), range(n_points)):
            if v != s[pos]:
                pairs.add((i, index[tuple(sorted((*s[:pos], v, *s[pos + 1 :])))]))
    return sets, np.array(sorted(pairs))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_covariance_sensitivity_by_enumeration(n):
    """d = 2, rows in {0, ½, 1}²: the paper's |ΔM_ij| ≤ 6/n and our L1 Δ = 3d²/n of
    u = (M_ij, i < j; M_ii/2) hold, as do the tighter 2/n, 1/n of the pair-sum argument.
    The exact worst case here is |ΔM_ij| = 1/n and ‖Δu‖₁ = 2/n: the paper is 6× loose."""
    d = 2
    grid = np.array(list(itertools.product([0.0, 0.5, 1.0], repeat=d)))
    sets, pairs = _neighbour_table(len(grid), n)
    cov = np.array([pp.covariance(grid[list(s)]) for s in sets])
    delta = np.abs(cov[pairs[:, 0]] - cov[pairs[:, 1]])
    iu, w = pp._triangle(d)
    worst_entry = delta.max(axis=0)
    worst_l1 = (delta[:, iu[0], iu[1]] * w).sum(axis=1).max()
    assert np.all(worst_entry <= 6 / n)
    assert worst_l1 <= pp.covariance_sensitivity(n, d) == 3 * d * d / n
    assert np.all(worst_entry <= np.where(np.eye(d, dtype=bool), 1 / n, 2 / n) + 1e-12)
    assert worst_entry.max() == pytest.approx(1 / n) and worst_l1 == pytest.approx(2 / n)


def test_covariance_measurement_rebuilds_the_paper_noise(rng):
    """One Laplace measurement with b = 3d²/(εn); M̂ off-diagonal noise Lap(b), diagonal
    Lap(2b) (Alg 2): over many entries the mean |noise| matches b and 2b within 5 s.e."""
    n, d, eps = 50, 30, 1.0
    x = rng.random((n, d))
    m = pp.private_covariance(x, eps, rng)
    assert (m.mechanism, m.norm, m.sensitivity, m.epsilon) == ("laplace", "l1", 3 * d * d / n, eps)
    assert m.scale == pytest.approx(3 * d * d / (eps * n))
    noise = pp.noisy_covariance(m, d) - pp.covariance(x)
    np.testing.assert_allclose(noise, noise.T)
    off = np.abs(noise[np.triu_indices(d, 1)])
    assert abs(off.mean() / m.scale - 1) < 5 / math.sqrt(off.size)
    assert abs(np.abs(np.diag(noise)).mean() / (2 * m.scale) - 1) < 5 / math.sqrt(d)


@pytest.mark.parametrize("d", [1, 3])
def test_mean_sensitivity_is_attained(d):
    """All pairs of points of {0, ½, 1}^d: max ‖Δ X̄‖₁ = d/n, attained by 0 vs 1."""
    n = 5
    grid = np.array(list(itertools.product([0.0, 0.5, 1.0], repeat=d)))
    worst = np.abs(grid[:, None, :] - grid[None, :, :]).sum(-1).max() / n
    m = pp.private_mean(np.vstack([grid[:1]] * n), 1.0, np.random.default_rng(0))
    assert worst == pytest.approx(m.sensitivity) and m.sensitivity == d / n


@pytest.mark.parametrize("n", [2, 3])
def test_pmm_level_sensitivity_by_enumeration(n):
    """d' = 2, depth 3, R = 1, points on and off the cell boundaries: every level's count
    vector changes by exactly 2 in L1 in the worst case (the paper's 1 is the add/remove
    value), the root (n) never changes."""
    depth, radius = 3, 1.0
    axis = [-1.0, -0.3, 0.0, 0.5, 1.0]
    points = np.array(list(itertools.product(axis, repeat=2)))
    sets, pairs = _neighbour_table(len(points), n)
    counts = [np.concatenate(pp.level_counts(points[list(s)], radius, depth)) for s in sets]
    counts = np.array(counts)
    assert np.all(counts[:, :2].sum(axis=1) == n)
    delta = np.abs(counts[pairs[:, 0]] - counts[pairs[:, 1]])
    bounds = np.cumsum([0, 2, 4, 8])
    per_level = [delta[:, a:b].sum(axis=1).max() for a, b in itertools.pairwise(bounds)]
    assert per_level == [2, 2, 2]
    assert pp.level_plan(1.0, depth, 2, "corrected").sensitivity == 2.0
    assert pp.level_plan(1.0, depth, 2, "paper").sensitivity == 1.0


@pytest.mark.parametrize(
    ("epsilon", "depth", "dims"),
    [(1 / 3, 16, 2), (0.1, 1, 1), (0.7, 12, 3), (2.3, 20, 10), (1e-3, 5, 1), (5.0, 24, 7)],
)
def test_corrected_level_budget_sums_to_eps3(epsilon, depth, dims):
    """Σ_j ε_j ≤ ε₃ in both float sums, tight to 1e-12; every recorded ε_j ≥ 2/σ_j (never
    under-recorded); the scales keep the paper's shape 2^{(1/2)(1−1/d')(r−j)}."""
    plan = pp.level_plan(epsilon, depth, dims, "corrected")
    assert plan.levels == tuple(range(1, depth + 1))
    assert math.fsum(plan.epsilons) <= epsilon and sum(plan.epsilons) <= epsilon
    assert math.fsum(plan.epsilons) == pytest.approx(epsilon, rel=1e-12)
    assert all(e >= 2 / s for e, s in zip(plan.epsilons, plan.scales, strict=True))
    ratio = np.array(plan.scales) / plan.scales[-1]
    np.testing.assert_allclose(ratio, 2.0 ** (0.5 * (1 - 1 / dims) * (depth - np.arange(1, depth + 1))))


@pytest.mark.parametrize(("dims", "s_digest"), [(1, 17.0), (2, 5.95), (3, 4.75), (10, 3.7)])
def test_paper_scales_are_not_normalised(dims, s_digest):
    """r = 16, ε₃ = ⅓: the literal σ_j give Σ_{j=0..r} 1/σ_j = S·ε₃ with the digest's S; the
    true replace-one cost is 2ε₃(S − root term) ≈ 2Sε₃, while the recorded (claimed)
    ε_j sum to ε₃."""
    eps, depth = 1 / 3, 16
    plan = pp.level_plan(eps, depth, dims, "paper")
    s = math.fsum(1 / x for x in plan.scales) / eps
    assert s == pytest.approx(s_digest, rel=0.01)
    assert math.fsum(plan.epsilons) <= eps
    true, reasons = pp.paper_defects(eps, depth, dims)
    root_term = 2.0 ** (-0.5 * (1 - 1 / dims) * depth)
    assert true == pytest.approx(2 * eps * (s - root_term))
    assert true > 2 * eps * s * 0.94 and true / eps > 7 and len(reasons) == 2


@pytest.mark.parametrize(("variant", "should_pass"), [("corrected", True), ("paper", False)])
def test_pmm_counts_audit(variant, should_pass, rng):
    """d' = 2, depth 2, ε₃ = 1; D' moves one point from the corner cell (−,−) to (+,+), so
    the counts differ at both levels. The Neyman–Pearson score for Lap_Z is
    Σ_k (|z_k − T'_k| − |z_k − T_k|)/σ_k. Corrected: true ε = 1 = claimed. Paper: the
    literal scales cost 2(2^{−1/4} + 1) ≈ 3.68 against the claimed 1."""
    eps, depth, radius = 1.0, 2, 1.0
    base = np.array([[-0.5, 0.5], [0.5, -0.5], [0.2, 0.2], [-0.9, -0.9]])
    moved = base.copy()
    moved[-1] = [0.9, 0.9]
    plan = pp.level_plan(eps, depth, 2, variant)
    t, tp = (pp.level_counts(a, radius, depth) for a in (base, moved))
    if variant == "paper":
        t, tp = [np.array([4]), *t], [np.array([4]), *tp]
    scales = np.concatenate([np.full(c.size, s) for c, s in zip(t, plan.scales, strict=True)])
    t, tp = np.concatenate(t), np.concatenate(tp)

    def release(which, n, g):
        noise = [pp.discrete_laplace(s, (n, 1), g) for s in scales]
        return (tp if which else t) + np.hstack(noise)

    lb = audit(release, lambda z: np.sum((np.abs(z - tp) - np.abs(z - t)) / scales, axis=1), 0.0, rng)
    claimed = math.fsum(plan.epsilons)
    assert claimed <= eps
    if should_pass:
        assert lb <= claimed
    else:
        assert lb > claimed + 2.0  # measured ≈ 3.6 with seed 42


def test_discrete_laplace_pmf(rng):
    """P(z) = (1 − p)/(1 + p)·p^{|z|}, p = e^{−1/σ}: empirical frequencies of z = −3..3
    within 5 binomial s.e."""
    scale, n = 2.0, 200_000
    z = pp.discrete_laplace(scale, n, rng)
    assert z.dtype.kind == "i"
    p = math.exp(-1 / scale)
    for k in range(-3, 4):
        expected = (1 - p) / (1 + p) * p ** abs(k)
        assert abs(np.mean(z == k) - expected) < 5 * math.sqrt(expected * (1 - expected) / n)


def test_measure_tree_records(rng):
    """Corrected: levels 1..r, root = n without a measurement, ε_j as planned, no defect.
    Paper: a noisy root at level 0 and a defect on every level naming the true cost."""
    a = rng.uniform(-1, 1, size=(200, 2))
    ok = pp.measure_tree(a, 1.0, 0.5, 5, rng)
    plan = pp.level_plan(0.5, 5, 2, "corrected")
    assert ok.root == 200 and [m.name for m in ok.measurements] == [f"pmm_level_{j}" for j in range(1, 6)]
    assert [m.epsilon for m in ok.measurements] == list(plan.epsilons)
    assert all(m.defect is None and m.mechanism == "discrete_laplace" for m in ok.measurements)
    assert [m.value.size for m in ok.measurements] == [2, 4, 8, 16, 32]
    bad = pp.measure_tree(a, 1.0, 0.5, 5, rng, "paper")
    assert bad.measurements[0].name == "pmm_level_0" and len(bad.levels) == 5
    assert all(m.defect and "truly costs" in m.defect for m in bad.measurements)
    assert math.fsum(m.epsilon for m in bad.measurements) <= 0.5


def test_consistency_and_allocation(rng):
    """Noisy counts with negatives: consistent children are non-negative integers summing
    to their parent; allocate(m) sums to m, within 1 of m·w/Σw; an all-negative pair
    splits its parent evenly."""
    depth = 7
    true = pp.level_counts(rng.uniform(-1, 1, size=(60, 2)), 1.0, depth)
    noisy = [c + pp.discrete_laplace(3.0, c.shape, rng) for c in true]
    assert any(np.any(c < 0) for c in noisy)
    levels = pp.consistent_counts(60, noisy, rng)
    parent = np.array([60])
    for lv in levels:
        assert lv.dtype.kind == "i" and np.all(lv >= 0)
        np.testing.assert_array_equal(lv.reshape(-1, 2).sum(axis=1), parent)
        parent = lv
    for m in (0, 1, 37, 1000):
        q = pp.allocate(levels[-1], m, rng)
        assert q.sum() == m and np.all(q >= 0)
        assert np.all(np.abs(q - m * levels[-1] / 60) < 1)
    assert sorted(pp.consistent_counts(5, [np.array([-3, 0])], rng)[0]) == [2, 3]
    np.testing.assert_array_equal(pp.allocate(np.zeros(4, dtype=int), 6, rng).sum(), 6)


def _subspace_data(n, d, k, rng):
    """Rows 0.5 + c·U(z − ½), z uniform in [0, 1]^k, U orthonormal d×k, c = 0.6/max_i‖U_i‖₁:
    an affine k-dim subspace, every entry in [0.2, 0.8]."""
    u = np.linalg.qr(rng.normal(size=(d, k)))[0]
    return 0.5 + (rng.random((n, k)) - 0.5) @ u.T * (0.6 / np.abs(u).sum(axis=1).max()), u


def _box(x: np.ndarray) -> tuple[Schema, MixedRows]:
    """A matrix in [0, 1]^d as a schema of d ``Continuous`` [0, 1] columns: its design
    matrix is x itself, and the output's ``unit`` is Y."""
    cols = tuple(Continuous(f"x{k}", 0.0, 1.0) for k in range(x.shape[1]))
    bins = np.column_stack([c.to_bins(x[:, k]) for k, c in enumerate(cols)])
    return Schema(cols), MixedRows(bins, x.copy())


def _fit(x, epsilon, rng, m=None, **kwargs):
    """Alg 1 in one call: ``PrivatePCA.fit`` with the plan of ``plan_budget`` (⅓ each), m
    rows (default n)."""
    schema, rows = _box(x)
    params = pp.PrivatePCAParams(**kwargs)
    plan = plan_budget("pure", epsilon, 0.0, pp.PrivatePCA().stage_weights(schema, params))
    return pp.PrivatePCA().fit(rows, schema, plan, params, m=len(x) if m is None else m, rng=rng)


def test_noise_free_limit_recovers_the_subspace(rng):
    """ε = 1e9, d = 5, d' = 2, depth 16: every leaf gets its true count, so each synthetic
    point shares a leaf cell with a data point: per-coordinate W1 ≤ the cell diagonal
    2R·√2/2^8, and points lie on the data's affine subspace (distance < 1e-6)."""
    x, u = _subspace_data(3000, 5, 2, rng)
    fit = _fit(x, 1e9, rng, dims=2, depth=16)
    y, projection = fit.rows.unit, fit.stages[1].state.projection
    assert y.shape == x.shape and not projection.adaptive
    resid = (y - x.mean(axis=0)) - (y - x.mean(axis=0)) @ u @ u.T
    assert np.linalg.norm(resid, axis=1).mean() < 1e-6
    diag = 2 * fit.facts["radius"] * math.sqrt(2) / 2**8
    for c in range(5):
        assert wasserstein_distance(x[:, c], y[:, c]) <= diag


def test_eigh_ranks_by_algebraic_eigenvalue(rng):
    """M̂ = Q diag(1, 0.5, −3) Qᵀ: the top eigenvector is Q e₁; an SVD would pick the
    noise direction Q e₃ (|−3| largest)."""
    q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    mhat = q @ np.diag([1.0, 0.5, -3.0]) @ q.T
    v = pp.top_eigenvectors(mhat, 2)
    assert abs(v[:, 0] @ q[:, 0]) == pytest.approx(1) and abs(v[:, 1] @ q[:, 1]) == pytest.approx(1)
    assert abs(np.linalg.svd(mhat)[0][:, 0] @ q[:, 2]) == pytest.approx(1)


@pytest.mark.parametrize("k", [2, 3])
def test_adaptive_dims_finds_the_true_dimension(k, rng):
    """Clean rank-k data in [0, 1]^5, ε = 1e9, n = 3000 (ε₃n = 10¹²): the tail noise
    √(Σλ) ~ d^{1.25}(εn)^{−1/2} ≈ 1e-5 is far below the next penalty ≈ (εn)^{−1/(k+1)},
    and the true λ_k ≫ both, so the §6 rule returns k (through the real stages 1–2)."""
    x, _ = _subspace_data(3000, 5, k, rng)
    plan = plan_budget("pure", 1e9, 0.0, dict(pp.STAGE_WEIGHTS))
    e1, e2, e3 = (plan.stage(s).epsilon for s in ("covariance", "mean", "measure"))
    cov, mean = pp.private_covariance(x, e1, rng), pp.private_mean(x, e2, rng)
    proj = pp.private_projection(cov, mean, None, e3, 3000)
    assert proj.adaptive and proj.dims == k
    assert proj.radius == pytest.approx(math.sqrt(5) + np.linalg.norm(x.mean(axis=0)))


SCHEMA = Schema(
    (Continuous("income", 0.0, 100.0), Ordinal("size", ("s", "m", "l")), Nominal("colour", ("r", "g", "b")))
)


def _rows(n, rng):
    t = rng.random(n)
    size = np.minimum(2, (3 * t).astype(int))
    colour = rng.integers(0, 3, n)
    income = np.clip(100 * t + rng.normal(0, 5, n), 0, 100)
    unit = np.column_stack([SCHEMA.columns[0].to_unit(income), np.full(n, np.nan), np.full(n, np.nan)])
    bins = np.column_stack([SCHEMA.columns[0].to_bins(income), size, colour]).astype(np.int32)
    return MixedRows(bins, unit)


@pytest.mark.parametrize("variant", ["corrected", "paper"])
def test_four_stages_on_a_mixed_schema(variant, rng):
    """Encode → estimate → sample → decode: m rows with valid bins, continuous values in
    [0, 1], NaN elsewhere; every stage's recorded ε within its plan share; public facts;
    defects exactly for the paper variant."""
    synth, params = pp.PrivatePCA(), pp.PrivatePCAParams(variant=variant, dims=2)
    plan = plan_budget("pure", 3.0, 0.0, synth.stage_weights(SCHEMA, params))
    synth.check(SCHEMA, params)
    enc = synth.encode(_rows(2000, rng), SCHEMA, plan, params, rng)
    est = synth.estimate(enc.state, plan, params, rng)
    smp = synth.sample(est.state, params, 500, rng)
    out = synth.decode(smp.state, SCHEMA, params, rng)
    assert isinstance(out, MixedRows) and len(out) == 500 and out.bins.shape == (500, 3)
    assert np.all((out.bins >= 0) & (out.bins < np.array(SCHEMA.n_bins)))
    assert np.all((out.unit[:, 0] >= 0) & (out.unit[:, 0] <= 1)) and np.all(np.isnan(out.unit[:, 1:]))
    measurements = (*enc.measurements, *est.measurements, *smp.measurements)
    for s in plan.stages:
        assert math.fsum(m.epsilon for m in measurements if m.stage == s.stage) <= s.epsilon
    assert {m.stage for m in measurements} == {"covariance", "mean", "measure"}
    assert est.facts["dims"] == 2 and est.facts["depth"] == math.ceil(math.log2(2000))
    assert len(est.facts["level_scales"]) == len([m for m in measurements if m.stage == "measure"])
    non_dp = [m for m in measurements if m.defect]
    if variant == "corrected":
        assert synth.defects(params) == [] and not non_dp
    else:
        assert len(synth.defects(params)) == 2 and {m.stage for m in non_dp} == {"measure"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "exact"}, "params.variant"),
        ({"dims": 0}, "params.dims"),
        ({"dims": True}, "params.dims"),
        ({"depth": 0}, "params.depth"),
        ({"depth": pp.MAX_DEPTH + 1}, "params.depth"),
    ],
)
def test_params_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pp.PrivatePCAParams(**kwargs)


def test_check_and_inputs_are_validated(rng):
    with pytest.raises(ValueError, match=r"params\.dims"):
        pp.PrivatePCA().check(SCHEMA, pp.PrivatePCAParams(dims=6))  # design width is 5
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pp.private_covariance(np.full((4, 2), 1.5), 1.0, rng)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pp.private_mean(np.full((4, 2), 1.5), 1.0, rng)


# ---------------------------------------------------------------- PSMM (Alg 5)


def _ball_points(axis, dims, radius):
    pts = np.array(list(itertools.product(axis, repeat=dims)))
    return pts[np.linalg.norm(pts, axis=1) <= radius]


@pytest.mark.parametrize("n", [2, 3])
def test_psmm_grid_count_sensitivity_by_enumeration(n):
    """d' = 2, R = 1, δ = 0.5: points on cell boundaries, at −R and near it. Every point's
    cell ⌊a/δ⌋ is listed (no nearest-cell fallback); the count vector sums to n and its
    worst replace-one L1 change is exactly 2 (the paper's 1 is the add/remove value)."""
    radius, delta = 1.0, 0.5
    points = _ball_points([-1.0, -0.999, -0.5, 0.0, 0.7], 2, radius)
    cells = pp.psmm_grid(radius, 2, delta)
    listed = {tuple(c) for c in cells}
    assert all(tuple(k) in listed for k in np.floor(points / delta).astype(int))
    sets, pairs = _neighbour_table(len(points), n)
    counts = np.array([pp.grid_counts(points[list(s)], cells, delta) for s in sets])
    assert np.all(counts.sum(axis=1) == n)
    assert np.abs(counts[pairs[:, 0]] - counts[pairs[:, 1]]).sum(axis=1).max() == 2
    assert pp.psmm_scale(1.0)[1] == 2.0 and pp.psmm_scale(1.0, "paper")[1] == 1.0


@pytest.mark.parametrize(("radius", "dims", "delta"), [(1.0, 3, 0.3), (2.5, 3, 0.7), (1.7, 4, 0.9)])
def test_psmm_grid_covers_the_ball(radius, dims, delta, rng):
    """L = every cell whose closure meets the ball: random points in the ball and on the
    sphere (incl. ±R·e_c) all fall in listed cells, although some of those cells are
    anchored outside the ball (the digest's pitfall); no listed cell misses the ball;
    ``psmm_grid_size`` agrees and its fallback is a lower bound."""
    u = rng.normal(size=(4000, dims))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    a = np.vstack([u * radius, u * radius * rng.random((4000, 1)) ** (1 / dims)])
    a = np.vstack([a, radius * np.eye(dims), -radius * np.eye(dims)])
    cells = pp.psmm_grid(radius, dims, delta)
    listed = {tuple(c) for c in cells}
    assert all(tuple(k) in listed for k in np.floor(a / delta).astype(int))
    anchors = np.linalg.norm(cells * delta, axis=1)
    assert np.any(anchors > radius)
    nearest = np.linalg.norm(np.clip(0.0, cells * delta, (cells + 1) * delta), axis=1)
    assert np.all(nearest <= radius * (1 + 1e-9))
    assert pp.psmm_grid_size(radius, dims, delta) == (len(cells), True)
    assert len(np.unique(cells, axis=0)) == len(cells)
    size, exact = pp.psmm_grid_size(10.0, 3, 0.01)
    assert not exact and size >= 4 / 3 * math.pi * 1e9
    with pytest.raises(ValueError, match="above 10"):
        pp.psmm_grid(radius, dims, delta, max_cells=10)


def _bl_by_dual(nu, q, centres):
    """max Σ f_i(ν_i − q_i) s.t. |f_i| ≤ 1, f_i − f_j ≤ ‖c_i − c_j‖₂ for all i ≠ j."""
    from scipy.optimize import linprog

    size = nu.size
    i, j = np.nonzero(~np.eye(size, dtype=bool))
    a_ub = np.zeros((i.size, size))
    a_ub[np.arange(i.size), i], a_ub[np.arange(i.size), j] = 1.0, -1.0
    res = linprog(
        -(nu - q),
        A_ub=a_ub,
        b_ub=np.linalg.norm(centres[i] - centres[j], axis=1),
        bounds=(-1, 1),
        method="highs",
    )
    assert res.success
    return -res.fun


def test_closest_probability_matches_the_dual_bl_distance(rng):
    """A signed ν on 16 cells (d' = 2, R = 1, δ = 0.5): ν̂ is a probability vector, the LP
    value equals d_BL(ν, ν̂) by the dual LP (all pairs, no pruning) within 1e-7, and no
    other probability vector is closer. A probability ν is its own optimum (value 0)."""
    cells = pp.psmm_grid(1.0, 2, 0.5)
    centres = (cells + 0.5) * 0.5
    nu = rng.normal(0.0, 0.1, cells.shape[0]) + rng.dirichlet(np.ones(cells.shape[0]))
    nuhat, value = pp.closest_probability(nu, centres)
    assert np.all(nuhat >= 0) and nuhat.sum() == pytest.approx(1.0, abs=1e-12)
    assert abs(value - _bl_by_dual(nu, nuhat, centres)) < 1e-7
    for q in rng.dirichlet(np.ones(cells.shape[0]), size=5):
        assert _bl_by_dual(nu, q, centres) >= value - 1e-9
    p = rng.dirichlet(np.ones(cells.shape[0]))
    phat, zero = pp.closest_probability(p, centres)
    assert zero == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(phat, p, atol=1e-9)


@pytest.mark.parametrize(("distance", "expected"), [(0.3, 0.06), (3.0, 0.4)])
def test_closest_probability_two_cells_by_hand(distance, expected):
    """ν = (1.2, −0.2): ν̂ = (1, 0); the 0.2 excess either moves to the negative cell
    (cost 0.2·d) or is destroyed there and created here (cost 0.2 + 0.2): the BL value
    is 0.2·min(d, 2): 0.06 for d = 0.3, 0.4 for d = 3 (the bounded part of BL)."""
    nuhat, value = pp.closest_probability(np.array([1.2, -0.2]), np.array([[0.0], [distance]]))
    np.testing.assert_allclose(nuhat, [1.0, 0.0], atol=1e-12)
    assert value == pytest.approx(expected, abs=1e-12)


def test_psmm_measurement_budget(rng):
    """One measurement for the whole grid. corrected: σ = 2/ε₃ (≥, rounded up), recorded
    sensitivity 2 and ε₃, 2/σ ≤ ε₃. paper: Lap_Z(1/ε₃), sensitivity 1, a defect naming
    the true cost 2ε₃."""
    a = rng.uniform(-0.5, 0.5, size=(100, 3))
    eps = 0.7
    ok = pp.measure_grid(a, 1.0, eps, 0.4, rng)
    m = ok.measurement
    assert (m.name, m.stage, m.mechanism, m.sensitivity, m.epsilon, m.defect) == (
        "psmm_counts",
        "measure",
        "discrete_laplace",
        2.0,
        eps,
        None,
    )
    assert m.scale >= 2 / eps and m.scale == pytest.approx(2 / eps) and 2 / m.scale <= eps
    assert m.value.size == ok.cells.shape[0] == pp.psmm_grid_size(1.0, 3, 0.4)[0]
    bad = pp.measure_grid(a, 1.0, eps, 0.4, rng, "paper").measurement
    assert (bad.scale, bad.sensitivity, bad.epsilon) == (1 / eps, 1.0, eps)
    assert "truly costs 1.4" in bad.defect


@pytest.mark.parametrize(("variant", "should_pass"), [("corrected", True), ("paper", False)])
def test_psmm_counts_audit(variant, should_pass, rng):
    """d' = 2, R = 1, δ = 1 (12 cells), ε₃ = 1; D' moves one point to another cell. The
    Neyman–Pearson score for Lap_Z is Σ_v (|z_v − T'_v| − |z_v − T_v|)/σ. Corrected
    (σ = 2): true ε = 1 = claimed. Paper (σ = 1): true ε = 2 against the claimed 1."""
    eps, radius, delta = 1.0, 1.0, 1.0
    cells = pp.psmm_grid(radius, 2, delta)
    base = np.array([[-0.5, 0.5], [0.5, -0.5], [0.2, 0.2], [-0.9, -0.1]])
    moved = base.copy()
    moved[-1] = [0.1, 0.9]
    t, tp = (pp.grid_counts(a, cells, delta) for a in (base, moved))
    assert np.abs(t - tp).sum() == 2
    scale, _ = pp.psmm_scale(eps, variant)

    def release(which, n, g):
        return (tp if which else t) + pp.discrete_laplace(scale, (n, t.size), g)

    lb = audit(release, lambda z: np.sum((np.abs(z - tp) - np.abs(z - t)) / scale, axis=1), 0.0, rng)
    if should_pass:
        assert lb <= eps
    else:
        assert lb > eps + 0.5  # true 2


def test_psmm_noise_free_limit_keeps_cell_counts(rng):
    """ε₃ = 1e9 (noise 0 w.h.p.): ν is already a probability vector, ν̂ = ν, and m = n
    output points land exactly n_v in each cell v."""
    radius, delta = 1.0, 0.5
    a = rng.normal(size=(300, 3))
    a *= (radius * rng.random((300, 1)) ** (1 / 3)) / np.linalg.norm(a, axis=1, keepdims=True)
    grid = pp.measure_grid(a, radius, 1e9, delta, rng)
    points, bl = pp.psmm_sample(grid, rng)
    assert bl == pytest.approx(0.0, abs=1e-12) and points.shape == (300, 3)
    np.testing.assert_array_equal(
        pp.grid_counts(points, grid.cells, delta), pp.grid_counts(a, grid.cells, delta)
    )
    q = pp.round_measure(np.array([0.5, 0.25, 0.25, 0.0]), 7, rng)
    assert q.sum() == 7 and q[3] == 0 and q[0] in (3, 4)


def test_subroutine_choice_and_its_limit(rng):
    """'psmm' with too large a grid raises naming params.subroutine, the size and the
    limit; 'auto' falls back to PMM and says why in the facts (d' < 3, or grid size)."""
    x = _rows(2000, rng)
    synth = pp.PrivatePCA()
    params = pp.PrivatePCAParams(dims=3, subroutine="psmm")
    plan = plan_budget("pure", 3.0, 0.0, synth.stage_weights(SCHEMA, params))
    enc = synth.encode(x, SCHEMA, plan, params, rng)
    with pytest.raises(ValueError, match=r"params\.subroutine.*cells, more than PSMM_MAX_CELLS = 400"):
        synth.estimate(enc.state, plan, params, rng)
    auto = synth.estimate(enc.state, plan, pp.PrivatePCAParams(dims=3, subroutine="auto"), rng)
    assert auto.facts["subroutine"] == "pmm" and auto.facts["grid_cells"] > pp.PSMM_MAX_CELLS
    assert "PSMM_MAX_CELLS" in auto.facts["subroutine_note"]
    assert [m.name for m in auto.measurements][1:] == [f"pmm_level_{j}" for j in range(1, 12)]
    two = synth.estimate(enc.state, plan, pp.PrivatePCAParams(dims=2, subroutine="auto"), rng)
    assert two.facts["subroutine"] == "pmm" and "< 3" in two.facts["subroutine_note"]
    default = synth.estimate(enc.state, plan, pp.PrivatePCAParams(dims=3), rng)
    assert default.facts["subroutine"] == "pmm" and default.facts["grid_cells"] is None
    with pytest.raises(ValueError, match=r"params\.subroutine"):
        pp.PrivatePCAParams(subroutine="PSMM")


@pytest.mark.parametrize("variant", ["corrected", "paper"])
def test_four_stages_with_psmm(variant, rng):
    """n = 500, ε = 3 with stage weights 1 : 1 : 0.003 (ε₃n ≈ 2.2, a precise mean so R ≈ 3.1),
    d = 5, d' = 3, the paper's δ: the grid fits (≈ 280 cells). With the default ⅓ split
    the noisy mean at ε₂n ≈ 2 inflates R to ≈ 7 and |L| to ≈ 2000 (see the report). One
    ``psmm_counts`` measurement in stage "measure", budgets within the plan, m rows with
    valid bins; the paper variant's defect list names the PSMM count sensitivity."""
    synth, params = pp.PrivatePCA(), pp.PrivatePCAParams(variant=variant, dims=3, subroutine="psmm")
    plan = plan_budget("pure", 3.0, 0.0, {"covariance": 1.0, "mean": 1.0, "measure": 0.003})
    enc = synth.encode(_rows(500, rng), SCHEMA, plan, params, rng)
    est = synth.estimate(enc.state, plan, params, rng)
    smp = synth.sample(est.state, params, 150, rng)
    out = synth.decode(smp.state, SCHEMA, params, rng)
    assert len(out) == 150 and np.all((out.bins >= 0) & (out.bins < np.array(SCHEMA.n_bins)))
    assert np.all((out.unit[:, 0] >= 0) & (out.unit[:, 0] <= 1))
    assert est.facts["subroutine"] == "psmm" and 8 <= est.facts["grid_cells"] <= pp.PSMM_MAX_CELLS
    assert est.facts["depth"] is None and smp.facts["bl_distance"] >= 0
    measurements = (*enc.measurements, *est.measurements)
    assert [m.name for m in measurements if m.stage == "measure"] == ["psmm_counts"]
    assert est.measurements[-1].value.size == est.facts["grid_cells"]
    for s in plan.stages:
        assert math.fsum(m.epsilon for m in measurements if m.stage == s.stage) <= s.epsilon
    if variant == "corrected":
        assert synth.defects(params) == [] and all(m.defect is None for m in measurements)
    else:
        assert len(synth.defects(params)) == 1 and "PSMM" in synth.defects(params)[0]
        assert est.measurements[-1].defect and len(synth.defects(pp.PrivatePCAParams(variant="paper"))) == 2


def test_fit_with_psmm_cells(rng):
    """``PrivatePCA.fit`` with ``subroutine='psmm', psmm_cells=64`` on [0, 1]^4 data,
    d' = 3, ε = 3, n = 300: the paper's δ would need thousands of cells; the public target
    coarsens δ to at most 64 cells. n rows in [0, 1]^4, one PSMM measurement; the default
    stays PMM. ``psmm_delta_for_cells`` is nearly the finest: the next step has more cells."""
    x = _subspace_data(300, 4, 3, rng)[0]
    with pytest.raises(ValueError, match=r"params\.subroutine"):
        _fit(x, 3.0, rng, dims=3, subroutine="psmm")
    fit = _fit(x, 3.0, rng, dims=3, subroutine="psmm", psmm_cells=64)
    y, facts = fit.rows.unit, fit.facts
    assert y.shape == x.shape and np.all((y >= 0) & (y <= 1))
    assert facts["subroutine"] == "psmm" and facts["depth"] is None and 8 <= facts["grid_cells"] <= 64
    assert [m.name for m in fit.measurements] == ["covariance", "mean", "psmm_counts"]
    pmm_facts = _fit(x, 3.0, rng, dims=3).facts
    assert pmm_facts["subroutine"] == "pmm" and pmm_facts["depth"] == 9 and pmm_facts["grid_cells"] is None
    for radius, dims, cells in [(3.0, 3, 400), (6.7, 3, 64), (1.0, 2, 12), (2.0, 4, 16)]:
        delta = pp.psmm_delta_for_cells(radius, dims, cells)
        s = 0 if delta > radius else round((radius / delta) ** 2)
        assert pp.psmm_grid_size(radius, dims, delta)[0] <= cells
        assert pp.psmm_grid_size(radius, dims, radius / math.sqrt(s + 1) * (1 - 1e-6))[0] > cells
    with pytest.raises(ValueError, match="2\\^3 = 8"):
        pp.psmm_delta_for_cells(1.0, 3, 7)
    for bad in (1, 401, 3.0):
        with pytest.raises(ValueError, match=r"params\.psmm_cells"):
            pp.PrivatePCAParams(psmm_cells=bad)
