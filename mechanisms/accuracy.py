"""The accuracy a noisy statistic's noise implies, from its mechanism and scale alone: no
data, so it can be published beside the statistic (``release.json``'s
``privacy.accuracy``, ``dprelease audit show``, the report).

Per entry of a statistic, the noise e has
* Gaussian of s.d. σ: sd = σ, E|e| = σ·√(2/π);
* Laplace of scale b: sd = √2·b, E|e| = b;
* discrete Laplace, P(e = k) ∝ q^|k| with q = e^(−1/b): sd = √(2q)/(1 − q),
  E|e| = 2q/(1 − q²);
* none (a value used without noise; the release is then not DP): 0.

For a **count table** over public cells (one-way histograms ``histogram[...]`` and, over a
column's declared cells, ``cuts[...]``, two-way
marginals ``marginal[...]`` (mst, aim), the
refine stage's ``pair[...]``, ron_gauss's ``class_counts``), whose counts sum to the public
n, the noise alone moves the normalised table by E‖e‖₁/(2n) = K·E|e|/(2n) in total
variation (K cells). This is the raw noise before post-processing (the projection onto the
simplex lowers it for sparse tables): a forecast, not a bound.
"""

from __future__ import annotations

import math

__all__ = ["COUNT_TABLES", "describe", "entry_noise", "expected_error", "is_count_table"]

COUNT_TABLES = ("histogram[", "cuts[", "pair[", "marginal[", "class_counts")


def entry_noise(mechanism: str, scale: float) -> tuple[float, float]:
    """(sd, E|e|) of the noise on one entry."""
    if mechanism == "gaussian":
        return scale, scale * math.sqrt(2 / math.pi)
    if mechanism == "laplace":
        return math.sqrt(2) * scale, scale
    if mechanism == "discrete_laplace":
        q = math.exp(-1 / scale) if scale > 0 else 0.0
        return math.sqrt(2 * q) / (1 - q), 2 * q / (1 - q * q)
    return 0.0, 0.0


def is_count_table(statistic: str) -> bool:
    return statistic.startswith(COUNT_TABLES)


def expected_error(statistic: str, mechanism: str, scale: float, dimension: int, n: int) -> dict:
    """The data-independent accuracy of one published statistic: per-entry sd and E|e|,
    and for a count table summing to n, the expected total-variation shift K·E|e|/(2n)."""
    sd, mean_abs = entry_noise(mechanism, scale)
    out = {"statistic": statistic, "noise_sd": sd, "expected_abs_error": mean_abs}
    if is_count_table(statistic):
        out["expected_tvd"] = dimension * mean_abs / (2 * n)
    return out


def describe(accuracy: dict | None) -> str:
    """One ``expected_error`` entry in words: "±E|e|", and ", TVD x" for a count table;
    "—" when there is none (a bundle from before it was published)."""
    if accuracy is None:
        return "—"
    text = f"±{accuracy['expected_abs_error']:.3g}"
    return text + f", TVD {accuracy['expected_tvd']:.2g}" if "expected_tvd" in accuracy else text
