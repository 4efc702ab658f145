"""``mst`` and ``aim`` on Private-PGM (``mechanisms.graphical``, ``mechanisms.workload``):
the exponential mechanism's law and scale, the wiring of every noisy statistic and every
selection through the stages' own code (``tests/wiring.py``: the change between neighbours
never exceeds the recorded Δ, and reaches it for the count tables), the budget of AIM's
rounds, the spanning tree, the sampler's law, and ``sensitivities`` naming exactly what the
stages measure (what ``audit verify`` re-derives)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dprelease.mechanisms import aim, graphical, mst
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.primitives import exponential_mechanism, exponential_scale
from dprelease.mechanisms.randomness import opendp
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.mechanisms.workload import candidate_pairs, target_triples
from tests.wiring import Probe, compare, rows_of, worst

SCHEMA = Schema(
    (
        Continuous("x", 0.0, 1.0, intervals=4),
        Continuous("k", 0, 5, integer=True),
        Ordinal("o", ("lo", "mid", "hi")),
        Nominal("c", ("a", "b", "c")),
    )
)
N = 300
CHEAP = {
    "mst": mst.MSTParams(iters=30),
    "aim": aim.AIMParams(rounds=4, round_iters=10, iters=30),
    "aim-target": aim.AIMParams(rounds=4, round_iters=10, iters=30, target="c"),
}


def _synth(name: str):
    return {"mst": mst.MST(), "aim": aim.AIM(), "aim-target": aim.AIM()}[name]


def _record(rng: np.random.Generator) -> dict:
    return {
        "x": float(rng.random()),
        "k": int(rng.integers(0, 6)),
        "o": str(rng.choice(["lo", "mid", "hi"])),
        "c": str(rng.choice(["a", "b", "c"])),
    }


def _table(rng: np.random.Generator, n: int = N) -> pd.DataFrame:
    return pd.DataFrame([_record(rng) for _ in range(n)])


def _replace(table: pd.DataFrame, i: int, record: dict) -> pd.DataFrame:
    out = table.copy()
    out.loc[i] = record
    return out.astype(table.dtypes.to_dict())


def _plan(name: str, epsilon: float = 1.0):
    return plan_budget("zcdp", epsilon, 1e-6, _synth(name).stage_weights(SCHEMA, CHEAP[name]))


# ---------------------------------------------------------------- the exponential mechanism


def test_the_exponential_scale_is_the_one_opendp_charges_rho_for():
    """s = Δ∞/√(2ρ): OpenDP's map of its Gumbel noisy max at s and Δ∞ is ρ (to rounding)."""
    dp = opendp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=False)
    for delta, rho in ((2.0, 0.01), (1.0, 0.5), (56.0, 1e-4)):
        s = exponential_scale(delta, rho)
        charged = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=s).map(delta)
        assert charged == pytest.approx(rho, rel=1e-12) and s == pytest.approx(delta / math.sqrt(2 * rho))


def test_the_seeded_selection_follows_the_exponential_law(seed):
    """P(r) ∝ exp(q_r / s) (Gumbel-max): a χ² test on 20,000 seeded draws at α = 0.001."""
    scores = np.array([0.0, 1.0, 2.5, 4.0])
    rng = np.random.default_rng(seed)
    picks = [
        int(
            exponential_mechanism(
                scores, linf_sensitivity=2.0, rho=0.125, rng=rng, name="s", stage="t"
            ).value[0]
        )
        for _ in range(20_000)
    ]
    s = exponential_scale(2.0, 0.125)
    law = np.exp(scores / s) / np.exp(scores / s).sum()
    observed = np.bincount(picks, minlength=len(scores))
    assert stats.chisquare(observed, law * len(picks)).pvalue > 0.001


def test_the_vetted_selection_records_opendps_scale():
    from dprelease.mechanisms.primitives import release_streams

    m = exponential_mechanism(
        np.array([0.0, 100.0]),
        linf_sensitivity=2.0,
        rho=0.5,
        rng=release_streams(None).encode,
        name="s",
        stage="t",
    )
    assert m.mechanism == "exponential" and m.norm == "linf" and m.rho == 0.5
    assert m.scale >= exponential_scale(2.0, 0.5) and int(m.value[0]) in (0, 1)


# ---------------------------------------------------------------- wiring, through the stages' own code


