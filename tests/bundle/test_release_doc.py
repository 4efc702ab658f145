"""Issue 41: the release document read as ``ReleaseDocument`` (``bundle.release_doc``), not
by key. ``from_json(x).to_json()`` is ``x`` byte for byte for every fixture bundle, a freshly
written one and any document an older or newer version could write (keys dropped, keys this
version does not know, nulls, another key order), so a bundle written through it keeps the
bytes its manifest and the ledger's seal hold; the readers see the same values the keys held."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dprelease.bundle.files import json_text, write_json
from dprelease.bundle.parts import Part, PartError
from dprelease.bundle.release_doc import ReleaseDocument
from tests.properties import property_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DOCUMENTS = sorted(FIXTURES.rglob("release.json"))
FIXTURE = FIXTURES / "v0.2.0" / "fixture-2" / "public" / "release.json"


def _unknown(value: object, where: str = "") -> list[str]:
    """Every key a part keeps in ``extra``: one this version does not type."""
    if isinstance(value, Part):
        found = [f"{where}.{k}" for k in value.extra]
        for k in value.as_mapping():
            if k not in value.extra:
                found += _unknown(getattr(value, k), f"{where}.{k}")
        return found
    if isinstance(value, tuple):
        return [u for i, v in enumerate(value) for u in _unknown(v, f"{where}[{i}]")]
    if isinstance(value, dict) and all(isinstance(v, Part) for v in value.values()):
        return [u for k, v in value.items() for u in _unknown(v, f"{where}.{k}")]
    return []


def test_there_are_fixture_bundles():
    assert FIXTURE in DOCUMENTS


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_bundle_round_trips_byte_for_byte(path):
    text = path.read_text(encoding="utf-8")
    doc = ReleaseDocument.from_file(path)
    assert doc.to_json() == text
    assert doc.as_mapping() == json.loads(text)
    assert ReleaseDocument.from_json(json.loads(text)) == doc
    assert _unknown(doc) == []  # every key an old bundle holds is typed


def test_the_fixture_reads_as_its_keys_said():
    raw = json.loads(FIXTURE.read_text())
    doc = ReleaseDocument.from_file(FIXTURE)
    assert doc.bundle_format is None and doc.made_by == "0.2.0"  # format 1: no bundle_format
    assert (doc.release_id, doc.dataset, doc.mechanism.name) == ("fixture-2", "adult", "factor_gauss")
    book = doc.privacy.ledger
    assert book.totals.epsilon == raw["privacy"]["ledger"]["totals"]["epsilon"]
    assert [r.statistic for r in book.measurements] == [
        r["statistic"] for r in raw["privacy"]["ledger"]["measurements"]
    ]
    unit = doc.privacy.unit
    assert unit == "rho" and [s.spent(unit) for s in book.stages] == [
        s["rho_spent"] for s in raw["privacy"]["ledger"]["stages"]
    ]
    record = doc.privacy.record
    assert (
        record.chain_head is not None
        and record.chain_head.seq == raw["privacy"]["ledger_record"]["chain_head"]["seq"]
    )
    assert (
        record.period is not None
        and record.period.this_period.period
        == (raw["privacy"]["ledger_record"]["period"]["this_period"]["period"])
    )
    assert doc.tables is not None and doc.tables.count == raw["tables"]["count"]
    assert doc.has("advice") and [a.as_mapping() for a in doc.advice or ()] == raw["advice"]


def _shown_before(doc: dict) -> dict:
    """What ``audit show --json`` printed before issue 41, read by key."""
    priv, book = doc["privacy"], doc["privacy"]["ledger"]
    record = priv.get("ledger_record") or {}
    return {
        "release_id": doc["release_id"],
        "dataset": doc["dataset"],
        "status": doc["status"],
        "mechanism": doc["mechanism"]["name"],
        "accountant": priv["accountant"],
        "input_rows_n_public": priv["input_rows_n_public"],
        "differentially_private": doc["differentially_private"],
        "defects": book["defects"],
        "fit_for_publication": doc["randomness"]["fit_for_publication"],
        "stages": book["stages"],
        "measurements": book["measurements"],
        "accuracy": priv.get("accuracy"),
        "totals": book["totals"],
        "lifetime": record.get("lifetime"),
        "dataset_guarantee": record.get("dataset_guarantee"),
        "chain_head": record.get("chain_head"),
        **({"discovered": doc["discovered"]} if doc.get("discovered") else {}),
    }


def _same_shown(path: Path) -> None:
    from dprelease.cli.records import _shown

    raw = json.loads(path.read_text())
    shown = _shown(ReleaseDocument.from_file(path))
    assert json.dumps(shown, indent=2) == json.dumps(_shown_before(raw), indent=2)


def test_audit_show_prints_the_json_it_printed():
    _same_shown(FIXTURE)


def test_a_partial_or_empty_document_reads_with_defaults_and_writes_only_its_keys():
    partial = {"outputs": {"synthetic.csv": {"format": "csv"}}, "release_id": "r"}
    doc = ReleaseDocument.from_json(partial)
    assert doc.as_mapping() == partial and doc.privacy.ledger.measurements == ()
    assert doc.outputs["synthetic.csv"].format == "csv" and doc.tables is None and not doc.has("advice")
    assert ReleaseDocument.from_json("{}").to_json() == "{}\n"


@pytest.mark.parametrize(
    "bad",
    ["[]", {"privacy": []}, {"privacy": {"ledger": {"measurements": {}}}}, {"columns": {"modelled": "a"}}],
)
def test_a_part_that_is_not_an_object_is_refused(bad):
    with pytest.raises(PartError):
        ReleaseDocument.from_json(bad if isinstance(bad, str) else json.dumps(bad))


def test_the_writer_gives_the_bytes_write_json_gave(tmp_path, monkeypatch):
    """``write_bundle_files`` writes release.json through ``ReleaseDocument.to_json``: the same
    bytes ``write_json`` wrote from the mapping, numpy numbers and tuples included."""
    import dprelease.bundle.write as write

    monkeypatch.setattr(write, "_manifest", lambda folder: None)
    document = json.loads(FIXTURE.read_text())
    del document["tables"]  # no tables/ here: no public report
    document["privacy"]["synthetic_rows"] = np.int64(100)
    document["privacy"]["holdout_fraction"] = np.float64(0.25)
    document["columns"]["modelled"] = tuple(document["columns"]["modelled"])
    document["privacy"]["ledger"]["measurements"][0]["noise_scale"] = np.float32(1.5)
    staging = tmp_path / ".staging-r"
    (staging / "public").mkdir(parents=True)
    (staging / "internal").mkdir()
    dest = write.write_bundle_files(
        staging, tmp_path / "r", pd.DataFrame({"age": [1]}), copy.deepcopy(document)
    )
    write_json(tmp_path / "old.json", document)
    assert (dest / "public" / "release.json").read_bytes() == (tmp_path / "old.json").read_bytes()
    assert (dest / "public" / "release.json").read_text() == json_text(document)


def test_a_fresh_discovery_bundle_round_trips_and_audits(tmp_path):
    """A schema discovery's bundle, written now (``discovery.schema``: bounds with atoms and
    categories): it round-trips, every key it holds is typed, and ``audit verify`` (which reads
    it as a ``ReleaseDocument``) passes."""
    from dprelease.discovery.schema import discover
    from dprelease.records.audit import verify_bundle

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    found = discover(
        FIXTURES / "v0.2.0" / "data.csv",
        {"age": "integer", "hours-per-week": "integer", "sex": "nominal"},
        dataset="adult",
        epsilon=3.0,
        delta=1e-6,
        ledger_url=url,
        out=tmp_path / "out",
        lifetime=None,
        atom_share=0.05,
    )
    path = found.bundle / "public" / "release.json"
    text = path.read_text()
    doc = ReleaseDocument.from_json(text)
    assert doc.to_json() == text and doc.is_discovery and _unknown(doc) == []
    assert doc.discovered is not None and doc.discovered["sex"].kind == "categories"
    assert doc.discovered["hours-per-week"].atoms is not None  # 40 hours: ~10 noise scales above τ
    checks = verify_bundle(found.bundle, url)
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert {"schema/atoms[hours-per-week]", "schema/categories[sex]"} <= {c.name for c in checks}
    _same_shown(path)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


MAPS = ("outputs", "discovered")
"""Objects whose every value is a part (by file or column name): no key is unknown there."""


@st.composite
def _variant(draw: st.DrawFn, value: Any, key: str = "") -> Any:
    """``value`` as another version might have written it: in each object, keys dropped,
    the order shuffled, keys this version does not know added, an object set to null."""
    if isinstance(value, list):
        return [draw(_variant(v)) for v in value]
    if not isinstance(value, dict):
        return value
    keys = draw(st.permutations(list(value)))
    if key in MAPS:
        return {k: draw(_variant(value[k])) for k in keys}
    kept = [k for k in keys if draw(st.integers(0, 3)) > 0]  # most kept
    nulled = {k for k in kept if isinstance(value[k], dict) and draw(st.integers(0, 9)) == 0}
    out = {k: None if k in nulled else draw(_variant(value[k], k)) for k in kept}
    extra = draw(
        st.dictionaries(st.text(min_size=1, max_size=8).map(lambda k: f"x-{k}"), json_values, max_size=2)
    )
    return {**out, **extra}


@pytest.mark.property
@property_settings(60)
@given(data=st.data())
def test_any_version_of_the_document_round_trips(data):
    raw = json.loads(FIXTURE.read_text())
    variant = data.draw(_variant(raw))
    text = json_text(variant)
    doc = ReleaseDocument.from_json(text)
    assert doc.to_json() == text
    assert doc.as_mapping() == variant
