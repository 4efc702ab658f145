"""ron_gauss, wired: the Δ each stage passes to the noise bounds what the stage really
measures (``tests/wiring.py``: noise off, replace-one neighbours, D's releases replayed
for D'), for every noisy statistic (``class_counts``, ``mean`` / ``class_sums``,
``second_moment``), every task and both accountants (zcdp → L2, pure → L1), on random and
on worst-case neighbouring tables; and it is the Δ ``sensitivities`` derives from public
facts (what ``audit verify`` re-derives).

Design rows are x/B with entries in [0, 1/B] (B = √(feature columns)), so ‖x‖ ≤ 1 and,
being non-negative, ‖x − x'‖₂ ≤ √2: the mean's Δ₂ = 2/n and the class sums' Δ₂ = 2 are
valid but reach at most 1/√2 of themselves; the tests assert the exact change their
construction gives, so a statistic measured at the wrong scale fails either way."""

import functools
import math

import numpy as np
import pandas as pd
import pytest

from dprelease.mechanisms import ron_gauss as rg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from tests.wiring import compare, flow_stages, rows_of, worst

SCHEMA = Schema(
    (
        Continuous("x", 0.0, 1.0),
        Continuous("k", 0, 9, integer=True),
        Ordinal("o", ("lo", "mid", "hi")),
        Nominal("c", ("a", "b", "c", "d")),
    )
)
TASKS = [("unsupervised", None), ("regression", "x"), ("classification", "c"), ("classification", "o")]
NOTIONS = ["zcdp", "pure"]
HI = {"x": 1.0, "k": 9, "o": "hi", "c": "d"}  # every feature at its top: ‖x‖ = 1
LO = {"x": 0.0, "k": 0, "o": "lo", "c": "a"}


def _record(rng: np.random.Generator) -> dict:
    return {
        "x": float(rng.random()),
        "k": int(rng.integers(0, 10)),
        "o": str(rng.choice(["lo", "mid", "hi"])),
        "c": str(rng.choice(["a", "b", "c", "d"])),
    }


def _table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame([_record(rng) for _ in range(n)])


def _replace(table: pd.DataFrame, i: int, record: dict) -> pd.DataFrame:
    out = table.copy()
    out.loc[i, list(record)] = list(record.values())
    return out.astype(table.dtypes.to_dict())


@functools.cache
def _plan(notion: str, task: str):
    return plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, rg.stage_weights(task, "corrected"))


def _run(notion: str, params: rg.RonGaussParams, schema: Schema = SCHEMA):
    stages = flow_stages("ron_gauss", schema, _plan(notion, params.task), params)
    return lambda table: stages(rows_of(table, schema))


def _changes(notion, params, d, d2, schema=SCHEMA, jitter=None):
    return {c.name: c for c in compare(_run(notion, params, schema), d, d2, jitter)}


