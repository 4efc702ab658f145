"""``aim``'s public parameters and their checks (the mechanism's steps are in ``aim``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dprelease.mechanisms.factor_marginals import Cuts, check_cuts

__all__ = ["AIMParams"]


@dataclass(frozen=True)
class AIMParams:
    """Public hyperparameters: ``rounds`` T (None: 16·p, the paper's), ``max_model_size``
    in MB of the junction tree (the paper's 80), mirror-descent ``round_iters`` per round
    (warm-started) and ``iters`` for the final model; ``target`` (a nominal or ordinal
    column the release is for): its two-way tables with every other column are measured
    before the rounds (stage ``target``, each at the first round's ρ), a public choice in the
    place of p − 1 selections; ``batch``: rounds between two estimates (1, the paper's: an
    estimate after every round; more rounds share a model, never choosing a candidate twice
    in one batch, and the budget is annealed when every table of the batch barely moved the
    model); ``triples``: with a target, its three-way marginals with every two other columns
    are candidates too (``workload.target_triples``); ``cuts``: where a merged column's
    groups lie (``factor_marginals.Cuts``). mbi compiles a program for every new
    set of cliques, which is most of AIM's time."""

    def triples_of(self) -> str | None:
        """The column whose triples are candidates (None: pairs only)."""
        return self.target if self.triples else None

    rounds: int | None = None
    max_model_size: float = 80.0
    round_iters: int = 100
    iters: int = 1000
    target: str | None = None
    batch: int = 1
    triples: bool = True
    cuts: Cuts = "quantiles"

    def __post_init__(self) -> None:
        if self.rounds is not None and not (isinstance(self.rounds, int) and self.rounds >= 1):
            raise ValueError(f"params.rounds ({self.rounds}) must be an integer >= 1")
        if not (self.max_model_size > 0 and math.isfinite(self.max_model_size)):
            raise ValueError(f"params.max_model_size ({self.max_model_size}) must be a finite number > 0")
        for name in ("round_iters", "iters", "batch"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"params.{name} ({value}) must be an integer >= 1")
        check_cuts(self.cuts)

    def total_rounds(self, p: int) -> int:
        return self.rounds if self.rounds is not None else 16 * p
