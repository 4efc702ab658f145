"""The ``privacy`` part of the release document (``bundle.release_doc``), typed: the
budget plan, the account (``privacy.ledger``: measurements, stages, totals), the accuracy
statement and the ledger's record (``ledger.facts``: its chain head, this release's rows,
the dataset's guarantee and its lifetime or period account)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from dprelease.bundle.parts import STRINGS, Part, part, parts

__all__ = [
    "Account",
    "Accuracy",
    "AllTime",
    "ChainHead",
    "Guarantee",
    "LedgerRecord",
    "LifetimeAccount",
    "MeasurementRow",
    "PeriodRecord",
    "PlanStage",
    "PolicyRecord",
    "Privacy",
    "PublishedPlan",
    "RecordedRow",
    "Room",
    "StageAccount",
    "ThisPeriod",
    "Totals",
    "Unit",
    "VoidSince",
    "unit_of",
]

Unit = Literal["rho", "epsilon"]
"""What a release's shares are counted in: ρ under zCDP, ε under pure DP."""


def unit_of(accountant: str) -> Unit:
    """``rho`` for the zCDP accountant, else ``epsilon``."""
    return "rho" if accountant == "zcdp" else "epsilon"


@dataclass(frozen=True, kw_only=True)
class PlanStage(Part):
    """A stage of the budget plan: its weight and share (ρ under zCDP, ε under pure DP)."""

    stage: str = ""
    weight: float = 0.0
    rho: float | None = None
    epsilon: float | None = None

    def share(self, unit: Unit) -> float | None:
        return self.rho if unit == "rho" else self.epsilon


@dataclass(frozen=True, kw_only=True)
class PublishedPlan(Part):
    """``privacy.budget_plan``: the split fixed before the data was read."""

    notion: str = ""
    epsilon: float = 0.0
    delta: float = 0.0
    rho: float | None = None
    stages: tuple[PlanStage, ...] = field(default=(), metadata=parts(PlanStage))
    spent_epsilon: float | None = None
    spent_rho: float | None = None


@dataclass(frozen=True, kw_only=True)
class MeasurementRow(Part):
    """One noisy statistic of the account (``Measurement.ledger_row``: everything but its value)."""

    stage: str = ""
    statistic: str = ""
    mechanism: str = ""
    sensitivity: float = 0.0
    sensitivity_norm: str = ""
    noise_scale: float = 0.0
    rho: float | None = None
    epsilon: float | None = None
    dimension: int = 0
    differentially_private: bool = False
    defect: str | None = None

    def share(self, unit: Unit) -> float | None:
        return self.rho if unit == "rho" else self.epsilon


@dataclass(frozen=True, kw_only=True)
class StageAccount(Part):
    """One stage of the account: what it was allocated and spent, in the release's unit
    (``rho_*`` under zCDP, ``epsilon_*`` under pure DP; the other pair absent)."""

    stage: str = ""
    weight: float = 0.0
    rho_allocated: float | None = None
    rho_spent: float | None = None
    epsilon_allocated: float | None = None
    epsilon_spent: float | None = None

    def allocated(self, unit: Unit) -> float:
        """NaN when the bundle states none (every comparison with it fails)."""
        found = self.rho_allocated if unit == "rho" else self.epsilon_allocated
        return math.nan if found is None else found

    def spent(self, unit: Unit) -> float:
        """NaN when the bundle states none (every comparison with it fails)."""
        found = self.rho_spent if unit == "rho" else self.epsilon_spent
        return math.nan if found is None else found


@dataclass(frozen=True, kw_only=True)
class Totals(Part):
    """The release's composed total: ρ (zCDP) and the (ε, δ) statement, and how it converts."""

    rho: float | None = None
    epsilon: float = 0.0
    delta: float = 0.0
    conversion: str = ""


@dataclass(frozen=True, kw_only=True)
class Account(Part):
    """``privacy.ledger``: the release's account (``mechanisms.accounting.account``)."""

    status: str = ""
    defects: tuple[str, ...] = field(default=(), metadata=STRINGS)
    measurements: tuple[MeasurementRow, ...] = field(default=(), metadata=parts(MeasurementRow))
    stages: tuple[StageAccount, ...] = field(default=(), metadata=parts(StageAccount))
    totals: Totals = field(default_factory=Totals, metadata=part(Totals))


@dataclass(frozen=True, kw_only=True)
class Accuracy(Part):
    """The error a statistic's noise alone implies (``mechanisms.accuracy.expected_error``;
    ``expected_tvd`` for a count table only)."""

    statistic: str = ""
    noise_sd: float = 0.0
    expected_abs_error: float = 0.0
    expected_tvd: float | None = None


@dataclass(frozen=True, kw_only=True)
class ChainHead(Part):
    """The ledger's chain head when the bundle was sealed: its identity, not its location."""

    seq: int = 0
    hash: str = ""


