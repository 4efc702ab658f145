"""A schedule whose budget is spent pages once, not at every slot (issue 42): a refusal
repeats an earlier one when the ledger gave the same dataset the very same reason
(``ledger.charges.repeated_refusal``), and then sends ``dprelease.release.refused-again``,
which no automation watches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dprelease.ledger.charges import repeated_refusal
from dprelease.ledger.database import FIELDS

REASONS = ["period 2026-11 used up", "period 2026-12 used up", "release id taken"]


def _refused(rid: str, dataset: str, reason: str) -> dict:
    row = dict.fromkeys(FIELDS)
    row.update(kind="release", status="refused", release_id=rid, dataset=dataset, detail={"reason": reason})
    return row


def _released(rid: str, dataset: str) -> dict:
    row = dict.fromkeys(FIELDS)
    row.update(kind="release", status="reserved", release_id=rid, dataset=dataset, detail={})
    return row


@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(REASONS), st.booleans()), max_size=30))
def test_each_distinct_reason_pages_once_per_dataset(steps: list[tuple[str, str, bool]]):
    """Whatever the order of refusals and releases: the refusals that page (not repeats) are
    exactly the first of each (dataset, reason), as the ledger would be read after each one."""
    rows: list[dict] = []
    paged: list[tuple[str, str]] = []
    for i, (dataset, reason, refused) in enumerate(steps):
        rid = f"r{i}"
        if not refused:
            rows.append(_released(rid, dataset))
            continue
        rows.append(_refused(rid, dataset, reason))
        if not repeated_refusal([r for r in rows if r["dataset"] == dataset], rid):
            paged.append((dataset, reason))
    firsts = list(dict.fromkeys((d, why) for d, why, refused in steps if refused))
    assert paged == firsts


def test_a_release_that_was_never_refused_is_no_repeat():
    assert not repeated_refusal([_refused("a", "d", REASONS[0])], "b")