def _releases(*offsets):
    """A jitter moving D's k-th noisy release by ``offsets[k]`` (later ones unmoved): the
    Δ must hold whatever the earlier releases are, so a test may choose them."""
    calls = iter(offsets)
    return lambda shape: np.broadcast_to(np.asarray(next(calls, 0.0), dtype=float), shape)


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize(("task", "label"), TASKS)
def test_recorded_sensitivity_bounds_random_neighbours(task, label, notion):
    """150 random pairs, n ∈ [5, 40), p ∈ {Meckes' rule, 1, 2, 3}; every other pair with
    N(0, 1) jitter on D's releases (μ far from the rows, so re-centred rows are clipped
    and noisy class counts are fractional): every change is within its recorded Δ."""
    rng = np.random.default_rng(11)
    changes = []
    for trial in range(150):
        dims = [None, 1, 2, 3][trial % 4]
        params = rg.RonGaussParams(task=task, label=label, dims=dims)
        d = _table(rng, int(rng.integers(5, 40)))
        d2 = _replace(d, int(rng.integers(len(d))), _record(rng))
        jitter = (lambda shape: rng.normal(0, 1.0, shape)) if trial % 2 else None
        changes.append(compare(_run(notion, params), d, d2, jitter))
    for c in (c for pair in changes for c in pair):
        assert c.within, c
    top = worst(changes)
    names = {"class_counts", "class_sums"} if task == "classification" else {"mean"}
    assert set(top) == names | {"second_moment"}
    assert all(c.ratio > 0.1 for c in top.values()), top  # the search is not vacuous


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize(("task", "label"), TASKS[:2])
def test_mean_moves_by_the_design_maximum(task, label, notion):
    """HI vs LO in every feature: x − x' = d/B with d = 1 per continuous or ordinal
    column and a one-hot swap (‖·‖₁ = 2, ‖·‖₂ = √2) for c, so the mean moves by exactly
    ‖d‖/(B·n). Unsupervised: ‖d‖₁ = ‖d‖₂² = 5, B = 2, m = 7 → ratio √5/4 ≈ 0.56 (L2),
    5/(4√7) ≈ 0.47 (L1); label x: 4, √3, 6 → 1/√3 ≈ 0.58, 2/(3√2) ≈ 0.47. The L2 ratio
    is above 1/2, so a Δ measured for 2n is exceeded; a mean over 2n misses the value."""
    params = rg.RonGaussParams(task=task, label=label)
    n = 20
    d = _table(np.random.default_rng(1), n)
    c = _changes(notion, params, _replace(d, 3, HI), _replace(d, 3, LO))["mean"]
    s1, s2, b = (5, 5, 2.0) if label is None else (4, 4, math.sqrt(3))
    expected = (s1 if notion == "pure" else math.sqrt(s2)) / (b * n)
    assert c.within and c.observed == pytest.approx(expected, rel=1e-9), c
    if notion == "zcdp":
        assert c.ratio > 0.55, c


@pytest.mark.parametrize("notion", NOTIONS)
def test_a_class_change_reaches_the_count_and_sum_bounds(notion):
    """Label c, features x, k, o (m = 3, no one-hot, B = √3): HI moving from class a to
    b changes the counts by (−1, +1): exactly Δ₁ = 2, Δ₂ = √2; the class sums by −x in
    a, +x in b with x = (1, 1, 1)/√3: exactly Δ₁ = 2‖x‖₁ = 2√3 = 2√m, and √2 = Δ₂/√2 in L2
    (‖x‖ = 1 and the rows are non-negative, so the stated Δ₂ = 2 is not reachable)."""
    params = rg.RonGaussParams(task="classification", label="c")
    d = _table(np.random.default_rng(2), 20)
    c = _changes(notion, params, _replace(d, 5, HI | {"c": "a"}), _replace(d, 5, HI | {"c": "b"}))
    assert c["class_counts"].observed == pytest.approx(c["class_counts"].recorded, rel=1e-9)
    sums = c["class_sums"]
    assert sums.within, sums
    assert sums.ratio == pytest.approx(1.0 if notion == "pure" else 1 / math.sqrt(2), rel=1e-9)