def _run(name: str, plan):
    """The flow's encode and estimate tasks (every measurement; the sample step only
    estimates the model, post-processing)."""
    from prefect.logging import disable_run_logger

    from dprelease.mechanisms.randomness import noise_rngs
    from dprelease.tasks.synthesis import encode, estimate_private_moments

    def run(table: pd.DataFrame) -> list:
        rngs = noise_rngs(0, 2)
        with disable_run_logger():
            mechanism = _synth(name).name
            enc = encode.fn(mechanism, rows_of(table, SCHEMA), SCHEMA, plan, CHEAP[name], rngs[0])
            est = estimate_private_moments.fn(mechanism, enc.state, plan, CHEAP[name], rngs[1])
        return [*enc.measurements, *est.measurements]

    return run


@pytest.mark.parametrize("name", ["mst", "aim", "aim-target"])
def test_every_statistic_and_selection_changes_by_at_most_its_recorded_sensitivity(name):
    """20 random neighbouring pairs and the worst-case one for the tables (a record moving
    to a cell of every column at once): each histogram, table and selection score changes
    by at most the Δ it recorded (L2 for the Gaussian tables, L∞ for the scores), and the
    one-way histograms attain theirs (Δ₂ = √2)."""
    plan = _plan(name)
    run = _run(name, plan)
    rng = np.random.default_rng(11)
    changes = []
    for _ in range(20):
        d = _table(rng)
        changes.append(compare(run, d, _replace(d, int(rng.integers(N)), _record(rng))))
    d = _table(rng)
    d.loc[0] = {"x": 0.05, "k": 0, "o": "lo", "c": "a"}
    changes.append(compare(run, d, _replace(d, 0, {"x": 0.95, "k": 5, "o": "hi", "c": "c"})))
    found = worst(changes)
    assert all(c.within for c in found.values()), [c for c in found.values() if not c.within]
    tables = [c for c in found.values() if c.norm == "l2"]
    assert tables and all(c.ratio == pytest.approx(1.0) for c in tables if c.name.startswith("histogram["))
    scores = [c for c in found.values() if c.norm == "linf"]
    assert scores and max(c.ratio for c in scores) > 0.5  # a halved Δ∞ would not hold


def test_the_targets_triples_are_measured_at_their_recorded_sensitivity(monkeypatch):
    """With a target, its three-way tables are candidates (``workload.target_triples``).
    The probe chooses the last candidate in every round (a triple); through the stages' own
    code each triple's table moves by at most its Δ₂ = √2 between neighbours and reaches it
    when a record moves to a cell of every column at once."""
    choose = Probe.select

    def last(self, scores, scale, sensitivity, rho, rng):
        out, used = choose(self, scores, scale, sensitivity, rho, rng)
        if self.replay is None:
            out[0] = len(scores) - 1
        return out, used

    monkeypatch.setattr(Probe, "select", last)
    plan = _plan("aim-target")
    run = _run("aim-target", plan)
    rng = np.random.default_rng(21)
    changes = []
    for _ in range(5):
        d = _table(rng)
        changes.append(compare(run, d, _replace(d, int(rng.integers(N)), _record(rng))))
    d = _table(rng)
    d.loc[0] = {"x": 0.05, "k": 0, "o": "lo", "c": "a"}
    changes.append(compare(run, d, _replace(d, 0, {"x": 0.95, "k": 5, "o": "hi", "c": "c"})))
    found = worst(changes)
    assert all(c.within for c in found.values()), [c for c in found.values() if not c.within]
    rounds = [c for c in found.values() if c.stage == "measure"]
    triples = [c for c in rounds if c.name.count(",") == 2]
    assert triples and triples == rounds
    assert max(c.ratio for c in triples) == pytest.approx(1.0)


def test_the_targets_triples_respect_the_size_cap_and_hold_the_target():
    triples = target_triples(SCHEMA, [200, 40, 3, 2], target="c")
    assert triples == [(0, 2, 3), (1, 2, 3)]  # (0, 1, 3): 16,000 cells > 10,000
    assert not aim.AIMParams(target="c", triples=False).triples_of()


@pytest.mark.parametrize("name", ["mst", "aim", "aim-target"])
def test_sensitivities_name_exactly_what_the_stages_measure(name):
    """``Synthesizer.sensitivities`` on the stages' public facts gives each record's stage
    and Δ (the derivation ``audit verify`` repeats), and nothing more."""
    plan = _plan(name)
    synth = _synth(name)
    rows = rows_of(_table(np.random.default_rng(3)), SCHEMA)
    fit = synth.fit(rows, SCHEMA, plan, CHEAP[name], m=50, rng=np.random.default_rng(4))
    derived = synth.sensitivities(SCHEMA, CHEAP[name], N, fit.facts)
    assert sorted(derived) == sorted(m.name for m in fit.measurements)
    for m in fit.measurements:
        assert derived[m.name].stage == m.stage and derived[m.name].bound(m.norm) == m.sensitivity


