"""Issue 38, "crashes reported as what they are": the ``on_crashed`` hook run by another
process than the run's (Prefect's worker, after the run's process was killed) names the
release and what the ledger holds of it, whatever the run had done when it died.

The property drives the hook (``flows/hooks.py``) with a flow run as the worker hands it
over (its name still Prefect's, its parameters the deployment's) after a death at any point:
before or after the reservation, after any number of the plan's stages, with the release id
given, in the spec, or made from the deployment's scheduled time, and ``out_dir`` relative
(the deployment's working directory) or absolute. Before issue 38 it reported
``unknown-release`` of dataset ``unknown`` in stage ``load_spec``."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from contextlib import chdir
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import event, example, given
from hypothesis import strategies as st

import dprelease.flows.delivery as delivery
import dprelease.flows.release as release_module
from dprelease.bundle.files import sha256
from dprelease.bundle.staging import prepare_staging
from dprelease.flows.hooks import on_crashed, release_id_of
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import plan_budget
from dprelease.spec import load_spec
from tests.helpers import DEMO_SPEC
from tests.properties import property_settings

STAGES = ["encode", "estimate", "sample", "gates", "extra"]
SLOT = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def _spec(folder: Path, release_id: str | None) -> Path:
    spec = {**DEMO_SPEC, "dataset": {"name": "adult", "path": "data.csv"}}
    if release_id is not None:
        spec["release_id"] = release_id
    (folder / "data.csv").write_text("age\n1\n")  # never read: the hook reads no data
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _worker_copy(params: dict, deployment: bool, slot: datetime) -> SimpleNamespace:
    """The flow run as a worker hands it to the hook: read before the run started, so named
    by Prefect (the flow renamed it to its release id since)."""
    return SimpleNamespace(
        id=uuid.uuid4(),
        name="witty-fox",
        flow_id=uuid.uuid4(),
        deployment_id=uuid.uuid4() if deployment else None,
        expected_start_time=slot,
        parameters=params,
        tags=["dp"],
    )


KILLED = SimpleNamespace(
    message="Process exited with status code: -9. This indicates that the process exited due to a SIGKILL.",
    result=lambda raise_on_failure: None,
)


def _seal(url: str, rid: str, staging: Path, dest: Path, flow_run_id: str) -> list[dict]:
    """Seal the release as ``write_bundle`` does (its manifests' sha256 in the ledger), before
    the rename that its process did not live to make; the ledger's rows."""
    for part in ("public", "internal"):
        (staging / part).mkdir(exist_ok=True)
        (staging / part / "manifest.json").write_text(json.dumps({"part": part}))
    detail = {
        "public_manifest_sha256": sha256(staging / "public" / "manifest.json"),
        "internal_manifest_sha256": sha256(staging / "internal" / "manifest.json"),
        "bundle": str(dest.resolve()),
        "flow_run_id": flow_run_id,
    }
    with Ledger(url) as led:
        led.finish(rid, "released", {**detail, "manifest_sha256": detail["public_manifest_sha256"]})
        return led.entries()


@pytest.fixture
def emitted(monkeypatch):
    seen: list[dict] = []
    monkeypatch.setattr(delivery, "emit_event", lambda **kw: seen.append(kw))
    return seen


@pytest.mark.property
@property_settings(30)
@given(
    planned=st.integers(1, 5),
    spent=st.integers(0, 5),
    reserved=st.booleans(),
    staged=st.booleans(),
    naming=st.sampled_from(["parameter", "spec", "slot"]),
    relative_out=st.booleans(),
    explicit_ledger=st.booleans(),
    ledger_exists=st.booleans(),
    sealed=st.booleans(),
)
@example(  # issue 38: its whole plan spent, named from the deployment's slot, out_dir relative
    planned=3,
    spent=3,
    reserved=True,
    staged=True,
    naming="slot",
    relative_out=True,
    explicit_ledger=False,
    ledger_exists=True,
    sealed=False,
)
def test_the_crash_hook_of_another_process_names_the_release_and_its_charge(
    emitted, planned, spent, reserved, staged, naming, relative_out, explicit_ledger, ledger_exists, sealed
):
    spent = min(spent, planned) if reserved else 0
    staged = staged or reserved  # the flow makes its staging folder before it reserves
    sealed = sealed and reserved
    spent = planned if sealed else spent
    event(
        "died " + ("after the seal" if sealed else "after its reserve" if reserved else "before its reserve")
    )
    emitted.clear()
    with tempfile.TemporaryDirectory() as tmp, chdir(tmp):  # the deployment's working directory
        home = Path(tmp)
        spec_path = _spec(home, "adult-fixed" if naming == "spec" else None)
        out_dir = "releases" if relative_out else str(home / "releases")
        out = home / "releases"
        url = (
            f"sqlite:///{home / 'ledger-elsewhere.db'}"
            if explicit_ledger
            else f"sqlite:///{out / 'ledger.db'}"
        )
        params = {"spec_path": str(spec_path), "out_dir": out_dir}
        if naming == "parameter":
            params["release_id"] = "monthly-7"
        if explicit_ledger:
            params["ledger_url"] = url
        rid = {"parameter": "monthly-7", "spec": "adult-fixed", "slot": "adult-20261101t020000z"}[naming]
        run = _worker_copy(params, deployment=True, slot=SLOT)

        out.mkdir()
        plan = plan_budget("zcdp", 0.5, 1e-6, {s: 1.0 for s in STAGES[:planned]})
        rows_before: list[dict] = []
        if reserved or ledger_exists:  # a first release that died before its reserve has none
            with Ledger(url) as led:
                if reserved:
                    led.reserve(
                        dataset="adult", release_id=rid, mechanism="factor_gauss", plan=plan, lifetime=None
                    )
                    led.spend(rid, STAGES[:spent], plan)
                rows_before = led.entries()
        if staged:  # the run's process dies: the kernel drops its lock, the folder stays
            held = prepare_staging(out, rid)
            (held.path / "internal").mkdir(exist_ok=True)
            assert held.fd is not None
            os.close(held.fd)
        if sealed:  # it died between the ledger's seal and the rename into place
            rows_before = _seal(url, rid, held.path, out / rid, str(run.id))

        on_crashed(None, run, KILLED)

        (sent,) = emitted
        payload = sent["payload"]
        assert payload["release_id"] == rid and sent["resource"]["prefect.resource.name"] == rid
        assert payload["dataset"] == "adult" and sent["resource"]["dprelease.dataset"] == "adult"
        if sealed:  # what the ledger vouches for is published, and reported so
            assert sent["event"] == "dprelease.release.completed" and payload["bundle"] == str(
                out.resolve() / rid
            )
            assert (out / rid / "public" / "manifest.json").is_file() and not (out / "failures").exists()
            with Ledger(url, create=False) as led:
                assert led.entries() == rows_before
            return
        assert sent["event"] == "dprelease.release.failed" and payload["crashed"] is True
        assert "unknown" not in json.dumps(payload)
        if reserved:
            with Ledger(url, create=False) as led:
                assert led.entries() == rows_before  # the hook settles nothing: fail closed
                assert payload["ledger_status"] == "reserved"
                assert payload["stages_spent"] == sorted(STAGES[:spent])
                assert payload["stages_planned"] == STAGES[:planned]
                assert payload["epsilon_spent"] == led.charge(rid).epsilon == plan.spent_epsilon
        else:
            assert payload["ledger_status"] is None and payload["stages_spent"] == []  # nothing reserved
            assert (Path(url.removeprefix("sqlite:///")).exists()) == ledger_exists  # never created here
        record = Path(payload["failure_record"])
        assert record.parent == out.resolve() / "failures" and record.name.startswith(f"{rid}-")
        failure = json.loads((record / "failure.json").read_text())
        assert failure["release_id"] == rid and failure["error"] == "ProcessDied"
        assert (record / "internal").is_dir() == staged  # the dead run's reports, kept only there
        assert not list(out.glob(".staging-*"))  # its staging folder became the record


@pytest.mark.property
@property_settings(25)
@given(
    given_id=st.one_of(st.none(), st.just("monthly-7"), st.just("../escaped"), st.integers()),
    spec_id=st.one_of(st.none(), st.just("adult-fixed")),
    at=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)),
)
def test_the_hook_names_a_deployment_s_run_as_the_flow_named_it(given_id, spec_id, at):
    """The crash hook and the flow agree on a deployment run's release id, however late the
    run started after its slot (``_run_name``, run in the flow's process, against
    ``release_id_of``, run by the worker)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = _spec(Path(tmp), spec_id)
        params = {"spec_path": str(spec_path), "release_id": given_id}
        run = _worker_copy(params, deployment=True, slot=at)
        runtime = SimpleNamespace(id=run.id, name=run.name, parameters=params, scheduled_start_time=at)
        patch = pytest.MonkeyPatch()
        try:
            patch.setattr(release_module, "flow_run", runtime)
            patch.setattr(release_module, "deployment", SimpleNamespace(id=run.deployment_id))
            named = release_module._run_name()  # at "now": a late start keeps its slot's id
        finally:
            patch.undo()
            release_module._NAMED_AT.pop(str(run.id), None)
        hooks_id = release_id_of(params, run, load_spec(spec_path))
        if hooks_id is None:  # the flow refuses it: its run keeps Prefect's name
            assert named == run.name and given_id is not None
        else:
            assert hooks_id == named