ONE = Schema((Continuous("a", 0.0, 1.0), Continuous("y", 0.0, 1.0), Nominal("c", ("a", "b"))))
# (task, label, D's record, D''s record, observed/Δ in L2, in L1), m = p = 1, μ released 0
SECOND = [
    ("unsupervised", None, {"a": 1.0}, {"a": 0.0}, 1 / math.sqrt(2), 1 / 2),
    ("regression", "y", {"a": 1.0, "y": 1.0}, {"a": 1.0, "y": 0.0}, 1 / math.sqrt(2), 1 / 3),
    ("regression", "y", {"a": 1.0, "y": 1.0}, {"a": 0.0, "y": 0.5}, math.sqrt(3 / 8), 1 / 2),
    ("classification", "c", {"a": 1.0, "c": "a"}, {"a": 1.0, "c": "b"}, 1.0, 1.0),
]


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize(("task", "label", "rec", "rec2", "r2", "r1"), SECOND)
def test_second_moment_reaches_its_worst_case(task, label, rec, rec2, r2, r1, notion):
    """One feature a, p = 1 (W = ±1), n = 20, the other rows a = 0 (y = ½ → label 0);
    D's mean (or class sums) released as 0 (a possible noisy release), so x̄ = a exactly.
    Unsupervised: v² moves 1 → 0, by 1/n = Δ₂/√2 = Δ₁/2 (Δ₂ = √2/n needs orthogonal
    axis-aligned x̃, x̃', so p ≥ 2 and W aligned with the design: probability 0 for a Haar W).
    Regression, v = (±a, y), u(vvᵀ) = (a², ±ay, y²): the label flip moves ay by 2 (the L2
    maximum for p = 1, 2/(2√2)), (1, 1) vs (0, 0) moves every entry by 1 (the L1
    maximum, 3/6). Classification: the record leaves class a (−1) and joins b (+1): exactly
    Δ₁ = p + 1 = 2 and Δ₂ = √2 (the bound is attained). A statistic halved, a Δ for 2n,
    or a label outside [−1, 1] fails."""
    schema = Schema(tuple(col for col in ONE.columns if col.name in rec))
    params = rg.RonGaussParams(task=task, label=label)
    d = pd.DataFrame([{"a": 0.0, "y": 0.5, "c": "b"}] * 20)[list(rec)]
    d = _replace(d, 0, rec)
    # D's exact mean / class sums have 1/20 resp. 1 (class a) in a: release 0 instead.
    release = _releases(0.0, [[-1.0], [0.0]]) if task == "classification" else _releases(-1.0 / 20)
    c = _changes(notion, params, d, _replace(d, 0, rec2), schema, release)["second_moment"]
    assert c.within, c
    assert c.ratio == pytest.approx(r1 if notion == "pure" else r2, rel=1e-9), c


@pytest.mark.parametrize("notion", NOTIONS)
def test_a_record_far_from_the_mean_is_clipped_after_centring(notion):
    """One nominal (a, b), m = p = 2 (W orthogonal, an isometry), n = 20: 19 rows a and
    the record b, so μ = (0.95, 0.05) and x − μ = 0.95·(−1, 1), of norm 1.34: clipped to
    norm 1; D' (the record a) gives x − μ = 0.05·(1, −1). Both lie on one line: the
    change is f·u(ûûᵀ), f = 1 − 2·0.05² = 0.995, with ‖u(ûûᵀ)‖₂² = (1 + Σû⁴)/2 ≥ 3/4 and
    ‖u(ûûᵀ)‖₁ = (‖û‖₁² + 1)/2 ≥ 1: ratio ≥ 0.995·√(3/8) ≈ 0.61 (L2), ≥ 0.995/3 (L1).
    Unclipped, f = 2·0.95² − 0.005 = 1.8 and the L2 ratio ≥ 1.8·√(3/8) ≈ 1.1 > 1."""
    schema = Schema((Nominal("c", ("a", "b")),))
    d = pd.DataFrame({"c": ["a"] * 20})
    params = rg.RonGaussParams(dims=2)
    c = _changes(notion, params, _replace(d, 0, {"c": "b"}), d, schema)["second_moment"]
    assert c.within, c
    f = 1 - 2 * 0.05**2
    assert c.ratio >= f * (math.sqrt(3 / 8) if notion == "zcdp" else 1 / 3) * (1 - 1e-9), c


@pytest.mark.parametrize("dims", [None, 2])
@pytest.mark.parametrize(("task", "label"), TASKS)
def test_sensitivities_are_what_the_stages_record(task, label, dims):
    """The public derivation (``audit verify``'s) equals each measurement's recorded Δ,
    name and stage, under both accountants; ``tight`` where a test above attains Δ."""
    params = rg.RonGaussParams(task=task, label=label, dims=dims)
    d = _table(np.random.default_rng(3), 25)
    derived = rg.sensitivities(SCHEMA, params, 25)
    assert {k for k, s in derived.items() if s.tight} == (
        {"class_counts", "second_moment"} if task == "classification" else set()
    )
    for notion in NOTIONS:
        measured = _run(notion, params)(d)
        assert {m.name for m in measured} == set(derived)
        for m in measured:
            assert m.norm == ("l2" if notion == "zcdp" else "l1")
            assert m.stage == derived[m.name].stage
            assert m.sensitivity == derived[m.name].bound(m.norm)
