"""The ledger's facts a release publishes in ``release.json`` (``ledger_facts``) and in
its events (``budget_facts``): which ledger recorded the spend (its chain head, never its
location), this release's rows, the dataset's account under its budget policy (a lifetime,
or a period: this release's period and all time), what that policy guarantees, and
whether the dataset's guarantee is void."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dprelease.ledger import database
from dprelease.ledger.store import Ledger
from dprelease.mechanisms.periods import PeriodBudget

__all__ = ["budget_facts", "ledger_facts"]


def ledger_facts(ledger: Ledger, dataset: str, release_id: str) -> dict:
    """For ``release.json``: the ledger's identity, not its location (a file path or a
    database's host and role is the steward's topology, never public): its chain head
    (seq and hash) when the document is made, just before the closing row seals the
    bundle; the rows of this release (seq and hash, for ``audit verify`` to find and
    compare); and the dataset's lifetime account with this release included (its whole
    plan is charged while it runs)."""
    rows = ledger.rows(release_id=release_id)
    lifetime = ledger.lifetime(dataset)
    void = ledger.void_since(dataset)
    seq, digest = ledger.head()
    doc: dict[str, Any] = {
        "chain_head": {"seq": seq, "hash": digest},
        "rows": [
            {
                "seq": r.seq,
                "hash": r.hash,
                "kind": r.kind,
                "status": r.status,
                "stage": r.stage,
                "statistic": r.statistic,
            }
            for r in rows
            if r.kind != "release" or r.status == "reserved"
        ],
        "dataset_guarantee": {
            "void_since": void,
            "statement": (
                f"VOID: release '{void['release_id']}' of this dataset was not differentially private, so no "
                "composed (epsilon, delta) guarantee holds for the dataset since then; this release's own "
                "guarantee is stated above but does not compose with that one"
                if void
                else "every release of this dataset in the ledger so far was differentially private"
            ),
        },
        "lifetime": None,
        "period": None,
        "policy": _policy(ledger, dataset),
    }
    budget = ledger.period_budget(dataset)
    if budget is not None:
        doc["period"] = _period_account(ledger, dataset, release_id, budget)
    if lifetime is not None:
        spend = ledger.spend_so_far(dataset, lifetime[1])
        doc["lifetime"] = {
            "epsilon": lifetime[0],
            "delta": lifetime[1],
            "spent_epsilon": spend.epsilon,
            "spent_delta": spend.delta,
            "rule": spend.rule,
            **_headroom(ledger, dataset),
            "releases_counted": ledger.charged_releases(dataset),
        }
    return doc


PRIVACY_UNIT = (
    "one record: one row of the input table, taken to be one person's row; neighbouring tables differ "
    "by replacing one row (replace-one). A person with several rows in one table is protected by group "
    "privacy only (a weaker guarantee the spec does not state)"
)


def _policy(ledger: Ledger, dataset: str) -> dict:
    """The dataset's budget policy, its privacy unit and what its guarantee covers, in words."""
    lifetime, budget = ledger.lifetime(dataset), ledger.period_budget(dataset)
    if budget is not None:
        one = (
            f"the releases of dataset '{dataset}' reserved in one UTC calendar period of {budget.length} "
            f"together are (epsilon={budget.epsilon:g}, delta={budget.delta:g})-DP for the rows of the "
            "tables they read. "
        )
        k = (
            f"composition of k period budgets (at most epsilon={budget.epsilon:g}·k and "
            f"delta={budget.delta:g}·k by basic composition; zCDP composes them more tightly)"
        )
        if budget.disjoint:
            covers = (
                f"{one}The steward declared the periods disjoint (privacy.period.disjoint): no person's "
                "row is in two periods' tables (e.g. one cohort per period). On that declaration the "
                "periods compose in parallel, so a person's all-time guarantee is that of their one "
                f"period, at most (epsilon={budget.epsilon:g}, delta={budget.delta:g}); "
                "period.all_time.per_person_epsilon states the largest period's composed spend so far. "
                "The declaration is the steward's and is not checked against the data: if it is false, "
                f"a person whose row is in the tables of k periods' releases is covered only by the {k}, "
                "and period.all_time.spent_epsilon (the sum over periods, composed) applies"
            )
        else:
            covers = (
                f"{one}The budget starts again each period, so it does not bound all periods together: a "
                f"person whose row is in the tables of k periods' releases is covered by the {k}, not by "
                "one period's epsilon. period.all_time states the composed total so far"
            )
        return {"kind": "period", "privacy_unit": PRIVACY_UNIT, "covers": covers}
    if lifetime is not None:
        return {
            "kind": "lifetime",
            "privacy_unit": PRIVACY_UNIT,
            "covers": (
                f"all releases of dataset '{dataset}' together are at most (epsilon={lifetime[0]:g}, "
                f"delta={lifetime[1]:g})-DP for the rows of the tables they read, whenever they run"
            ),
        }
    return {
        "kind": None,
        "privacy_unit": PRIVACY_UNIT,
        "covers": (
            f"no budget policy: each release's own guarantee is stated above, and the releases of dataset "
            f"'{dataset}' compose without a cap (`dprelease ledger show` gives their composed total)"
        ),
    }


