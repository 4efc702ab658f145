"""Issue 19, ``dprelease discover`` (``init --private-epsilon`` until issue 31): bounds and
categories discovered under DP, charged to the dataset's ledger as a release of its own with
a bundle that ``audit verify`` checks; refusals read and spend nothing; a bad column fails
without spending. ``init`` stays read-free: it refuses the discovery's options."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.ledger import Ledger, default_url
from dprelease.records.audit import verify_bundle
from dprelease.spec.release import ReleaseSpec
from tests.helpers import cli_text, without_software

KINDS = ["--kind", "age=integer", "--kind", "income=continuous", "--kind", "sex=nominal"]
ATOMS_ON = ["--atom-share", "0.05"]


def _people(tmp_path, n: int = 4_000):
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            # 30 % zeros, and a tenth of the incomes missing (empty cells)
            "income": np.where(
                rng.random(n) < 0.1, np.nan, np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, 1e5, n))
            ),
            "sex": rng.choice(["f", "m"], n),
            "note": rng.choice(["x", "y"], n),
        }
    )
    table.loc[0, "sex"] = "only-one"
    table.loc[rng.random(n) < 0.1, "income"] = np.nan
    path = tmp_path / "people.csv"
    table.to_csv(path, index=False)
    return path


def _discover(path, *extra):
    return CliRunner().invoke(app, ["discover", str(path), "--epsilon", "1", *extra])


def test_discovered_values_are_charged_audited_and_make_a_valid_spec(tmp_path):
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--lifetime-epsilon", "5")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "people.yaml").read_text()
    raw = yaml.safe_load(text)
    age, income, sex = raw["schema"]["age"], raw["schema"]["income"], raw["schema"]["sex"]
    assert 18 <= age["bounds"][0] < age["bounds"][1] <= 91 and age["out_of_bounds"] == "clip"
    assert income["bounds"][0] == 0.0  # 30 % zeros: the atom is its own lower quantile
    assert (
        sex["categories"] == ["f", "m", "(other)"] and sex["other"] == "(other)"
    )  # one-record category dropped
    assert raw["schema"]["note"] == {"type": "FILL"}  # kind unknown: never read
    assert text.count("discovered under DP in people-schema-") == 3 + 3  # each line and its confirm item
    assert raw["privacy"]["lifetime_epsilon"] == 5.0 and raw["privacy"]["lifetime_delta"] == 1e-6
    assert raw["draft"]["written_by"] == "dprelease discover"
    with Ledger(default_url(out)) as led:
        (done,) = led.releases("people")
        assert (done["status"], done["epsilon"], done["delta"]) == ("released", 1.0, 1e-7)
        bundle = out / done["release_id"]
    checks = verify_bundle(bundle, default_url(out))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert set(doc["discovered"]) == {"age", "income", "sex"} and "only-one" not in json.dumps(doc)
    shown = CliRunner().invoke(app, ["audit", "show", str(bundle)])
    assert shown.exit_code == 0 and "partition selection" in cli_text(shown.output), shown.output
    as_json = json.loads(CliRunner().invoke(app, ["audit", "show", str(bundle), "--json"]).output)
    assert as_json["discovered"]["sex"]["categories"] == ["f", "m"] and as_json["totals"]["delta"] == 1e-7
    raw["schema"]["note"] = {"type": "nominal", "categories": ["x", "y"]}
    del raw["draft"]
    ReleaseSpec.model_validate(raw)  # the discovered values make a spec the release accepts


@pytest.mark.parametrize(
    "moved",
    [
        ["--private-epsilon", "1"],
        ["--private-delta", "1e-7"],
        ["--atom-share", "0.05"],
        ["--bundle-out", "releases"],
        ["--ledger", "l.db"],
        ["--insecure-seed", "3"],
    ],
    ids=lambda a: a[0],
)
def test_init_refuses_the_discovery_options_and_opens_no_ledger(tmp_path, monkeypatch, moved):
    """Issue 31: ``init`` never reads a value or spends: given an option of the DP discovery
    (it took them until the discovery became ``dprelease discover``) it exits 2 naming the
    option and the new command, and writes no draft, no bundle and no ledger, even with a
    ledger in DPRELEASE_LEDGER."""
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "env-ledger.db"
    monkeypatch.setenv("DPRELEASE_LEDGER", str(ledger))
    data = _people(tmp_path)
    result = CliRunner().invoke(app, ["init", str(data), *KINDS, *moved])
    text = cli_text(result.output)
    assert result.exit_code == 2, result.output
    assert f"{moved[0]} is not an option of init" in text and "dprelease discover DATA --epsilon E" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["people.csv"]  # no draft, ledger or bundle
    result = CliRunner().invoke(app, ["init", str(data), *KINDS])  # DPRELEASE_LEDGER alone is no request
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["people.csv", "people.yaml"]
    assert "No value of the data was read" in (tmp_path / "people.yaml").read_text()


def test_init_help_offers_no_discovery_and_discover_is_a_command():
    top = cli_text(CliRunner().invoke(app, ["--help"], terminal_width=200).output)
    init_help = cli_text(CliRunner().invoke(app, ["init", "--help"], terminal_width=200).output)
    assert "discover" in top and "--private-epsilon" not in init_help and "--ledger" not in init_help


def test_a_tampered_discovery_bundle_fails_its_audit(tmp_path):
    out = tmp_path / "releases"
    assert _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out)).exit_code == 0
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    doc_path = bundle / "public" / "release.json"
    doc = json.loads(doc_path.read_text())
    doc["discovered"]["sex"]["threshold"] = 2.0  # a threshold the noise does not justify
    doc_path.write_text(json.dumps(doc))
    failed = {c.name for c in verify_bundle(bundle, default_url(out)) if not c.ok}
    assert {"schema/categories[sex]", "public/release.json"} <= failed


def test_without_a_known_kind_nothing_is_read_or_charged(tmp_path):
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), "--bundle-out", str(out))
    assert result.exit_code == 2 and "--kind NAME=KIND" in cli_text(result.output)
    assert not out.exists() and not (tmp_path / "people.yaml").exists()


def test_a_lifetime_budget_it_would_exceed_refuses_before_reading(tmp_path):
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--lifetime-epsilon", "0.5")
    assert result.exit_code == 4 and "lifetime budget" in cli_text(result.output), result.output
    assert not (tmp_path / "people.yaml").exists()
    with Ledger(default_url(out)) as led:
        assert [r["status"] for r in led.releases("people")] == ["refused"]


def test_text_in_a_numeric_column_fails_naming_it_and_spends_nothing(tmp_path):
    path = _people(tmp_path)
    table = pd.read_csv(path)
    table["age"] = table["age"].astype(str)
    table.loc[7, "age"] = "SECRET-VALUE"
    table.to_csv(path, index=False)
    out = tmp_path / "releases"
    result = _discover(path, *KINDS, "--bundle-out", str(out))
    text = cli_text(result.output)
    assert result.exit_code == 2 and "column 'age'" in text and "SECRET" not in text, text
    with Ledger(default_url(out)) as led:
        (row,) = led.releases("people")
        assert row["status"] == "failed" and row["epsilon"] == 0.0
        failed = [r for r in led.entries(dataset="people") if r["status"] == "failed"]
        assert [without_software(r["detail"]) for r in failed] == [{"stage": "read", "error": "DataError"}]


def test_a_ledger_on_the_bundle_folder_is_refused_before_anything_is_spent(tmp_path):
    """Issue 30: ``--bundle-out X --ledger X`` (X missing) made X the ledger's file, then
    failed writing the bundle into it after the noise was drawn; now refused first."""
    same = tmp_path / "X"
    result = _discover(_people(tmp_path), *KINDS, "--bundle-out", str(same), "--ledger", str(same))
    text = cli_text(result.output)
    assert result.exit_code == 2, result.output
    assert f"--ledger ({same}) must be a file apart from --bundle-out" in text and "ledger.db" in text, text
    assert not same.exists() and not (tmp_path / "people.yaml").exists()  # no ledger, no bundle, no draft


def test_a_bundle_folder_that_cannot_be_made_is_refused_before_the_reserve(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    ledger = tmp_path / "ledger.db"
    Ledger(default_url(tmp_path)).close()  # the dataset's ledger, as a steward keeps it
    result = _discover(
        _people(tmp_path), *KINDS, "--bundle-out", str(blocker / "out"), "--ledger", str(ledger)
    )
    assert result.exit_code == 2 and "is not writable" in cli_text(result.output), result.output
    with Ledger(default_url(tmp_path)) as led:
        assert led.releases("people") == [] and led.entries(dataset="people") == []  # nothing reserved


def test_a_ledger_below_a_file_is_refused_before_the_reserve(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _discover(
        _people(tmp_path), *KINDS, "--bundle-out", str(tmp_path / "out"), "--ledger", str(blocker / "l.db")
    )
    text = cli_text(result.output)
    assert result.exit_code == 2 and f"'{blocker}' is a file" in text, result.output


def test_audit_verify_says_which_ledger_it_checked_and_why(tmp_path):
    """Issues 30 and 38: without --ledger the audit uses the SQLite ledger the bundle's
    internal/ledger.json names (release.json names none: only its chain head), else ledger.db
    beside the bundle, and says which; a copy with neither says what to pass."""
    out = tmp_path / "releases"
    assert _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out)).exit_code == 0
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    named = default_url(out)
    assert str(out).encode() not in (bundle / "public" / "release.json").read_bytes()
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle)])
    text = cli_text(result.output)
    assert result.exit_code == 0, result.output
    assert "the bundle's chain head" in text and "internal/manifest.json" in text
    assert (
        f"checked against the ledger {named} (named by the bundle's internal/ledger.json; pass --ledger "
        "to choose)" in text
    )
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle), "--ledger", str(out)])
    assert f"checked against the ledger {named} (--ledger)" in cli_text(result.output), result.output
    copy = tmp_path / "copy"  # the bundle and the ledger copied elsewhere: the record names the old place
    shutil.copytree(out, copy)
    (out / "ledger.db").rename(tmp_path / "elsewhere.db")
    result = CliRunner().invoke(app, ["audit", "verify", str(copy / bundle.name)])
    text = cli_text(result.output)
    assert result.exit_code == 0, result.output
    assert (
        f"checked against the ledger {default_url(copy)} (the bundle's internal/ledger.json names {named}, "
        "which is not a file here; ledger.db beside the bundle; pass --ledger to choose)" in text
    )
    result = CliRunner().invoke(app, ["audit", "verify", str(bundle)])
    text = cli_text(result.output)
    assert result.exit_code == 1
    assert (
        f"no ledger was checked (the bundle's internal/ledger.json names {named}, which is not a file "
        "here; no ledger.db beside the bundle; pass --ledger URL)" in text
    )


@pytest.mark.parametrize("name", ["a" * 57, "My Data"])
def test_a_dataset_name_no_release_id_can_hold_is_refused_before_the_reserve(tmp_path, name):
    """The discovery is named ``<name>-schema-<time>``, a folder: a name a spec would refuse
    (too long for the id, or not lowercase letters, digits and '-') is refused first."""
    Ledger(default_url(tmp_path)).close()
    result = _discover(_people(tmp_path), *KINDS, "--name", name, "--bundle-out", str(tmp_path))
    text = cli_text(result.output)
    assert result.exit_code == 2 and f"the dataset name ({name!r}" in text and "at most 56" in text, text
    with Ledger(default_url(tmp_path)) as led:
        assert led.entries(dataset=name) == []
    assert not list(tmp_path.glob("*-schema-*"))


def test_the_atoms_selections_are_charged_listed_in_the_bundle_and_audited(tmp_path):
    """Each numeric column's atoms are a ledger row ``atoms[<column>]`` of a third of its
    share (ε/3 per column, ε/9 each), and a partition selection of δ/3 listed in the
    bundle; the rows sum to the plan's (ε, δ), ``audit verify`` re-derives the atoms'
    threshold, and a threshold the noise does not justify fails it."""
    out = tmp_path / "releases"
    assert _discover(_people(tmp_path), *KINDS, *ATOMS_ON, "--bundle-out", str(out)).exit_code == 0
    with Ledger(default_url(out)) as led:
        (done,) = led.releases("people")
        rows = {r["statistic"]: r for r in led.entries(dataset="people") if r["kind"] == "measurement"}
    assert (done["epsilon"], done["delta"]) == (1.0, 1e-7)
    for name in ("age", "income"):
        atoms = rows[f"atoms[{name}]"]
        assert (atoms["sensitivity"], atoms["detail"]["mechanism"]) == (2.0, "laplace")
        assert atoms["epsilon"] == pytest.approx(1 / 9) and atoms["noise_scale"] == pytest.approx(18)
    assert math.fsum(r["epsilon"] for r in rows.values()) == pytest.approx(1.0)
    assert math.fsum(r["epsilon"] for r in rows.values()) <= 1.0
    bundle = out / done["release_id"]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    found = doc["discovered"]["income"]["atoms"]
    assert (
        found["atoms"] == [0.0]
        and found["min_share"] == 0.05
        and found["epsilon"] == rows["atoms[income]"]["epsilon"]
    )
    selections = [doc["discovered"][c]["atoms"]["delta"] for c in ("age", "income")]
    assert math.fsum([*selections, doc["discovered"]["sex"]["delta"]]) == pytest.approx(1e-7)
    assert "atoms[income]" in {r["statistic"] for r in doc["privacy"]["ledger"]["measurements"]}
    checks = {c.name: c for c in verify_bundle(bundle, default_url(out))}
    assert all(c.ok for c in checks.values()) and checks["schema/atoms[income]"].ok
    found["threshold"] = 2.0
    (bundle / "public" / "release.json").write_text(json.dumps(doc))
    failed = {c.name for c in verify_bundle(bundle, default_url(out)) if not c.ok}
    assert {"schema/atoms[income]", "public/release.json"} <= failed


def test_a_column_zero_in_30_percent_of_rows_is_drafted_with_atom_0_and_the_draft_validates(tmp_path):
    """``discover`` on a CSV whose score is exactly 0 in 30 % of the rows: the
    draft declares ``atoms: [0.0]`` in the syntax the spec loader reads, and once its
    ``draft:`` section is deleted, ``dprelease validate`` passes it."""
    rng = np.random.default_rng(3)
    n = 5_000
    table = pd.DataFrame(
        {
            "score": np.where(rng.random(n) < 0.3, 0.0, np.round(rng.uniform(0, 100, n), 2)),
            "visits": np.where(rng.random(n) < 0.5, 3, rng.integers(0, 50, n)),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    table.to_csv(tmp_path / "scores.csv", index=False)
    kinds = ["--kind", "score=continuous", "--kind", "visits=integer", "--kind", "sex=nominal"]
    result = _discover(tmp_path / "scores.csv", *kinds, *ATOMS_ON, "--bundle-out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    draft = tmp_path / "scores.yaml"
    text = draft.read_text()
    assert "atoms: [0.0]" in text and "atoms: [3]" in text, text
    schema = yaml.safe_load(text)["schema"]
    assert schema["score"]["atoms"] == [0.0] and schema["visits"]["atoms"] == [3]
    draft.write_text(text.split("\ndraft:\n")[0] + "\n")  # the steward confirmed every item
    result = CliRunner().invoke(app, ["validate", str(draft)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--atom-share", "1"], "--atom-share (1.0) must be 0 (no atoms) or a number between 0 and 1"),
        (["--atom-share", "-0.1"], "--atom-share (-0.1) must be 0 (no atoms) or a number between 0 and 1"),
        (["--delta", "0"], "--delta (0.0) must be > 0 when categories or atoms are"),
    ],
)
def test_a_bad_atom_share_or_no_delta_is_refused_before_the_reserve(tmp_path, option, said):
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out), *option)
    text = cli_text(result.output)
    assert result.exit_code == 2 and said in text, text
    assert not (tmp_path / "people.yaml").exists()
    with Ledger(default_url(out)) as led:
        assert led.entries(dataset="people") == []


def test_the_atom_share_sets_the_least_share_of_an_atom(tmp_path):
    """``--atom-share 0.35``: income's zeros (30 % of the rows) are no longer an atom."""
    out = tmp_path / "releases"
    assert (
        _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--atom-share", "0.35").exit_code == 0
    )
    raw = yaml.safe_load((tmp_path / "people.yaml").read_text())
    assert "atoms" not in raw["schema"]["income"]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert doc["discovered"]["income"]["atoms"]["min_share"] == 0.35


