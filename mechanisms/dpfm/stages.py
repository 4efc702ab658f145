"""``dpfm`` end to end: the four pipeline steps (``DPFM``; ``DPFM().fit`` runs
Algorithm 3 in one call), the sensitivities from public facts, the ε = ∞ ablation
(``fit_without_noise``, not a release) and ``internals`` for diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.dpfm.budget import _paper_notion, _part, stage_weights
from dprelease.mechanisms.dpfm.factors import (
    choose_factors,
    loadings_sensitivity,
    private_loadings,
    private_scores,
    reconstruct,
    scores_sensitivity,
    top_eigenvectors,
)
from dprelease.mechanisms.dpfm.links import Code, decode_latent, encode_rows, make_code
from dprelease.mechanisms.dpfm.params import DPFMParams, _check, _kinds, defects, encoded_width
from dprelease.mechanisms.dpfm.thresholds import measure_thresholds, threshold_sensitivity
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.schema import Ordinal, Schema
from dprelease.mechanisms.synthesizer import Facts, Fit, MixedRows, Sensitivity, Stage, Synthesizer

__all__ = [
    "DPFM",
    "Encoded",
    "Factored",
    "Internals",
    "Latent",
    "fit_without_noise",
    "internals",
    "sensitivities",
]


def sensitivities(
    schema: Schema, params: DPFMParams, n: int, facts: Facts | None = None
) -> dict[str, Sensitivity]:
    """Every statistic dpfm measures (corrected), from public facts: the ordinal
    cumulative frequencies when the schema has ordinal columns (``threshold_sensitivity``,
    attained), the top-r eigenvectors (``loadings_sensitivity``, p* = ``encoded_width``)
    and the factor scores (``scores_sensitivity``). r is the public ``params.factors``."""
    levels = [schema.columns[j].n_bins for j in _kinds(schema, Ordinal)]
    r, p_star = params.factors, encoded_width(schema)
    if r is None:
        raise ValueError("params.factors (None) must be an integer: the sensitivities need the public r")
    out = {
        "top_eigenvectors": Sensitivity(
            "loadings", loadings_sensitivity(p_star, r, "l1"), loadings_sensitivity(p_star, r, "l2")
        ),
        "factor_scores": Sensitivity("scores", scores_sensitivity(r, "l1"), scores_sensitivity(r, "l2")),
    }
    if levels:
        out["ordinal_cumulative_frequencies"] = Sensitivity(
            "thresholds",
            threshold_sensitivity(levels, n, "l1"),
            threshold_sensitivity(levels, n, "l2"),
            tight=True,
        )
    return out


@dataclass(frozen=True)
class Encoded:
    """The encode step's state: the confidential encoded rows X* and their link code."""

    x: np.ndarray = field(repr=False)
    code: Code


@dataclass(frozen=True)
class Factored:
    """The estimate step's state: the encoded rows, the released loadings Ṽ (p*, r) and
    the plan the scores are drawn from (None: the ε = ∞ ablation, no noise)."""

    encoded: Encoded
    loadings: np.ndarray = field(repr=False)
    plan: BudgetPlan | None


@dataclass(frozen=True)
class Latent:
    """The sample step's state: the synthetic latent X̃* (n, p*), one row per input row,
    and the link code that decodes it."""

    latent: np.ndarray = field(repr=False)
    code: Code


def _encode(
    rows: MixedRows, schema: Schema, plan: BudgetPlan | None, params: DPFMParams, rng: np.random.Generator
) -> tuple[Encoded, tuple[Measurement, ...]]:
    """Thresholds first (corrected: the encoding uses them), then the link code and X*."""
    _check(schema, params)
    part = _part(plan, "thresholds") if _kinds(schema, Ordinal) else None  # no ordinal: no stage
    thresholds, measured = measure_thresholds(rows, schema, part, params, rng=rng)
    code, records = make_code(rows, schema, thresholds, params)
    return Encoded(encode_rows(rows, schema, code, rng=rng), code), (*records, *measured)


def _estimate(
    encoded: Encoded, plan: BudgetPlan | None, params: DPFMParams, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, str, tuple[Measurement, ...]]:
    """r, then Ṽ from the noisy top-r eigenvectors; also the exact V (confidential)."""
    x = encoded.x
    v_all, nu = top_eigenvectors(x, x.shape[1])
    r, note, records = choose_factors(nu, x.shape[0], params, "loadings")
    v_tilde, m = private_loadings(v_all[:, :r], _part(plan, "loadings"), rng=rng)
    return v_tilde, v_all[:, :r], note, (*records, *(() if m is None else (m,)))


def _sample(
    encoded: Encoded,
    v_tilde: np.ndarray,
    plan: BudgetPlan | None,
    params: DPFMParams,
    rng: np.random.Generator,
) -> tuple[np.ndarray, tuple[Measurement, ...]]:
    w, m = private_scores(encoded.x, v_tilde, _part(plan, "scores"), params, rng=rng)
    return reconstruct(w, v_tilde, encoded.code), (() if m is None else (m,))


def _public_cdfs(schema: Schema, code: Code) -> dict[str, list[float]]:
    names = [schema.columns[j].name for j in _kinds(schema, Ordinal)]
    return {name: [float(v) for v in cdf] for name, cdf in zip(names, code.decode_cdfs, strict=True)}


