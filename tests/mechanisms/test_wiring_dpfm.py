"""dpfm (corrected), wired: the Δ each stage passes to the noise bounds what the stage really
measures (``tests/wiring.py``): the ordinal cumulative frequencies (``thresholds``), the
top-r eigenvectors (``loadings``) and the factor scores (``scores``), under both accountants
(zCDP → L2, pure → L1), on random and on worst-case neighbouring tables; and it is the Δ
``sensitivities`` derives from public facts (what ``audit verify`` re-derives)."""

import math

import numpy as np
import pandas as pd
import pytest

from dprelease.mechanisms import dpfm
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from tests.wiring import compare, flow_stages, rows_of, worst

LEVELS = {"o": ("lo", "mid", "hi"), "q": ("1", "2", "3", "4")}
NUMERIC = (Continuous("x", 0.0, 1.0), Continuous("k", 0, 9, integer=True))
NOMINAL = (Nominal("c", ("a", "b", "c", "d")), Nominal("b", ("n", "y")))
SCHEMA = Schema((*NUMERIC, *(Ordinal(name, lv) for name, lv in LEVELS.items()), *NOMINAL))  # p* = 8
NO_ORDINAL = Schema((*NUMERIC, *NOMINAL))  # p* = 6
DELTA = {"zcdp": 1e-6, "pure": 0.0}
# r ∈ {1, 2, 3}; κ = 1 < √3 clips the continuous extremes, so rows reach ‖x*ᵢ‖₂ = 1
PARAMS = [dpfm.DPFMParams(factors=r, clip=c) for r in (1, 2, 3) for c in (3.0, 1.0)]
EXPECTED = ("ordinal_cumulative_frequencies", "top_eigenvectors", "factor_scores")  # in stage order


def _plan(notion, schema, params=PARAMS[0]):
    """The flow's plan (``stage_weights``; no ``thresholds`` stage without ordinal columns)."""
    return plan_budget(notion, 1.0, DELTA[notion], dpfm.stage_weights(schema, params))


def _record(rng: np.random.Generator, schema: Schema) -> dict:
    """A random record; a continuous value is 0 or 1 (y* = ∓√3, clipped when κ < √3) a
    third of the time each."""
    out = {}
    for col in schema.columns:
        if isinstance(col, Continuous):
            u = float(rng.choice([0.0, 1.0, rng.random()]))
            out[col.name] = round(9 * u) if col.integer else u
        else:
            out[col.name] = str(rng.choice(col.levels if isinstance(col, Ordinal) else col.categories))
    return out


def _table(rng: np.random.Generator, n: int, schema: Schema) -> pd.DataFrame:
    return pd.DataFrame([_record(rng, schema) for _ in range(n)])


def _replace(table: pd.DataFrame, i: int, record: dict) -> pd.DataFrame:
    out = table.copy()
    out.loc[i] = record
    return out.astype(table.dtypes.to_dict())


def _run(plan, schema, params):
    stages = flow_stages("dpfm", schema, plan, params)
    return lambda table: stages(rows_of(table, schema))