def test_the_draft_declares_only_atoms_inside_the_bounds_and_writes_them_as_yaml_floats(tmp_path):
    """Post-processing of the published atoms: one beyond a bound and a fraction in an
    integer column are left out (the bounds are not widened) and the confirm line says so;
    a tiny atom is written so that YAML reads a float back (``1e-05`` would be text)."""
    from dprelease.discovery.schema import Discovery, draft_entries
    from dprelease.mechanisms.discovery import DiscoveredAtoms, DiscoveredBounds
    from dprelease.mechanisms.primitives import Measurement

    def found(
        atoms: tuple[float, ...], lower: float, upper: float
    ) -> tuple[DiscoveredBounds, DiscoveredAtoms]:
        m = Measurement(
            "atoms[x]", "schema", np.full(len(atoms), 500.0), "laplace", 2.0, "l1", 6.0, None, 1 / 3
        )
        return DiscoveredBounds(lower, upper, 0.01, ()), DiscoveredAtoms(atoms, 100.0, 0.05, m)  # type: ignore[arg-type]

    (b1, a1), (b2, a2) = found((0.0, 1e-05, 250.0), 0.0, 99.0), found((2.5, 3.0), 0.0, 10.0)
    d = Discovery("t-schema-x", tmp_path, {"gain": b1, "kids": b2}, {"gain": a1, "kids": a2}, {}, 1.0, 1e-7)
    lines = draft_entries(d, {"gain": "continuous", "kids": "integer"})
    gain, kids = (yaml.safe_load("{" + lines[c][0] + "}") for c in ("gain", "kids"))
    assert gain["atoms"] == [0.0, 1e-05] and kids["atoms"] == [3]
    assert all("left out" in lines[c][2] for c in ("gain", "kids"))


