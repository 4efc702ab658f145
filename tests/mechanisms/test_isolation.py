"""Post-processing isolation: a release's synthetic table is a function of its noisy
releases (and public facts, and the seeded streams) only, never of the confidential rows.

The wiring harness (``tests/wiring.py``) checks what reaches the noise; it cannot see a
later step that reads the exact statistic beside its noisy release (e.g. raking to the
exact 2-way tables while the ledger shows the noisy ones). Here the flow's own four tasks
(``flow_synthesis``: encode → estimate → sample → decode, the demo's schema through the
spec) run on a table D, recording every release, and then on a very different table D' of
the same n that *replays* them (``replayed``: the real noise is still drawn, so every
stream advances as on D). Any use of D' beyond its releases changes the output.

The budget (ε = 50) keeps the noise small against the counts of 1,000 rows, so that the
releases are not shrunk away to the model (``refine.shrunk_distribution``) and a mutant
that uses an exact statistic in a release's place cannot hide (``tests/mutants.py``
applies one per mechanism). At the demo's ε = 1 on 1,000 rows it could: the exact 2-way
tables lie within the noise level of the candidates' own tables, the James–Stein weight
is 0 for all 42 of them, and raking to them changes nothing (17 of the 42 noisy tables
are shrunk away too). ``test_every_release_steers_the_output`` guards the choice.
"""

import functools
from pathlib import Path

import pandas as pd
import pytest

from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import load_spec
from tests.helpers import adult_rows, write_spec
from tests.wiring import flow_synthesis, recorded, replayed, rows_of

N = 1_000
EPSILON = 50.0

# (mechanism, params) on the demo's schema; spectral is not DP and releases nothing
CONFIGS = {
    "factor_gauss (demo: target income)": ("factor_gauss", {"target": "income"}),
    "factor_gauss (no target)": ("factor_gauss", {}),
    "ron_gauss": ("ron_gauss", {}),
    "ron_gauss (classification)": ("ron_gauss", {"task": "classification", "label": "income"}),
    "dpfm": ("dpfm", {}),
    "private_pca": ("private_pca", {"dims": 3}),
    "pcappd": ("pcappd", {}),
    "lda_ppd": ("lda_ppd", {"target": "income"}),
    "mst": ("mst", {"iters": 50}),
    "aim": ("aim", {"rounds": 2, "round_iters": 10, "iters": 30}),
}


@functools.cache
def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D and D': two disjoint-by-seed samples of the demo data, same n."""
    return adult_rows(N, seed=1), adult_rows(N, seed=2)


def _run(folder: Path, mechanism: str, params: dict, notion: str):
    d, _ = _tables()
    privacy = {"epsilon": EPSILON, "delta": 1e-6 if notion == "zcdp" else 0.0, "accountant": notion}
    spec = load_spec(write_spec(folder, d, mechanism={"name": mechanism, "params": params}, privacy=privacy))
    schema, p = spec.public_schema(), spec.privacy
    plan = plan_budget(p.accountant, p.epsilon, p.delta, spec.stage_weights())
    stages = flow_synthesis(mechanism, schema, plan, spec.mechanism_params(), seed=3)
    return lambda table: stages(rows_of(table, schema))


# mst and aim fit graphical models (mbi compiles each to XLA: 35 s a run for aim): over a minute
# of CPU each, so they run in the background tier
LONG = [pytest.mark.long]
CASES = [
    pytest.param(config, notion, id=f"{config}-{notion}", marks=LONG if name in ("mst", "aim") else [])
    for config, (name, _) in CONFIGS.items()
    for notion in MECHANISMS[name].notions
]


@pytest.mark.parametrize(("config", "notion"), CASES)
def test_output_is_a_function_of_the_releases_only(tmp_path, config, notion):
    """D' replaying D's releases ends with D's synthetic table, cell for cell; D' on its
    own releases does not (the output does depend on the data, through the releases)."""
    mechanism, params = CONFIGS[config]
    d, d_prime = _tables()
    run = _run(tmp_path, mechanism, params, notion)
    out, out_prime = replayed(run, d, d_prime)
    pd.testing.assert_frame_equal(out_prime, out)
    assert not run(d_prime).equals(out)


# private_pca: on the demo data the projected rows sit on few lattice points, so a deep PMM
# level whose occupied cells split the same way on D and D' leaves the consistent counts as
# they were (legitimately); lda_ppd: 4 s per run, its two releases covered by the mutants;
# mst and aim: a selection replaced by D''s changes which tables are measured next, so the
# later releases cannot be swapped in one by one.
STEERING = [c for c in CONFIGS if CONFIGS[c][0] not in ("private_pca", "lda_ppd", "mst", "aim")]


@pytest.mark.parametrize("config", STEERING)
def test_every_release_steers_the_output(tmp_path, config):
    """The replay test's power: replacing any one release of D by D''s changes D's
    synthetic table, so no release is ignored (e.g. a refine table shrunk away entirely),
    and using any exact statistic in a release's place would show."""
    mechanism, params = CONFIGS[config]
    d, d_prime = _tables()
    run = _run(tmp_path, mechanism, params, MECHANISMS[mechanism].notions[0])
    out, mine = recorded(run, d)
    _, theirs = recorded(run, d_prime)
    ignored = [
        i for i in range(len(mine)) if recorded(run, d, [*mine[:i], theirs[i], *mine[i + 1 :]])[0].equals(out)
    ]
    assert not ignored, f"releases {ignored} of {len(mine)} do not change the output"