def _period_account(ledger: Ledger, dataset: str, release_id: str, budget: PeriodBudget) -> dict:
    """The account of this release's period (the window of its latest attempt's reservation,
    ``ledger.windows``) and all time."""
    at = ledger.reserved_at(release_id) or database.now()
    start, end = budget.length.window(at)
    label = budget.length.label(at)
    spend, count = ledger.period_spend(dataset, budget, at)
    total = ledger.spend_so_far(dataset, budget.delta)
    person = ledger.all_time_guarantee(dataset, budget)
    return {
        "length": str(budget.length),
        "alignment": "UTC calendar periods (counted from 1970-01-01, weeks from Monday), not rolling",
        "epsilon": budget.epsilon,
        "delta": budget.delta,
        "disjoint": budget.disjoint,
        "this_period": {
            "period": label,
            "start": start.isoformat(),
            "resets": end.isoformat(),
            "spent_epsilon": spend.epsilon,
            "spent_delta": spend.delta,
            "rule": spend.rule,
            "releases_counted": count,
            **_headroom(ledger, dataset, at),
        },
        "all_time": {
            "spent_epsilon": total.epsilon,
            "spent_delta": total.delta,
            "rule": total.rule,
            "periods": len(ledger.period_spends(dataset, budget)),
            "releases_counted": ledger.charged_releases(dataset),
            "per_person_epsilon": person.epsilon,
            "per_person_delta": person.delta,
            "per_person_rule": (
                "parallel composition over periods declared disjoint: the largest period's composed spend"
                if budget.disjoint
                else "every release composed (a person may be in every period's tables)"
            ),
        },
    }


def _headroom(ledger: Ledger, dataset: str, at: datetime | None = None) -> dict:
    """What the budget policy still admits (in ``at``'s period, for a period budget). Not
    ε_L − ε_spent: under zCDP composition the ρ's add, so a next release can often take
    more than that difference. ``used_up``: no further release of any kind fits."""
    room = ledger.headroom(dataset, at)
    assert room is not None  # only called with a budget policy
    return {
        "next_epsilon_max": room.epsilon,
        "next_epsilon_at_delta": room.delta,
        "rho_left": room.rho,
        "used_up": room.used_up,
    }


def budget_facts(ledger: Ledger, dataset: str, release_id: str) -> dict:
    """This release's charge and the dataset's lifetime account, from the ledger."""
    charge = ledger.charge(release_id)
    facts: dict[str, Any] = {
        "epsilon_spent": None if charge.is_void else charge.epsilon,
        "delta_spent": None if charge.is_void else charge.delta,
        "differentially_private": not charge.is_void,
        "dataset_guarantee_void_since": (ledger.void_since(dataset) or {}).get("release_id"),
    }
    budget = ledger.period_budget(dataset)
    if budget is not None:
        at = (
            ledger.reserved_at(release_id) or database.now()
        )  # a refused release: the period it was refused in
        spend, _ = ledger.period_spend(dataset, budget, at)
        facts["period"] = {
            "length": str(budget.length),
            "period": budget.length.label(at),
            "resets": budget.length.window(at)[1].isoformat(),
            "epsilon": budget.epsilon,
            "delta": budget.delta,
            "epsilon_spent": spend.epsilon,
            **_headroom(ledger, dataset, at),
        }
    lifetime = ledger.lifetime(dataset)
    if lifetime is None:
        facts["lifetime"] = None
    else:
        spend = ledger.spend_so_far(dataset, lifetime[1])
        facts["lifetime"] = {
            "epsilon": lifetime[0],
            "delta": lifetime[1],
            "epsilon_spent": spend.epsilon,
            **_headroom(ledger, dataset),
        }
    return facts
