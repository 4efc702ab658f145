"""``dprelease.release`` end to end under the session's Prefect harness: the demo, a
DataFrame, a refusal before anything is read, then ``audit.verify`` and ``ledger.show`` on
what was published."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import dprelease
from dprelease.ledger import Ledger
from tests.helpers import DEMO_DIR, adult_rows, record_release, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A release of a DataFrame (checks off, OS entropy) into its own folder."""
    folder = tmp_path_factory.mktemp("api")
    spec = dprelease.Spec.load(write_spec(folder, adult_rows(10), checks={"enabled": False}))
    df = pd.read_csv(DEMO_DIR / "adult.csv.gz").sample(
        1500, random_state=2
    )  # numbers typed as pandas reads them
    return dprelease.release(spec, data=df, out=folder / "out", release_id="frame"), folder / "out"


def test_the_demo_publishes_a_bundle_and_one_ledger_charge(tmp_path):
    r = dprelease.release(dprelease.Spec.demo(), out=tmp_path, insecure_seed=1)
    assert r.path == tmp_path / r.release_id and (r.path / "public" / "release.json").is_file()
    assert list(r.synthetic.columns) == dprelease.Spec.demo().columns
    assert r.epsilon == pytest.approx(1.0) and r.delta == 1e-6 and r.rho is not None
    assert r.account.spent.epsilon == pytest.approx(1.0)
    (charged,) = dprelease.ledger.show(out=tmp_path).releases
    assert charged["release_id"] == r.release_id and charged["status"] == "released"


def test_a_dataframe_is_released(published):
    r, _ = published
    assert r.release_id == "frame" and list(r.synthetic.columns) == dprelease.Spec.demo().columns
    assert r.fit_for_publication and r.accuracy and r.dataset == "adult"
    assert json.loads((r.path / "public" / "release.json").read_text())["status"] == "released"


def test_audit_verify_passes_a_bundle_and_fails_a_tampered_one(published):
    r, _ = published
    result = dprelease.audit.verify(r.path)
    assert result.passed, result.failed
    with (r.path / "public" / "synthetic.csv").open("a") as f:
        f.write("tampered\n")
    tampered = dprelease.audit.verify(r.path)
    assert not tampered.passed and any(c.group == "files" for c in tampered.failed)


def test_ledger_show_returns_the_charges(published):
    r, out = published
    summary = dprelease.ledger.show(out=out)
    assert [x["release_id"] for x in summary.releases] == ["frame"] and summary.chain_intact
    assert summary.accounts["adult"].spent.epsilon == pytest.approx(r.epsilon)


def test_a_refused_release_raises_before_reading_data_and_spends_nothing(tmp_path):
    spec = write_spec(
        tmp_path, None, checks={"enabled": False}, privacy={"epsilon": 1.0, "lifetime_epsilon": 1.2}
    )
    (tmp_path / "data.csv").write_bytes(b"\xff not a csv")  # never opened: the ledger refuses first
    out = tmp_path / "out"
    with Ledger(f"sqlite:///{out / 'ledger.db'}") as led:
        record_release(led, "earlier", lifetime=(1.2, 1e-6), dataset="adult")
    with pytest.raises(dprelease.errors.BudgetRefused):
        dprelease.release(spec, out=out, release_id="next")
    with Ledger(f"sqlite:///{out / 'ledger.db'}", create=False) as led:
        (row,) = led.entries(release_id="next")
    assert row["status"] == "refused" and not row["epsilon"]


def test_a_dataframe_breaking_the_schema_is_refused_naming_the_column_to_its_caller(tmp_path):
    """Issue 41: the caller passed the DataFrame, and the refusal hid the column from them
    (Prefect's records still never hold it: ``tests/flows/test_refusal_privacy.py``)."""
    spec = dprelease.Spec.load(write_spec(tmp_path, adult_rows(10), checks={"enabled": False}))
    df = pd.read_csv(DEMO_DIR / "adult.csv.gz").sample(500, random_state=3)
    df.loc[df.index[7], "age"] = 140  # above the schema's bounds [17, 90]
    with pytest.raises(dprelease.errors.InputRefused) as e:
        dprelease.release(spec, data=df, out=tmp_path / "out", release_id="bad-age")
    assert "'age'" in str(e.value) and "failure record" in str(e.value), str(e.value)
    assert e.value.detail in str(e.value)
