"""Issue 18: the checks tell the CLI's display each step as it starts (a 1M-row release
spends about 10 s in them), and a display that is told nothing changes no result."""

from __future__ import annotations

import numpy as np

from dprelease.checks.reports import linkage_report, utility_report
from tests.checks.test_degenerate import HOLDOUT, NORMAL, REAL, SCHEMA, _binned


def test_each_check_step_is_told_and_the_reports_are_unchanged():
    real_b, syn_b, hold_b = _binned(REAL), _binned(NORMAL), _binned(HOLDOUT)
    steps: list[str] = []
    told = utility_report(
        *real_b,
        *syn_b,
        SCHEMA,
        target="flag",
        real_test=HOLDOUT,
        rng=np.random.default_rng(1),
        progress=steps.append,
    )
    silent = utility_report(
        *real_b, *syn_b, SCHEMA, target="flag", real_test=HOLDOUT, rng=np.random.default_rng(1)
    )
    assert told == silent
    assert [s.split(":")[0] for s in steps] == ["marginals, pairs and associations", "pMSE", "TSTR"]
    steps.clear()
    linkage_report(
        *real_b,
        *syn_b,
        SCHEMA,
        keeps_row_order=True,
        holdout=hold_b,
        rng=np.random.default_rng(2),
        progress=steps.append,
    )
    assert steps[0] == "distances to the closest real record" and steps[-1].startswith("membership")
