"""The intervals of ``dprelease query`` against a known truth (item 17): per mechanism and
table, the share of 90 % intervals that held the true count over 300 random queries of one to
three conditions, the median half-width against the median error of the synthetic rows' own
count (the issue's target: at most 3.5 times), per method, and the time to fit, to build the
replicates and model checks, and per query. Through the product's own code
(``tests/intervals.py``: the fit, the tables, the replicates, ``records.query.answer_where``).

Tables: Adult (the demo data and spec, every row fitted) and ``tests.intervals.GENERATED``, a
5,000-row table with a known joint distribution. factor_gauss on both; mst and aim on the
generated table (Adult with aim takes minutes per fit). Seeds 1-3 (``--quick``: seed 1).

``.venv/bin/python benchmarks/bench_intervals.py [--quick]`` runs it and prints the section;
``benchmarks/run.py --only intervals`` also stores it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import Any

from common import REPO, load_avg, run_command

sys.path.insert(0, str(REPO))  # the harness the tests use

from dprelease.api import Spec
from dprelease.engines.inputs import read_input, resolve_mechanism
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.registry import MECHANISMS
from tests.intervals import GENERATED, evaluate, generated_table

QUERIES = 300
CASES = (("factor_gauss", "adult"), ("factor_gauss", "generated"), ("mst", "generated"), ("aim", "generated"))


def _case(mechanism: str, table: str, seed: int) -> dict[str, Any]:
    if table == "adult":
        spec = resolve_mechanism(Spec.demo().model)
        schema = spec.public_schema()
        data, _ = read_input(spec)
        params, plan = spec.mechanism_params(), spec.budget_plan()
    else:
        synth = MECHANISMS[mechanism]
        schema, data = GENERATED, generated_table(5000, 0)
        params = synth.params_type(target="band") if mechanism == "factor_gauss" else synth.params_type()
        plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(schema, params))
    got = evaluate(mechanism, params, data, schema, plan, queries=QUERIES, seed=seed)
    print(
        f"  {mechanism} on {table}, seed {seed}: coverage {got.coverage:.3f}, ratio {got.ratio:.2f}",
        flush=True,
    )
    return {"mechanism": mechanism, "table": table, "seed": seed, **asdict(got), "ratio": got.ratio}


def run(quick: bool = False) -> dict[str, Any]:
    started, load = time.perf_counter(), load_avg()
    seeds = (1,) if quick else (1, 2, 3)
    rows = [_case(m, t, s) for m, t in CASES for s in seeds]
    return {
        "command": run_command("intervals", quick),
        "quick": quick,
        "queries": QUERIES,
        "seeds": list(seeds),
        "rows": rows,
        "load_avg_1m": {"start": load, "end": load_avg()},
        "wall_s": time.perf_counter() - started,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("intervals", run))
