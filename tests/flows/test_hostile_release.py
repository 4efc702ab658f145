"""Hostile and broken input through the CLI and the flow (issue 6): each case gets a
clear message naming the column or field and the rule, a non-zero exit (2 for bad input
or a bad spec), nothing published and, when no noise was drawn, no budget spent; a
failure after the noise keeps its spend (fail closed).

Issue 6's bullets and where each is tested, by the layer that refuses the input:

* missing file → ``tests/engines/test_read_refusals.py::test_missing_file``,
  ``test_cli_refuses_bad_input[missing-file]``
* unreadable or truncated CSV/Parquet → ``tests/engines/test_read_refusals.py``
* header mismatch → ``tests/engines/test_read_refusals.py::test_header_mismatch``,
  ``test_cli_refuses_bad_input[header-mismatch]``
* wrong types, NaN/inf in a continuous column, values outside the public bounds, unknown
  categories, empty data → ``tests/tasks/test_validate_input.py``;
  the ``clip``/``other`` policies → ``tests/tasks/test_validate_policies.py``,
  ``test_policies_end_to_end``; ``test_cli_refuses_bad_input[unknown-category]``,
  ``[empty-data]``
* a policy declared wrongly → ``tests/spec/test_spec_refusals.py::test_other_must_be_declared``
* fewer rows than the mechanism or the checks need, δ ≥ 1/n →
  ``tests/engines/test_row_refusals.py``, ``test_cli_refuses_bad_input[delta-over-1-n]``
* ε ≤ 0, NaN or absurdly large → ``tests/spec/test_spec_refusals.py::test_epsilon_out_of_range``,
  ``test_cli_refuses_bad_epsilon``; ε so small that the noise swamps the histograms (issue 17) →
  ``test_cli_refuses_bad_input[tiny-epsilon]``, ``tests/spec/test_forecast.py``
* a release id that already exists → ``test_release_id_that_already_exists`` (the ledger's
  own refusal: ``tests/ledger/test_store.py::test_reruns_never_spend_twice``)
* output directory not writable → ``test_output_directory_not_writable``,
  ``tests/bundle/test_write.py::test_write_errors_become_clear_messages``
* output fills up part way → ``test_disk_fills_up_part_way`` (the spend is kept: fail closed),
  ``tests/bundle/test_write.py``, ``tests/tasks/test_streaming.py``
* fuzz of the spec loader → ``tests/spec/test_spec_fuzz.py``
"""

from __future__ import annotations

import copy
import errno
import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.mechanisms.errors import DPReleaseError
from tests.helpers import (
    DEMO_SPEC,
    adult_rows,
    assert_nothing_published,
    assert_nothing_spent,
    cli_text,
    ledger_rows,
    real_run_only,
    write_spec,
)


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    """A wide terminal, so that rich never folds a long path inside a message."""
    import dprelease.cli.main

    monkeypatch.setattr(dprelease.cli.main.console, "width", 1000)


def test_cli_refuses_bad_epsilon(tmp_path):
    """A spec error stops the CLI before Prefect starts or any data is read (exit 2)."""
    spec = write_spec(tmp_path, adult_rows(50), privacy={"epsilon": float("nan"), "delta": 1e-6})
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out)])
    assert result.exit_code == 2
    text = cli_text(result.output)
    assert "spec field 'privacy.epsilon'" in text and "nothing was read or spent" in text
    assert not out.exists()


# ---------------------------------------------------------------- end to end, under Prefect
# (the session's prefect_harness is in tests/conftest.py)


