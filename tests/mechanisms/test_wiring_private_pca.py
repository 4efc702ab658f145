"""private_pca, wired: the Δ₁ each stage passes to the noise bounds what the stage really
measures (``tests/wiring.py``), for PMM and PSMM, on random and on worst-case neighbouring
tables; and it is the Δ₁ ``sensitivities`` derives from public facts (what ``audit
verify`` re-derives). Corrected variant, pure ε: every statistic is calibrated in L1.

Design rows x ∈ [0, 1]^d. With n public and replace-one neighbours: the mean moves by
(x − x')/n, ‖·‖₁ ≤ d/n; each PMM level and the PSMM grid are histograms of the projected
rows a_i = V̂ᵀ(x_i − X̄_priv) (V̂, X̄_priv replayed from D), so a record leaves one cell and
enters another: Δ₁ = 2; the covariance vector u = (M_ij, i < j; M_ii/2) is recorded at the
paper's 3d²/n, while the pair-sum argument (``covariance_sensitivity``) gives
‖Δu‖₁ ≤ (d² − d/2)/n."""

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger

from dprelease.mechanisms import private_pca as pp
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.design import design
from dprelease.mechanisms.primitives import noise_rngs
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from dprelease.tasks.synthesis import encode, estimate_private_moments, project_and_sample
from tests.wiring import compare, flow_stages, rows_of, worst

SCHEMA = Schema(  # d = 4: every design coordinate can be 0 or 1 (a 2-category one-hot block)
    (Continuous("x", 0.0, 1.0), Ordinal("o", ("lo", "mid", "hi")), Nominal("c", ("a", "b")))
)
WIDE = Schema(  # d = 6: a 3-category one-hot block and an integer column
    (
        Continuous("x", 0.0, 1.0),
        Continuous("k", 0, 9, integer=True),
        Ordinal("o", ("lo", "mid", "hi")),
        Nominal("c", ("a", "b", "c")),
    )
)
LOW = {"x": 0.0, "o": "lo", "c": "a"}  # design (0, 0, 1, 0)
HIGH = {"x": 1.0, "o": "hi", "c": "b"}  # design (1, 1, 0, 1): differs from LOW everywhere
PMM = pp.PrivatePCAParams()  # d' by the §6 rule, depth ⌈log₂(ε₃n)⌉
PMM_DEEP = pp.PrivatePCAParams(dims=2, depth=6)
PSMM = pp.PrivatePCAParams(dims=2, subroutine="psmm", psmm_cells=64)
PSMM_3 = pp.PrivatePCAParams(dims=3, subroutine="psmm", psmm_cells=100)


def _plan(epsilon=3.0):
    return plan_budget("pure", epsilon, 0.0, pp.STAGE_WEIGHTS)


def _record(rng: np.random.Generator, schema: Schema) -> dict:
    out = {}
    for c in schema.columns:
        if isinstance(c, Continuous):
            lo, hi = c.lower, c.upper
            v = [lo, hi, lo + (hi - lo) * rng.random()][int(rng.integers(3))]  # bounds a third of the time
            out[c.name] = round(v) if c.integer else float(v)
        else:
            out[c.name] = str(rng.choice(c.values))
    return out


def _table(rng: np.random.Generator, n: int, schema: Schema) -> pd.DataFrame:
    return pd.DataFrame([_record(rng, schema) for _ in range(n)])


def _replace(table: pd.DataFrame, i: int, record: dict) -> pd.DataFrame:
    out = table.copy()
    out.loc[i] = record
    return out.astype(table.dtypes.to_dict())


def _run(params, schema=SCHEMA, plan=None):
    stages = flow_stages("private_pca", schema, plan or _plan(), params)
    return lambda table: stages(rows_of(table, schema))


