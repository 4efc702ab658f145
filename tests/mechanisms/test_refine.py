"""Issue 16, interactions: factor_gauss's ``refine`` stage (``mechanisms.refine``). The
tables are chosen from public facts; each table's Δ, as the stage really passes it to the
noise, bounds the change on random neighbours and is attained on a worst case (in memory
and through the streaming passes); ``sensitivities`` (what ``audit verify`` re-derives)
lists exactly what the stages record; raking post-processes toward the tables."""

import functools

import numpy as np
import pandas as pd
import pytest

import dprelease.mechanisms.refine as refine
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.refine import (
    MAX_EXTRA_TABLES,
    MODEL_FLOOR,
    TARGET_SHARE,
    Pairs,
    pair_cells,
    rake,
    shrunk_distribution,
    table_pairs,
    table_parts,
)
from dprelease.mechanisms.resolution import Cells
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from tests.wiring import compare, flow_stages, rows_of

SCHEMA = Schema(
    (
        Continuous("x", 0.0, 1.0),
        Continuous("k", 0, 9, integer=True),
        Ordinal("o", ("lo", "mid", "hi")),
        Nominal("y", ("no", "yes")),
    )
)
PARAMS = fg.FactorGaussParams(target="y")
PAIRS = ["pair[x,y]", "pair[k,y]", "pair[o,y]"]


def _record(rng: np.random.Generator) -> dict:
    return {
        "x": float(rng.random()),
        "k": int(rng.integers(0, 10)),
        "o": str(rng.choice(["lo", "mid", "hi"])),
        "y": str(rng.choice(["no", "yes"])),
    }


def _table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame([_record(rng) for _ in range(n)])


def _replace(table: pd.DataFrame, i: int, record: dict) -> pd.DataFrame:
    out = table.copy()
    out.loc[i] = record
    return out.astype(table.dtypes.to_dict())


def _plan(notion: str):
    return plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.stage_weights(SCHEMA, PARAMS))


def _run(plan):
    stages = flow_stages("factor_gauss", SCHEMA, plan, PARAMS)
    return lambda table: stages(rows_of(table, SCHEMA))


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_each_table_changes_within_its_recorded_sensitivity(notion):
    plan = _plan(notion)
    rng = np.random.default_rng(11)
    seen = set()
    for trial in range(100):
        d = _table(rng, int(rng.integers(5, 40)))
        d2 = _replace(d, int(rng.integers(len(d))), _record(rng))
        jitter = (lambda shape: rng.normal(0, 2.0, shape)) if trial % 2 else None
        for c in compare(_run(plan), d, d2, jitter):
            assert c.within, c
            seen.add(c.name)
    assert set(PAIRS) <= seen


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_a_record_moving_cell_in_every_table_attains_the_sensitivity(notion):
    """x, k and o at opposite ends and y flipped: the record leaves one cell of every
    table and enters another, so each table changes by exactly √2 (L2) / 2 (L1)."""
    d = _table(np.random.default_rng(1), 30)
    d2 = _replace(d, 3, {"x": 0.99, "k": 9, "o": "hi", "y": "yes"})
    d = _replace(d, 3, {"x": 0.01, "k": 0, "o": "lo", "y": "no"})
    pairs = [c for c in compare(_run(_plan(notion)), d, d2) if c.name.startswith("pair")]
    assert [c.name for c in pairs] == PAIRS
    for c in pairs:
        assert c.observed == pytest.approx(c.recorded, rel=1e-12), c


def test_sensitivities_are_what_the_stages_record():
    """The names and Δs the stages record are the ones ``sensitivities`` derives from the
    public facts the same run publishes."""
    for notion in ("zcdp", "pure"):
        rows = rows_of(_table(np.random.default_rng(3), 25), SCHEMA)
        fit = fg.FactorGauss().fit(rows, SCHEMA, _plan(notion), PARAMS, m=25, rng=np.random.default_rng(0))
        measured = fit.measurements
        derived = fg.sensitivities(SCHEMA, PARAMS, 25, fit.facts)
        assert {m.name for m in measured} == set(derived)
        assert {m.stage for m in measured if m.name in PAIRS} == {"refine"}
        for m in measured:
            assert m.sensitivity == derived[m.name].bound(m.norm)


def test_the_tables_cells_come_from_public_facts_only(rng):
    """Two different tables of the same n give the same cells: the layout is a function
    of (schema, target, n, noise), never of the rows."""
    a = pair_cells(SCHEMA, 3, n=200, mean_abs_noise=30.0)
    b = pair_cells(SCHEMA, 3, n=200, mean_abs_noise=30.0)
    assert all(np.array_equal(g, h) for g, h in zip(a.cells.groups, b.cells.groups, strict=True))
    assert a.sizes == [len(set(a.cells.groups[j])) * 2 for j in range(3)]
    # more rows, more cells; the target always keeps its declared cells
    big = pair_cells(SCHEMA, 3, n=200_000, mean_abs_noise=30.0)
    assert big.cells.n_groups == [64, 10, 3, 2] and a.cells.n_groups[3] == 2


