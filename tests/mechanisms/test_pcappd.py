"""``pcappd`` (DP-PCA publishing, Alg A): the exact moment sensitivity by enumeration and
its attaining pair, the paper's categorical formula exceeded (the digest's
counterexamples), audits, the rows-stage sensitivity attained, the noise-free limit and
the four pipeline stages."""

import itertools
import math

import numpy as np
import pytest

from dprelease.mechanisms import pcappd
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import design
from dprelease.mechanisms.primitives import laplace_mechanism
from dprelease.mechanisms.publishing import (
    layout,
    moment_sensitivity,
    paper_moment_sensitivity,
)
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows
from tests.mechanisms.audit_tools import audit
from tests.mechanisms.small import SMALL, run, small_rows


def _records(widths: tuple[int, ...], grid: tuple[float, ...]) -> np.ndarray:
    """Every design row: numerics on ``grid``, every category of every block."""
    choices = [[np.array([g]) for g in grid] if w == 1 else list(np.eye(w)) for w in widths]
    return np.array([np.concatenate(c) for c in itertools.product(*choices)])


def _phi(x: np.ndarray) -> np.ndarray:
    """One record's contribution to (S₁, triu(S₂)), row-wise."""
    iu = np.triu_indices(x.shape[1])
    return np.concatenate([x, (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]], axis=1)


def _worst(widths: tuple[int, ...], grid: tuple[float, ...]) -> float:
    """max over all replace-one pairs of records of ‖φ(x) − φ(x')‖₁."""
    f = _phi(_records(widths, grid))
    return max(float(np.abs(f - row).sum(axis=1).max()) for row in f)


def _attaining_pair(widths: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The proof's maximiser: u = 1, v = σ*/p₁ (every coordinate), every category changed."""
    lay = layout(widths)
    p1, p2 = lay.p1, lay.p2
    sigma = min(p1, (p2 - 1) * p1 / (p1 + 1)) if p2 > 1 else 0.0
    x, xp = np.zeros(lay.width), np.zeros(lay.width)
    x[list(lay.numeric)] = 1.0
    xp[list(lay.numeric)] = sigma / p1 if p1 else 0.0
    for b in lay.blocks:
        x[b.start], xp[b.start + 1] = 1.0, 1.0
    return x, xp


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"variant": "literal"}, "variant"),
        ({"components": 0}, "components"),
        ({"components": True}, "components"),
        ({"components": 2.0}, "components"),
    ],
)
def test_bad_params_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=rf"params\.{name} "):
        pcappd.PCAPPDParams(**kwargs)


def test_check_defects_and_weights():
    schema = Schema((Continuous("a", 0.0, 1.0), Nominal("b", ("x", "y", "z"))))
    pcappd.check(schema, pcappd.PCAPPDParams(components=4))
    with pytest.raises(ValueError, match=r"params\.components \(5\) must be at most the design width \(4\)"):
        pcappd.check(schema, pcappd.PCAPPDParams(components=5))
    assert pcappd.defects(pcappd.PCAPPDParams()) == []
    assert "(5, 5): 91⅔ vs 85" in pcappd.defects(pcappd.PCAPPDParams(variant="paper"))[0]
    assert pcappd.stage_weights(schema, pcappd.PCAPPDParams()) == {"moments": 0.5, "rows": 0.5}
    assert pcappd.PCAPPD().notions == ("pure",) and pcappd.PCAPPD().keeps_row_order


# ---------------------------------------------------------------- moment sensitivity


