"""``lda_ppd`` (DP-LDA publishing, Alg B): the exact class-moment sensitivity by
enumeration, the paper's Δ exceeded, audits, the weighted-median step, greedy synthesis
(noise-free reproduction, its known loss, time) and the four pipeline stages."""

import itertools
import math
import time

import numpy as np
import pytest

from dprelease.mechanisms import lda_ppd
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.primitives import laplace_mechanism
from dprelease.mechanisms.publishing import class_moment_sensitivity, layout, paper_class_moment_sensitivity
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.synthesizer import MixedRows
from tests.mechanisms.audit_tools import audit


def _records(widths, grid):
    choices = [[np.array([g]) for g in grid] if w == 1 else list(np.eye(w)) for w in widths]
    return np.array([np.concatenate(c) for c in itertools.product(*choices)])


def _phi(x: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """One record's contribution to (S_1..S_L, triu(Σxxᵀ)), row-wise."""
    iu = np.triu_indices(x.shape[1])
    sums = (np.eye(n_classes)[y][:, :, None] * x[:, None, :]).reshape(len(x), -1)
    return np.concatenate([sums, (x[:, :, None] * x[:, None, :])[:, iu[0], iu[1]]], axis=1)


def _worst(widths, grid, n_classes):
    """max ‖φ(x, y) − φ(x', y')‖₁ over all pairs. By symmetry (relabelling the categories
    of a block, or the classes, permutes coordinates and keeps the L1 norm) x may take
    category 0 in every block and class 0; its numerics and all of x' are enumerated."""
    recs = _records(widths, grid)
    lay = layout(widths)
    first = (
        np.all([recs[:, b.start] == 1 for b in lay.blocks], axis=0)
        if lay.blocks
        else np.ones(len(recs), bool)
    )
    xs = recs[first]
    all_x = np.repeat(recs, n_classes, axis=0)
    all_y = np.tile(np.arange(n_classes), len(recs))
    f_all = _phi(all_x, all_y, n_classes)
    f_x = _phi(xs, np.zeros(len(xs), dtype=int), n_classes)
    return max(float(np.abs(f_all - row).sum(axis=1).max()) for row in f_x)


def _attaining(widths):
    """u = 1 (class 0), v = σ*/p₁ (class 1), every category changed."""
    lay = layout(widths)
    p1, p2 = lay.p1, lay.p2
    sigma = min(p1, (p2 + 1) * p1 / (p1 + 1)) if p1 else 0.0
    x, xp = np.zeros(lay.width), np.zeros(lay.width)
    x[list(lay.numeric)], xp[list(lay.numeric)] = 1.0, (sigma / p1 if p1 else 0.0)
    for b in lay.blocks:
        x[b.start], xp[b.start + 1] = 1.0, 1.0
    return _phi(x[None], np.array([0]), 2)[0], _phi(xp[None], np.array([1]), 2)[0]


# ---------------------------------------------------------------- parameters


def test_params_check_defects_and_weights():
    with pytest.raises(ValueError, match=r"params\.variant "):
        lda_ppd.LDAPPDParams(variant="literal")
    schema = Schema((Continuous("a", 0.0, 1.0), Nominal("b", ("x", "y")), Ordinal("o", ("l", "m", "h"))))
    for target, msg in [
        (None, "must name a schema column"),
        ("zz", "must name"),
        ("a", "must be a nominal or ordinal"),
    ]:
        with pytest.raises(ValueError, match=rf"params\.target \({target!r}\) {msg}"):
            lda_ppd.check(schema, lda_ppd.LDAPPDParams(target=target))
    lda_ppd.check(schema, lda_ppd.LDAPPDParams(target="o"))
    with pytest.raises(ValueError, match=r"params\.target \('b'\) must leave at least one feature"):
        lda_ppd.check(Schema((Nominal("b", ("x", "y")),)), lda_ppd.LDAPPDParams(target="b"))
    assert lda_ppd.defects(lda_ppd.LDAPPDParams()) == []
    assert len(lda_ppd.defects(lda_ppd.LDAPPDParams(variant="paper"))) == 2
    assert lda_ppd.stage_weights(schema, lda_ppd.LDAPPDParams()) == {"class_counts": 0.05, "moments": 0.95}
    assert lda_ppd.stage_weights(schema, lda_ppd.LDAPPDParams(variant="paper")) == {"moments": 1.0}
    assert lda_ppd.LDAPPD().notions == ("pure",) and not lda_ppd.LDAPPD().keeps_row_order


# ---------------------------------------------------------------- sensitivity


@pytest.mark.parametrize(
    ("widths", "grid", "n_classes", "exact", "paper"),
    [
        ((1, 2, 2), (0, 0.5, 1), 2, 16.0, 15.0),  # σ* = p₁: a vertex
        ((1, 1, 2), tuple(np.arange(7) / 6), 3, 12 + 1 / 3, 13.0),  # v* = ⅔; paper valid
        ((1,), (0, 0.25, 0.5, 0.75, 1), 2, 2.25, 3.0),  # numeric: the paper's 2p + p(p+1)/2 loose
        ((2, 3), (0, 1), 3, 10.0, 10.0),  # nominal only
    ],
)
def test_class_moment_sensitivity_is_the_exact_maximum(widths, grid, n_classes, exact, paper):
    lay = layout(widths)
    assert class_moment_sensitivity(lay.p1, lay.p2) == pytest.approx(exact)
    assert paper_class_moment_sensitivity(lay.p1, lay.p2) == pytest.approx(paper)
    assert _worst(widths, grid, n_classes) == pytest.approx(exact, abs=1e-9)
    t, tp = _attaining(widths)
    assert np.abs(t - tp).sum() == pytest.approx(exact)


@pytest.mark.parametrize(("p1", "p2", "exact", "paper"), [(5, 5, 100, 90), (3, 6, 96, 84)])
def test_paper_delta_is_exceeded_at_the_digest_counterexamples(p1, p2, exact, paper):
    """Numerics on {0, 1} (the maximiser σ* = p₁ is a vertex here), binary blocks, two
    classes: the worst pair reaches the exact Δ, above the paper's."""
    widths = (1,) * p1 + (2,) * p2
    assert _worst(widths, (0.0, 1.0), 2) == exact == class_moment_sensitivity(p1, p2)
    assert paper_class_moment_sensitivity(p1, p2) == paper


@pytest.mark.parametrize(("kind", "should_pass"), [("corrected", True), ("third", False)])
def test_moment_release_audit(kind, should_pass, rng):
    """Claimed ε = 1 on the attaining pair at (p₁, p₂) = (1, 2), L = 2 (25 coordinates).
    The paper's Δ = 15 vs 16 (6 %) is too small a gap for a 2·10⁵-run audit of a loss
    spread over 25 coordinates (privacy-testing note §4): the enumeration is the test.
    ``third``: positive control, Δ/3 (true ε = 3; ε_lb 1.90-1.99 over seeds 0-3)."""
    t, tp = _attaining((1, 2, 2))
    eps = 1.0
    delta1 = class_moment_sensitivity(1, 2) * (1 / 3 if kind == "third" else 1.0)

    def release(which, n, g):
        value = np.tile(tp if which else t, (n, 1))
        return laplace_mechanism(value, l1_sensitivity=delta1, epsilon=eps, rng=g, name="m", stage="s").value

    def score(z):
        return np.sum(np.abs(z - tp) - np.abs(z - t), axis=1) * eps / delta1

    lb = audit(release, score, 0.0, rng)
    assert lb <= eps if should_pass else lb > eps + 0.5


# ---------------------------------------------------------------- greedy synthesis


def test_weighted_median_is_the_exact_minimiser(rng):
    """For random a (some zero) and b: the clipped weighted median of b/a with weights |a|
    attains min over a 10⁴-point grid of [0, 1] of Σ|aᵢz − bᵢ| (up to the grid's
    resolution; it is never worse), and the unclipped one attains min over the kinks."""
    for _ in range(200):
        k = int(rng.integers(1, 12))
        a = rng.uniform(0, 2, k) * (rng.random(k) < 0.8)
        a[0] = 1.0
        b = rng.normal(0.5, 0.8, k)
        r = np.divide(b, a, out=np.zeros(k), where=a > 0)
        z = lda_ppd.weighted_median(r, a)

        def f(v, a=a, b=b):
            return np.abs(np.multiply.outer(np.atleast_1d(v), a) - b).sum(axis=-1)

        kinks = r[a > 0]
        assert f(z)[0] <= f(kinks).min() + 1e-12
        zc = min(1.0, max(0.0, z))
        grid = np.linspace(0, 1, 10_001)
        assert f(zc)[0] <= f(grid).min() + 1e-12


def _mixed_data(n, rng, numeric=3):
    """Classes 0/1; numerics 0.5 + 0.12·(latent ± noise), two 3-level blocks cut from the
    latent (class shifts the latent by 0.8)."""
    widths = (1,) * numeric + (3, 3)
    lay = layout(widths)
    y = rng.integers(0, 2, n)
    z = rng.normal(size=n) + 0.8 * y
    x = np.zeros((n, lay.width))
    for k, i in enumerate(lay.numeric):
        x[:, i] = np.clip(0.5 + 0.12 * (z + (k % 3 - 1) * rng.normal(size=n)), 0, 1)
    for b in lay.blocks:
        level = np.clip(np.floor((z + rng.normal(size=n)) / 1.2 + 1.5), 0, 2).astype(int)
        x[np.arange(n), b.start + level] = 1.0
    return x, y, widths


def _as_rows(x, y, widths) -> tuple[Schema, MixedRows]:
    """A design matrix (widths: 1 a numeric coordinate in [0, 1], K a one-hot block) and
    classes as a schema: ``Continuous`` [0, 1] and ``Nominal`` columns in that order and
    the class column ``y`` last, so the features' design matrix is x itself."""
    lay, cols, bins, unit = layout(widths), [], [], []
    for k, (start, w) in enumerate(zip(lay.starts, lay.widths, strict=True)):
        if w == 1:
            cols.append(Continuous(f"x{k}", 0.0, 1.0))
            bins.append(cols[-1].to_bins(x[:, start]))
            unit.append(x[:, start])
        else:
            cols.append(Nominal(f"x{k}", tuple(f"c{i}" for i in range(w))))
            bins.append(np.argmax(x[:, start : start + w], axis=1))
            unit.append(np.full(len(x), np.nan))
    cols.append(Nominal("y", ("no", "yes")))
    bins.append(y)
    unit.append(np.full(len(x), np.nan))
    return Schema(tuple(cols)), MixedRows(np.column_stack(bins).astype(np.int32), np.column_stack(unit))


def _fit(x, y, widths, *, epsilon, rng, m=None):
    """``LDAPPD.fit`` (corrected, target y) with the plan of ``plan_budget``: the
    released model (``Fit.stages[1].state``) and the greedy rows with their classes."""
    schema, rows = _as_rows(x, y, widths)
    params = lda_ppd.LDAPPDParams(target="y")
    plan = plan_budget("pure", epsilon, 0.0, lda_ppd.LDAPPD().stage_weights(schema, params))
    fit = lda_ppd.LDAPPD().fit(rows, schema, plan, params, m=len(x) if m is None else m, rng=rng)
    model, sampled = fit.stages[1].state, fit.stages[2].state
    assert isinstance(model, lda_ppd.LDAModel) and isinstance(sampled, lda_ppd.Synthesized)
    return model, sampled.x, sampled.labels


def test_noise_free_greedy_reproduces_the_moments(rng):
    """ε = 10⁹ (noise ~10⁻⁶ on the sums). Tolerances: class counts within 1 of mπ_c
    (the deficit rule: a picked class had deficit ≥ 0 — the deficits sum to 0 — so
    deficits stay > −1, and with L = 2 they are opposite); class means and off-diagonal
    second moments at least as close as an i.i.d. resample of the data, 3 standard
    errors, ½ ≥ any s.d. on [0, 1]: 1.5/√n_c and 1.5/√n. Diagonal entries of the
    numerics: the linearisation z² ≈ z·μ_i pulls rows towards the class means, so up to
    the pooled within-class variance may be lost, plus the same 1.5/√n."""
    n = 3000
    x, y, widths = _mixed_data(n, rng)
    model, xs, ys = _fit(x, y, widths, epsilon=1e9, rng=rng)
    counts = np.bincount(ys, minlength=2)
    assert np.all(np.abs(counts - n * model.shares) < 1)
    assert np.all((xs >= 0) & (xs <= 1))
    for c in range(2):
        n_c = int(np.sum(y == c))
        assert np.abs(xs[ys == c].mean(axis=0) - x[y == c].mean(axis=0)).max() <= 1.5 / math.sqrt(n_c)
    err = xs.T @ xs / n - x.T @ x / n
    off = err - np.diag(np.diag(err))
    assert np.abs(off).max() <= 1.5 / math.sqrt(n)
    within = sum(np.mean(y == c) * np.var(x[y == c], axis=0) for c in range(2))
    assert np.all(np.abs(np.diag(err)) <= within + 1.5 / math.sqrt(n))


def test_greedy_loses_within_class_variance_of_independent_numerics(rng):
    """The known loss: with independent numerics, once the earlier features of a row are
    set, every off-diagonal ratio D_ij/w_j and the mean term sit near μ_i and outweigh
    the diagonal term (weight μ_i), so the features set last collapse to the class mean:
    their synthetic within-class variance is a small fraction of the true 0.0225 (the
    first feature, chosen against the anchors only, keeps it)."""
    n = 2000
    y = rng.integers(0, 2, n)
    x = np.clip(rng.normal(0.3 + 0.3 * y[:, None], 0.15, size=(n, 4)), 0, 1)
    _, xs, ys = _fit(x, y, (1, 1, 1, 1), epsilon=1e9, rng=rng)
    assert np.abs(xs[ys == 0].mean(axis=0) - x[y == 0].mean(axis=0)).max() <= 1.5 / math.sqrt(np.sum(y == 0))
    assert xs[ys == 0].var(axis=0)[-1] < 0.25 * x[y == 0].var(axis=0).min()


def test_greedy_time_is_linear_in_rows(rng):
    """m = 2000 rows of p = 30 numerics (O(mp²)); measured, not asserted tightly: under
    5 ms a row (the 20,000 × 30 figure is reported by the lead's benchmark)."""
    n, p = 2000, 30
    x = rng.random((n, p))
    y = rng.integers(0, 2, n)
    model, _, _ = _fit(x, y, (1,) * p, epsilon=1.0, rng=rng, m=1)
    start = time.perf_counter()
    xs, _ = lda_ppd.synthesize(model, n)
    elapsed = time.perf_counter() - start
    assert xs.shape == (n, p) and elapsed / n < 5e-3


# ---------------------------------------------------------------- pipeline


SMALL = Schema(
    (
        Continuous("age", 17.0, 90.0),
        Ordinal("edu", ("lo", "mid", "hi")),
        Nominal("job", ("a", "b", "c")),
        Nominal("car", ("x", "y")),
        Nominal("y", ("no", "yes", "maybe")),
    )
)


def _small_rows(n, rng):
    age = rng.uniform(17, 90, n)
    bins = np.column_stack(
        [SMALL.columns[0].to_bins(age), *(rng.integers(0, k, n) for k in (3, 3, 2, 3))]
    ).astype(np.int32)
    unit = np.full(bins.shape, np.nan)
    unit[:, 0] = SMALL.columns[0].to_unit(age)
    return MixedRows(bins, unit)


def _run(rows, params, rng, m, eps=2.0, notion="pure"):
    s = lda_ppd.LDAPPD()
    plan = plan_budget(notion, eps, 1e-6 if notion == "zcdp" else 0.0, s.stage_weights(SMALL, params))
    enc = s.encode(rows, SMALL, plan, params, rng)
    est = s.estimate(enc.state, plan, params, rng)
    smp = s.sample(est.state, params, m, rng)
    out = s.decode(smp.state, SMALL, params, rng)
    return out, (*enc.measurements, *est.measurements), {**enc.facts, **est.facts}, plan


@pytest.mark.parametrize("target", ["y", "edu"])
def test_four_stages_give_valid_rows(target, rng):
    rows = _small_rows(300, rng)
    params = lda_ppd.LDAPPDParams(target=target)
    out, ms, facts, plan = _run(rows, params, rng, m=250)
    assert out.bins.shape == (250, 5)
    assert np.all(out.bins >= 0) and np.all(out.bins < np.array(SMALL.n_bins))
    assert np.all((out.unit[:, 0] >= 0) & (out.unit[:, 0] <= 1)) and np.isnan(out.unit[:, 1:]).all()
    np.testing.assert_array_equal(
        out.bins[:, 0], SMALL.columns[0].to_bins(SMALL.columns[0].from_unit(out.unit[:, 0]))
    )
    assert [m.stage for m in ms] == ["class_counts", "moments"] and all(m.defect is None for m in ms)
    lay_p1, lay_p2 = (2, 2) if target == "y" else (1, 3)
    assert ms[1].sensitivity == pytest.approx(class_moment_sensitivity(lay_p1, lay_p2))
    assert ms[0].sensitivity == 2.0 and ms[0].value.shape == (3,)
    for m in ms:
        assert m.epsilon <= plan.stage(m.stage).epsilon
    assert facts["nominal_columns"] == lay_p2 and len(facts["class_shares"]) == 3


def test_paper_variant_records_its_defects_and_zcdp_is_refused(rng):
    """SMALL with target y: (p₁, p₂) = (2, 2), paper Δ = 21 < exact 22."""
    rows = _small_rows(100, rng)
    params = lda_ppd.LDAPPDParams(variant="paper", target="y")
    out, ms, _, _ = _run(rows, params, rng, m=100)
    assert len(out) == 100
    counts, moments = ms
    assert counts.mechanism == "none" and counts.defect == lda_ppd.CLASS_SIZE_DEFECT
    np.testing.assert_array_equal(counts.value, np.bincount(rows.bins[:, 4], minlength=3))
    assert moments.sensitivity == 21.0 and "below the exact maximum 22" in moments.defect
    assert class_moment_sensitivity(2, 2) == 22.0
    with pytest.raises(ValueError, match=r"privacy\.accountant: pure"):
        _run(rows, lda_ppd.LDAPPDParams(target="y"), rng, m=10, notion="zcdp")
