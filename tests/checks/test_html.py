"""The steward's report (``checks.html.render_report``), checked on the rendered HTML
(issue 18, item 8): a legend on every plot with more than one series, the budget in the
accountant's own unit (ρ under zCDP, ε under pure DP) with no blank cell, and the
dataset's lifetime account from ``privacy.ledger_record`` as ``ledger.ledger_facts``
writes it. The inputs are built as ``tests/checks/test_degenerate.py`` builds them."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

import dprelease.checks.html
from dprelease.checks.gates import gate_metrics
from dprelease.checks.html import render_report
from dprelease.checks.reports import linkage_report, utility_report
from dprelease.ledger import Ledger, ledger_facts
from dprelease.mechanisms.accounting import BudgetPlan, account, plan_budget
from dprelease.mechanisms.gates import GATES_STAGE, decide, measure_gates
from dprelease.mechanisms.primitives import Measurement, gaussian_mechanism, laplace_mechanism, unprotected
from tests.checks.test_degenerate import BOUNDS, HOLDOUT, NORMAL, REAL, SCHEMA, _binned
from tests.helpers import record_release

WEIGHTS = {"marginals": 0.5, "moments": 0.5, GATES_STAGE: 0.05}
ZCDP = plan_budget("zcdp", 1.0, 1e-6, WEIGHTS)
PURE = plan_budget("pure", 1.0, 0.0, WEIGHTS)
DATASET = "d"


@pytest.fixture(scope="module")
def checked() -> dict:
    """The report's inputs other than ``document``: bins, utility, linkage and gates
    (max-only bounds, so every gate's min is missing)."""
    real_b, syn_b, hold_b = _binned(REAL), _binned(NORMAL), _binned(HOLDOUT)
    rng = np.random.default_rng(5)
    values = gate_metrics(*real_b, *syn_b, SCHEMA, list(BOUNDS), rng)
    measured = measure_gates(values, len(REAL), ZCDP.stage(GATES_STAGE), rng=rng)
    return {
        "real_bins": real_b[1],
        "syn_bins": syn_b[1],
        "utility": utility_report(*real_b, *syn_b, SCHEMA, target="flag", real_test=HOLDOUT, rng=rng),
        "linkage": linkage_report(*real_b, *syn_b, SCHEMA, keeps_row_order=False, holdout=hold_b, rng=rng),
        "gates": [g.as_dict() for g in decide(measured, BOUNDS)],
    }


def _measurements(plan: BudgetPlan) -> list[Measurement]:
    """One noisy measurement per synthesis stage in the plan's notion, and one value used
    without noise (a paper-literal defect: no ρ and no ε)."""
    rng = np.random.default_rng(0)
    noisy = [
        gaussian_mechanism(
            np.zeros(3), l2_sensitivity=1.0, rho=s.share, rng=rng, name=f"hist[a<{i}]", stage=s.stage
        )
        if plan.notion == "zcdp"
        else laplace_mechanism(
            np.zeros(3), l1_sensitivity=1.0, epsilon=s.share, rng=rng, name=f"hist[a<{i}]", stage=s.stage
        )
        for i, s in enumerate(plan.stages)
        if s.stage != GATES_STAGE
    ]
    return [*noisy, unprotected(np.zeros(1), name="raw count", stage="moments", defect="no noise")]


def _document(plan: BudgetPlan, record: dict | None) -> dict:
    """The parts of ``release.json`` the report reads."""
    return {
        "release_id": "r2",
        "mechanism": {"name": "factor_gauss"},
        "privacy": {
            "ledger": account(plan, _measurements(plan), allow_non_dp=True),
            "synthetic_rows": len(NORMAL),
            "ledger_record": record,
        },
    }


def _page(checked: dict, document: dict) -> str:
    c = checked
    page = render_report(
        c["real_bins"], c["syn_bins"], SCHEMA, c["utility"], c["linkage"], c["gates"], document
    )
    assert "could not be drawn" not in page
    return page


def _cells(page: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", page, flags=re.S)


def _record(tmp_path, plan: BudgetPlan, lifetime: tuple[float, float] | None) -> dict:
    """``privacy.ledger_record`` of release r2, after r1, from a real SQLite ledger."""
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        record_release(led, "r1", plan=plan, lifetime=lifetime)
        record_release(led, "r2", plan=plan, lifetime=lifetime)
        return ledger_facts(led, DATASET, "r2")


def test_every_plot_with_more_than_one_series_has_a_legend(checked, monkeypatch):
    """Each marginal panel (not only the first) and the DCR plot carry a matplotlib legend,
    and each multi-series picture has one HTML key naming its series."""
    drawn: list[tuple[int, int]] = []  # per figure: (axes with > 1 series, legends among them)
    png = dprelease.checks.html._png

    def spy(fig, key=(), **kwargs):
        multi = [ax for ax in fig.axes if len(set(ax.get_legend_handles_labels()[1])) > 1]
        drawn.append((len(multi), sum(ax.get_legend() is not None for ax in multi)))
        return png(fig, key, **kwargs)

    monkeypatch.setattr(dprelease.checks.html, "_png", spy)
    page = _page(checked, _document(ZCDP, None))
    marginals, heatmaps, dcr = drawn
    assert marginals == (len(SCHEMA), len(SCHEMA)) and dcr == (1, 1)
    assert heatmaps == (0, 0)  # one series per panel, read off the colour bar
    keys = re.findall(r'<figcaption class="key">(.*?)</figcaption>', page)
    assert len(keys) == 2  # the marginals and the DCR plot
    assert "real" in keys[0] and "synthetic" in keys[0]
    assert "synthetic → closest real" in keys[1] and "real → closest other real" in keys[1]
    assert page.count("data:image/png;base64,") == 3


def test_zcdp_budget_shows_rho_per_stage_and_measurement_and_the_total_epsilon_delta(checked, tmp_path):
    document = _document(ZCDP, _record(tmp_path, ZCDP, None))
    led = document["privacy"]["ledger"]
    page = _page(checked, document)
    assert all(cell.strip() for cell in _cells(page))  # no blank cell anywhere
    for header in ("ρ (zCDP) allocated", "ρ (zCDP) spent", "ρ (zCDP)"):
        assert f"<th>{header}</th>" in page
    assert "ε (pure DP)" not in page and "<th>epsilon</th>" not in page
    for stage in led["stages"]:
        assert (
            f"<td>{stage['stage']}</td><td>{stage['weight']:.6g}</td><td>{stage['rho_allocated']:.6g}</td>"
            in page
        )
    for m in led["measurements"][:-1]:
        assert f"<td>{m['rho']:.6g}</td><td>" in page  # then the expected error (issue 16)
    assert "<td>raw count</td>" in page and "<td>—¹</td><td>" in page  # no noise: no ρ
    assert "¹ used without noise: it costs no budget" in page
    assert "hist[a&lt;0]" in page and "hist[a<0]" not in page  # names from the data stay escaped
    t = led["totals"]
    assert (
        f"Release total: ρ = {t['rho']:.6g}, which is (ε, δ) = ({t['epsilon']:.6g}, {t['delta']:.3g}) "
        f"({html.escape(t['conversion'])})." in page
    )
    assert "<td>—</td>" in page and "— in min or max: no bound on that side." in page  # the gates' min


def test_pure_budget_shows_epsilon_and_no_blank_cell(checked, tmp_path):
    document = _document(PURE, _record(tmp_path, PURE, None))
    led = document["privacy"]["ledger"]
    page = _page(checked, document)
    assert all(cell.strip() for cell in _cells(page))
    assert "<th>ε (pure DP)</th>" in page and "ρ (zCDP)" not in page
    for m in led["measurements"][:-1]:
        assert f"<td>{m['epsilon']:.6g}</td><td>" in page
    assert "<td>—¹</td><td>" in page and "¹ used without noise" in page
    t = led["totals"]
    assert f"Release total: ε = {t['epsilon']:.6g}, δ = 0 (basic composition)." in page


@pytest.mark.parametrize(
    ("plan", "lifetime"), [(ZCDP, (5.0, 1e-5)), (PURE, (5.0, 0.0))], ids=["zcdp", "pure-lifetime"]
)
def test_the_lifetime_line_states_the_budget_the_spend_and_the_headroom(checked, tmp_path, plan, lifetime):
    record = _record(tmp_path, plan, lifetime)
    life = record["lifetime"]
    page = _page(checked, _document(plan, record))
    assert life["releases_counted"] == 2 and life["epsilon"] == 5.0
    assert (
        f"Lifetime budget of the dataset: (ε, δ) = ({life['epsilon']:.6g}, {life['delta']:.3g}). "
        f"Spent so far with this release (releases counted: 2): (ε, δ) = "
        f"({life['spent_epsilon']:.6g}, {life['spent_delta']:.3g}), by {life['rule']}. "
        f"The next release can take ε up to {life['next_epsilon_max']:.6g} at δ "
        f"{life['next_epsilon_at_delta']:.3g} " in page
    )
    if lifetime[1] > 0:
        assert life["rho_left"] > 0 and f"(ρ left {life['rho_left']:.6g})" in page
    else:
        assert life["rho_left"] is None and "(no ρ: the lifetime δ is 0" in page
    assert "No lifetime budget" not in page and "VOID" not in page


def test_a_used_up_lifetime_is_stated_as_such(checked, tmp_path):
    """Two pure releases of ε = 1 on a lifetime (2, 0): nothing fits any more, and the report
    says so instead of 'ε up to 0'."""
    record = _record(tmp_path, PURE, (2.0, 0.0))
    assert record["lifetime"]["used_up"]
    page = _page(checked, _document(PURE, record))
    assert "The lifetime budget is used up: no further release of this dataset fits." in page
    assert "The next release can take" not in page


def test_without_a_lifetime_budget_the_report_says_so(checked, tmp_path):
    page = _page(checked, _document(ZCDP, _record(tmp_path, ZCDP, None)))
    assert (
        "No lifetime budget is set for this dataset" in page and "Lifetime budget of the dataset:" not in page
    )


def test_a_void_dataset_guarantee_is_stated_with_the_release_that_voided_it(checked, tmp_path):
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        led.reserve(
            dataset="d", release_id="x<1>", mechanism="spectral", plan=PURE, lifetime=None, not_dp=["n"]
        )
        led.mark_unprotected("x<1>")
        led.finish("x<1>", "released")
        record_release(led, "r2", plan=ZCDP)
        record = ledger_facts(led, DATASET, "r2")
    assert record["dataset_guarantee"]["void_since"]["release_id"] == "x<1>"
    page = _page(checked, _document(ZCDP, record))
    assert "The dataset's guarantee is VOID since release 'x&lt;1&gt;'" in page
    assert "No lifetime budget is set for this dataset" in page


def test_a_document_without_a_ledger_record_says_the_lifetime_account_is_unknown(checked):
    page = _page(checked, _document(ZCDP, None))
    assert "release.json has no ledger record" in page
