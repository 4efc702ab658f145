"""The utility and linkage reports of one release, with their stated subsample sizes.

Both read confidential rows; their output goes to ``internal/`` only. Subsampling keeps
checks on 1M rows well under a minute: histograms, TVDs, Cramér's V and exact matches
use every row; the estimates below use at most the stated number of rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from dprelease.checks import linkage as lk
from dprelease.checks import utility as ut
from dprelease.mechanisms.schema import Schema

__all__ = ["LIMITS", "flat_metrics", "linkage_report", "utility_report"]

LIMITS = {
    "model_rows": 50_000,  # each of: TSTR training on real, on synthetic, TSTR test
    "pmse_rows": 10_000,  # each of: the real and the synthetic side of the pMSE classifier
    "spearman_rows": 200_000,
    "dcr_queries": 2_000,  # synthetic rows (and real rows, for the reference) whose DCR is computed
    "dcr_reference": 20_000,  # real rows they are compared with
    "link_queries": 2_000,
    "membership_rows": 10_000,  # training rows and holdout rows each
}


def _sample(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(n, size=k, replace=False)) if n > k else np.arange(n)


def _nulls(matrix: np.ndarray) -> list[list[float | None]]:
    """A matrix for JSON: an undefined (NaN) entry becomes null."""
    return [[float(v) if np.isfinite(v) else None for v in row] for row in matrix]


def _association_difference(a_real: np.ndarray, a_syn: np.ndarray) -> dict:
    """mean |a_real − a_syn| over the column pairs i < j whose association is defined on
    both sides; a pair with a one-valued column on either side is undefined (0/0, see
    ``utility.association_matrix``), counted in ``undefined_pairs`` and left out. No
    defined pair (e.g. every synthetic column one value, or one column): the mean is None."""
    upper = np.triu_indices(a_real.shape[0], 1)
    diff = np.abs(a_real - a_syn)[upper]
    defined = np.isfinite(diff)
    undefined = int((~defined).sum())
    return {
        "mean": float(diff[defined].mean()) if defined.any() else None,
        "pairs": int(diff.size),
        "undefined_pairs": undefined,
        "method": "Spearman's rho between continuous/ordinal columns; Cramér's V (public "
        "bins) for pairs with a nominal column",
        "undefined": "an association with a column that takes one value in the compared rows is 0/0: "
        "null in the matrices and left out of the mean"
        if undefined
        else None,
        "real": _nulls(a_real),
        "synthetic": _nulls(a_syn),
    }


def _silent(step: str) -> None:
    """No progress display."""


def utility_report(
    real: pd.DataFrame,
    real_bins: np.ndarray,
    synthetic: pd.DataFrame,
    syn_bins: np.ndarray,
    schema: Schema,
    *,
    target: str | None,
    real_test: pd.DataFrame | None,
    rng: np.random.Generator,
    progress: Callable[[str], None] = _silent,
) -> dict:
    """``real`` is what the release was fitted on; ``real_test`` the holdout (if any).
    ``progress`` is told each step as it starts (the CLI's display)."""
    progress("marginals, pairs and associations")
    seed = int(rng.integers(2**31))
    r_spear = _sample(len(real), LIMITS["spearman_rows"], rng)
    s_spear = _sample(len(synthetic), LIMITS["spearman_rows"], rng)
    a_real = ut.association_matrix(real_bins[r_spear], real.iloc[r_spear], schema)
    a_syn = ut.association_matrix(syn_bins[s_spear], synthetic.iloc[s_spear], schema)
    report = {
        "tvd_1way": ut.tvd_1way(real_bins, syn_bins, schema),
        "tvd_2way": ut.tvd_2way(real_bins, syn_bins, schema, rng),
        "corr_diff": _association_difference(a_real, a_syn),
        "wasserstein_scaled": ut.wasserstein_scaled(real, synthetic, schema),
        "limits": LIMITS,
    }
    progress("pMSE: can a classifier tell real from synthetic rows?")
    k = LIMITS["pmse_rows"]
    r_idx, s_idx = _sample(len(real), k, rng), _sample(len(synthetic), k, rng)
    report["pmse"] = ut.pmse(real.iloc[r_idx], synthetic.iloc[s_idx], schema, seed=seed)
    k = LIMITS["model_rows"]
    s_idx = _sample(len(synthetic), k, rng)
    if target is not None:
        progress(f"TSTR: models of {target} trained on synthetic, tested on real rows")
        if real_test is None:  # no holdout: an 80/20 split of the fitted rows
            perm = rng.permutation(len(real))
            cut = int(0.8 * len(real))
            train, test = real.iloc[perm[:cut]], real.iloc[perm[cut:]]
            note = "TRTR on an 80/20 split of the rows the release was fitted on; TSTR tested on the 20 %"
        else:
            train, test = real, real_test
            note = "tested on the holdout rows, which the release never saw"
        train = train.iloc[_sample(len(train), k, rng)]
        test = test.iloc[_sample(len(test), k, rng)]
        report["tstr"] = {
            **ut.tstr(train, test, synthetic.iloc[s_idx], schema, target, seed=seed),
            "note": note,
        }
    return report


def linkage_report(
    real: pd.DataFrame,
    real_bins: np.ndarray,
    synthetic: pd.DataFrame,
    syn_bins: np.ndarray,
    schema: Schema,
    *,
    keeps_row_order: bool,
    holdout: tuple[pd.DataFrame, np.ndarray] | None,
    rng: np.random.Generator,
    progress: Callable[[str], None] = _silent,
) -> dict:
    """DCR (synthetic → real, and real → nearest other real as the reference), exact and
    unique exact matches, correct links (row-preserving mechanisms), membership share.
    ``progress`` is told each step as it starts."""
    progress("distances to the closest real record")
    f_real, nominal = lk.gower_features(real, real_bins, schema)
    f_syn, _ = lk.gower_features(synthetic, syn_bins, schema)
    ref = _sample(len(real), LIMITS["dcr_reference"], rng)
    queries = _sample(len(synthetic), LIMITS["dcr_queries"], rng)
    d_syn, _ = lk.nearest(f_syn[queries], f_real[ref], nominal)
    own = _sample(len(ref), min(LIMITS["dcr_queries"], len(ref)), rng)  # positions within ref
    d_real, _ = lk.nearest(f_real[ref[own]], f_real[ref], nominal, self_index=own)
    report = {
        "distance": "Gower: mean over columns of |x-y|/public range (continuous), |i-j|/(L-1) "
        "(ordinal), mismatch (nominal)",
        "dcr_synthetic_to_real": lk.dcr_summary(d_syn),
        "dcr_real_to_real": lk.dcr_summary(d_real),
        "exact_match_distance": lk.EXACT_MATCH_DISTANCE,
        **lk.exact_match_rates(real, synthetic),
        "correct_link_rate": None,
        "membership_share": None,
        "limits": LIMITS,
    }
    if keeps_row_order and len(synthetic) == len(real):
        progress("correct links (the mechanism keeps row order)")
        rows = _sample(len(real), LIMITS["link_queries"], rng)
        others = np.setdiff1d(_sample(len(real), LIMITS["dcr_reference"], rng), rows)
        ref_rows = np.union1d(rows, others[: max(0, LIMITS["dcr_reference"] - len(rows))])
        report["correct_link_rate"] = lk.correct_link_rate(f_real, f_syn, nominal, rows, ref_rows)
    if holdout is not None:
        progress("membership: held-out rows vs fitted rows")
        h_df, h_bins = holdout
        f_hold, _ = lk.gower_features(h_df, h_bins, schema)
        k = min(LIMITS["membership_rows"], len(h_df), len(real))
        report["membership_share"] = lk.membership_share(
            f_real[_sample(len(real), k, rng)], f_hold[_sample(len(h_df), k, rng)], f_syn[queries], nominal
        )
        report["membership_rows_each"] = k
    return report


def flat_metrics(utility: dict, linkage: dict) -> dict[str, float | None]:
    """The scalar metrics a gate can bound."""
    tstr = utility.get("tstr", {})
    wass = utility["wasserstein_scaled"]
    return {
        "tvd_1way": utility["tvd_1way"]["mean"],
        "tvd_2way": utility["tvd_2way"]["mean"],
        "corr_diff": utility["corr_diff"]["mean"],
        "pmse": utility["pmse"]["pmse"],
        "wasserstein_max": max((v for v in wass.values() if v is not None), default=None),
        "tstr_auc": tstr.get("tstr") if tstr.get("metric") == "roc_auc" else None,
        "tstr_r2": tstr.get("tstr") if tstr.get("metric") == "r2" else None,
        "tstr_ratio": tstr.get("ratio"),
        "exact_match_rate": linkage["exact_match_rate"],
        "unique_exact_match_rate": linkage["unique_exact_match_rate"],
        "dcr_q05": linkage["dcr_synthetic_to_real"]["quantiles"]["q05"],
        "correct_link_rate": linkage["correct_link_rate"],
        "membership_share": linkage["membership_share"],
    }