@dataclass(frozen=True, kw_only=True)
class RecordedRow(Part):
    """One of this release's ledger rows, as the bundle names it (for ``audit verify``)."""

    seq: int = 0
    hash: str = ""
    kind: str = ""
    status: str = ""
    stage: str | None = None
    statistic: str | None = None


@dataclass(frozen=True, kw_only=True)
class VoidSince(Part):
    """The dataset's first release that was not differentially private, and when."""

    release_id: str = ""
    time: str = ""


@dataclass(frozen=True, kw_only=True)
class Guarantee(Part):
    """Whether the dataset's composed guarantee holds (``void_since``: the first non-DP
    release; None when every release was DP)."""

    void_since: VoidSince | None = field(default=None, metadata=part(VoidSince))
    statement: str = ""


@dataclass(frozen=True, kw_only=True)
class Room(Part):
    """What a budget policy still admits (``ledger.facts``' headroom): the largest ε of a
    next release at ``next_epsilon_at_delta``, the ρ left, whether no release fits any more
    (bundles from before issue 30 lack ``used_up``)."""

    next_epsilon_max: float = 0.0
    next_epsilon_at_delta: float = 0.0
    rho_left: float | None = None
    used_up: bool | None = None


@dataclass(frozen=True, kw_only=True)
class LifetimeAccount(Room):
    """The dataset's lifetime account with this release included."""

    epsilon: float = 0.0
    delta: float = 0.0
    spent_epsilon: float = 0.0
    spent_delta: float = 0.0
    rule: str = ""
    releases_counted: int = 0


@dataclass(frozen=True, kw_only=True)
class ThisPeriod(Room):
    """The account of the period this release was reserved in."""

    period: str = ""
    start: str = ""
    resets: str = ""
    spent_epsilon: float = 0.0
    spent_delta: float = 0.0
    rule: str = ""
    releases_counted: int = 0


@dataclass(frozen=True, kw_only=True)
class AllTime(Part):
    """Every period so far: the composed total, and what bounds one person's loss."""

    spent_epsilon: float = 0.0
    spent_delta: float = 0.0
    rule: str = ""
    periods: int = 0
    releases_counted: int = 0
    per_person_epsilon: float = 0.0
    per_person_delta: float = 0.0
    per_person_rule: str = ""


@dataclass(frozen=True, kw_only=True)
class PeriodRecord(Part):
    """A period budget's account (``ledger.facts``): the policy, this release's period and
    all time."""

    length: str = ""
    alignment: str = ""
    epsilon: float = 0.0
    delta: float = 0.0
    disjoint: bool = False
    this_period: ThisPeriod = field(default_factory=ThisPeriod, metadata=part(ThisPeriod))
    all_time: AllTime = field(default_factory=AllTime, metadata=part(AllTime))


@dataclass(frozen=True, kw_only=True)
class PolicyRecord(Part):
    """The dataset's budget policy in words (``kind``: lifetime, period or None)."""

    kind: str | None = None
    privacy_unit: str = ""
    covers: str = ""


@dataclass(frozen=True, kw_only=True)
class LedgerRecord(Part):
    """``privacy.ledger_record``: which ledger recorded the spend and the dataset's account.
    Bundles from before issue 38 hold ``url`` instead of ``chain_head``; from before issue
    32, no ``policy``."""

    chain_head: ChainHead | None = field(default=None, metadata=part(ChainHead))
    rows: tuple[RecordedRow, ...] = field(default=(), metadata=parts(RecordedRow))
    dataset_guarantee: Guarantee | None = field(default=None, metadata=part(Guarantee))
    lifetime: LifetimeAccount | None = field(default=None, metadata=part(LifetimeAccount))
    period: PeriodRecord | None = field(default=None, metadata=part(PeriodRecord))
    policy: PolicyRecord | None = field(default=None, metadata=part(PolicyRecord))
    url: str | None = None


@dataclass(frozen=True, kw_only=True)
class Privacy(Part):
    """The document's ``privacy``: the guarantee's terms, the plan, the account, the
    accuracy and the ledger's record. A schema discovery's holds the accountant, n, the
    plan and the account only."""

    accountant: str = ""
    neighbour_relation: str = ""
    statement: str = ""
    input_rows_n_public: int = 0
    rows_fitted: int = 0
    holdout_fraction: float = 0.0
    synthetic_rows: int = 0
    budget_plan: PublishedPlan = field(default_factory=PublishedPlan, metadata=part(PublishedPlan))
    ledger: Account = field(default_factory=Account, metadata=part(Account))
    accuracy: tuple[Accuracy, ...] | None = field(default=None, metadata=parts(Accuracy))
    numerics: str = ""
    ledger_record: LedgerRecord | None = field(default=None, metadata=part(LedgerRecord))

    @property
    def unit(self) -> Unit:
        """What the shares are counted in: ρ under zCDP, else ε."""
        return unit_of(self.accountant)

    @property
    def record(self) -> LedgerRecord:
        """``ledger_record``, or an empty one when the bundle holds none."""
        return self.ledger_record or LedgerRecord()
