"""The guarantee end to end, as users meet it: held-out records change nothing
published; a non-DP release voids its dataset's account everywhere it is shown; the
audit re-derives every sensitivity and checks both seals and the folder; a ledger
password never reaches Prefect."""

import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dprelease.bundle.files import sha256
from dprelease.cli.main import app
from dprelease.engines.inputs import holdout_split
from dprelease.flows.release import release
from dprelease.ledger import PASSWORD_ENV
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.primitives import release_streams
from dprelease.records.audit import verify_bundle
from tests.helpers import adult_rows, cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]
GATES = {"tvd_1way": {"max": 0.9}, "tvd_2way": {"max": 1.0}}  # generous: small tables, noisy gates
SEED = 5


def _held_out_and_fitted(n: int, fraction: float) -> tuple[int, int]:
    """One held-out and one fitted row position of a seeded memory-engine release: the
    flow splits with its ``holdout`` stream."""
    import pandas as pd

    held = holdout_split(pd.DataFrame({"i": range(n)}), fraction, release_streams(SEED).holdout)[1]
    held_rows = set(held["i"])
    return min(held_rows), min(set(range(n)) - held_rows)


def test_a_held_out_record_changes_nothing_published(tmp_path):
    """The holdout is part of the protected table. The synthesis and the DP gates read the
    fitted rows only; the advisory checks read the holdout but never change an output. So
    with the same seed, replacing a held-out record leaves every published byte and the
    gates' decision unchanged, while replacing a fitted record changes them (the test can
    fail)."""
    data = adult_rows(600, seed=3)
    other = adult_rows(600, seed=8).iloc[0]
    held, fitted = _held_out_and_fitted(len(data), 0.2)
    outputs = {}
    for name, row in (("base", None), ("held", held), ("fitted", fitted)):
        folder = tmp_path / name
        folder.mkdir()
        table = data.copy()
        if row is not None:
            table.iloc[row] = other
        spec = write_spec(folder, table, checks={"target": "income", "holdout_fraction": 0.2, "gates": GATES})
        bundle = Path(release(str(spec), str(folder / "out"), release_id="r", insecure_seed=SEED))
        doc = json.loads((bundle / "public" / "release.json").read_text())
        outputs[name] = ((bundle / "public" / "synthetic.csv").read_bytes(), doc["checks"]["gates"])
    assert outputs["held"] == outputs["base"]
    assert outputs["fitted"][0] != outputs["base"][0]