def test_the_streaming_pass_sums_the_same_tables_as_memory(rng):
    """``chunk_moment_sum`` over two chunks, split back by ``estimate_moment_sum``'s rule,
    gives the memory path's tables exactly."""
    n = 400
    bins = np.column_stack([rng.integers(0, k, n) for k in SCHEMA.n_bins]).astype(np.int32)
    plan = _plan("zcdp")
    enc = fg.FactorGauss().encode(fg.MixedRows(bins), SCHEMA, plan, PARAMS, rng).state
    dither = rng.random(bins.shape)
    parts = [
        fg.chunk_moment_sum(bins[s], dither[s], enc.code, PARAMS) for s in (slice(0, 150), slice(150, n))
    ]
    total = functools.reduce(np.add, parts)
    p = len(SCHEMA)
    tables = np.split(total[p * p :], np.cumsum(enc.code.pairs.sizes)[:-1])
    for got, want in zip(tables, enc.pair_counts, strict=True):
        np.testing.assert_array_equal(got, want)


def test_raking_fits_candidates_to_the_tables_and_margins(rng):
    """Post-processing: candidates drawn independently of y, raked to a table in which y
    depends on x, take on that dependence (the weighted table equals the target)."""
    pairs = Pairs(Cells((np.arange(2), np.arange(2))), ((0, 1),), ("x", "y"), 1)
    candidates = rng.integers(0, 2, (20_000, 2)).astype(np.int32)
    n = 1_000
    truth = np.array([0.45, 0.05, 0.1, 0.4])  # (x, y) cells: y follows x
    # noise scale 1e-6: the shrinkage weight is 1 − 4e-12/‖d‖², i.e. the table itself
    table = Measurement("pair[x,y]", "refine", truth * n, "gaussian", 2**0.5, "l2", 1e-6, 0.1, None, None)
    w = rake(candidates, pairs, [table], n)
    got = np.bincount(pairs.keys(candidates)[0], weights=w, minlength=4)
    model = np.bincount(pairs.keys(candidates)[0], minlength=4) / len(candidates)
    np.testing.assert_allclose(got, (1 - MODEL_FLOOR) * truth + MODEL_FLOOR * model, atol=1e-9)


def _noisy(value: np.ndarray, sd: float) -> Measurement:
    return Measurement("pair[x,y]", "refine", value, "gaussian", 2**0.5, "l2", sd, 0.1, None, None)


def test_a_table_of_noise_alone_is_shrunk_to_the_model(rng):
    """K = 100 cells of pure noise (σ = 50 per count, n = 1,000): ‖d‖² = σ²·χ²_K, so the
    James–Stein weight is max(0, 1 − K/χ²_K) ≤ 1 − 100/200 = 0.5 unless χ²_100 > 200
    (probability < 1e-8): the shrunk target's error is at most half the raw table's."""
    n, k, sd = 1_000, 100, 50.0
    model = rng.dirichlet(np.ones(k))
    table = _noisy(n * model + rng.normal(0, sd, k), sd)
    got = shrunk_distribution(table, model, n)
    raw = np.abs(table.value / n - model).sum()
    assert np.abs(got - model).sum() <= 0.5 * raw


def test_a_table_far_from_the_model_is_kept(rng):
    """Signal ‖n(p − p̂)‖² = 1e6·Σ(p − p̂)² far above K·σ² = 4: λ = 1 − 4/‖d‖² ≈ 1, and
    the target is the measured table itself, but for the model's floor (to 1e-5)."""
    n = 1_000
    truth, model = np.array([0.45, 0.05, 0.1, 0.4]), np.full(4, 0.25)
    d = n * (truth - model)
    lam = 1 - 4 / float(d @ d)
    got = shrunk_distribution(_noisy(n * truth, 1.0), model, n)
    np.testing.assert_allclose(got, (1 - MODEL_FLOOR) * (model + lam * (truth - model)) + MODEL_FLOOR * model)
    np.testing.assert_allclose(got, (1 - MODEL_FLOOR) * truth + MODEL_FLOOR * model, atol=1e-5)


def test_a_cell_the_projection_empties_keeps_a_tenth_of_its_model_mass():
    """A table whose noise drives a cell below 0 is projected to 0 there; the raking target
    keeps MODEL_FLOOR of the model's mass, so candidates in that cell are not raked out."""
    n, model = 1_000, np.array([0.5, 0.3, 0.2])
    got = shrunk_distribution(_noisy(np.array([800.0, 400.0, -200.0]), 1.0), model, n)
    assert got[2] == pytest.approx(MODEL_FLOOR * 0.2) and got.sum() == pytest.approx(1.0)


