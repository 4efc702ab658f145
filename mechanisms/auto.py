"""``mechanism: auto``: ``factor_gauss`` or ``aim``, chosen by a public rule before the
budget is reserved (docs/mechanisms/auto.md).

The rule reads public facts only: the fitted rows n (public under replace-one: neighbours
have the same n), the accountant, the number of modelled columns p and how many of them are
continuous (the schema). ``aim`` is chosen when

    the accountant is zCDP,  n ≥ ``MIN_AIM_ROWS``,  fewer than half the columns are
    continuous,  and  p ≤ ``MAX_AIM_COLUMNS``;

otherwise ``factor_gauss``. ``factor_gauss`` is a Gaussian copula: continuous columns are its
home ground, and on the four tables of BENCHMARKS §15 whose columns are half or more continuous
it is ahead of ``aim`` on most figures at every ε. On Adult (6 of 15 continuous) and its
samples of 1,000 to 10,000 rows ``aim`` is ahead on at least half of them at every ε. AIM
measures many small tables, each at a fraction of ρ, so it needs rows: nothing smaller than
``MIN_AIM_ROWS`` was measured. Its time grows with p (16·p rounds, a compiled estimate per set
of cliques). The evidence is 13 tables, four of them held out to test the rule, on which
it was right in 7 of 12 conditions (docs/mechanisms/auto.md). ``aim`` runs with
``batch`` = ``AIM_BATCH`` (the variant measured there); the spec's ``target`` goes to either
mechanism.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = [
    "AIM_BATCH",
    "AUTO",
    "AUTO_PARAMS",
    "CANDIDATES",
    "MAX_AIM_COLUMNS",
    "MIN_AIM_ROWS",
    "AutoChoice",
    "candidate_params",
    "choose",
    "rule_text",
]

AUTO = "auto"
AUTO_PARAMS = ("target",)
"""The parameters ``mechanism: auto`` takes (both candidates have them)."""
CANDIDATES = ("factor_gauss", "aim")
"""What ``auto`` chooses between, the fast default first."""
MIN_AIM_ROWS = 800
"""The fewest fitted rows for which ``aim`` is chosen: the smallest measured (BENCHMARKS §15,
Adult's 1,000-row sample, 800 fitted)."""
MAX_AIM_COLUMNS = 40
"""The most modelled columns ``aim`` is chosen for (its time grows with p)."""
AIM_BATCH = 4


@dataclass(frozen=True)
class AutoChoice:
    """The mechanism ``auto`` chose, its parameters, and the public facts it was chosen on:
    ``n_fitted`` the rows the release fits, ``rows`` the input's rows n they were counted
    from (None when only the fitted count was given, as in the benchmarks)."""

    mechanism: str
    params: dict[str, Any]
    n_fitted: int
    columns: int
    continuous: int
    accountant: str
    reason: str
    rows: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"rule": rule_text(), **asdict(self)}


def rule_text() -> str:
    """The rule in one line, as the CLI and ``release.json`` state it."""
    return (
        f"aim if the accountant is zcdp, n >= {MIN_AIM_ROWS:,} fitted rows, fewer than half the columns "
        f"continuous and at most {MAX_AIM_COLUMNS} columns; else factor_gauss"
    )


def candidate_params(name: str, target: str | None) -> dict[str, Any]:
    """The parameters ``auto`` runs candidate ``name`` with: the spec's ``target``, and
    ``batch`` for ``aim``."""
    base: dict[str, Any] = {} if target is None else {"target": target}
    return {**base, "batch": AIM_BATCH} if name == "aim" else base


def choose(
    n_fitted: int,
    accountant: str,
    columns: int,
    continuous: int,
    target: str | None,
    allowed: tuple[str, ...] = CANDIDATES,
) -> AutoChoice:
    """The rule above on public facts. ``allowed``: the candidates the spec admits (e.g.
    an engine or a parameter one of them does not support)."""
    facts = (n_fitted, columns, continuous, accountant)
    aim = AutoChoice("aim", candidate_params("aim", target), *facts, "")
    fast = AutoChoice("factor_gauss", candidate_params("factor_gauss", target), *facts, "")
    if accountant != "zcdp":
        why_not_aim = f"accountant {accountant} (aim needs zcdp)"
    elif "aim" not in allowed:
        why_not_aim = "aim cannot run this spec"
    elif n_fitted < MIN_AIM_ROWS:
        why_not_aim = f"n = {n_fitted:,} < {MIN_AIM_ROWS:,} fitted rows"
    elif 2 * continuous >= columns:
        why_not_aim = f"{continuous} of {columns} columns continuous (half or more)"
    elif columns > MAX_AIM_COLUMNS:
        why_not_aim = f"{columns} columns > {MAX_AIM_COLUMNS}"
    else:
        return replace(
            aim,
            reason=f"n = {n_fitted:,} >= {MIN_AIM_ROWS:,} fitted rows, {continuous} of {columns} columns "
            "continuous",
        )
    if "factor_gauss" in allowed:
        return replace(fast, reason=why_not_aim)
    if "aim" in allowed and accountant == "zcdp":
        return replace(aim, reason="factor_gauss cannot run this spec")
    raise ValueError(f"mechanism 'auto' has no candidate this spec admits among {list(CANDIDATES)}")