@pytest.mark.parametrize("schema", [SCHEMA, NO_ORDINAL], ids=["ordinal", "no_ordinal"])
@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_recorded_sensitivity_bounds_random_neighbours(notion, schema):
    """100 random pairs per configuration (n = 3..30, r ∈ {1, 2, 3}, κ ∈ {3, 1}; half with
    jittered 'noisy' thresholds and loadings, so encoding and scores use realistic private
    f̃ and Ṽ): every statistic's change is within the Δ it recorded. Thresholds: each
    f_{j,l} moves by ≤ 1/n for ≤ Lⱼ−1 levels. Loadings: any two orthonormal r-frames
    (data-free). Scores: only the replaced row moves (the encoding randomness of the
    others is shared), by (x − x')Ṽ with ‖x‖₂, ‖x'‖₂ ≤ 1 and D's released Ṽ replayed."""
    rng = np.random.default_rng(11)
    changes = []
    for trial in range(100):
        params = PARAMS[trial % len(PARAMS)]
        d = _table(rng, int(rng.integers(3, 31)), schema)
        d2 = _replace(d, int(rng.integers(len(d))), _record(rng, schema))
        jitter = (lambda shape: rng.normal(0, 0.5, shape)) if trial % 2 else None
        changes.append(compare(_run(_plan(notion, schema, params), schema, params), d, d2, jitter))
    for c in (c for pair in changes for c in pair):
        assert c.within, c
    top = worst(changes)
    assert set(top) == set(EXPECTED[0 if schema is SCHEMA else 1 :])
    assert top["factor_scores"].ratio > 0.0  # the changed row really moved the scores


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_cumulative_frequencies_reach_their_recorded_sensitivity(notion):
    """A record moving from level 0 to level Lⱼ−1 in every ordinal column moves all
    Σⱼ(Lⱼ−1) = 2 + 3 interior frequencies by exactly 1/n: Δ₁ = 5/n, Δ₂ = √5/n, attained
    (to floating point). A Δ computed for 2n, or frequencies divided by 2n, fails."""
    n, params = 30, PARAMS[1]
    d = _table(np.random.default_rng(1), n, SCHEMA)
    first, last = {k: lv[0] for k, lv in LEVELS.items()}, {k: lv[-1] for k, lv in LEVELS.items()}
    row = d.loc[3].to_dict()
    changes = compare(
        _run(_plan(notion, SCHEMA), SCHEMA, params),
        _replace(d, 3, {**row, **first}),
        _replace(d, 3, {**row, **last}),
    )
    (freq,) = [c for c in changes if c.name == "ordinal_cumulative_frequencies"]
    assert freq.recorded == pytest.approx(5 / n if notion == "pure" else math.sqrt(5) / n, rel=1e-12)
    assert freq.observed == pytest.approx(freq.recorded, rel=1e-9), freq


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_scores_nearly_reach_their_recorded_sensitivity(notion):
    """Two continuous columns and one ordinal, p* = 3, κ = 1, r = 2. D's level shares are
    1/20, 18/20, 1/20, so f̃ = (0, .05, .95, 1) and level 'lo' encodes to z ≤ Φ⁻¹(.05) <
    −1, 'hi' to z ≥ 1; values 0 and 1 to y* = ∓√3: all clipped, so the record (0, 0, lo)
    is x = −u and (1, 1, hi) is x' = u, u = (1, 1, 1)/√3, ‖u‖₂ = 1 (the row scaling κ√p*
    is what makes it 1). D's loadings release is jittered by C·[2v₁, v₂] (noise that
    dominates V), v₁,₂ = (u ± w)/√2, w = (1, −1, 0)/√2, so Ṽ = ±[v₁, v₂] up to Wedin's
    sin θ ≤ 2/C; then (x' − x)Ṽ = ±(√2, √2): L2 = 2 = Δ₂ and L1 = 2√2 = 2√r = Δ₁. Both
    norms are stationary there, so the ratio is 1 − O(1/C²) (≈ 1 − 10⁻¹⁴ at C = 10⁶); we
    ask for > 1 − 10/C. A halved Δ, rows scaled by κ only (‖x‖₂ = √3) or left unclipped
    (|z| > 1.6) all exceed Δ."""
    schema = Schema((Continuous("a", 0.0, 1.0), Continuous("b", 0.0, 1.0), Ordinal("o", LEVELS["o"])))
    params, big = dpfm.DPFMParams(factors=2, clip=1.0), 1e6
    rng = np.random.default_rng(5)
    d = pd.DataFrame({"a": rng.uniform(0.2, 0.8, 20), "b": rng.uniform(0.2, 0.8, 20), "o": ["mid"] * 20})
    d = _replace(_replace(d, 1, {"a": 1.0, "b": 1.0, "o": "hi"}), 0, {"a": 0.0, "b": 0.0, "o": "lo"})
    u, w = np.ones(3) / math.sqrt(3), np.array([1.0, -1.0, 0.0]) / math.sqrt(2)
    frame = np.column_stack([2 * (u + w), u - w]) / math.sqrt(2)

    def jitter(shape):
        return big * frame if shape == frame.shape else np.zeros(shape)

    changes = compare(
        _run(_plan(notion, schema), schema, params),
        d,
        _replace(d, 0, {"a": 1.0, "b": 1.0, "o": "hi"}),
        jitter,
    )
    (scores,) = [c for c in changes if c.name == "factor_scores"]
    assert scores.recorded == (2.0 if notion == "zcdp" else 2 * math.sqrt(2))
    assert scores.within and scores.ratio > 1 - 10 / big, scores


@pytest.mark.parametrize("schema", [SCHEMA, NO_ORDINAL], ids=["ordinal", "no_ordinal"])
def test_sensitivities_are_what_the_stages_record(schema):
    """The public derivation (``audit verify``'s) equals each measurement's recorded Δ:
    same names and stages, Δ in the norm each stage calibrated to (p* = 8 or 6, any r)."""
    for notion in ("zcdp", "pure"):
        for params in PARAMS[::2]:
            d = _table(np.random.default_rng(3), 25, schema)
            measured = _run(_plan(notion, schema, params), schema, params)(d)
            derived = dpfm.sensitivities(schema, params, 25)
            assert [m.name for m in measured] == [name for name in EXPECTED if name in derived]
            assert set(derived) == set(EXPECTED[0 if schema is SCHEMA else 1 :])
            for m in measured:
                assert m.norm == ("l2" if notion == "zcdp" else "l1")
                assert m.stage == derived[m.name].stage
                assert m.sensitivity == derived[m.name].bound(m.norm)


def test_the_flow_plan_without_ordinal_columns_runs():
    """Regression (found by these tests): ``stage_weights`` drops ``thresholds`` when the
    schema has no ordinal column, and ``_encode`` used to ask the plan for it anyway
    (KeyError), so every such dpfm release failed before measuring anything."""
    plan = plan_budget("pure", 1.0, 0.0, dpfm.stage_weights(NO_ORDINAL, PARAMS[0]))
    measured = _run(plan, NO_ORDINAL, PARAMS[0])(_table(np.random.default_rng(2), 10, NO_ORDINAL))
    assert [m.stage for m in measured] == ["loadings", "scores"]