def _bad_input(kind: str, folder: Path) -> tuple[Path, str]:
    """A spec whose data breaks one rule, and the words the message must hold."""
    data = adult_rows(300)
    if kind == "missing-file":
        path = write_spec(folder, dataset={"name": "adult", "path": "nowhere.csv"}, checks={"enabled": False})
        return path, f"dataset file '{folder / 'nowhere.csv'}' does not exist; fix dataset.path in the spec"
    if kind == "header-mismatch":
        data = data.rename(columns={"sex": "gender"})
        words = "the data header has column(s) the schema does not declare: ['gender']"
    elif kind == "unknown-category":
        data.loc[5, "race"] = "Martian"
        words = "column 'race': values must be among the 5 declared categories"
    elif kind == "empty-data":
        data = data.iloc[:0]
        words = "has no data rows"
    elif kind == "tiny-epsilon":  # issue 17: ε = 1e-9 crashed the checks after spending
        path = write_spec(folder, data, privacy={"epsilon": 1e-9, "delta": 1e-6})
        return path, "raise privacy.epsilon to at least"
    else:  # delta-over-1-n: 300 rows, δ = 0.01 ≥ 1/300
        path = write_spec(folder, data, privacy={"epsilon": 1.0, "delta": 0.01}, checks={"enabled": False})
        return path, "privacy.delta (0.01) must be below 1/n = 0.00333 for the n = 300 input rows"
    return write_spec(folder, data, checks={"enabled": False}), words


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "kind",
    ["missing-file", "header-mismatch", "unknown-category", "empty-data", "delta-over-1-n", "tiny-epsilon"],
)
def test_cli_refuses_bad_input(kind, tmp_path):
    spec, words = _bad_input(kind, tmp_path)
    out = tmp_path / "out"
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "bad"])
    took = time.perf_counter() - started
    text = cli_text(result.output)
    assert result.exit_code == 2, text
    assert_nothing_published(out, "bad")
    assert_nothing_spent(out, "bad")
    if kind in ("missing-file", "header-mismatch"):  # issue 18: found before Prefect starts
        assert words in text and "nothing was read or spent" in text
        assert ledger_rows(out, "bad") == [] and took < 3.0
    else:
        assert words in text and "nothing was published" in text
        assert len(ledger_rows(out, "bad")) == 1  # the attempt is on record, charged nothing


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_release_id_that_already_exists(tmp_path):
    """A second run with a published release_id is refused and charged nothing: the
    first release's charge is unchanged, its bundle untouched."""
    from dprelease.flows.release import release

    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="r1", insecure_seed=1)
    before = ledger_rows(out, "r1")
    manifest = (out / "r1" / "public" / "manifest.json").read_text()
    assert before[0]["status"] == "released" and before[0]["epsilon"] > 0
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r1"])
    assert result.exit_code == 4 and "release 'r1' already exists" in cli_text(result.output)
    # moved away on disk, the id is still taken in the ledger
    (out / "r1").rename(tmp_path / "r1-moved")
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r1"])
    text = cli_text(result.output)
    assert result.exit_code == 4 and "r1" in text and "already exists" in text
    assert not (out / "r1").exists() and not list(out.glob(".staging-*"))
    after = ledger_rows(out, "r1")
    assert [(r["status"], r["epsilon"], r["delta"]) for r in after] == [
        (r["status"], r["epsilon"], r["delta"]) for r in before
    ]
    assert (tmp_path / "r1-moved" / "public" / "manifest.json").read_text() == manifest


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_output_directory_not_writable(tmp_path):
    """--out below a regular file fails for root too (chmod does not stop root); where
    the tests do not run as root, a folder without write permission is tried as well."""
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    outs = [blocker / "out"]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        outs.append(locked)
    for out in outs:
        result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "w"])
        text = cli_text(result.output)
        assert result.exit_code == 2, text
        assert f"output folder '{out}' is not writable" in text and "pass --out" in text
        assert_nothing_published(out, "w")
        assert_nothing_spent(out, "w")


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_disk_fills_up_part_way(tmp_path, monkeypatch):
    """ENOSPC while writing synthetic.csv, after the noise was drawn: nothing is
    published, no staging folder is left, the failure record says what happened, and the
    spend is KEPT in the ledger (fail closed)."""
    import dprelease.bundle.write as bundle
    from dprelease.flows.release import release

    def fill_up(table, path):
        path.write_text(",".join(table.columns) + "\n1,2")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle, "write_csv", real_run_only(bundle.write_csv, fill_up))
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    with pytest.raises(
        DPReleaseError, match=re.escape("failed: no space left on device (ENOSPC); nothing was published")
    ):
        release(str(spec), str(out), release_id="full", insecure_seed=2)
    assert_nothing_published(out, "full")
    (record,) = list((out / "failures").iterdir())
    failure = json.loads((record / "failure.json").read_text())
    assert failure["stage"] == "write_bundle" and "ENOSPC" in failure["message"]
    (row,) = ledger_rows(out, "full")
    assert row["status"] == "failed" and row["epsilon"] > 0 and row["delta"] > 0  # the spend is kept


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_policies_end_to_end(tmp_path):
    """clip and other in a real release: the release runs, release.json publishes the
    policies, the counts are in internal/clipping.json only (not in public/, not on the
    terminal)."""
    data = adult_rows(300)
    data.loc[[3, 8], "age"] = ["150", "-4"]
    data.loc[[1, 2, 4], "race"] = "Martian"
    raw = copy.deepcopy(DEMO_SPEC["schema"])
    raw["age"]["out_of_bounds"] = "clip"
    raw["race"].update(unknown="other", other="Other")
    spec = write_spec(tmp_path, data, schema=raw, checks={"enabled": False})
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["release", str(spec), "--out", str(out), "--release-id", "pol", "--insecure-seed", "4"]
    )
    assert result.exit_code == 0, result.output
    clipping = json.loads((out / "pol" / "internal" / "clipping.json").read_text())
    assert clipping["out_of_bounds_clipped"]["age"] == 2 and clipping["unknown_mapped_to_other"] == {
        "race": 3
    }
    doc = json.loads((out / "pol" / "public" / "release.json").read_text())
    assert doc["spec"]["schema"]["age"]["out_of_bounds"] == "clip"
    assert doc["spec"]["schema"]["race"]["other"] == "Other"
    public_text = " ".join(p.read_text() for p in (out / "pol" / "public").glob("*.json"))
    assert "clipping" not in public_text and "mapped_to_other" not in public_text
    assert "clip" not in cli_text(result.output).lower()
    assert "clipping.json" in json.loads((out / "pol" / "internal" / "manifest.json").read_text())["files"]
    assert yaml.safe_load(spec.read_text())["schema"]["age"]["out_of_bounds"] == "clip"