def _extremes(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: n/2 rows LOW, n/2 rows HIGH; D': one LOW replaced by HIGH. X̄ = ½·1 and M is
    rank one along v = HIGH − LOW ∈ {±1}^d, so V̂'s first column is ±v/2 and the two
    records project to a₀ = ∓1 vs ±1 (other coordinates 0): opposite halves at level 1,
    hence different cells at every PMM level, and different PSMM cells ⌊a/δ⌋."""
    d = pd.DataFrame([LOW] * (n // 2) + [HIGH] * (n // 2))
    return d, _replace(d, 0, HIGH)


CONFIGS = [(SCHEMA, PMM), (WIDE, PMM_DEEP), (SCHEMA, PSMM), (WIDE, PSMM_3)]


@pytest.mark.parametrize(("schema", "params"), CONFIGS, ids=["pmm", "pmm-deep", "psmm", "psmm-3"])
def test_recorded_sensitivity_bounds_random_neighbours(schema, params):
    """120 random pairs, n ∈ [3, 40), a third of continuous values at the bounds; every
    other pair with N(0, ½²) added to each release, so V̂, X̄_priv, hence R, d' and δ, are
    those of a noisy run (counts are rounded; nothing later reads them). Every statistic
    is within its recorded Δ₁, and the covariance within the pair-sum (d² − d/2)/n."""
    rng = np.random.default_rng(11)
    run, d = _run(params, schema), design(schema).width
    changes = []
    for trial in range(120):
        n = int(rng.integers(3, 40))
        t = _table(rng, n, schema)
        t2 = _replace(t, int(rng.integers(n)), _record(rng, schema))
        jitter = (lambda shape: rng.normal(0, 0.5, shape)) if trial % 2 else None
        changes.append(compare(run, t, t2, jitter))
        for c in changes[-1]:
            assert c.within, c
            if c.name == "covariance":
                assert c.observed <= (d * d - d / 2) / n * (1 + 1e-9), c
    top = worst(changes)
    counts = {"psmm_counts"} if params.subroutine == "psmm" else {f"pmm_level_{j}" for j in range(1, 7)}
    assert {"covariance", "mean"} <= set(top) and set(top) - {"covariance", "mean"} <= counts
    assert all(top[k].ratio == pytest.approx(1.0) for k in set(top) & counts)  # random moves reach 2


@pytest.mark.parametrize("params", [PMM, PMM_DEEP, PSMM, PSMM_3], ids=["pmm", "pmm-deep", "psmm", "psmm-3"])
def test_mean_and_counts_reach_their_recorded_sensitivity(params):
    """``_extremes`` (n = 20): the replaced record differs in all d coordinates, so the
    mean moves by exactly d/n; it changes cell, so every level's (or the grid's) counts
    move by exactly 2. A halved Δ, a halved statistic or a count Δ of 1 fails here."""
    d, d2 = _extremes(20)
    changes = compare(_run(params), d, d2)
    names = {c.name for c in changes}
    if params.subroutine == "psmm":
        assert "psmm_counts" in names
    else:
        assert {"pmm_level_1", "pmm_level_2"} <= names
    for c in changes:
        if c.name != "covariance":
            assert c.observed == pytest.approx(c.recorded, rel=1e-9), c
    (mean,) = [c for c in changes if c.name == "mean"]
    assert mean.recorded == pytest.approx(4 / 20, rel=1e-12)


@pytest.mark.parametrize("n", [2, 7, 50])
def test_covariance_is_within_its_loose_sensitivity(n):
    """D: n rows HIGH (M = 0); D': one replaced by LOW. D' has Σ(x − x̄)(x − x̄)ᵀ =
    ((n − 1)/n)·vvᵀ with v ∈ {±1}^d, so M' = vvᵀ/n and ‖Δu‖₁ = (d(d − 1)/2 + d/2)/n = d²/(2n):
    exactly ⅙ of the recorded 3d²/n (the largest a random search over {0, ½, 1}-valued
    rows with n ≤ 20 found; the random pairs above stay below 0.09): within, and loose."""
    d = pd.DataFrame([HIGH] * n)
    changes = compare(_run(PMM), d, _replace(d, 0, LOW))
    (cov,) = [c for c in changes if c.name == "covariance"]
    assert cov.within and cov.recorded == pytest.approx(3 * 16 / n, rel=1e-12)
    assert cov.observed == pytest.approx(16 / (2 * n), rel=1e-9) and cov.ratio == pytest.approx(1 / 6)


def test_mean_is_attained_only_when_every_coordinate_can_flip():
    """On WIDE the nominal block has 3 coordinates and a record moves 2 of them, so the
    mean's worst change is (1 + 1 + 1 + 2)/n < d/n = 6/n: ``sensitivities`` says it is
    not tight there (still valid), and tight on SCHEMA (see the test above)."""
    lo = {"x": 0.0, "k": 0, "o": "lo", "c": "a"}
    d = pd.DataFrame([lo] * 10)
    changes = compare(_run(PMM, WIDE), d, _replace(d, 0, {"x": 1.0, "k": 9, "o": "hi", "c": "c"}))
    (mean,) = [c for c in changes if c.name == "mean"]
    assert mean.observed == pytest.approx(5 / 10, rel=1e-9) and mean.recorded == pytest.approx(6 / 10)
    facts = {"subroutine": "pmm", "depth": 3, "dims": 2}
    assert not pp.sensitivities(WIDE, PMM, 10, facts)["mean"].tight
    assert pp.sensitivities(SCHEMA, PMM, 10, facts)["mean"].tight


def _stages_with_facts(schema, plan, params, rows, seed=0):
    """The flow's three tasks (bodies, as ``flow_stages``): measurements and the facts
    merged as the flow merges them."""
    rngs = noise_rngs(seed, 7)
    with disable_run_logger():
        enc = encode.fn("private_pca", rows, schema, plan, params, rngs[0])
        est = estimate_private_moments.fn("private_pca", enc.state, plan, params, rngs[1])
        smp = project_and_sample.fn("private_pca", est.state, params, len(rows), rngs[2])
    stages = (enc, est, smp)
    return [m for s in stages for m in s.measurements], {k: v for s in stages for k, v in s.facts.items()}


@pytest.mark.parametrize(
    ("schema", "params", "subroutine"),
    [
        (SCHEMA, PMM, "pmm"),
        (WIDE, PMM_DEEP, "pmm"),
        (SCHEMA, PSMM, "psmm"),
        (WIDE, PSMM_3, "psmm"),
        (WIDE, pp.PrivatePCAParams(dims=3, subroutine="auto", psmm_cells=100), "psmm"),
        (WIDE, pp.PrivatePCAParams(dims=2, subroutine="auto"), "pmm"),
    ],
)
def test_sensitivities_are_what_the_stages_record(schema, params, subroutine):
    """With real (seeded) noise: the public derivation from (schema, params, n, the
    stages' facts) names exactly the measured statistics, in their stages, with each
    recorded Δ₁ (what ``audit verify`` and the flow's bundle check compare)."""
    for n, epsilon in ((25, 3.0), (200, 1.0)):
        rows = rows_of(_table(np.random.default_rng(n), n, schema), schema)
        measured, facts = _stages_with_facts(schema, _plan(epsilon), params, rows)
        assert facts["subroutine"] == subroutine
        derived = pp.sensitivities(schema, params, n, facts)
        assert [m.name for m in measured] == list(derived)
        for m in measured:
            assert m.norm == "l1" and derived[m.name].l2 is None
            assert m.stage == derived[m.name].stage
            assert m.sensitivity == derived[m.name].bound("l1")
