"""Additive-noise primitives and the frozen record every noisy output travels in.

``Measurement`` holds the noisy value *and* how it was made (mechanism, sensitivity and
its norm, noise scale, ρ or ε). The ledger and the audit bundle serialise these records;
they never recompute a scale.

Noise uses numpy's ``Generator.normal`` / ``Generator.laplace`` on doubles. That is the
textbook float sampler (Mironov 2012 shows its low bits can leak); the bundle states it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mechanisms.accounting import StageBudget
from mechanisms.errors import BudgetError

__all__ = [
    "FLOAT_SAMPLER_NOTE",
    "Measurement",
    "gaussian_mechanism",
    "gaussian_sigma",
    "laplace_mechanism",
    "laplace_scale",
    "measure",
    "measure_stage",
    "unprotected",
]

FLOAT_SAMPLER_NOTE = (
    "noise drawn with numpy's floating-point normal/laplace samplers; the guarantee is "
    "for idealised real arithmetic (see Mironov 2012 on floating-point leakage)"
)


@dataclass(frozen=True)
class Measurement:
    """A noisy statistic and the facts an auditor needs to check it.

    ``defect`` is None for a measurement whose cost is a valid DP guarantee; otherwise it
    says why not (a paper's too-small sensitivity, sorted noise, a value used without
    noise). The ledger then marks the release *not differentially private*.
    """

    name: str
    stage: str
    value: np.ndarray
    mechanism: Literal["gaussian", "laplace", "discrete_laplace", "none"]
    sensitivity: float
    norm: Literal["l1", "l2"]
    scale: float
    rho: float | None
    epsilon: float | None
    defect: str | None = None

    def ledger_row(self) -> dict:
        """Everything but the value: safe to publish."""
        return {
            "stage": self.stage,
            "statistic": self.name,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity,
            "sensitivity_norm": self.norm,
            "noise_scale": self.scale,
            "rho": self.rho,
            "epsilon": self.epsilon,
            "dimension": int(np.size(self.value)),
            "differentially_private": self.defect is None,
            "defect": self.defect,
        }


def gaussian_sigma(l2_sensitivity: float, rho: float) -> float:
    """σ = Δ₂ / √(2ρ) gives ρ-zCDP (Bun & Steinke 2016, Prop. 1.6); rounded up."""
    if not (rho > 0 and math.isfinite(rho)):
        raise BudgetError(f"rho ({rho}) must be a finite number > 0")
    return math.nextafter(l2_sensitivity / math.sqrt(2 * rho), math.inf)


def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """b = Δ₁ / ε gives ε-DP (Dwork et al. 2006); rounded up."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise BudgetError(f"epsilon ({epsilon}) must be a finite number > 0")
    return math.nextafter(l1_sensitivity / epsilon, math.inf)


def gaussian_mechanism(
    value: np.ndarray,
    *,
    l2_sensitivity: float,
    rho: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """value + N(0, σ²I) with σ = Δ₂/√(2ρ): ρ-zCDP for a query of L2 sensitivity Δ₂."""
    sigma = gaussian_sigma(l2_sensitivity, rho)
    noisy = np.asarray(value, dtype=float) + rng.normal(0.0, sigma, size=np.shape(value))
    return Measurement(name, stage, noisy, "gaussian", l2_sensitivity, "l2", sigma, rho, None)


def laplace_mechanism(
    value: np.ndarray,
    *,
    l1_sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """value + Lap(b)^d with b = Δ₁/ε: ε-DP for a query of L1 sensitivity Δ₁."""
    b = laplace_scale(l1_sensitivity, epsilon)
    noisy = np.asarray(value, dtype=float) + rng.laplace(0.0, b, size=np.shape(value))
    return Measurement(name, stage, noisy, "laplace", l1_sensitivity, "l1", b, None, epsilon)


def measure(
    value: np.ndarray,
    *,
    share: float,
    zcdp: bool,
    l2_sensitivity: float,
    l1_sensitivity: float,
    rng: np.random.Generator,
    name: str,
    stage: str,
) -> Measurement:
    """The accountant's mechanism for a budget share: Gaussian with ρ = ``share`` under
    zCDP, Laplace with ε = ``share`` under pure DP."""
    if zcdp:
        return gaussian_mechanism(
            value, l2_sensitivity=l2_sensitivity, rho=share, rng=rng, name=name, stage=stage
        )
    return laplace_mechanism(
        value, l1_sensitivity=l1_sensitivity, epsilon=share, rng=rng, name=name, stage=stage
    )


def measure_stage(
    value: np.ndarray,
    budget: StageBudget,
    *,
    l2_sensitivity: float,
    l1_sensitivity: float,
    rng: np.random.Generator,
    name: str,
) -> Measurement:
    """``measure`` with a stage's whole share: Gaussian with its ρ under zCDP, Laplace with
    its ε under pure DP; the record carries the stage's name."""
    zcdp = budget.rho is not None
    return measure(
        value,
        share=budget.rho if zcdp else budget.epsilon,
        zcdp=zcdp,
        l2_sensitivity=l2_sensitivity,
        l1_sensitivity=l1_sensitivity,
        rng=rng,
        name=name,
        stage=budget.stage,
    )


def unprotected(value: np.ndarray, *, name: str, stage: str, defect: str) -> Measurement:
    """A value computed from the data and used *without* noise (only a paper-literal
    variant does this): recorded so the ledger shows it and marks the release non-DP."""
    return Measurement(
        name, stage, np.asarray(value, dtype=float), "none", 0.0, "l1", 0.0, None, None, defect
    )