NUMERIC = ["--kind", "age=integer", "--kind", "income=continuous"]


def test_with_atom_share_0_the_bounds_get_half_a_columns_share_each_and_no_atoms_are_found(tmp_path):
    """``--atom-share 0``: each bound is ε/(2k) (here 1/6), no ledger row ``atoms[...]``,
    no ``atoms`` in the bundle or the draft, δ all on the one nominal column's categories;
    ``audit verify`` passes."""
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), *KINDS, "--bundle-out", str(out), "--atom-share", "0")
    assert result.exit_code == 0, result.output
    with Ledger(default_url(out)) as led:
        (done,) = led.releases("people")
        rows = {r["statistic"]: r for r in led.entries(dataset="people") if r["kind"] == "measurement"}
    assert set(rows) == {f"bound[{c},{s}]" for c in ("age", "income") for s in ("lower", "upper")} | {
        "categories[sex]"
    }
    assert all(
        rows[f"bound[{c},{s}]"]["epsilon"] == pytest.approx(1 / 6)
        for c in ("age", "income")
        for s in ("lower", "upper")
    )
    bundle = out / done["release_id"]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert "atoms" not in doc["discovered"]["income"] and "atoms" not in doc["statement"]
    assert doc["discovered"]["sex"]["delta"] == 1e-7 and done["delta"] == 1e-7
    text = (tmp_path / "people.yaml").read_text()
    assert "atoms" not in text.lower(), text  # 30 % zeros, yet no atom is declared or mentioned
    checks = verify_bundle(bundle, default_url(out))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_with_atoms_off_and_numeric_columns_only_delta_0_is_accepted_and_the_plan_is_pure(tmp_path):
    """No partition selection runs: ``--private-delta 0`` is accepted, and so the charge is
    (ε, 0) whatever δ is given; ``audit verify`` passes on the bundle."""
    for delta, out in (("0", tmp_path / "a"), ("1e-7", tmp_path / "b")):
        result = _discover(
            _people(tmp_path),
            *NUMERIC,
            "--bundle-out",
            str(out),
            "--atom-share",
            "0",
            "--private-delta",
            delta,
            "--force",
        )
        assert result.exit_code == 0, result.output
        with Ledger(default_url(out)) as led:
            (done,) = led.releases("people")
        assert (done["epsilon"], done["delta"]) == (1.0, 0.0)
        checks = {c.name: c for c in verify_bundle(out / done["release_id"], default_url(out))}
        assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
        assert checks["partition selections' delta"].ok


