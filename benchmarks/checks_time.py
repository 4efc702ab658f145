"""Wall time of the post-release checks (utility and linkage reports) on resampled Adult.

    .venv/bin/python benchmarks/checks_time.py [ROWS]    # default 1,000,000

Fits factor_gauss (ε = 1) on ROWS rows drawn with replacement from Adult (seed 0),
then times ``utility_report`` (target income) and ``linkage_report`` in-process.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from dprelease.checks.reports import linkage_report, utility_report
from dprelease.engines.tables import bins_to_table, read_table, table_to_bins
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.synthesizer import MixedRows
from dprelease.spec import load_spec


def main(rows: int) -> None:
    spec = load_spec("flows/demo/adult.yaml")
    schema = spec.public_schema()
    df = read_table(spec.data_path, schema, spec.missing_tokens())
    df = df.sample(n=rows, replace=rows > len(df), random_state=0).reset_index(drop=True)
    bins = table_to_bins(df, schema)
    plan = plan_budget("zcdp", 1.0, 1e-6, fg.STAGE_WEIGHTS)
    rel = (
        fg.FactorGauss()
        .fit(MixedRows(bins), schema, plan, fg.FactorGaussParams(), m=rows, rng=np.random.default_rng(0))
        .rows
    )
    syn = bins_to_table(rel.bins, schema, rng=np.random.default_rng(1))
    syn_bins = table_to_bins(syn, schema)
    t = time.perf_counter()
    utility_report(
        df, bins, syn, syn_bins, schema, target="income", real_test=None, rng=np.random.default_rng(2)
    )
    t_util = time.perf_counter() - t
    t = time.perf_counter()
    linkage_report(
        df, bins, syn, syn_bins, schema, keeps_row_order=False, holdout=None, rng=np.random.default_rng(3)
    )
    t_link = time.perf_counter() - t
    print(
        f"rows {rows:,}: utility_report {t_util:.1f} s, linkage_report {t_link:.1f} s, "
        f"total {t_util + t_link:.1f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