@pytest.mark.parametrize(
    ("widths", "grid", "exact", "paper"),
    [
        ((1, 2, 2), (0, 0.25, 0.5, 0.75, 1), 14.25, 14.0),  # v* = ½ on the grid
        ((1, 1, 2, 3), tuple(np.arange(7) / 6), 19 + 1 / 3, 19.0),  # v* = ⅓
        ((1, 1, 1, 3), (0, 0.5, 1), 16.0, 16.0),  # p₂ = 1: the paper's s is exact
        ((2, 3, 2), (0, 1), 18.0, 18.0),  # nominal only
        ((1, 1, 1, 1), (0, 0.5, 1), 14.0, 14.0),  # numeric only: p + p(p+1)/2
    ],
)
def test_moment_sensitivity_is_the_exact_maximum(widths, grid, exact, paper):
    """All replace-one pairs of records (numerics on the grid, every category): the maximum
    L1 change equals the exact Δ when the grid holds the proof's maximiser and never
    exceeds it; the paper's s is below it as soon as p₁ ≥ 1, p₂ ≥ 2."""
    lay = layout(widths)
    assert moment_sensitivity(lay.p1, lay.p2) == pytest.approx(exact)
    assert paper_moment_sensitivity(lay.p1, lay.p2) == pytest.approx(paper)
    assert _worst(widths, grid) == pytest.approx(exact, abs=1e-9)
    x, xp = _attaining_pair(widths)
    assert np.abs(_phi(x[None]) - _phi(xp[None])).sum() == pytest.approx(exact)


@pytest.mark.parametrize(
    ("p1", "p2", "vertex", "exact", "paper"), [(5, 5, 91, 91 + 2 / 3, 85), (3, 6, 90, 90, 81)]
)
def test_paper_formula_is_exceeded_at_the_digest_counterexamples(p1, p2, vertex, exact, paper):
    """Numerics on {0, 1}, binary blocks, all pairs: the maximum is the digest's 91 / 90,
    above the paper's 85 / 81; the exact Δ (interior maximiser at (5, 5)) is 91⅔ / 90."""
    widths = (1,) * p1 + (2,) * p2
    assert _worst(widths, (0.0, 1.0)) == vertex
    assert paper_moment_sensitivity(p1, p2) == paper < vertex <= moment_sensitivity(p1, p2)
    assert moment_sensitivity(p1, p2) == pytest.approx(exact)
    x, xp = _attaining_pair(widths)
    assert np.abs(_phi(x[None]) - _phi(xp[None])).sum() == pytest.approx(exact)


def test_random_continuous_pairs_stay_below_the_bound(rng):
    """Random numerics (a third pinned to 0 or 1) and categories at (p₁, p₂) = (4, 3)."""
    widths = (1, 1, 1, 1, 2, 3, 4)
    lay = layout(widths)
    bound = moment_sensitivity(lay.p1, lay.p2)

    def draw(k):
        x = np.zeros((k, lay.width))
        u = rng.random((k, lay.p1))
        pinned = rng.random(u.shape) < 0.3
        u[pinned] = rng.integers(0, 2, pinned.sum())
        x[:, list(lay.numeric)] = u
        for b in lay.blocks:
            x[np.arange(k), b.start + rng.integers(0, b.stop - b.start, k)] = 1.0
        return x

    change = np.abs(_phi(draw(20_000)) - _phi(draw(20_000))).sum(axis=1)
    assert change.max() <= bound + 1e-9 and change.max() > 0.8 * bound


def _moment_release(widths, delta1, epsilon):
    x, xp = _attaining_pair(widths)
    t, tp = _phi(x[None])[0], _phi(xp[None])[0]

    def release(which, n, g):
        value = np.tile(tp if which else t, (n, 1))
        return laplace_mechanism(
            value, l1_sensitivity=delta1, epsilon=epsilon, rng=g, name="m", stage="s"
        ).value

    def score(z):
        return np.sum(np.abs(z - tp) - np.abs(z - t), axis=1) * epsilon / delta1

    return release, score


@pytest.mark.parametrize(("kind", "should_pass"), [("corrected", True), ("third", False)])
def test_moment_release_audit(kind, should_pass, rng):
    """Claimed ε = 1 on the attaining pair at (p₁, p₂) = (1, 2) (20 coordinates).
    ``corrected``: Δ = 14.25, the bound must hold. ``third``: positive control with Δ/3
    (true ε = 3). The paper's s = 14 is only 1.8 % small here (85 vs 91⅔ is 7.8 % at
    (5, 5)): a privacy loss spread over 20-135 coordinates hides such a gap from a
    2·10⁵-run audit (privacy-testing note §4), so the enumeration above is the test."""
    widths, eps = (1, 2, 2), 1.0
    delta1 = moment_sensitivity(1, 2) * (1 / 3 if kind == "third" else 1.0)
    lb = audit(*_moment_release(widths, delta1, eps), 0.0, rng)
    assert lb <= eps if should_pass else lb > eps + 0.5


