"""A dataset is its schema, not its name (``ledger.identity``): the fingerprint of a public
schema (``Schema.fingerprint``) ignores what a steward revises while the data stay the same
and changes with the table's shape; the ledger refuses a release whose fingerprint another
dataset name holds, before anything is read, unless the steward declares a new dataset with a
reason (recorded, and shown by ``ledger show``); a name whose schema changes is admitted and
the change recorded; ledgers written before fingerprints keep working; the pre-check and the
reserve decide alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.ledger import BudgetRefused, Ledger, show
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema
from tests.helpers import PURE_PLAN, cli_text
from tests.properties import property_settings

COLUMNS = (
    Continuous("age", 17.0, 90.0, integer=True),
    Continuous("income", 0.0, 1e6, transform="log"),
    Continuous("born", -10000.0, 20000.0, integer=True, calendar="D"),
    Nominal("sex", ("f", "m")),
    Ordinal("edu", ("low", "mid", "high")),
)
SCHEMA = Schema(COLUMNS)
FP = SCHEMA.fingerprint


@pytest.mark.property
@given(
    order=st.permutations(range(len(COLUMNS))),
    lower=st.floats(-1e6, 17.0),
    upper=st.floats(90.0, 1e9),
    bins=st.integers(1, 1024),
    categories=st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=6, unique=True),
    levels=st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=6, unique=True),
)
@property_settings(60)
def test_the_fingerprint_ignores_order_bounds_bins_and_categories(
    order, lower, upper, bins, categories, levels
):
    """Reordered columns, a bound widened or narrowed, bins, a transform, categories and
    levels revised: the same table, the same fingerprint."""
    revised = [
        Continuous("age", lower, upper, intervals=bins, missing=True),
        Continuous("income", min(lower, 0.0), upper, transform="asinh", scale=100.0),
        Continuous("born", lower, upper, calendar="D"),
        Nominal("sex", tuple(categories)),
        Nominal("edu", tuple(levels)),  # an ordinal column declared nominal holds categories all the same
    ]
    assert Schema(tuple(revised[i] for i in order)).fingerprint == FP


@pytest.mark.parametrize(
    "columns",
    [
        COLUMNS[:-1],  # a column dropped
        (*COLUMNS, Nominal("region", ("n", "s"))),  # a column added
        (
            Continuous("Age", 17.0, 90.0),
            *COLUMNS[1:],
        ),  # a column renamed (case counts: headers match exactly)
        (Nominal("age", ("young", "old")), *COLUMNS[1:]),  # a number that became a category
        (*COLUMNS[:2], Continuous("born", -10000.0, 20000.0), *COLUMNS[3:]),  # a date that became a number
    ],
    ids=["dropped", "added", "renamed", "number-to-category", "date-to-number"],
)
def test_the_fingerprint_changes_with_the_tables_shape(columns):
    assert Schema(tuple(columns)).fingerprint != FP


def _reserve(led, rid, dataset, schema=FP, new_dataset=None, lifetime=(3.0, 0.0)):
    led.reserve(
        dataset=dataset,
        release_id=rid,
        mechanism="m",
        plan=PURE_PLAN,
        lifetime=lifetime,
        schema=schema,
        new_dataset=new_dataset,
    )
    led.spend(rid, [s.stage for s in PURE_PLAN.stages], PURE_PLAN)
    return led.finish(rid, "released")


def test_a_renamed_dataset_is_refused_unless_declared_new(url):
    with Ledger(url) as led:
        _reserve(led, "a1", "survey")
        facts = {"dataset": "survey-2026", "plan": PURE_PLAN, "lifetime": (3.0, 0.0), "schema": FP}
        precheck = led.refusal(release_id="b1", **facts)
        with pytest.raises(BudgetRefused) as refused:
            _reserve(led, "b1", "survey-2026")
        why = str(refused.value)
        assert why == precheck
        assert "dataset 'survey-2026' has the same public schema" in why and "as dataset 'survey'" in why
        assert "Nothing was read or spent" in why and "set dataset.name: survey in the spec" in why
        assert '--new-dataset "REASON"' in why and "new_dataset=" in why
        (b1,) = [r for r in led.releases() if r["release_id"] == "b1"]
        assert b1["status"] == "refused" and b1["stages"] == [] and b1["events"][0]["detail"]["reason"] == why
        reason = "the 2026 wave:   a new sample"
        assert led.refusal(release_id="b2", new_dataset=reason, **facts) is None
        _reserve(led, "b2", "survey-2026", new_dataset=reason)
        _reserve(led, "b3", "survey-2026")  # it holds the fingerprint now: declared once
        _reserve(led, "a2", "survey")  # and so does the first name
        (b2,) = [r for r in led.releases() if r["release_id"] == "b2"]
        assert b2["events"][0]["detail"]["new_dataset"] == "the 2026 wave: a new sample"
        assert b2["events"][0]["detail"]["schema"] == FP
        assert led.spend_so_far("survey", 0.0).epsilon == 2 * PURE_PLAN.spent_epsilon
        with pytest.raises(BudgetRefused, match=r"as dataset 'survey', 'survey-2026' in this ledger"):
            _reserve(led, "c1", "survey-copy")
        assert led.verify_chain() == []
    account = show(url).accounts["survey-2026"]
    assert account.schema == (
        {
            "release_id": "b2",
            "time": account.schema[0]["time"],
            "new_dataset": "the 2026 wave: a new sample",
            "schema": FP,
        },
    )
    text = cli_text(CliRunner().invoke(app, ["ledger", "show", "--ledger", url], terminal_width=300).output)
    assert (
        "survey-2026: declared a new dataset at release 'b2'" in text
        and "reason: the 2026 wave: a new sample" in text
    )


def test_a_changed_schema_under_the_same_name_is_recorded_not_refused(url):
    wider = Schema((*COLUMNS, Nominal("region", ("n", "s")))).fingerprint
    with Ledger(url) as led:
        _reserve(led, "a1", "survey")
        _reserve(led, "a2", "survey", schema=wider)
        _reserve(led, "a3", "survey", schema=wider)
        rows = {r["release_id"]: r["events"][0]["detail"] for r in led.releases()}
    assert rows["a2"]["schema_before"] == FP and rows["a2"]["schema"] == wider
    assert "schema_before" not in rows["a3"] and "schema_before" not in rows["a1"]
    (change,) = show(url).accounts["survey"].schema
    assert (change["release_id"], change["schema_before"], change["schema"]) == ("a2", FP, wider)
    text = cli_text(CliRunner().invoke(app, ["ledger", "show", "--ledger", url], terminal_width=300).output)
    assert (
        "survey: its public schema changed at release 'a2'" in text and f"{FP[:12]} -> {wider[:12]}" in text
    )


def test_ledgers_without_fingerprints_keep_working(url):
    """Rows written before fingerprints (no ``detail.schema``) bind nothing: a new name for
    the same data is admitted (the fingerprint cannot see it), then binds its fingerprint;
    the old dataset's rows keep counting, and its first fingerprinted release then meets
    the new name's binding, as a copy would."""
    with Ledger(url) as led:
        _reserve(led, "old1", "survey", schema=None)
        _reserve(led, "new1", "renamed")
        _reserve(led, "old2", "survey", schema=None)
        with pytest.raises(BudgetRefused, match="as dataset 'renamed'"):
            _reserve(led, "x", "survey")  # once fingerprinted, the old name meets the new one's binding
        assert led.verify_chain() == []


def test_the_reason_must_say_something(url):
    with Ledger(url) as led:
        _reserve(led, "a1", "survey")
        for blank in ("", "   \n"):
            with pytest.raises(DPReleaseError, match=r"--new-dataset \(.*\) must say in 1 to 500 characters"):
                _reserve(led, "b1", "renamed", new_dataset=blank)
        with pytest.raises(DPReleaseError, match="must say in 1 to 500"):
            led.refusal(dataset="b", release_id=None, plan=PURE_PLAN, lifetime=None, new_dataset="x" * 501)
        assert [r["release_id"] for r in led.releases()] == ["a1"]  # nothing written