def _encode_facts(schema: Schema, encoded: Encoded) -> dict[str, object]:
    return {
        "encoded_width": encoded.x.shape[1],
        "clip": encoded.code.clip,
        "ordinal_cumulative_frequencies": _public_cdfs(schema, encoded.code),
    }


def _factor_facts(v_tilde: np.ndarray, note: str) -> dict[str, object]:
    return {"factors_used": v_tilde.shape[1], "factors_note": note}


def fit_without_noise(
    rows: MixedRows, schema: Schema, params: DPFMParams, *, rng: np.random.Generator
) -> Fit:
    """The ε = ∞ ablation of Algorithm 3: **not private and not a release** (no noise
    anywhere: exact ordinal frequencies, exact top-r eigenvectors, exact factor scores).
    For benchmarks and tests that measure what the factor model loses by itself; the
    flow never calls it and it takes no ε.

    The same steps as ``DPFM.fit`` without a plan: the result has the same stages
    (their states as the pipeline's, with ``None`` for the plan), the same facts, no
    measurements, and n rows, row i from input row i; ``internals`` reads it.
    """
    encoded, _ = _encode(rows, schema, None, params, rng)
    v_tilde, _, note, _ = _estimate(encoded, None, params, rng)
    latent, _ = _sample(encoded, v_tilde, None, params, rng)
    stages: tuple[Stage[object], ...] = (
        Stage(encoded, (), _encode_facts(schema, encoded)),
        Stage(Factored(encoded, v_tilde, None), (), _factor_facts(v_tilde, note)),
        Stage(Latent(latent, encoded.code)),
    )
    facts = {k: v for st in stages for k, v in st.facts.items()}
    return Fit(decode_latent(latent, schema, encoded.code, params), (), facts, stages)


@dataclass(frozen=True)
class Internals:
    """What a dpfm fit holds beyond its rows, for diagnostics (confidential: never
    released). ``latent``: the synthetic latent X̃* (n, p*); ``loadings``: the released Ṽ
    (p*, r); ``exact_loadings``: the exact top-r eigenvectors V of X*ᵀX* (for the subspace
    overlap ‖ṼᵀV‖²_F / r, say)."""

    latent: np.ndarray = field(repr=False)
    loadings: np.ndarray = field(repr=False)
    exact_loadings: np.ndarray = field(repr=False)


def internals(fit: Fit) -> Internals:
    """The ``Internals`` of a dpfm ``Fit`` (``DPFM.fit`` or ``fit_without_noise``),
    read from its stages' states; V is recomputed from the encoded rows X* (the same
    eigendecomposition the estimate step ran)."""
    factored, sampled = fit.stages[1].state, fit.stages[2].state
    if not isinstance(factored, Factored) or not isinstance(sampled, Latent):
        raise TypeError("internals reads the stages of a dpfm fit (Factored, Latent)")
    exact, _ = top_eigenvectors(factored.encoded.x, factored.loadings.shape[1])
    return Internals(sampled.latent, factored.loadings, exact)


# ---------------------------------------------------------------- the four pipeline steps


class DPFM(Synthesizer[DPFMParams, Encoded, Factored, Latent]):
    """latent factor model (Zhang-Xu-Tang-Qu): private ordinal thresholds, noisy top-r
    eigenvectors and noisy factor scores; one output row per input row

    dpfm's four steps (the package's docstring states the stages, their Δ and noise)."""

    name = "dpfm"
    notions = ("pure", "zcdp")
    spends = {"encode": ("thresholds",), "estimate": ("loadings",), "sample": ("scores",)}
    keeps_row_order = True

    stage_weights = staticmethod(stage_weights)
    defects = staticmethod(defects)

    def check(self, schema: Schema, params: DPFMParams) -> None:
        _check(schema, params)

    def encode(
        self, rows: MixedRows, schema: Schema, plan: BudgetPlan, params: DPFMParams, rng: np.random.Generator
    ) -> Stage[Encoded]:
        _paper_notion(params, plan.notion)
        encoded, measurements = _encode(rows, schema, plan, params, rng)
        return Stage(encoded, measurements, _encode_facts(schema, encoded))

    def estimate(
        self, state: Encoded, plan: BudgetPlan, params: DPFMParams, rng: np.random.Generator
    ) -> Stage[Factored]:
        encoded = state  # tests/mutants.py edits the next line by its text
        v_tilde, _, note, measurements = _estimate(encoded, plan, params, rng)
        return Stage(Factored(encoded, v_tilde, plan), measurements, _factor_facts(v_tilde, note))

    def sample(self, state: Factored, params: DPFMParams, m: int, rng: np.random.Generator) -> Stage[Latent]:
        n = state.encoded.x.shape[0]
        if m != n:
            raise ValueError(
                f"dpfm releases exactly one row per fitted input row (asked for {m}, fitted {n}); "
                "remove synthetic_rows from the spec"
            )
        latent, measurements = _sample(state.encoded, state.loadings, state.plan, params, rng)
        return Stage(Latent(latent, state.encoded.code), measurements)

    def decode(
        self, state: Latent, schema: Schema, params: DPFMParams, rng: np.random.Generator
    ) -> MixedRows:
        return decode_latent(state.latent, schema, state.code, params)

    sensitivities = staticmethod(sensitivities)
