"""Issue 33: a signed heavy-tailed column (net assets: debts below 0, a long tail both
ways) declared ``transform: asinh`` with a public ``scale``, through the real flow (its
rehearsal included). Its bins are equal-width on asinh(x/scale): a few hundred dollars wide
near 0, geometric beyond, so the published table keeps the sign split and the typical
magnitude that 64 linear bins (62,500 dollars wide on these bounds) would blur."""

import json

import numpy as np
import pandas as pd
import pytest

from dprelease.flows.release import release
from tests.helpers import write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

SCHEMA = {
    "net_assets": {"type": "continuous", "bounds": [-2e6, 2e6], "transform": "asinh", "scale": 1000.0},
    "owner": {"type": "nominal", "categories": ["no", "yes"]},
}
N, DEBT = 3_000, 0.3


def _table(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    size = np.exp(rng.normal(np.log(5_000), 1.5, n))  # median |x| 5,000, a heavy tail
    sign = np.where(rng.random(n) < DEBT, -1.0, 1.0)
    net = np.clip(sign * size, -2e6, 2e6).round(2)
    return pd.DataFrame({"net_assets": net, "owner": np.where(net > 50_000, "yes", "no")})


def test_a_signed_heavy_tailed_column_is_released_on_asinh_bins(tmp_path):
    real = _table()
    spec = write_spec(tmp_path, real, schema=SCHEMA, checks={"enabled": False}, output={"formats": ["csv"]})
    release(str(spec), str(tmp_path / "out"), release_id="net", insecure_seed=2)
    public = tmp_path / "out" / "net" / "public"
    syn = pd.read_csv(public / "synthetic.csv")
    x = syn["net_assets"].to_numpy()
    assert x.min() >= -2e6 and x.max() <= 2e6
    # the sign split survives (σ of the noisy counts ≈ 20 of 3,000 rows; sampling ≈ 0.01)
    assert abs(np.mean(x < 0) - DEBT) < 0.05
    # and so does the typical magnitude: bins ≈ 27 % wide in |x| there; linear bins decode
    # |x| uniformly in [0, 62,500) and publish a median 7 times too large (seed 2)
    ratio = np.median(np.abs(x)) / np.median(np.abs(real["net_assets"]))
    assert 0.7 < ratio < 1.4, ratio
    doc = json.loads((public / "release.json").read_text())
    declared = doc["spec"]["schema"]["net_assets"]
    assert declared["transform"] == "asinh" and declared["scale"] == 1000.0
