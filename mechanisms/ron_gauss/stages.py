"""``ron_gauss`` end to end: the four pipeline stages (``RonGauss``; ``RonGauss().fit``
runs them in one call), the sensitivities from public
facts and the steps' states (``Encoded``; the ``RonGaussModel``; ``Sample``: the synthetic
rows in R^p as the paper releases them, for benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.design import Design, design
from dprelease.mechanisms.marginals import histogram_sensitivity
from dprelease.mechanisms.primitives import stage_noise
from dprelease.mechanisms.ron_gauss.centring import Centred, centre, mean_sensitivity
from dprelease.mechanisms.ron_gauss.model import RonGaussModel, build_model, reconstruct, sample_projected
from dprelease.mechanisms.ron_gauss.moments import (
    _projection,
    covariance_sensitivity,
    default_dims,
    measure_covariance,
)
from dprelease.mechanisms.ron_gauss.params import _LABEL_BOUND, RonGaussParams, defects, stage_weights
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.synthesizer import (
    Facts,
    HistogramNoise,
    MixedRows,
    Sensitivity,
    Stage,
    Synthesizer,
)

__all__ = ["Encoded", "RonGauss", "Sample", "check", "class_count_noise", "sensitivities"]


# --- the four pipeline stages -------------------------------------------------------


def _layout(schema: Schema, params: RonGaussParams) -> tuple[Design, int | None]:
    """The design of the feature columns and the label's position (None: unsupervised)."""
    if params.label is None:
        return design(schema), None
    j = schema.names.index(params.label)
    return design(Schema(schema.columns[:j] + schema.columns[j + 1 :])), j


def check(schema: Schema, params: RonGaussParams) -> None:
    """The label fits the task and the schema; ``dims`` fits the design width."""
    if params.task == "unsupervised" and params.label is not None:
        raise ValueError(f"params.label ({params.label!r}) must be None for task 'unsupervised'")
    if params.task != "unsupervised":
        wanted = ("continuous",) if params.task == "regression" else ("nominal", "ordinal")
        if params.label not in schema.names:
            raise ValueError(f"params.label ({params.label!r}) must name a schema column: {schema.names}")
        if schema[params.label].kind not in wanted:
            raise ValueError(
                f"params.label ({params.label!r}) must be a {' or '.join(wanted)} column for task "
                f"{params.task!r}, not {schema[params.label].kind}"
            )
        if len(schema) < 2:
            raise ValueError(f"params.label ({params.label!r}) must leave at least one feature column")
    width = _layout(schema, params)[0].width
    if params.dims is not None and params.dims > width:
        raise ValueError(f"params.dims ({params.dims}) must be at most the design width ({width})")


def class_count_noise(
    schema: Schema, params: RonGaussParams, plan: BudgetPlan, n: int | None
) -> list[HistogramNoise]:
    """The ``class_counts`` histogram's noise (corrected classification; the paper variant
    and the other tasks publish no histogram), from public facts, as ``centre`` draws it:
    the whole stage on the label's L public classes at Δ₂ = √2 / Δ₁ = 2
    (``histogram_sensitivity``), calibrated by ``primitives.stage_noise``."""
    if params.task != "classification" or params.variant == "paper" or params.label is None:
        return []
    kind, scale = stage_noise(
        plan.stage("class_counts"),
        l2_sensitivity=histogram_sensitivity("l2"),
        l1_sensitivity=histogram_sensitivity("l1"),
    )
    return [HistogramNoise("class_counts", params.label, schema[params.label].n_bins, kind, scale)]


def sensitivities(
    schema: Schema, params: RonGaussParams, n: int, facts: Facts | None = None
) -> dict[str, Sensitivity]:
    """Every statistic ron_gauss measures (corrected), from public facts: the design
    width m of the features, the projected dimension p (``params.dims`` or Meckes' rule)
    and n. Unsupervised / regression: ``mean`` (``mean_sensitivity``), then the second
    moment (``covariance_sensitivity``, with the label bound for regression).
    Classification: ``class_counts`` (histogram, 2 / √2), ``class_sums`` and the per-class
    second-moment sums (n = 1 in both, the sums are not divided). Tight: the counts, and
    the per-class second moment (a record moving class, released class means μ_c that
    centre it at x̃ = ±e₁ in both classes give Δ₂ = √2; at x̃ = s/√p, s ∈ {±1}^p, Δ₁ = p + 1)."""
    m = _layout(schema, params)[0].width
    p = params.dims or default_dims(m)
    label = _LABEL_BOUND if params.task == "regression" else None
    n_eff = 1 if params.task == "classification" else n

    def second(norm: str) -> float:
        return covariance_sensitivity(p, n_eff, variant="corrected", norm=norm, label_bound=label)

    tight = params.task == "classification"
    out = {"second_moment": Sensitivity("covariance", second("l1"), second("l2"), tight=tight)}
    if params.task == "classification":
        out["class_counts"] = Sensitivity(
            "class_counts", histogram_sensitivity("l1"), histogram_sensitivity("l2"), tight=True
        )
        out["class_sums"] = Sensitivity("mean", mean_sensitivity(m, 1, "l1"), mean_sensitivity(m, 1, "l2"))
    else:
        out["mean"] = Sensitivity("mean", mean_sensitivity(m, n, "l1"), mean_sensitivity(m, n, "l2"))
    return out


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the centred rows and what was released to centre them
    (``Centred``, confidential rows), and the design's public row bound B."""

    centred: Centred
    row_bound: float


