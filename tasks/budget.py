"""``allocate_budget``: split the spec's (ε, δ) — or ρ under zCDP — across the stages
and reserve the plan in the ledger, before any data is read.

Policy: ``cache_policy=NO_CACHE, persist_result=False``. Its inputs are public, but the
plan is the audit record, so we persist it ourselves (``public/budget_plan.json`` and a
``reserved`` row in the ledger) rather than in Prefect's opaque result store.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.files import write_json
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import ReleaseSpec
from dprelease.tasks.scrub import scrub_errors

__all__ = ["allocate_budget"]


@task(name="allocate_budget", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def allocate_budget(
    spec: ReleaseSpec, public_dir: Path, ledger: Ledger, release_id: str, new_dataset: str | None = None
) -> BudgetPlan:
    """Build the plan from the spec alone, refuse it if it exceeds the spec, and reserve it
    in the ledger (which refuses it when the dataset's budget policy cannot take it, when
    ``release_id`` already spent, or when another dataset name holds the fingerprint of the
    spec's public schema and ``new_dataset``, the steward's reason, is not given;
    ``BudgetRefused``). A mechanism that is not DP with these parameters is reserved as an
    unbounded (void) charge."""
    p = spec.privacy
    plan = spec.budget_plan()
    if plan.spent_epsilon > p.epsilon:
        raise BudgetError(
            f"budget plan ({plan.spent_epsilon!r}) must not exceed privacy.epsilon ({p.epsilon!r})"
        )
    write_json(public_dir / "budget_plan.json", plan.as_dict())
    ledger.reserve(
        dataset=spec.dataset.name,
        release_id=release_id,
        mechanism=spec.mechanism.name,
        plan=plan,
        lifetime=p.lifetime,
        period=p.period_budget,
        not_dp=MECHANISMS[spec.mechanism.name].defects(spec.mechanism_params()),
        schema=spec.public_schema().fingerprint,
        new_dataset=new_dataset,
    )
    get_run_logger().info(
        "budget plan reserved: %s", ", ".join(f"{s.stage} w={s.weight:g}" for s in plan.stages)
    )
    return plan
