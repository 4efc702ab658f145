"""Issue 19, the steward's whole path: ``dprelease discover`` on a CSV, the
draft confirmed (its ``draft:`` section deleted), then ``dprelease release`` of that spec
through the real flow, charged to the same ledger and lifetime budget. The discovered
bounds clip, the rarer categories map to ``(other)``, and the two charges compose with the
partition selection's δ set aside."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.flows.release import release
from dprelease.ledger import Ledger, default_url
from dprelease.mechanisms.accounting import zcdp_epsilon, zcdp_rho
from dprelease.records.audit import verify_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]


def _people(n: int = 20_000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    table = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            "hours": np.where(rng.random(n) < 0.2, 0, rng.integers(1, 80, n)),
            "sex": rng.choice(["f", "m"], n),
            "region": rng.choice(["north", "south", "east"], n),
        }
    )
    table.loc[0, "region"] = "island"  # one record: never published, mapped to (other)
    return table


def test_a_discovered_draft_releases_and_both_charges_compose(tmp_path):
    _people().to_csv(tmp_path / "people.csv", index=False)
    out = tmp_path / "releases"
    kinds = ["--kind", "age=integer", "--kind", "hours=integer", "--kind", "sex=nominal"]
    kinds += ["--kind", "region=nominal", "--bundle-out", str(out), "--lifetime-epsilon", "10"]
    result = CliRunner().invoke(app, ["discover", str(tmp_path / "people.csv"), "--epsilon", "1", *kinds])
    assert result.exit_code == 0, result.output
    draft = tmp_path / "people.yaml"
    raw = yaml.safe_load(draft.read_text())
    assert raw["schema"]["region"]["categories"] == ["east", "north", "south", "(other)"]
    del raw["draft"]  # the steward confirmed every item
    raw["checks"] = {"target": "sex"}
    draft.write_text(yaml.safe_dump(raw, sort_keys=False))

    release(str(draft), str(out), release_id="people-1", insecure_seed=5)

    public = out / "people-1" / "public"
    syn = pd.read_csv(public / "synthetic.csv")
    lo, hi = raw["schema"]["age"]["bounds"]
    assert syn["age"].between(lo, hi).all() and set(syn["region"]) <= {"east", "north", "south", "(other)"}
    assert "too small" not in draft.read_text()  # q below its cap: the bounds sit near the quantiles
    clipped = json.loads((out / "people-1" / "internal" / "clipping.json").read_text())
    real = _people()
    for name in ("age", "hours"):  # every real value beyond a discovered bound, and only those
        b = raw["schema"][name]["bounds"]
        assert clipped["out_of_bounds_clipped"][name] == (~real[name].between(*b)).sum()
    assert clipped["unknown_mapped_to_other"]["region"] == 1
    with Ledger(default_url(out)) as led:
        spend = led.spend_so_far("people", 1e-6)
    # discovery (1, 1e-7) pure: rho 1/2 with 1e-7 set aside; the release at (1, 1e-6): its rho
    want = zcdp_epsilon(1.0**2 / 2 + zcdp_rho(1.0, 1e-6), 1e-6 - 1e-7)
    assert spend.epsilon == pytest.approx(want) and "approximate zCDP" in spend.rule
    for bundle in out.iterdir():
        if bundle.is_dir():
            failed = [c for c in verify_bundle(bundle, default_url(out)) if not c.ok]
            assert [c.name for c in failed] == ["randomness"] or not failed, failed  # seeded release