@dataclass(frozen=True)
class Sample:
    """The sample stage's state (``Fit.stages[2].state``): ``rows`` x̂ (m, design width)
    in design coordinates (``reconstruct``), what ``decode`` maps to the schema;
    ``labels`` (regression: y, not clipped; classification: class indices; else None);
    ``projected``: the same rows in the model's R^p (``sample_projected``), as the paper
    releases them. Post-processing of the model; the reproductions score ``projected``."""

    rows: np.ndarray = field(repr=False)
    labels: np.ndarray | None = field(repr=False)
    projected: np.ndarray = field(repr=False)


class RonGauss(Synthesizer[RonGaussParams, Encoded, RonGaussModel, Sample]):
    """RON-Gauss: private mean, random orthonormal projection, private second moment
    (Gaussian, label-augmented, or one Gaussian per class) -> fresh rows mapped back

    ron_gauss's four steps (the package's docstring states the stages, their Δ and noise)."""

    name = "ron_gauss"
    notions = ("pure", "zcdp")
    spends = {"encode": ("class_counts", "mean"), "estimate": ("covariance",)}

    def stage_weights(self, schema: Schema, params: RonGaussParams) -> dict[str, float]:
        return stage_weights(params.task, params.variant)

    defects = staticmethod(defects)
    check = staticmethod(check)

    def encode(
        self,
        rows: MixedRows,
        schema: Schema,
        plan: BudgetPlan,
        params: RonGaussParams,
        rng: np.random.Generator,
    ) -> Stage[Encoded]:
        features, j = _layout(schema, params)
        keep = [k for k in range(len(schema)) if k != j]
        x = features.encode(MixedRows(rows.bins[:, keep], None if rows.unit is None else rows.unit[:, keep]))
        target: np.ndarray | None = None
        if params.task == "regression":
            target = _LABEL_BOUND * (2.0 * rows.require_unit()[:, j] - 1.0)
        elif params.task == "classification":
            target = rows.bins[:, j].astype(int)
        centred = centre(
            x,
            target,
            task=params.task,
            variant=params.variant,
            normalise=params.normalise_mode,
            row_bound=features.max_norm,
            n_classes=None if j is None else schema.columns[j].n_bins,
            parts={s.stage: s for s in plan.stages},
            rng=rng,
        )
        facts: dict[str, object] = {
            "dims": params.dims or default_dims(features.width),
            "dims_note": "given in the spec"
            if params.dims
            else "Meckes' rule floor(2 ln m / ln ln m), m = design width",
            "projection": params.projection_kind,
            "normalise": params.normalise_mode,
        }
        return Stage(Encoded(centred, features.max_norm), centred.measurements, facts)

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: RonGaussParams, rng: np.random.Generator
    ) -> Stage[RonGaussModel]:
        centred = state.centred
        m = centred.rows.shape[1]
        w = _projection(params.projection_kind, m, params.dims or default_dims(m), rng)
        cov = measure_covariance(
            centred,
            w,
            plan.stage("covariance"),
            task=params.task,
            variant=params.variant,
            label_bound=_LABEL_BOUND,
            rng=rng,
        )
        model = build_model(
            centred,
            w,
            cov,
            task=params.task,
            variant=params.variant,
            normalise=params.normalise_mode,
            row_bound=state.row_bound,
        )
        facts: dict[str, object] = {"clipped_eigenvalue_mass": model.clipped_mass}
        if model.proportions is not None:
            facts["class_proportions"] = [float(q) for q in model.proportions]
        return Stage(model, (cov,), facts)

    def sample(
        self, state: RonGaussModel, params: RonGaussParams, m: int, rng: np.random.Generator
    ) -> Stage[Sample]:
        z, labels = sample_projected(state, m, rng)
        return Stage(Sample(reconstruct(state, z, labels), labels, z))

    def decode(
        self, state: Sample, schema: Schema, params: RonGaussParams, rng: np.random.Generator
    ) -> MixedRows:
        x, labels = state.rows, state.labels
        features, j = _layout(schema, params)
        rows = features.decode(x)
        if j is None:
            return rows
        if labels is None:
            raise ValueError(f"params.label ({params.label!r}) needs the sampled labels")
        column = schema.columns[j]
        if isinstance(column, Continuous):
            unit = np.clip((labels / _LABEL_BOUND + 1.0) / 2.0, 0.0, 1.0)
            bins = column.to_bins(column.from_unit(unit))
        else:
            unit, bins = np.full(len(labels), np.nan), labels
        unit_rows = np.insert(rows.require_unit(), j, unit, axis=1)
        return MixedRows(np.insert(rows.bins, j, bins, axis=1), unit_rows)

    sensitivities = staticmethod(sensitivities)

    def histograms(
        self, schema: Schema, params: RonGaussParams, plan: BudgetPlan, n: int | None
    ) -> list[HistogramNoise]:
        return class_count_noise(schema, params, plan, n)