@pytest.mark.parametrize("kinds", [KINDS, [*NUMERIC, *ATOMS_ON]], ids=["a nominal column", "atoms on"])
def test_delta_0_is_refused_when_a_partition_selection_runs(tmp_path, kinds):
    out = tmp_path / "releases"
    result = _discover(_people(tmp_path), *kinds, "--bundle-out", str(out), "--private-delta", "0")
    text = cli_text(result.output)
    assert result.exit_code == 2 and "--delta (0.0) must be > 0 when categories or atoms" in text, text
    assert not (tmp_path / "people.yaml").exists()
    with Ledger(default_url(out)) as led:
        assert led.entries(dataset="people") == []


def test_audit_verify_fails_a_bundle_that_leaves_out_a_partition_selection_the_ledger_recorded(tmp_path):
    """The δ sum runs over every partition selection the ledger recorded: a bundle whose
    ``atoms`` entry is gone (its δ no longer counted) fails that check, not only its seal."""
    out = tmp_path / "releases"
    assert _discover(_people(tmp_path), *KINDS, *ATOMS_ON, "--bundle-out", str(out)).exit_code == 0
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    doc_path = bundle / "public" / "release.json"
    doc = json.loads(doc_path.read_text())
    del doc["discovered"]["income"]["atoms"]
    doc_path.write_text(json.dumps(doc))
    checks = {c.name: c for c in verify_bundle(bundle, default_url(out))}
    assert (
        not checks["partition selections' delta"].ok
        and "atoms[income]" in checks["partition selections' delta"].detail
    )
