"""``aim``: the adaptive and iterative mechanism on Private-PGM (McKenna, Mullins, Sheldon,
Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for Differentially Private Synthetic
Data", Alg. 2), over the project's public cells.

Workload: the candidate two-way marginals of ``mechanisms.workload`` (at most
``MAX_PAIR_CELLS`` cells each), with ``params.target`` also its three-way marginals with every
two other columns (``workload.target_triples``, ``params.triples``), and their one-way
closure; a table weighs 1, a single column ½ (the paper's compiled weights, normalised). Stages (zCDP only):

1. ``marginals`` — every one-way marginal (``mechanisms.workload``), weight 0.9/16 of the
   whole: the paper's initial round, d one-way tables at the first round's σ.
2. ``select`` and ``measure`` — rounds. Round t picks a candidate r by the exponential
   mechanism at ρₛ with the score q_r = w_r(‖C_r − M_r(p̂)‖₁ − √(2/π)·σ·K_r) (C_r the exact
   counts, p̂ the current model, K_r its cells), among the candidates whose junction tree
   stays within ``max_model_size``·(budget used)/(budget), then measures C_r with Gaussian
   noise at ρₘ (σ = Δ₂/√(2ρₘ)), and re-estimates the model (warm start). The first round
   takes ρₘ = ρ_measure/T, ρₛ = ρ_select/T (T = ``rounds``, default 16·p); when a
   measurement barely moves the model (‖M_r(p̂') − M_r(p̂)‖₁ ≤ √(2/π)·σ·K_r) both are
   multiplied by 4 (σ halved, ε doubled), and the round that would leave less than two
   rounds' budget takes all that is left. The stages split 1 : 9, the paper's.
With ``params.target`` (a nominal or ordinal column), stage ``target`` measures the
target's two-way tables with every other column before the rounds, each at the first
round's ρ: a public choice in the place of p − 1 selections (factor_gauss's ``refine`` makes
the same one).

3. estimation and sampling (post-processing) — mbi's mirror descent on every measurement
   (``mechanisms.graphical``), ``params.iters`` iterations; fresh rows along its junction
   tree, decoded through the private one-way densities.

Sensitivity (replace-one): Δ₁ = 2, Δ₂ = √2 for a count table; a score moves by at most
w_r·‖ΔC_r‖₁ ≤ 2·w_r ≤ 2, so Δ∞ = 2 for the selection (``SCORE_SENSITIVITY``).
Privacy: adaptive zCDP composition: every selection is ρₛ-zCDP (bounded range,
``primitives.exponential_mechanism``), every table ρₘ-zCDP; the rounds never spend more than
each stage's share (the last one takes what is left).
Corrected: the paper's neighbours are add/remove (Δ = 1 per table, Δ∞ = max w); under
replace-one both double.
The privacy argument: ``docs/proofs/marginal_synthesizers.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.aim_params import AIMParams
from dprelease.mechanisms.axes import axes_of
from dprelease.mechanisms.factor_marginals import one_way_sensitivities
from dprelease.mechanisms.graphical import Marginal, Model, estimate, marginal_of, model_size, sample
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.primitives import Measurement, exponential_mechanism, measure_stage
from dprelease.mechanisms.schema import Schema, check_target
from dprelease.mechanisms.synthesizer import (
    Facts,
    MixedRows,
    Sensitivity,
    Stage,
    Streaming,
    Synthesizer,
    fact_names,
)
from dprelease.mechanisms.workload import (
    MAX_PAIR_CELLS,
    ModelDraws,
    Sampled,
    Workload,
    WorkloadSums,
    encode_counts,
    encode_rows,
    histograms,
    l1_error,
    one_way,
    pair_name,
)

__all__ = ["AIM", "SCORE_SENSITIVITY", "AIMParams", "Measured", "run_rounds"]

SCORE_SENSITIVITY = 2.0
"""Δ∞ of a score w_r(‖C_r − M_r(p̂)‖₁ − bias) with w_r ≤ 1 under replace-one."""
SCORE_ROWS = 10
"""Rows drawn from the model per input row to count the candidates no clique holds."""
MAX_SCORE_ROWS = 1_000_000
SELECT_SHARE = 0.1
"""The selections' share of the rounds' budget (the paper's 0.1; the tables take 0.9)."""
ONE_WAY_WEIGHT = 0.5


def target_pairs(workload: Workload, target: str | None) -> list[tuple[int, int]]:
    """The candidate pairs that hold the target (public: the schema and the workload)."""
    if target is None:
        return []
    t = workload.names.index(target)
    return [pair for pair in workload.pairs if t in pair]


def measure_target(
    workload: Workload,
    counts: tuple[np.ndarray, ...],
    plan: BudgetPlan,
    target: str | None,
    *,
    rng: np.random.Generator,
) -> list[Marginal]:
    """Stage ``target``: the target's tables, the stage split evenly over them.

    Sensitivity: Δ₁ = 2, Δ₂ = √2 per table.
    Noise: Gaussian σ = √2/√(2ρ_t), ρ_t = ρ_target/(number of tables).
    Privacy: Σρ_t ≤ ρ_target.
    Reference: ours; McKenna et al. 2022 let a steward's workload weigh marginals, this
    measures the target's at once instead of selecting them.
    """
    pairs = target_pairs(workload, target)
    if not pairs:
        return []
    names = list(workload.names)
    parts = plan.stage("target").split(len(pairs))
    return [
        Marginal(
            pair,
            measure_stage(
                np.asarray(_exact(workload, counts, pair), dtype=float),
                part,
                l2_sensitivity=histogram_sensitivity("l2"),
                l1_sensitivity=histogram_sensitivity("l1"),
                rng=rng,
                name=pair_name(names, *pair),
                axes=axes_of(workload.cells, names, pair),
            ),
        )
        for pair, part in zip(pairs, parts, strict=True)
    ]


def _candidates(workload: Workload) -> list[tuple[tuple[int, ...], float]]:
    """The workload's closure with weights: every table, pair or triple (1), and every
    column (½)."""
    return [((j,), ONE_WAY_WEIGHT) for j in range(len(workload.sizes))] + [
        (columns, 1.0) for columns in workload.tables
    ]


def _exact(workload: Workload, counts: tuple[np.ndarray, ...], columns: tuple[int, ...]) -> np.ndarray:
    """The exact counts of a candidate: a table's (pair or triple), or a column's histogram."""
    if len(columns) >= 2:
        return counts[workload.tables.index(columns)]
    (j,) = columns
    return workload.one_counts[j]


@dataclass
class _Budget:
    """The rounds' budget: each stage's share, what its rounds have taken, and the current
    round's ρₛ, ρₘ."""

    select: float
    measure: float
    rho_s: float
    rho_m: float
    taken_s: list[float] = field(default_factory=list)
    taken_m: list[float] = field(default_factory=list)

    def next_round(self) -> bool:
        """Take this round's budget; True when it is the last: when less than two rounds'
        budget is left (the paper's rule), this round takes all that is left, rounded down so
        that the rounds' sums never exceed the shares (as ``accounting.split_budget``)."""
        left_s = self.select - math.fsum(self.taken_s)
        left_m = self.measure - math.fsum(self.taken_m)
        last = left_s < 2 * self.rho_s or left_m < 2 * self.rho_m
        if last:
            self.rho_s = _rest(self.select, self.taken_s)
            self.rho_m = _rest(self.measure, self.taken_m)
        self.taken_s.append(self.rho_s)
        self.taken_m.append(self.rho_m)
        return last

    @property
    def used(self) -> float:
        """The share of the rounds' budget taken so far."""
        return math.fsum([*self.taken_s, *self.taken_m]) / (self.select + self.measure)


def _rest(share: float, taken: list[float]) -> float:
    """What is left of ``share``, rounded down until every sum of ``taken`` and it fits."""
    rest = math.nextafter(share - math.fsum(taken), 0.0)
    while rest > 0 and (math.fsum([*taken, rest]) > share or sum([*taken, rest]) > share):
        rest = math.nextafter(rest, 0.0)
    return rest


def run_rounds(
    workload: Workload,
    counts: tuple[np.ndarray, ...],
    plan: BudgetPlan,
    params: AIMParams,
    *,
    rng: np.random.Generator,
) -> tuple[list[Marginal], list[Measurement], Model]:
    """The rounds (stages ``select`` and ``measure``): returns the measured tables, every
    record in order, and the last model. A candidate's model table M_r(p̂) is exact when a
    clique of the model holds r, else counted in ``SCORE_ROWS``·n rows drawn from the model
    (post-processing; its sampling error is far below the score's bias term).

    Sensitivity: Δ∞ = 2 per selection (``SCORE_SENSITIVITY``); Δ₁ = 2, Δ₂ = √2 per table.
    Noise: Gumbel of scale Δ∞/√(2ρₛ) per selection, Gaussian σ = √2/√(2ρₘ) per table.
    Privacy: Σρₛ ≤ ρ_select, Σρₘ ≤ ρ_measure; adaptive zCDP composition.
    Reference: McKenna et al. 2022, Alg. 2 (adapted to replace-one neighbours).
    """
    names, sizes, n = list(workload.names), workload.sizes, workload.n
    select, measure = plan.stage("select"), plan.stage("measure")
    assert select.rho is not None and measure.rho is not None  # aim is zCDP only
    rounds = params.total_rounds(len(names))
    budget = _Budget(select.rho, measure.rho, select.rho / rounds, measure.rho / rounds)
    fixed = measure_target(workload, counts, plan, params.target, rng=rng)
    measured: list[Marginal] = []
    records: list[Measurement] = [m.measurement for m in fixed]
    model = estimate(names, sizes, [*one_way(workload), *fixed], n, iters=params.round_iters)
    drawn = sample(model, min(SCORE_ROWS * n, MAX_SCORE_ROWS), rng)
    candidates = _candidates(workload)
    pending: list[tuple[tuple[int, ...], np.ndarray]] = []  # measured since the last estimate
    while True:
        last = budget.next_round()
        sigma = histogram_sensitivity("l2") / math.sqrt(2 * budget.rho_m)
        limit = params.max_model_size * budget.used
        cliques = [m.columns for m in (*fixed, *measured)]
        fresh = {c for c, _ in pending}
        allowed = [
            (c, w)
            for c, w in candidates
            if c not in fresh and (c in cliques or model_size(sizes, [*cliques, c]) <= limit)
        ]
        allowed = allowed or [(c, w) for c, w in candidates[: len(names)] if c not in fresh] or candidates[:1]
        fitted = [marginal_of(model, c, drawn, n) for c, _ in allowed]
        scores = np.array(
            [
                w * (l1_error(_exact(workload, counts, c), est) - _bias(sigma, sizes, c))
                for (c, w), est in zip(allowed, fitted, strict=True)
            ]
        )
        t = len(measured)
        choice = exponential_mechanism(
            scores,
            linf_sensitivity=SCORE_SENSITIVITY,
            rho=budget.rho_s,
            rng=rng,
            name=f"select[{t}]",
            stage="select",
        )
        k = int(choice.value[0])
        columns = allowed[k][0]
        table = measure_stage(
            np.asarray(_exact(workload, counts, columns), dtype=float),
            measure.take(budget.rho_m),
            l2_sensitivity=histogram_sensitivity("l2"),
            l1_sensitivity=histogram_sensitivity("l1"),
            rng=rng,
            name=_name(names, columns, t),
            axes=axes_of(workload.cells, workload.names, columns),
        )
        records += [choice, table]
        measured.append(Marginal(columns, table))
        pending.append((columns, fitted[k]))
        if not last and len(pending) < params.batch:
            continue
        model = estimate(
            names,
            sizes,
            [*one_way(workload), *fixed, *measured],
            n,
            warm_start=model,
            iters=params.round_iters,
        )
        if last:
            break
        if all(l1_error(marginal_of(model, c), before) <= _bias(sigma, sizes, c) for c, before in pending):
            budget.rho_s, budget.rho_m = 4 * budget.rho_s, 4 * budget.rho_m
        pending = []
        drawn = sample(model, min(SCORE_ROWS * n, MAX_SCORE_ROWS), rng)
    return [*fixed, *measured], records, model


def _bias(sigma: float, sizes: list[int], columns: tuple[int, ...]) -> float:
    """√(2/π)·σ·K: the expected L1 norm of the noise on a table of K cells."""
    return math.sqrt(2 / math.pi) * sigma * math.prod(sizes[c] for c in columns)


def _name(names: list[str], columns: tuple[int, ...], t: int) -> str:
    base = pair_name(names, *columns) if len(columns) >= 2 else f"histogram[{names[columns[0]]}]"
    return f"{base}#{t}"


def _facts(measured: list[Marginal], names: tuple[str, ...]) -> dict[str, object]:
    """The public facts of the rounds: the target's tables and each round's columns (the
    noisy selections' outcome)."""
    return {
        "target_pairs": [[names[c] for c in m.columns] for m in measured if m.measurement.stage == "target"],
        "rounds": [[names[c] for c in m.columns] for m in measured if m.measurement.stage == "measure"],
    }


@dataclass(frozen=True)
class Measured:
    """The estimate step's state: the workload (its exact counts dropped after the rounds),
    every measured table (the target's, then the rounds'), and the last round's model
    (None: a single column, no rounds)."""

    workload: Workload
    tables: list[Marginal]
    model: Model | None = field(default=None, repr=False)


def _estimate(
    workload: Workload,
    counts: tuple[np.ndarray, ...],
    plan: BudgetPlan,
    params: AIMParams,
    rng: np.random.Generator,
) -> Stage[Measured]:
    if len(workload.names) < 2:
        return Stage(Measured(workload, [], None), (), {"rounds": [], "target_pairs": []})
    measured, records, model = run_rounds(workload, counts, plan, params, rng=rng)
    state = Measured(replace(workload, counts=(), one_counts=()), measured, model)
    return Stage(state, tuple(records), _facts(measured, workload.names))


def _model(state: Measured, params: AIMParams) -> Stage[ModelDraws]:
    """Post-processing: the final model, ``params.iters`` iterations from the last round's."""
    workload = state.workload
    final = estimate(
        workload.names,
        workload.sizes,
        [*one_way(workload), *state.tables],
        workload.n,
        warm_start=state.model,
        iters=params.iters,
        last=True,
    )
    return Stage(ModelDraws(workload, final))


class AIMStreaming(Streaming[AIMParams, Measured]):
    """aim from sums over chunks: the one-way, pair and triple counts are sums over rows."""

    def encode(
        self,
        counts: Sequence[np.ndarray],
        n: int,
        schema: Schema,
        plan: BudgetPlan,
        params: AIMParams,
        rng: np.random.Generator,
    ) -> Stage[WorkloadSums[AIMParams, Measured]]:
        workload = encode_counts(list(counts), n, schema, plan, None, rng, params.triples_of(), params.cuts)
        return WorkloadSums(workload, _estimate).stage

    def sample(self, state: Measured, params: AIMParams) -> Stage[ModelDraws]:
        return _model(state, params)


class AIM(Synthesizer[AIMParams, Workload, Measured, Sampled]):
    """AIM (McKenna et al. 2022) on Private-PGM: noisy one-way marginals, then rounds that
    choose the worst-fitted two-way marginal (or three-way with the target) by the
    exponential mechanism, measure it with Gaussian noise and re-estimate a graphical model
    (mbi); fresh rows decoded through the private one-way densities

    aim's four steps (the module's docstring states the stages, their Δ and noise)."""

    name = "aim"
    notions = ("zcdp",)
    spends = {"encode": ("marginals",), "estimate": ("target", "select", "measure")}
    models_missing = True
    rehearsal_params = {"rounds": 2, "round_iters": 5, "iters": 5}
    streaming = AIMStreaming()

    def stage_weights(self, schema: Schema, params: AIMParams) -> dict[str, float]:
        """The paper's split: the one-way round 0.9·p/T of the whole (each one-way table at the
        first round's ρ), with a target its p − 1 tables as much again, the rest 1 : 9 between
        the selections and the tables."""
        p = len(schema)
        if p < 2:
            return {"marginals": 1.0}
        first = min(0.5, 0.9 * p / params.total_rounds(p))
        target = 0.0 if params.target is None else first * (p - 1) / p
        rest = 1 - first - target
        weights = {"marginals": first, "select": SELECT_SHARE * rest, "measure": (1 - SELECT_SHARE) * rest}
        return weights if params.target is None else {**weights, "target": target}

    def check(self, schema: Schema, params: AIMParams) -> None:
        """``params.target`` names a nominal or ordinal column, and every column fits a
        candidate: a column of more than ``MAX_PAIR_CELLS``/2 declared cells is in no pair's
        table with a column of two cells or more, so aim would model it apart from every other
        column, at the cost of its one-way table in every estimate (public: the schema)."""
        check_target(schema, params.target)
        wide = [c for c in schema.columns if c.n_bins > MAX_PAIR_CELLS // 2]
        if wide:
            c = wide[0]
            raise ValueError(
                f"name aim cannot model column '{c.name}' ({c.n_bins:,} cells) with any other: a "
                f"candidate marginal holds at most {MAX_PAIR_CELLS:,} cells, so no pair of it with a "
                "column of 2 cells or more fits. Merge its "
                f"{'categories' if c.kind == 'nominal' else 'levels or bins'} to at most "
                f"{MAX_PAIR_CELLS // 2:,} (coarsen the code list, or declare bins), declare it type: "
                "drop, or use mechanism factor_gauss"
            )

    def encode(
        self, rows: MixedRows, schema: Schema, plan: BudgetPlan, params: AIMParams, rng: np.random.Generator
    ) -> Stage[Workload]:
        return encode_rows(rows.bins, schema, plan, None, rng, params.triples_of(), params.cuts).stage

    def estimate(
        self, state: Workload, plan: BudgetPlan, params: AIMParams, rng: np.random.Generator
    ) -> Stage[Measured]:
        return _estimate(state, state.counts, plan, params, rng)

    def sample(self, state: Measured, params: AIMParams, m: int, rng: np.random.Generator) -> Stage[Sampled]:
        return Stage(Sampled(_model(state, params).state, m))

    def decode(
        self, state: Sampled, schema: Schema, params: AIMParams, rng: np.random.Generator
    ) -> MixedRows:
        return state.draws.draw(state.m, rng)

    def sensitivities(
        self, schema: Schema, params: AIMParams, n: int, facts: Facts | None = None
    ) -> dict[str, Sensitivity]:
        """Every statistic aim measures, from public facts: one histogram per column (and one
        over the declared cells per column cut by private mass, ``facts["cuts"]``), the
        target's tables (``facts["target_pairs"]``), and per round (``facts["rounds"]``, the
        noisy selections' outcome) its selection and its table."""
        h1, h2 = histogram_sensitivity("l1"), histogram_sensitivity("l2")
        out = one_way_sensitivities(schema, facts)
        for a, b in fact_names(facts, "target_pairs"):
            out[pair_name(schema.names, schema.names.index(a), schema.names.index(b))] = Sensitivity(
                "target", h1, h2, tight=True
            )
        for t, columns in enumerate(fact_names(facts, "rounds")):
            index = tuple(schema.names.index(c) for c in columns)
            out[f"select[{t}]"] = Sensitivity("select", None, None, linf=SCORE_SENSITIVITY)
            out[_name(schema.names, index, t)] = Sensitivity("measure", h1, h2, tight=True)
        return out

    histograms = staticmethod(histograms)