# ---------------------------------------------------------------- budgets and structure


@pytest.mark.parametrize("batch", [1, 3])
def test_aims_rounds_spend_each_stage_exactly_and_never_more(batch):
    """Whatever the annealing does, the rounds' ρ's sum to each stage's share and never above
    it; with batches, no candidate is chosen twice between two estimates."""
    params = aim.AIMParams(rounds=8, round_iters=10, iters=30, batch=batch)
    plan = plan_budget("zcdp", 1.0, 1e-6, aim.AIM().stage_weights(SCHEMA, params))
    rows = rows_of(_table(np.random.default_rng(5)), SCHEMA)
    fit = aim.AIM().fit(rows, SCHEMA, plan, params, m=20, rng=np.random.default_rng(6))
    for stage in ("select", "measure"):
        spent = math.fsum(m.rho for m in fit.measurements if m.stage == stage)
        assert spent <= plan.stage(stage).rho and spent == pytest.approx(plan.stage(stage).rho, rel=1e-9)
    rounds = [tuple(r) for r in fit.facts["rounds"]]
    assert len(rounds) == sum(m.stage == "measure" for m in fit.measurements)
    for start in range(0, len(rounds), batch):
        chunk = rounds[start : start + batch]
        assert len(set(chunk)) == len(chunk), chunk


def test_aims_target_tables_are_measured_before_the_rounds_within_their_stage():
    """With a target, its p − 1 tables come first (stage ``target``, split evenly, summing to
    at most the stage's share) and the rounds follow."""
    plan = _plan("aim-target")
    fit = aim.AIM().fit(
        rows_of(_table(np.random.default_rng(12)), SCHEMA),
        SCHEMA,
        plan,
        CHEAP["aim-target"],
        m=20,
        rng=np.random.default_rng(13),
    )
    first = [m for m in fit.measurements if m.stage != "marginals"][: len(SCHEMA) - 1]
    assert [m.stage for m in first] == ["target"] * (len(SCHEMA) - 1)
    assert all("c" in pair for pair in fit.facts["target_pairs"]) and len(fit.facts["target_pairs"]) == 3
    assert math.fsum(m.rho for m in first) <= plan.stage("target").rho


def test_mst_chooses_a_spanning_tree():
    plan = _plan("mst")
    fit = mst.MST().fit(
        rows_of(_table(np.random.default_rng(8)), SCHEMA),
        SCHEMA,
        plan,
        CHEAP["mst"],
        m=20,
        rng=np.random.default_rng(9),
    )
    edges = fit.facts["tree"]
    assert len(edges) == len(SCHEMA) - 1
    parent = {c: c for c in SCHEMA.names}

    def root(c):
        while parent[c] != c:
            c = parent[c]
        return c

    for a, b in edges:
        assert root(a) != root(b)  # no cycle
        parent[root(a)] = root(b)


def test_candidates_respect_the_public_size_cap_and_put_the_target_first():
    sizes = [200, 100, 3, 2]
    pairs = candidate_pairs(SCHEMA, sizes, target="c")
    assert (0, 1) not in pairs  # 20,000 cells > 10,000
    assert all(3 in p for p in pairs[:3]) and len(pairs) == 5


def test_the_sampler_draws_from_the_model(seed):
    """A model fitted to exact (noise-free, tiny-σ) tables of a 2-column joint: 20,000 rows
    drawn from it have that joint within sampling error (TVD ≤ 4·√(K/m)/2, K = 6 cells)."""
    from dprelease.mechanisms.graphical import Marginal, estimate, sample
    from dprelease.mechanisms.primitives import Measurement

    joint = np.array([[0.3, 0.1, 0.05], [0.05, 0.2, 0.3]])
    n = 10_000
    counts = joint * n

    def measured(columns, value):
        return Marginal(
            columns,
            Measurement("t", "s", np.asarray(value, float).ravel(), "gaussian", 1.0, "l2", 1e-3, 1.0, None),
        )

    model = estimate(["a", "b"], [2, 3], [measured((0, 1), counts)], n, iters=500)
    rows = sample(model, 20_000, np.random.default_rng(seed))
    freq = np.bincount(rows[:, 0] * 3 + rows[:, 1], minlength=6) / len(rows)
    assert 0.5 * np.abs(freq - joint.ravel()).sum() <= 4 * math.sqrt(6 / len(rows)) / 2
    assert graphical.marginal_of(model, (0, 1)) == pytest.approx(counts.ravel(), rel=0.02)