def test_a_target_must_be_a_nominal_or_ordinal_column():
    with pytest.raises(ValueError, match="must be a nominal or ordinal column"):
        fg.check(SCHEMA, fg.FactorGaussParams(target="x"))
    with pytest.raises(ValueError, match="must be a column of the schema"):
        fg.check(SCHEMA, fg.FactorGaussParams(target="nope"))
    assert fg.stage_weights(SCHEMA, PARAMS) == fg.REFINE_WEIGHTS
    assert fg.stage_weights(SCHEMA, fg.FactorGaussParams()) == fg.STAGE_WEIGHTS


def test_the_categorical_pairs_are_added_by_a_public_rule():
    """(j, target) for every other column, then every pair of the other nominal and
    ordinal columns, unless there are more than MAX_EXTRA_TABLES of those."""
    schema = Schema(
        (
            Continuous("x", 0.0, 1.0),
            Nominal("a", ("p", "q")),
            Ordinal("b", ("lo", "hi")),
            Nominal("c", ("r", "s", "t")),
            Nominal("y", ("no", "yes")),
        )
    )
    assert table_pairs(schema, 4) == [(0, 4), (1, 4), (2, 4), (3, 4), (1, 2), (1, 3), (2, 3)]
    wide = Schema((*(Nominal(f"n{i}", ("p", "q")) for i in range(13)), Nominal("y", ("no", "yes"))))
    assert 13 * 12 // 2 > MAX_EXTRA_TABLES and table_pairs(wide, 13) == [(i, 13) for i in range(13)]


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_the_target_tables_get_their_share_and_the_others_theirs_by_size(notion):
    """TARGET_SHARE evenly over the target's tables; the rest over the others in proportion
    to K_t^(1/3) (zCDP) or K_t^(1/4) (pure), which minimises Σ_t √K_t·s_t; Σ ≤ the stage's."""
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, {"refine": 1.0})
    stage = plan.stage("refine")
    tables = [(0, 4), (1, 4), (2, 4), (3, 4), (1, 2), (1, 3), (2, 3)]
    sizes = [20, 4, 6, 10, 6, 10, 15]
    shares = [s.share for s in table_parts(stage, tables, 4, sizes)]
    assert sum(shares) <= stage.share
    assert sum(shares[:4]) == pytest.approx(TARGET_SHARE * stage.share)
    assert shares[:4] == pytest.approx([shares[0]] * 4)
    power = 1 / 3 if notion == "zcdp" else 1 / 4
    assert np.array(shares[4:]) / shares[4] == pytest.approx((np.array(sizes[4:]) / sizes[4]) ** power)
    assert sum(shares[4:]) == pytest.approx((1 - TARGET_SHARE) * stage.share)
    # the split minimises Σ √K_t / √ρ_t (zCDP): any other split of the same total is worse
    k = np.array(sizes[4:], float)
    cost = lambda r: float(np.sum(np.sqrt(k) / np.sqrt(r)))  # noqa: E731
    if notion == "zcdp":
        best = cost(np.array(shares[4:]))
        for w in np.random.default_rng(0).dirichlet(np.ones(3), 200):
            assert cost(w * sum(shares[4:])) >= best * (1 - 1e-12)
    assert [s.stage for s in table_parts(stage, tables, 4, sizes)] == ["refine"] * 7


