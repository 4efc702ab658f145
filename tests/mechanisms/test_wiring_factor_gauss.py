"""factor_gauss, wired: the Δ each stage passes to the noise bounds what the stage really
measures (``tests/wiring.py``), on random and on worst-case neighbouring tables, in memory
and through the streaming passes; and it is the Δ ``sensitivities`` derives from public
facts (what ``audit verify`` re-derives)."""

import functools
import math

import numpy as np
import pandas as pd
import pytest

from dprelease.mechanisms import factor_gauss as fg
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
PARAMS = fg.FactorGaussParams()


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
    out.loc[i] = record
    return out.astype(table.dtypes.to_dict())


def _run(plan, schema=SCHEMA, params=PARAMS):
    stages = flow_stages("factor_gauss", schema, plan, params)
    return lambda table: stages(rows_of(table, schema))


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_recorded_sensitivity_bounds_random_neighbours(notion):
    """200 random pairs (half with jittered 'noisy' marginals, so the moments stage sees
    realistic private CDFs): every statistic's change is within the Δ it recorded."""
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.STAGE_WEIGHTS)
    rng = np.random.default_rng(7)
    changes = []
    for trial in range(200):
        d = _table(rng, int(rng.integers(5, 40)))
        d2 = _replace(d, int(rng.integers(len(d))), _record(rng))
        jitter = (lambda shape: rng.normal(0, 2.0, shape)) if trial % 2 else None
        changes.append(compare(_run(plan), d, d2, jitter))
    for c in (c for pair in changes for c in pair):
        assert c.within, c
    top = worst(changes)
    assert set(top) == {*(f"histogram[{c}]" for c in "xkoc"), "latent_second_moment"}


@pytest.mark.parametrize("notion", ["zcdp", "pure"])
def test_histograms_reach_their_recorded_sensitivity(notion):
    """A record that moves bin in every column changes each histogram by exactly Δ
    (√2 in L2, 2 in L1): the bound is tight, so a halved Δ or a doubled count fails."""
    plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.STAGE_WEIGHTS)
    d = _table(np.random.default_rng(1), 30)
    d2 = _replace(d, 3, {"x": 0.99, "k": 9, "o": "hi", "c": "d"})
    d = _replace(d, 3, {"x": 0.01, "k": 0, "o": "lo", "c": "a"})
    for c in compare(_run(plan), d, d2):
        if c.name.startswith("histogram"):
            assert c.observed == pytest.approx(c.recorded, rel=1e-12), c


def test_second_moment_nearly_reaches_its_recorded_l2_sensitivity():
    """Two continuous columns (B = √2 ≤ c): rows at the bins that encode to z ≈ (B, 0) and
    (0, B) under D's CDFs change u(ZᵀZ/n) by nearly √2·B²/n; the gap is the bin width of
    the dither (1/64 of the CDF), so the test asks for 90 % of the bound. A statistic
    divided by 2n, or a row bound B larger than recorded, fails."""
    schema = Schema((Continuous("a", 0.0, 1.0), Continuous("b", 0.0, 1.0)))
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    grid = (np.arange(640) + 0.5) / 640  # D's CDF: uniform, so U(value) ≈ value
    d = pd.DataFrame({"a": grid, "b": grid[::-1]})
    hi = 0.5 * (1 + math.erf(math.sqrt(2) / math.sqrt(2)))  # Φ(√2): U whose z is √2
    changes = compare(
        _run(plan, schema), _replace(d, 0, {"a": hi, "b": 0.5}), _replace(d, 0, {"a": 0.5, "b": hi})
    )
    (moment,) = [c for c in changes if c.name == "latent_second_moment"]
    assert moment.within and moment.ratio > 0.9, moment


def test_streaming_passes_measure_within_the_same_sensitivities(tmp_path):
    """The local engine's two passes (``stream_encode``, ``stream_estimate``), chunked,
    on CSV neighbours: each statistic within the Δ it records, which equals the memory
    path's."""
    from prefect.logging import disable_run_logger

    from dprelease.engines.chunks import Scan
    from dprelease.engines.runners import LocalEngine
    from dprelease.mechanisms.primitives import noise_rngs
    from dprelease.mechanisms.rowkeys import RowKeys
    from dprelease.spec import load_spec
    from dprelease.tasks.streaming import chunk_job, stream_encode, stream_estimate
    from tests.helpers import adult_rows, write_spec

    data = adult_rows(3_000, seed=4)
    spec = load_spec(write_spec(tmp_path, data, engine={"name": "local", "chunk_rows": 1_000}))
    schema, plan = spec.public_schema(), plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    job = chunk_job(spec, RowKeys(dither=1, holdout=2, sample=3))

    def run(table: pd.DataFrame):
        path = tmp_path / "data.csv"
        table.to_csv(path, index=False)
        engine = LocalEngine(path, 1_000)
        rngs = noise_rngs(0, 7)
        with disable_run_logger():
            scan = engine.run(job.scan, functools.partial(Scan.combine, k=job.sample_rows))
            steps = fg.FactorGauss().streaming
            enc = stream_encode.fn(steps, scan, schema, plan, PARAMS, rngs[0])
            est = stream_estimate.fn(steps, engine, job, enc.state, scan.fitted, plan, PARAMS, rngs[1])
        facts.update(enc.facts)
        return [*enc.measurements, *est.measurements]

    facts: dict = {}
    other = adult_rows(3_000, seed=9).iloc[0].to_dict()
    changes = compare(run, data, _replace(data, 1_500, other))
    assert all(c.within for c in changes), changes
    derived = fg.sensitivities(schema, PARAMS, 3_000, facts)
    for c in changes:
        assert c.recorded == derived[c.name].bound(c.norm)


def test_sensitivities_are_what_the_stages_record():
    """The public derivation (``audit verify``'s) equals each measurement's recorded Δ."""
    for notion in ("zcdp", "pure"):
        plan = plan_budget(notion, 1.0, 1e-6 if notion == "zcdp" else 0.0, fg.STAGE_WEIGHTS)
        fit = fg.FactorGauss().fit(
            rows_of(_table(np.random.default_rng(3), 25), SCHEMA),
            SCHEMA,
            plan,
            PARAMS,
            m=25,
            rng=np.random.default_rng(0),
        )
        measured = fit.measurements
        derived = fg.sensitivities(SCHEMA, PARAMS, 25, fit.facts)
        assert {m.name for m in measured} == set(derived)
        for m in measured:
            assert m.stage == derived[m.name].stage
            assert m.sensitivity == derived[m.name].bound(m.norm)