def test_a_non_dp_release_voids_the_dataset_everywhere(tmp_path):
    runner = CliRunner()
    out = tmp_path / "out"
    spectral = write_spec(
        tmp_path,
        adult_rows(300),
        checks={"enabled": False},
        privacy={"epsilon": 1.0, "delta": 0, "accountant": "pure", "allow_non_dp": True},
        mechanism={"name": "spectral_anonymization"},
    )
    release(str(spectral), str(out), release_id="sa", insecure_seed=1)
    dp = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    bundle = Path(release(str(dp), str(out), release_id="after", insecure_seed=1))
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert doc["differentially_private"]  # this release is DP ...
    assert doc["privacy"]["ledger_record"]["dataset_guarantee"]["void_since"]["release_id"] == "sa"  # ... but
    assert "DATASET GUARANTEE VOID: release 'sa'" in (bundle / "public" / "README.txt").read_text()

    ledger = f"sqlite:///{out / 'ledger.db'}"
    shown = runner.invoke(app, ["ledger", "show", "--ledger", ledger], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "guarantee VOID since release 'sa'" in cli_text(shown.output)
    audit = runner.invoke(app, ["audit", "show", str(bundle)], env={"COLUMNS": "200"})
    assert "dataset guarantee VOID since release 'sa'" in cli_text(audit.output)
    failed = [c.name for c in verify_bundle(bundle, None) if not c.ok]
    assert failed == ["randomness", "dataset guarantee"]

    life = write_spec(
        tmp_path, adult_rows(300), checks={"enabled": False}, privacy={"epsilon": 1, "lifetime_epsilon": 5}
    )
    refused = runner.invoke(app, ["release", str(life), "--out", str(out), "--release-id", "life"])
    assert refused.exit_code == 4, refused.output
    assert "has had a release that was not differentially private ('sa'" in cli_text(refused.output)


def test_audit_checks_the_folder_both_seals_and_rederives_sensitivities(tmp_path):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, adult_rows(300), checks={"target": "income", "gates": GATES})
    for rid in ("a", "b"):
        release(str(spec), str(out), release_id=rid)
    a, b = out / "a", out / "b"
    assert all(c.ok for c in verify_bundle(a, None)), [c for c in verify_bundle(a, None) if not c.ok]

    # a forger halves a statistic's recorded sensitivity *and* its noise scale (so the
    # arithmetic still holds), re-hashes the manifest: the public derivation catches it
    doc_path = a / "public" / "release.json"
    original = doc_path.read_bytes()
    doc = json.loads(original)
    row = next(r for r in doc["privacy"]["ledger"]["measurements"] if r["stage"] == "gates")
    row["sensitivity"] /= 2
    row["noise_scale"] /= 2
    doc_path.write_text(json.dumps(doc))
    manifest = a / "public" / "manifest.json"
    kept = manifest.read_bytes()
    m = json.loads(kept)
    m["files"]["release.json"] = sha256(doc_path)
    manifest.write_text(json.dumps(m))
    failed = {c.group for c in verify_bundle(a, None) if not c.ok}
    assert "sensitivity" in failed and "arithmetic" not in failed
    doc_path.write_bytes(original)
    manifest.write_bytes(kept)

    # an internal report is edited and the internal manifest re-hashed: its seal fails
    report = a / "internal" / "utility.json"
    report.write_text(report.read_text().replace("tvd", "tvd ", 1))
    imanifest = a / "internal" / "manifest.json"
    m = json.loads(imanifest.read_text())
    m["files"]["utility.json"] = sha256(report)
    imanifest.write_text(json.dumps(m))
    assert [c.name for c in verify_bundle(a, None) if not c.ok] == [
        "closing row seals internal/manifest.json"
    ]

    # the folder renamed, and a public/ copied from another release
    renamed = out / "renamed"
    shutil.copytree(b, renamed)
    assert "folder named after its release_id" in [c.name for c in verify_bundle(renamed, None) if not c.ok]
    shutil.rmtree(a / "public")
    shutil.copytree(b / "public", a / "public")
    names = [c.name for c in verify_bundle(a, None) if not c.ok]
    assert "folder named after its release_id" in names


def _prefect_text() -> str:
    """Everything Prefect's test server stored (its SQLite database, every table) and the
    files under PREFECT_HOME, as one string to search."""
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url.get_secret_value()
    path = url.split("///", 1)[1]
    chunks = []
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            chunks += [repr(row) for row in db.execute(f'SELECT * FROM "{t}"')]
    home = get_current_settings().home
    for p in Path(home).rglob("*"):
        if p.is_file() and p.stat().st_size < 50_000_000:
            chunks.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(chunks)


def test_a_ledger_password_never_reaches_prefect(tmp_path, postgres_database, monkeypatch):
    """A release through the CLI with a password in --ledger (loopback PostgreSQL trusts
    any password; what matters is where the string goes): the release succeeds on that
    ledger, release.json redacts the URL, and the password is nowhere in Prefect's
    database or files. The flow itself refuses a URL with a password."""
    monkeypatch.setenv(PASSWORD_ENV, "placeholder")  # restored after the test
    secret = f"KNOWN-{uuid.uuid4().hex}"
    user_host, name = postgres_database.split("://", 1)[1].rsplit("/", 1)
    user, host = user_host.split("@")
    url = f"postgresql+psycopg://{user}:{secret}@{host}/{name}"
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    result = CliRunner().invoke(
        app, ["release", str(spec), "--out", str(tmp_path / "out"), "--release-id", "pw", "--ledger", url]
    )
    assert result.exit_code == 0, result.output
    doc = (tmp_path / "out" / "pw" / "public" / "release.json").read_text()
    assert secret not in doc and secret not in result.output
    assert secret not in _prefect_text()
    with pytest.raises(DPReleaseError, match="ledger_url must not contain a password"):
        release(str(spec), str(tmp_path / "out"), release_id="pw2", ledger_url=url.replace(secret, "x"))