CATEGORIES = Schema(
    (
        Continuous("x", 0.0, 1.0),
        Nominal("a", ("p", "q", "r")),
        Ordinal("b", ("lo", "mid", "hi")),
        Nominal("y", ("no", "yes")),
    )
)


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_a_categorical_pair_table_attains_its_recorded_sensitivity(notion):
    """Through the flow's own stages: a record moving a, b and y changes every table, the
    pair (a, b) included, by exactly √2 (L2) / 2 (L1)."""
    params = fg.FactorGaussParams(target="y")
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.stage_weights(CATEGORIES, params))
    stages = flow_stages("factor_gauss", CATEGORIES, plan, params)
    rng = np.random.default_rng(4)
    d = pd.DataFrame(
        {
            "x": rng.random(30),
            "a": rng.choice(["p", "q", "r"], 30),
            "b": rng.choice(["lo", "mid", "hi"], 30),
            "y": rng.choice(["no", "yes"], 30),
        }
    )
    d2 = d.copy()
    d.loc[0] = [0.01, "p", "lo", "no"]
    d2.loc[0] = [0.99, "r", "hi", "yes"]
    pairs = [c for c in compare(lambda t: stages(rows_of(t, CATEGORIES)), d, d2) if c.name.startswith("pair")]
    assert [c.name for c in pairs] == ["pair[x,y]", "pair[a,y]", "pair[b,y]", "pair[a,b]"]
    for c in pairs:
        assert c.observed == pytest.approx(c.recorded, rel=1e-12), c
    derived = fg.sensitivities(CATEGORIES, params, 30)
    assert {c.name for c in pairs} <= set(derived)


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_the_noise_each_table_draws_follows_its_share(notion):
    """Through the flow's own stages: the scale each table's noise really has is
    Δ₂/√(2ρ_t) (zCDP) or Δ₁/ε_t (pure) with the share from ``table_parts`` on the tables'
    public sizes (a 5×4 pair gets more than a 3×3 one: (15/9)^(1/3) or ^(1/4) times), and
    the tables' shares sum to at most the stage's."""
    schema = Schema(
        (
            Nominal("a", ("p", "q", "r")),
            Ordinal("b", ("lo", "mid", "hi")),
            Nominal("c", ("1", "2", "3", "4", "5")),
            Nominal("y", ("no", "yes")),
        )
    )
    params = fg.FactorGaussParams(target="y")
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.stage_weights(schema, params))
    rng = np.random.default_rng(5)
    d = pd.DataFrame({"a": rng.choice(list("pqr"), 40), "b": rng.choice(["lo", "mid", "hi"], 40)})
    d = d.assign(c=rng.choice(list("12345"), 40), y=rng.choice(["no", "yes"], 40))
    measured = {m.name: m for m in flow_stages("factor_gauss", schema, plan, params)(rows_of(d, schema))}
    names = ["pair[a,y]", "pair[b,y]", "pair[c,y]", "pair[a,b]", "pair[a,c]", "pair[b,c]"]
    ratio = {m.name: m.sensitivity / m.scale for m in measured.values()}
    share = [ratio[n] ** 2 / 2 if notion == "zcdp" else ratio[n] for n in names]
    stage = plan.stage("refine").share
    assert sum(share) <= stage * (1 + 1e-12)
    assert share[:3] == pytest.approx([TARGET_SHARE * stage / 3] * 3)
    power = 1 / 3 if notion == "zcdp" else 1 / 4
    assert [share[4] / share[3], share[5] / share[3]] == pytest.approx([(15 / 9) ** power] * 2)


LINKED = Schema(
    (
        Continuous("x", 0.0, 1.0),
        *(Nominal(name, ("p", "q", "r", "s")) for name in "abcd"),
        Nominal("y", ("no", "yes")),
    )
)


def _linked(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Four categorical columns that copy each other with probability 0.7 and a target
    that depends on two of them: the 10 tables overlap and their noisy versions disagree."""
    a = rng.integers(0, 4, n)
    cols = [a]
    for _ in range(3):
        cols.append(np.where(rng.random(n) < 0.7, cols[-1], rng.integers(0, 4, n)))
    y = (cols[0] == cols[3]) ^ (rng.random(n) < 0.1)
    levels = np.array(["p", "q", "r", "s"])
    return pd.DataFrame(
        {
            "x": rng.random(n),
            **{k: levels[c] for k, c in zip("abcd", cols, strict=True)},
            "y": np.where(y, "yes", "no"),
        }
    )


@pytest.mark.parametrize("fit_rows", [10**9, 1_500])
def test_candidates_raked_in_chunks_keep_the_marginals(monkeypatch, fit_rows):
    """Regression: raking factors fitted on a subset of the candidates and applied to the
    rest put all the weight on one row combination (a 150,000-row Adult release had one
    distinct row, mean 1-way TVD 0.70). Raked in chunks, each agrees with the tables.

    Bound: the 1-way TVD of m = 4,000 rows drawn from a distribution p over k cells has
    mean ½·Σ √(2p(1−p)/(πm)) ≤ ½·√(2(k−1)/(πm)) ≈ 0.011 for k = 4; the release's one-way
    marginals carry stage 1's noise (σ ≈ 13 counts of 4,000 at ε = 1, ≈ 0.005 per cell in
    TVD) and the copula's and the raking's model error. 0.05 is ≥ 3× their sum; a collapse
    onto a few rows gives ≥ 0.5."""
    monkeypatch.setattr(refine, "FIT_ROWS", fit_rows)
    rng = np.random.default_rng(5)
    real = _linked(rng, 4_000)
    params = fg.FactorGaussParams(target="y")
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.stage_weights(LINKED, params))
    rows = rows_of(real, LINKED)
    fit = fg.FactorGauss().fit(rows, LINKED, plan, params, m=4_000, rng=np.random.default_rng(0))
    tvd = [
        0.5
        * np.abs(
            np.bincount(rows.bins[:, j], minlength=k) / 4_000
            - np.bincount(fit.rows.bins[:, j], minlength=k) / 4_000
        ).sum()
        for j, k in enumerate(LINKED.n_bins)
    ]
    assert np.mean(tvd) < 0.05, tvd
    assert len(np.unique(fit.rows.bins, axis=0)) > 1_000
