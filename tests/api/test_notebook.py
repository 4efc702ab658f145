"""The Python API in a notebook (issue 41), without Prefect: its annotations resolve, what it
returns prints in a few lines with ε rounded (the values kept exact) and shows as a table
(``to_frame``, ``_repr_html_``), and its errors name the call's arguments, not the CLI's
options."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

import pandas as pd
import pytest

import dprelease
from dprelease._terms import in_api_terms
from dprelease.audit import AuditResult, Check, LedgerChoice
from dprelease.ledger import Ledger
from dprelease.ledger.identity import NEW_DATASET
from dprelease.ledger.summary import DatasetAccount, LedgerSummary
from dprelease.mechanisms.lifetime import Headroom, LifetimeSpend
from dprelease.records.query import QueryResult
from tests.helpers import record_release

ALMOST_ONE = 0.9999999999999999  # the ledger's ε computed back from ρ, for a spec's 1


def _functions(obj: typing.Any) -> list[tuple[str, typing.Any]]:
    """``obj`` and, for a class, each method, property and cached property it defines."""
    if not inspect.isclass(obj):
        return [(obj.__name__, obj)]
    out = [(obj.__name__, obj)]
    for name, member in vars(obj).items():
        if isinstance(member, property):
            member = member.fget
        elif isinstance(member, classmethod | staticmethod):
            member = member.__func__
        member = getattr(member, "func", member)  # functools.cached_property
        if inspect.isfunction(member):
            out.append((f"{obj.__name__}.{name}", member))
    return out


def test_the_annotations_of_every_api_callable_resolve():
    """``typing.get_type_hints`` on each callable ``dprelease`` exports, its methods, and what
    ``audit.verify`` and ``query`` return (issue 41: NameError, names imported for type
    checkers only). ``LedgerSummary.to_frame`` is left out: ``ledger`` is below the API and
    does not import pandas, which the command line would then load at start."""
    exported = [getattr(dprelease, name) for name in dprelease.__all__]
    targets = [obj for obj in exported if callable(obj)]
    assert {"release", "synthesize", "query", "Spec", "Release"} <= {t.__name__ for t in targets}
    targets += [dprelease.audit.verify, AuditResult, QueryResult, dprelease.ledger.show, DatasetAccount]
    failed = {}
    for name, f in (pair for t in targets for pair in _functions(t)):
        try:
            typing.get_type_hints(f)
        except Exception as e:  # every failure, named below
            failed[name] = f"{type(e).__name__}: {e}"
    assert failed == {}
    assert typing.get_type_hints(dprelease.Spec.load)["return"] is dprelease.Spec


def _account(epsilon: float = ALMOST_ONE) -> DatasetAccount:
    spend = LifetimeSpend(epsilon, 1e-6, "zcdp", (epsilon, 1e-6), (epsilon, 1e-6))
    room = Headroom(2.0000000000000004, 1e-6, "zcdp", 0.1, False)
    return DatasetAccount("adult", (3.0, 1e-6), spend, None, room)


def test_a_spent_epsilon_is_shown_rounded_and_kept_exact():
    account = _account()
    assert repr(account) == (
        "DatasetAccount('adult': spent (1, 1e-06) by zcdp of a lifetime (3, 1e-06); "
        "next release up to ε 2 at δ 1e-06)"
    )
    assert account.spent.epsilon == ALMOST_ONE  # the field holds the ledger's value
    release = dprelease.Release(
        Path("releases/r1"), "r1", "adult", "zcdp", ALMOST_ONE, 1e-6, 0.024356, "", [], True, account, {}
    )
    assert "(1, 1e-06)-DP, rho=0.02436" in repr(release) and "0.9999" not in repr(release)
    assert release.epsilon == ALMOST_ONE
    void = dataclasses.replace(account, spent=LifetimeSpend(float("inf"), 1e-6, "void", (0, 0), None))
    assert "void (a release was not DP)" in repr(void)


def test_a_ledger_summary_is_a_few_lines_a_frame_and_a_table(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        for k in range(12):
            record_release(led, f"r{k}", dataset=f"d{k % 3}")
    summary = dprelease.ledger.show(url)
    lines = repr(summary).splitlines()
    assert len(lines) == 4 and lines[1].startswith("  d0: spent (") and len(repr(summary)) < 600
    frame = summary.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame["release_id"]) == [f"r{k}" for k in range(12)]
    assert {"dataset", "status", "epsilon", "delta"} <= set(frame.columns)
    assert not {"stages", "events"} & set(frame.columns)  # the nested rows stay in .releases
    shown = summary._repr_html_()
    assert shown.startswith("<pre>LedgerSummary(") and shown.count("</tr>") == 13  # header + 12
    empty = LedgerSummary(url, [], {}, [], (0, ""), 2)
    assert empty.to_frame().empty and "<table" in empty._repr_html_()


def test_an_audit_result_is_a_few_lines_a_frame_and_a_table():
    checks = [
        Check("files", "public/synthetic.csv", True, "sha256 matches"),
        Check("arithmetic", "epsilon <- rho", False, "1.2 is not 1.0"),
        Check("ledger", "head", True, "not checked (public)", checked=False),
    ]
    result = AuditResult(Path("b/public"), checks, LedgerChoice(None, "not looked for"))
    assert repr(result).splitlines() == [
        "AuditResult('b/public': FAILED 1 check(s); 3 checks, 1 not checked; ledger None: not looked for)",
        "  failed arithmetic/epsilon <- rho: 1.2 is not 1.0",
    ]
    frame = result.to_frame()
    assert list(frame.columns) == ["group", "name", "ok", "checked", "detail"]
    assert list(frame["ok"]) == [True, False, True] and len(frame) == 3
    assert "epsilon &lt;- rho" in result._repr_html_() and result._repr_html_().count("</tr>") == 4


def test_a_query_result_is_a_one_row_frame_and_a_table():
    result = QueryResult(
        2166, 1891, 2442, 0.0832, 0.0726, 0.0937, 0.9, "analytic", 26049, 1604.0,
        ("pair[age,income]",), ("age in [30, 39]", "income in {>50K}"), "the fitted rows",
    )  # fmt: skip
    frame = result.to_frame()
    assert len(frame) == 1 and frame.loc[0, "count"] == 2166
    assert frame.loc[0, "where"] == "age in [30, 39]; income in {>50K}"
    assert "income in {&gt;50K}" in result._repr_html_() and "<table" in result._repr_html_()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("pass the --ledger the releases used", "pass the ledger= the releases used"),
        ("--ledger must be a path without '?'", "ledger= must be a path without '?'"),
        ("pass --ledger URL to check it", "pass ledger=URL to check it"),
        ('e.g. --new-dataset "a new wave"', 'e.g. new_dataset="a new wave"'),
        ("--release-id ('X') must be lowercase", "release_id= ('X') must be lowercase"),
        ("choose another --out", "choose another out="),
        ("run `dprelease ledger migrate --ledger X` once", "run `dprelease ledger migrate --ledger X` once"),
        ("the --outcome and --ledgers", "the --outcome and --ledgers"),  # no such options
        (f"declare it with {NEW_DATASET}", 'declare it with new_dataset="REASON"'),
    ],
)
def test_a_cli_option_is_named_as_the_api_argument(given, said):
    assert in_api_terms(given) == said


def _refusal(tmp_path: Path, **kwargs: typing.Any) -> str:
    with pytest.raises(dprelease.DPReleaseError) as e:
        dprelease.release(dprelease.Spec.demo(), out=tmp_path / "out", **kwargs)
    return str(e.value)


def test_release_refusals_name_the_arguments_not_the_options(tmp_path):
    """Each is refused before Prefect is used or a data value read."""
    said = _refusal(tmp_path, ledger="ledger?x")
    assert said.startswith("ledger= must be a path without '?'"), said
    said = _refusal(tmp_path, new_dataset=" ")
    assert said.startswith("new_dataset= (' ') must say") and 'e.g. new_dataset="the 2026' in said, said
    said = _refusal(tmp_path, release_id="Not An Id")
    assert said.startswith("release_id= ('Not An Id') must be lowercase"), said
    with pytest.raises(dprelease.errors.LedgerError, match=r"^ledger= must be a path without"):
        dprelease.audit.verify(tmp_path, ledger="ledger?x")
