"""Issue 38: ``dprelease discover`` publishes only categories a spec can declare
(``discovery.schema.declarable``). Whatever categories the DP selection returns (adversarial
text fed to the real partition selection), the draft it writes loads with ``load_spec``
holding exactly the declarable ones and ``(other)``; the rest (text the spec's rule refuses,
the placeholder ``FILL``) are withheld from the draft and the bundle, which say how many."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.discovery.schema import OTHER, draft_entries
from dprelease.ledger import default_url
from dprelease.mechanisms.accounting import StageBudget
from dprelease.mechanisms.discovery import discover_categories
from dprelease.records.audit import verify_bundle
from dprelease.spec import SpecError, load_spec
from dprelease.spec.draft import draft_text
from tests.helpers import cli_text
from tests.properties import property_settings
from tests.spec.test_text_rule import texts

RELEASE = "people-schema-20260101t000000z"


def _draft(found, folder: Path) -> Path:
    path = folder / "people.yaml"
    entries = draft_entries(found, {"c": "nominal"})
    path.write_text(draft_text("people", "people.csv", ["c"], {"c": ("nominal", "--kind")}, entries, RELEASE))
    return path


@pytest.mark.property
@property_settings(150)
@given(
    categories=st.lists(
        texts | st.sampled_from(["FILL", " FILL", OTHER, "1e5", "a"]), min_size=1, max_size=6, unique=True
    )
)
# issue 38: the draft stayed a draft
@example(categories=["FILL", "a\x1bb", OTHER, "x" * 2000, "c\u2028d", "f"])
# written plain, read back as the float 100000.0
@example(categories=["1e5", "b"])
# found by this test: numpy's text dropped trailing NULs ('' published, 'a\x00' merged into 'a')
@example(categories=["\x00", "a", "a\x00"])
# found by this test: ':0' written plain inside the draft's [...] was not YAML
@example(categories=[":0", "a"])
def test_the_draft_of_any_selected_categories_loads_with_the_declarable_ones(categories, tmp_path_factory):
    from dprelease.discovery.schema import Discovery, declarable
    from dprelease.spec.draft import is_placeholder
    from dprelease.spec.text import text_problem

    values = np.array([c for c in categories for _ in range(50)], dtype=object)
    found = discover_categories(
        values, StageBudget("schema", 1.0, None, 20.0), 1e-6, "c", rng=np.random.default_rng(0)
    )
    selected = [c for c in categories if c != ""]  # empty cells are missing, never a category
    assert sorted(found.categories) == sorted(selected)  # every one passes at ε = 20, 50 rows each
    kept, withheld = declarable(found)
    declared = [c for c in kept.categories if c != OTHER]
    assert declared == [
        c for c in found.categories if text_problem(c) is None and not is_placeholder(c) and c != OTHER
    ]
    assert withheld == len(found.categories) - len(kept.categories)
    discovery = Discovery(RELEASE, Path("b"), {}, {}, {"c": kept}, 1.0, 1e-6, {"c": withheld})
    folder = tmp_path_factory.mktemp("draft")
    path = _draft(discovery, folder)
    if not declared:  # nothing declarable: the kind's placeholder stays, and the draft says why
        with pytest.raises(SpecError, match=r"schema\.c\.categories"):
            load_spec(path)
        assert (f"the {withheld} found cannot be declared" in path.read_text()) == (withheld > 0)
        return
    spec = load_spec(path)
    assert spec.columns["c"].categories == [*declared, OTHER] and spec.columns["c"].other == OTHER
    confirm = " ".join(spec.draft.confirm)
    assert (f"{withheld} more passed the selection" in confirm) == (withheld > 0)


def test_a_category_spelled_as_a_number_reads_back_as_text(tmp_path):
    """The draft wrote the category '1e5' plain; the spec's reader (YAML 1.2 numbers) read
    the float 100000.0 and refused the draft ("Input should be a valid string")."""
    from dprelease.discovery.schema import Discovery

    values = np.array(["1e5", "2E-3", "b"] * 50, dtype=object)
    found = discover_categories(
        values, StageBudget("schema", 1.0, None, 20.0), 1e-6, "c", rng=np.random.default_rng(0)
    )
    spec = load_spec(_draft(Discovery(RELEASE, Path("b"), {}, {}, {"c": found}, 1.0, 1e-6), tmp_path))
    assert spec.columns["c"].categories == ["1e5", "2E-3", "b", OTHER]


def _write(tmp_path: Path) -> Path:
    """Categories of 400 rows each: two declarable, and one of each kind a spec refuses
    (the placeholder, a control character, a line separator, 1,001 characters), the draft's
    own (other), and a number's spelling that YAML reads as a float."""
    rng = np.random.default_rng(0)
    kinds = ["f", "m", "FILL", "esc\x1b[31m", "line\u2028break", "x" * 1001, OTHER, "1e5"]
    pd.DataFrame({"c": rng.permutation(np.repeat(kinds, 400))}).to_csv(tmp_path / "people.csv", index=False)
    return tmp_path / "people.csv"


def test_discover_withholds_what_no_spec_declares_and_its_draft_loads(tmp_path):
    """Issue 38: ``discover`` published FILL and control characters as categories; the draft
    then stayed a draft (``FILL``) or was refused. Now the draft loads, its categories are
    the declarable ones, and the bundle says four were withheld; the audit passes."""
    out = tmp_path / "releases"
    result = CliRunner().invoke(
        app,
        [
            "discover",
            str(_write(tmp_path)),
            "--epsilon",
            "1",
            "--kind",
            "c=nominal",
            "--bundle-out",
            str(out),
        ],
    )
    assert result.exit_code == 0, cli_text(result.output)
    spec = load_spec(tmp_path / "people.yaml")
    assert spec.columns["c"].categories == ["1e5", "f", "m", OTHER]
    assert "4 more passed the selection but a spec cannot declare them" in " ".join(spec.draft.confirm)
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    doc = json.loads((bundle / "public" / "release.json").read_text())
    found = doc["discovered"]["c"]
    assert found["categories"] == [OTHER, "1e5", "f", "m"] and found["withheld"] == 4
    assert "FILL" not in found["categories"] and "\x1b" not in json.dumps(doc, ensure_ascii=False)
    checks = verify_bundle(bundle, default_url(out))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    shown = cli_text(CliRunner().invoke(app, ["audit", "show", str(bundle)], env={"COLUMNS": "1000"}).output)
    assert "4 more withheld" in shown
    assert yaml.safe_load((tmp_path / "people.yaml").read_text())["schema"]["c"]["type"] == "nominal"