# ---------------------------------------------------------------- rows stage


def _householder_frame(d: np.ndarray, k: int, rng) -> np.ndarray:
    """An orthonormal U (p, k) with d̂ᵀU = (1/√k)·1: a frame [d̂, …] rotated by the
    reflection sending e₁ to 1/√k (symmetric, so its first row is 1/√k too)."""
    q, _ = np.linalg.qr(np.column_stack([d, rng.normal(size=(len(d), k - 1))]))
    q *= np.sign(q[:, 0] @ d)
    if k == 1:
        return q
    v = np.eye(k)[0] - np.full(k, 1 / math.sqrt(k))
    return q @ (np.eye(k) - 2 * np.outer(v, v) / (v @ v))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_rows_sensitivity_is_valid_and_attained(k, rng):
    """‖(x − x')U_k‖₁ ≤ √(k(p₁+2p₂)) for random pairs and frames, with equality for
    x = (1, a), x' = (0, b) (every category changed) and a frame spreading x − x' evenly;
    the paper's √(kp) is larger."""
    widths = (1, 1, 3, 2, 4)
    lay = layout(widths)
    bound = pcappd.rows_sensitivity(lay, k, "corrected")
    assert bound == pytest.approx(math.sqrt(k * (2 + 6)))
    paper = pcappd.rows_sensitivity(lay, k, "paper")
    assert paper == pytest.approx(math.sqrt(k * 11)) and paper > bound
    recs = _records(widths, (0.0, 0.3, 1.0))
    for _ in range(20):
        u = np.linalg.qr(rng.normal(size=(lay.width, k)))[0]
        pairs = recs[rng.integers(0, len(recs), (2, 3000))]
        assert np.abs((pairs[0] - pairs[1]) @ u).sum(axis=1).max() <= bound + 1e-9
    x = np.array([1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0.0])
    xp = np.array([0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0.0])
    u = _householder_frame(x - xp, k, rng)
    np.testing.assert_allclose(u.T @ u, np.eye(k), atol=1e-12)
    assert np.abs((x - xp) @ u).sum() == pytest.approx(bound)


# ---------------------------------------------------------------- pipeline


def _plan(params, eps=2.0):
    return plan_budget("pure", eps, 0.0, pcappd.PCAPPD().stage_weights(SMALL, params))


def test_four_stages_release_one_valid_row_per_input_row(rng):
    rows = small_rows(150, rng)
    params = pcappd.PCAPPDParams(components=2)
    plan = _plan(params)
    out, ms, facts = run(pcappd.PCAPPD(), rows, plan, params, rng)
    assert out.bins.shape == rows.bins.shape
    assert np.all(out.bins >= 0) and np.all(out.bins < np.array(SMALL.n_bins))
    assert np.all((out.unit[:, :2] >= 0) & (out.unit[:, :2] <= 1)) and np.isnan(out.unit[:, 2:]).all()
    for j in (0, 1):
        col = SMALL.columns[j]
        np.testing.assert_array_equal(out.bins[:, j], col.to_bins(col.from_unit(out.unit[:, j])))
    assert [m.stage for m in ms] == ["moments", "rows"] and all(m.defect is None for m in ms)
    assert ms[0].sensitivity == pytest.approx(moment_sensitivity(3, 2)) == pytest.approx(25.375)
    assert ms[1].sensitivity == pytest.approx(math.sqrt(2 * 7)) and ms[1].value.shape == (150, 2)
    for m in ms:
        assert m.epsilon <= plan.stage(m.stage).epsilon and m.scale == pytest.approx(
            m.sensitivity / m.epsilon
        )
    assert facts["numeric_coordinates"] == 3 and facts["nominal_columns"] == 2 and facts["design_width"] == 8


def test_noise_free_limit_with_all_components_reproduces_the_rows(rng):
    """k = p: U_k is a basis, so X̂ = X + (noise)U_kᵀ; at ε = 10¹² the noise is ~10⁻¹⁰
    and decoding returns every bin and the continuous values."""
    rows = small_rows(200, rng)
    params = pcappd.PCAPPDParams(components=design(SMALL).width)
    out, _, _ = run(pcappd.PCAPPD(), rows, _plan(params, 1e12), params, rng)
    np.testing.assert_array_equal(out.bins, rows.bins)
    np.testing.assert_allclose(out.unit[:, :2], rows.unit[:, :2], atol=1e-6)


