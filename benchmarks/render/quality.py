"""The section of item 15 (``quality``): one table per (data table, ε) of the judge's figures,
and the picture of quality against ε (``draw``, called by ``run.py`` and ``quality.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIGURE_REL = "benchmarks/figures/quality_vs_epsilon.png"
"""Where the picture is written, relative to the repository (BENCHMARKS.md links it)."""

COLUMNS = (
    ("tvd_1way", "1-way TVD ↓", ".3f"),
    ("tvd_2way", "2-way TVD ↓", ".3f"),
    ("assoc_diff", "assoc. diff ↓", ".3f"),
    ("tstr_auc", "TSTR AUC ↑", ".3f"),
    ("pmse", "pMSE ↓", ".3f"),
    ("atom_err", "atom err ↓", ".3f"),
)
PANELS = (
    ("tstr_auc", "TSTR ROC-AUC (↑)"),
    ("pmse", "raw pMSE (↓; 0.25 separable)"),
    ("tvd_2way", "2-way TVD, judge cells (↓)"),
    ("assoc_diff", "association diff (↓)"),
)
STYLE = {
    "factor_gauss_today": ("tab:blue", "o"),
    "factor_gauss": ("tab:green", "s"),
    "mst": ("tab:orange", "^"),
    "aim": ("tab:red", "v"),
}


def _pm(s: dict[str, Any] | None, fmt: str) -> str:
    """'mean ± half range' over seeds ('mean' alone for one seed)."""
    if s is None:
        return "n/a"
    half = (s["max"] - s["min"]) / 2
    return f"{s['mean']:{fmt}}" if len(s["per_seed"]) == 1 else f"{s['mean']:{fmt}} ± {half:{fmt}}"


def _status(m: dict[str, Any], timeout_s: float) -> str:
    if not m.get("available", True):
        return "not available (spec fields not accepted yet)"
    statuses = sorted({r["status"] for r in m["runs"]})
    if statuses == ["timeout"]:
        r = m["runs"][0]
        extra = f"; killed after {r['rounds_done']} rounds" if r.get("rounds_done") else ""
        return f"did not finish in {timeout_s:.0f} s{extra}"
    return "failed (" + ", ".join(statuses) + ")"


def _table(t: dict[str, Any], eps: str, f: dict[str, Any]) -> list[str]:
    p = len(t["columns"])
    head = "| method | fit + sample | " + " | ".join(c[1] for c in COLUMNS) + f" | 1-way < uniform (of {p}) |"
    lines = [head, "|---|---:|" + "---:|" * (len(COLUMNS) + 1)]
    for m in t["results"].get(eps, {}).values():
        if not m.get("completed"):
            lines.append(f"| {m['label']} | {_status(m, f['aim_timeout_s'])} |" + " |" * (len(COLUMNS) + 1))
            continue
        x = m["metrics"]
        cells = [_pm(x.get(k), fmt) for k, _, fmt in COLUMNS]
        beats = x.get("beats_uniform")
        bu = (
            "n/a"
            if beats is None
            else _pm(beats, ".1f")
            if beats["max"] != beats["min"]
            else f"{beats['mean']:.0f}"
        )
        failed = len(m["runs"]) - m["completed"]
        took = _pm(m["total_s"], ".2f") + " s" + (f" ({failed} runs failed)" if failed else "")
        lines.append(f"| {m['label']} | {took} | " + " | ".join(cells) + f" | {bu} |")
    for ref, label in (
        ("resample", "reference: resample of the real 80 % (no privacy)"),
        ("uniform", "reference: uniform over the declared domain"),
    ):
        u = t.get(ref)
        if u is None:
            continue
        cells = ["n/a" if u.get(k) is None else f"{u[k]:{fmt}}" for k, _, fmt in COLUMNS]
        beats = "–" if u.get("beats_uniform") is None else str(u["beats_uniform"])
        lines.append(f"| {label} | – | " + " | ".join(cells) + f" | {beats} |")
    return lines


def render(f: dict[str, Any]) -> list[str]:
    eps_list = ", ".join(f"{e:g}" for e in f["epsilons"])
    j = f["judge"]
    env = f.get("peer_env") or {}
    pk = ", ".join(f"{k} {v}" for k, v in env.get("packages", {}).items()) or "no peer run finished"
    lines = [
        f"ε ∈ {{{eps_list}}}, δ = {f['delta']:g}, {f['seeds']} seed(s) per (table, ε, method); figures are "
        "the mean over seeds ± half their range. Each table is split 80/20 (seed 0); every method is fitted "
        "on the 80 % and returns as many rows. `factor_gauss (copula only)` is the table's spec without the "
        "continuous columns' `atoms`, `values`, `bins` and `decimals` and without `mechanism.params.target` "
        "(no `refine` stage): the copula of before issue 16, except that the resolution rule merges "
        "intervals; `factor_gauss` is the full spec; both in-process with their spec's `mechanism.params` "
        "and stage weights (no gates). MST and AIM "
        f"(smartnoise-synth in `{f.get('peer_python')}`: {pk}) get the same training rows as public-cell "
        f"indices of the full spec (when it loads), are decoded by `bins_to_table`; AIM is killed after "
        f"{f['aim_timeout_s']:.0f} s. Times: fit + sample (for `factor_gauss` also the in-process encoding "
        "and decoding, milliseconds; for MST and AIM without starting the peer python), on a shared "
        "2-core machine.",
        "",
        f"**The judge** ignores every spec's cells: each continuous column is cut into {j['bins']} "
        f"equal-width intervals over its declared bounds plus one cell per exact value holding "
        f"≥ {j['atom_share']:.0%} of the real training rows; levels and categories as declared. "
        "1-way TVD: mean over columns; 2-way TVD: "
        f"mean over column pairs (at most {j['max_pairs']}, a fixed random sample); association diff: mean "
        f"|real − synthetic| over pairs of the association matrix ({j['association']}); TSTR: "
        "HistGradientBoosting trained on the synthetic rows, ROC-AUC on the real 20 % (TRTR: trained on the "
        "real 80 %); pMSE on the raw decoded values (3-fold HistGradientBoosting propensity; 0 "
        "indistinguishable, 0.25 separable); atom err: mean |share real − share synthetic| over every "
        "declared atom and every value holding ≥ 5 % of a continuous column; the last column counts the "
        "columns whose 1-way TVD beats the uniform baseline's (every column drawn uniformly over its "
        "declared domain, scored by the same judge, one draw).",
        *(
            f"Re-measured {r['date']} at commit {r['commit']}: the rows of "
            + ", ".join(f"`{m}`" for m in r["methods"])
            + f" ({r['seeds']} seed(s); `{r['command']}`); the other rows are from the date above."
            for r in f.get("remeasured", [])
        ),
        "",
        f"![quality against ε]({FIGURE_REL})",
        "",
    ]
    for t in f["tables"].values():
        variants = t["variants"]
        full = variants["factor_gauss"]
        note = "" if full["available"] else f" The full spec does not load yet ({full['reason']})."
        lines += [
            f"### {t['label']} ({t['source']}; spec `{t['spec']}`)",
            "",
            f"{t['rows']:,} rows ({t['train_rows']:,} train / {t['test_rows']:,} test), {len(t['columns'])} "
            f"columns, target `{t['target']}`; TRTR ROC-AUC {t['trtr_auc']:.3f}. Declared atoms: "
            + (", ".join(f"{k} {v}" for k, v in t["declared_atoms"].items()) or "none")
            + "; the judge's frequent values: "
            + (", ".join(f"{k} {[round(a, 4) for a in v]}" for k, v in t["judge_atoms"].items()) or "none")
            + f"; {t['judge_pairs']} pairs.{note}",
            "",
        ]
        for eps in t["results"]:
            lines += [f"ε = {eps}:", "", *_table(t, eps, f), ""]
    return lines


def draw(f: dict[str, Any], path: Path) -> Path:
    """One row of panels per table, one panel per metric (TSTR AUC, pMSE, 2-way TVD,
    association diff) against ε (log scale), one line per method (bars: range over seeds);
    the uniform baseline dotted grey, TRTR dashed black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = list(f["tables"].values())
    fig, axes = plt.subplots(
        len(tables), len(PANELS), figsize=(4.2 * len(PANELS), 3.2 * len(tables)), squeeze=False
    )
    for row, t in zip(axes, tables, strict=True):
        eps_keys = list(t["results"])
        for ax, (metric, title) in zip(row, PANELS, strict=True):
            for method, (color, marker) in STYLE.items():
                xs, ys, lo, hi = [], [], [], []
                for e in eps_keys:
                    m = t["results"][e].get(method)
                    s = (m or {}).get("metrics", {}).get(metric) if m and m.get("completed") else None
                    if s is None:
                        continue
                    xs.append(float(e))
                    ys.append(s["mean"])
                    lo.append(s["mean"] - s["min"])
                    hi.append(s["max"] - s["mean"])
                if xs:
                    label = f["methods"].get(method, method)
                    ax.errorbar(xs, ys, yerr=[lo, hi], color=color, marker=marker, capsize=3, label=label)
            u = t["uniform"].get(metric)
            if u is not None:
                ax.axhline(u, color="grey", linestyle=":", label="uniform")
            if metric == "tstr_auc" and t.get("trtr_auc") is not None:
                ax.axhline(t["trtr_auc"], color="black", linestyle="--", label="TRTR (real)")
            ax.set_xscale("log")
            ax.set_xticks([float(e) for e in eps_keys], [e for e in eps_keys])
            ax.minorticks_off()
            ax.set_xlabel("ε")
            ax.set_title(f"{t['label']}: {title}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
