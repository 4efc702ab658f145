"""The ledger's facts a release publishes in ``release.json`` (``ledger_facts``) and in
its events (``budget_facts``): where the spend is recorded, this release's rows, the
dataset's lifetime account and whether its guarantee is void."""

from __future__ import annotations

from typing import Any

from dprelease.ledger.database import redact
from dprelease.ledger.store import Ledger

__all__ = ["budget_facts", "ledger_facts"]


def ledger_facts(ledger: Ledger, dataset: str, release_id: str) -> dict:
    """For ``release.json``: where the spend is recorded, the rows of this release (seq and
    hash, for ``audit verify`` to find and compare), and the dataset's lifetime account
    with this release included (its whole plan is charged while it runs)."""
    rows = ledger.entries(release_id=release_id)
    lifetime = ledger.lifetime(dataset)
    void = ledger.void_since(dataset)
    doc: dict[str, Any] = {
        "url": redact(ledger.url),
        "rows": [
            {k: r[k] for k in ("seq", "hash", "kind", "status", "stage", "statistic")}
            for r in rows
            if r["kind"] != "release" or r["status"] == "reserved"
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
    }
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


def _headroom(ledger: Ledger, dataset: str) -> dict:
    """What the lifetime budget still admits. Not ε_L − ε_spent: under zCDP composition the
    ρ's add, so a next release can often take more than that difference. ``used_up``: no
    further release of any kind fits."""
    room = ledger.headroom(dataset)
    assert room is not None  # only called with a lifetime budget
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