def test_sample_refuses_a_different_row_count_and_zcdp(rng):
    rows = small_rows(40, rng)
    params = pcappd.PCAPPDParams()
    with pytest.raises(ValueError, match=r"exactly one row per fitted input row.*remove synthetic_rows"):
        run(pcappd.PCAPPD(), rows, _plan(params), params, rng, m=41)
    zplan = plan_budget("zcdp", 1.0, 1e-6, pcappd.PCAPPD().stage_weights(SMALL, params))
    with pytest.raises(ValueError, match=r"privacy\.accountant: pure"):
        run(pcappd.PCAPPD(), rows, zplan, params, rng)


def test_paper_variant_records_the_too_small_sensitivity(rng):
    """SMALL has p₁ = 3, p₂ = 2: the paper's s = 25 < 25.375, and √(kp) for the rows."""
    rows = small_rows(60, rng)
    params = pcappd.PCAPPDParams(variant="paper", components=2)
    _, ms, _ = run(pcappd.PCAPPD(), rows, _plan(params), params, rng)
    assert ms[0].sensitivity == 25.0 and "below the exact maximum 25.375" in ms[0].defect
    assert ms[1].sensitivity == pytest.approx(math.sqrt(2 * 8)) and ms[1].defect is None
    numeric = Schema((Continuous("a", 0.0, 1.0), Ordinal("b", ("x", "y", "z"))))
    rows2 = MixedRows(
        np.zeros((30, 2), dtype=np.int32), np.column_stack([rng.random(30), np.full(30, np.nan)])
    )
    enc = pcappd.PCAPPD().encode(rows2, numeric, _plan(params), params, rng)
    est = pcappd.PCAPPD().estimate(enc.state, _plan(params), params, rng)
    assert est.measurements[0].defect is None and est.measurements[0].sensitivity == 5.0


def test_fit_in_one_call_on_a_box_schema(rng):
    """A [0, 1] matrix with two numerics and one-hot blocks of 3 and 2 is a schema
    (``Continuous`` [0, 1], ``Nominal``): ``PCAPPD.fit`` in one call with the plan of
    ``plan_budget``. The raw X̂ (``Fit.stages[2].state``) decodes to valid rows (step 7:
    one category per block, numerics in [0, 1]); U_k (p, k); ε within the plan; k > p
    refused before any noise."""
    schema = Schema(
        (
            Continuous("u", 0.0, 1.0),
            Continuous("v", 0.0, 1.0),
            Nominal("a", ("x", "y", "z")),
            Nominal("b", ("n", "y")),
        )
    )
    unit = np.column_stack([rng.random((100, 2)), np.full((100, 2), np.nan)])
    bins = np.column_stack(
        [
            schema.columns[0].to_bins(unit[:, 0]),
            schema.columns[1].to_bins(unit[:, 1]),
            rng.integers(0, 3, 100),
            rng.integers(0, 2, 100),
        ]
    )
    rows = MixedRows(bins.astype(np.int32), unit)
    params = pcappd.PCAPPDParams(components=2)
    plan = plan_budget("pure", 1.0, 0.0, pcappd.PCAPPD().stage_weights(schema, params))
    fit = pcappd.PCAPPD().fit(rows, schema, plan, params, m=100, rng=rng)
    axes = fit.stages[1].state.axes
    raw, published = fit.stages[2].state, design(schema).encode(fit.rows)
    assert raw.shape == published.shape == (100, 7) and axes.shape == (7, 2)
    assert np.all(published[:, 2:5].sum(axis=1) == 1) and np.all(published[:, 5:].sum(axis=1) == 1)
    assert np.all((published >= 0) & (published <= 1))
    assert math.fsum(m.epsilon for m in fit.measurements) <= 1.0
    with pytest.raises(ValueError, match=r"params\.components \(8\) must be at most the design width \(7\)"):
        pcappd.PCAPPD().fit(rows, schema, plan, pcappd.PCAPPDParams(components=8), m=100, rng=rng)
