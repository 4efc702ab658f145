"""The section of item 15 (``quality``): one table per (data table, ε) of the judge's figures,
each row marked when the run that measured it came from an uncommitted tree (``row_runs``),
and the picture of quality against ε (``draw``, called by ``run.py`` and ``quality.py``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from render.fmt import commit_of, dirty, entry_run, tree_mark

FIGURE_REL = "benchmarks/figures/quality_vs_epsilon.png"
"""Where the picture is written, relative to the repository (the item's page links it)."""
FIGURE_FROM_PAGE = "../../" + FIGURE_REL
"""The picture from the item's page, ``docs/benchmarks/quality.md`` (the docs site's hook
serves it beside the page)."""

COLUMNS = (
    ("tvd_1way", "1-way TVD ↓", ".3f"),
    ("tvd_2way", "2-way TVD ↓", ".3f"),
    ("assoc_diff", "assoc. diff ↓", ".3f"),
    ("tstr_auc", "TSTR AUC ↑", ".3f"),
    ("pmse", "pMSE raw ↓", ".3f"),
    ("pmse_cells", "pMSE cells ↓", ".3f"),
    ("atom_err", "atom err ↓", ".3f"),
)
PANELS = (
    ("tstr_auc", "TSTR ROC-AUC (↑)"),
    ("pmse", "raw pMSE (↓; 0.25 separable)"),
    ("pmse_cells", "pMSE on judge cells (↓)"),
    ("tvd_2way", "2-way TVD, judge cells (↓)"),
    ("assoc_diff", "association diff (↓)"),
)
STYLE = {
    "factor_gauss_today": ("tab:blue", "o"),
    "factor_gauss": ("tab:green", "s"),
    "dpmm_aim": ("tab:red", "v"),
    "dpmm_mst": ("tab:orange", "^"),
    "dpmm_privbayes": ("tab:brown", "D"),
    "mbi_mst": ("tab:purple", "<"),
    "mst": ("tab:olive", "X"),
    "aim": ("tab:pink", "*"),
    "aim_batch4": ("tab:cyan", "P"),
}
"""Colour and marker per method; a method without an entry (e.g. a mechanism added to
``quality.METHODS`` later) is drawn in the next colour of matplotlib's cycle."""


Row = tuple[str, str, str]
"""(table, ε, method): one row of the section's tables."""


def _flag(command: str, name: str) -> list[str] | None:
    """The comma-separated values of ``--name`` in a stored command (None when not given)."""
    found = re.search(rf"--{name} (\S+)", command)
    return found[1].split(",") if found else None


def _covers(run: dict[str, Any], table: str, eps: str) -> bool:
    """Whether a run of ``run.py --only quality`` measured this table at this ε (its command's
    ``--tables`` and ``--epsilons``, else the defaults of ``quality.options``)."""
    from quality import EPSILONS, QUICK_TABLE

    quick = "--quick" in run["command"].split()
    tables = _flag(run["command"], "tables") or ([QUICK_TABLE] if quick else None)
    epsilons = _flag(run["command"], "epsilons") or (["1"] if quick else [f"{e:g}" for e in EPSILONS])
    return (tables is None or table in tables) and float(eps) in {float(e) for e in epsilons}


def _table_run(entry: dict[str, Any], t: dict[str, Any]) -> dict[str, Any]:
    """The run that measured a table's rows (those not re-measured since): the table's own
    ``measured`` record, else the entry's run. A record without a commit shares the entry's
    when it names the entry's command; otherwise its commit was not stored."""
    base = entry_run(entry)
    measured = t.get("measured")
    if not measured:
        return base
    if "commit" in measured:
        return measured
    if measured["command"] == base["command"]:
        return {**measured, "commit": base["commit"], "dirty": base["dirty"]}
    return {**measured, "commit": None, "dirty": None}


def row_runs(entry: dict[str, Any]) -> dict[Row, dict[str, Any]]:
    """Each row's run: the last of the item's runs (its tables' runs, then every record of
    ``remeasured``, oldest first) whose methods, tables and ε include the row."""
    f = entry["figures"]
    out: dict[Row, dict[str, Any]] = {}
    for key, t in f["tables"].items():
        base = _table_run(entry, t)
        for eps, block in t["results"].items():
            for method in block:
                run = base
                for r in f.get("remeasured", []):
                    if method in r["methods"] and _covers(r, key, eps):
                        run = r
                out[(key, eps, method)] = run
    return out


def provenance(entry: dict[str, Any], runs: dict[Row, dict[str, Any]]) -> list[str]:
    """The runs whose rows the section shows, oldest first, each with its commit, its mark and
    its rows; then how many rows came from uncommitted trees. Runs whose rows were all measured
    again since are history (CHANGELOG.md, "Benchmark history"), not shown here."""
    used: dict[tuple[str, str], tuple[dict[str, Any], list[Row]]] = {}
    for row, run in runs.items():
        used.setdefault((run["date"], run["command"]), (run, []))[1].append(row)
    ordered = sorted(used.values(), key=lambda u: u[0]["date"])
    f = entry["figures"]
    lines = ["**Where each row comes from** (the runs whose figures are shown, oldest first):", ""]
    for run, rows in ordered:
        mark = tree_mark(run)
        methods = sorted({m for _, _, m in rows}, key=list(f["methods"]).index)
        tables = sorted({t for t, _, _ in rows}, key=list(f["tables"]).index)
        lines.append(
            f"- {run['date']}, commit {commit_of(run)}" + (f" **{mark}**" if mark else "") + f": {len(rows)} "
            f"row{'s' if len(rows) != 1 else ''} ({', '.join(f'`{m}`' for m in methods)} on {len(tables)} "
            f"table{'s' if len(tables) != 1 else ''}); `{run['command']}`"
        )
    n_dirty = sum(len(rows) for run, rows in ordered if dirty(run))
    n_unknown = sum(len(rows) for run, rows in ordered if dirty(run) is None)
    runs_dirty = sum(1 for run, _ in ordered if dirty(run))
    lines += [
        "",
        f"{n_dirty} of the {len(runs)} rows come from {runs_dirty} of these {len(ordered)} runs, made from "
        "a tree with uncommitted changes: their commit does not reproduce them, and each such row is "
        "marked *(unreproducible: uncommitted tree)*"
        + (
            f"; {n_unknown} rows come from a run whose commit was not stored, marked "
            "*(unreproducible: commit not recorded)*"
            if n_unknown
            else ""
        )
        + ". Earlier runs, all of whose rows were measured again since, are listed in `CHANGELOG.md` "
        '("Benchmark history").',
        "",
    ]
    return lines


def _pm(s: dict[str, Any] | None, fmt: str) -> str:
    """'mean ± half range' over seeds ('mean' alone for one seed)."""
    if s is None:
        return "n/a"
    half = (s["max"] - s["min"]) / 2
    return f"{s['mean']:{fmt}}" if len(s["per_seed"]) == 1 else f"{s['mean']:{fmt}} ± {half:{fmt}}"


def _status(m: dict[str, Any], timeout_s: float) -> str:
    if not m.get("available", True):
        return f"not available ({m.get('reason') or 'the spec does not load'})"
    statuses = sorted({r["status"] for r in m["runs"]})
    if statuses == ["timeout"]:
        r = m["runs"][0]
        extra = (
            f"; killed after {r['rounds_done']} of {r.get('rounds_planned')} planned rounds"
            if r.get("rounds_done")
            else ""
        )
        return f"did not finish in {r.get('timeout_s', timeout_s):.0f} s{extra}"
    return "failed (" + ", ".join(statuses) + ")"


def _table(t: dict[str, Any], eps: str, f: dict[str, Any], marks: dict[str, str]) -> list[str]:
    """One (table, ε): a row per method (its label followed by its run's mark, if any), then
    the references."""
    p = len(t["columns"])
    head = "| method | fit + sample | " + " | ".join(c[1] for c in COLUMNS) + f" | 1-way < uniform (of {p}) |"
    lines = [head, "|---|---:|" + "---:|" * (len(COLUMNS) + 1)]
    for key, m in t["results"].get(eps, {}).items():
        label = m["label"] + (f" *{marks[key]}*" if marks.get(key) else "")
        if not m.get("completed"):
            lines.append(f"| {label} | {_status(m, f['aim_timeout_s'])} |" + " |" * (len(COLUMNS) + 1))
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
        lines.append(f"| {label} | {took} | " + " | ".join(cells) + f" | {bu} |")
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


RULE_METRICS = ("tvd_1way", "tvd_2way", "assoc_diff", "tstr_auc", "pmse", "pmse_cells")
"""The six figures the rule of ``mechanism: auto`` is measured on (TSTR the only ↑)."""


def _continuous(t: dict[str, Any]) -> int:
    """The table's continuous columns (its spec's schema)."""
    from dprelease.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / t["spec"])  # relative to the repository
    return sum(c.kind == "continuous" for c in spec.public_schema().columns)


def rule_evidence(f: dict[str, Any], fast: str = "factor_gauss", slow: str = "aim_batch4") -> list[str]:
    """Per table and ε: the fitted rows, the figures on which ``slow`` (what ``auto`` runs as
    aim) beats ``fast``, what ``mechanism: auto`` chooses there (``mechanisms.auto``), and
    whether the table helped choose the rule or was held out to test it
    (``quality.HELD_OUT``); then, per set, how often the choice is behind on at most half the
    figures."""
    from quality import TABLES

    from dprelease.mechanisms.auto import choose, rule_text

    lines = [
        f"**The rule of `mechanism: auto`** ({rule_text()}; `mechanisms/auto.py`): the fitted rows n, and "
        f"the judge's figures on which `{slow}` is ahead of `{fast}` (means over seeds) of "
        + ", ".join(f"`{m}`" for m in RULE_METRICS)
        + ". *Set*: `fit`, the tables the rule was chosen on; `held out`, tables drawn before any "
        "was measured and kept out of the choice, to test it (`quality.HELD_OUT`).",
        "",
        "| table | set | ε | n fitted | aim ahead on | auto runs |",
        "|---|---|---:|---:|---|---|",
    ]
    tally: dict[str, list[bool]] = {"fit": [], "held out": []}
    for key, t in f["tables"].items():
        held = "held out" if key in TABLES and TABLES[key].held_out else "fit"
        for eps in sorted(t["results"], key=float):
            block = t["results"][eps]
            a, b = block.get(slow), block.get(fast)
            if not (a and b and a.get("completed") and b.get("completed")):
                continue
            ahead = [
                m
                for m in RULE_METRICS
                if a["metrics"][m] is not None
                and b["metrics"][m] is not None  # a metric some run could not compute
                and (a["metrics"][m]["mean"] > b["metrics"][m]["mean"]) == (m == "tstr_auc")
                and a["metrics"][m]["mean"] != b["metrics"][m]["mean"]
            ]
            pick = choose(t["train_rows"], "zcdp", len(t["columns"]), _continuous(t), t["target"]).mechanism
            behind = len(ahead) if pick == fast else len(RULE_METRICS) - len(ahead)
            tally[held].append(2 * behind <= len(RULE_METRICS))
            lines.append(
                f"| {t['label']} | {held} | {eps} | {t['train_rows']:,} | {len(ahead)} of {len(RULE_METRICS)}"
                + (f" ({', '.join(ahead)})" if ahead else "")
                + f" | {pick} |"
            )
    lines.append("")
    for name, right in tally.items():
        if right:
            lines.append(
                f"- {name}: what `auto` runs is behind the other candidate on at most half the figures in "
                f"{sum(right)} of the {len(right)} (table, ε) conditions."
            )
    return [*lines, ""]


def render(f: dict[str, Any], entry: dict[str, Any] | None = None) -> list[str]:
    """The section from the figures; with the stored ``entry`` (``run.py``), each row marked by
    its run and the runs listed (``provenance``), else (``quality.py`` printing one run) as is."""
    runs = row_runs(entry) if entry is not None else {}
    eps_list = ", ".join(f"{e:g}" for e in f["epsilons"])
    j = f["judge"]
    env = f.get("peer_env") or {}
    pk = (
        "; ".join(
            f"`{venv}` (Python {e['python']}): " + ", ".join(f"{k} {v}" for k, v in e["packages"].items())
            for venv, e in env.items()
        )
        or "no peer run finished"
    )
    k = f.get("peer_intervals", 32)
    lines = [
        f"ε ∈ {{{eps_list}}}, δ = {f['delta']:g}, {f['seeds']} seed(s) per (table, ε, method); figures are "
        "the mean over seeds ± half their range. Each table is split 80/20 (seed 0); every method is fitted "
        "on the 80 % and returns as many rows. `factor_gauss (copula only)` is the table's spec without the "
        "continuous columns' `atoms`, `values`, `bins` and `decimals` and without `mechanism.params.target` "
        "(no `refine` stage): the copula of before issue 16, except that the resolution rule merges "
        "intervals; `factor_gauss` is the full spec; both in-process with their spec's `mechanism.params` "
        "and stage weights (no gates).",
        "",
        "**The peers** are the maintained implementations, each in its own venv (`bash benchmarks/"
        f"peer_envs.sh`; {pk}): dpmm's AIM, MST and PrivBayes pipelines (its vendored Private-PGM; "
        "`proc_epsilon=None`, AIM with `max_model_size=80` MB, otherwise dpmm's defaults: AIM's workload "
        "every 2-way marginal of at most 10,000 cells and 16·d rounds) and an MST we wrote after the "
        "reference `mechanisms/mst.py` of `ryan112358/mbi` on mbi 2.0 (`benchmarks/peer_mbi.py`). Every "
        "peer gets the same public cells, from the spec and a public rule, never from the data: one cell "
        f"per integer where a continuous column's range holds at most {k} integers, one per declared value "
        f"where at most {k} are declared, else {k} equal-width intervals over the declared bounds on the "
        "declared scale (log1p for `transform: log`) plus one cell per declared atom; levels and "
        "categories as declared. Their cells are decoded the same way for every peer (`bins_to_table`: an "
        "interval by a uniform draw inside it). **Budget, checked on every run** (`peer_run.check_budget`): "
        "the (ε, δ) given is the one the peer ran with; no preprocessing ε spent (dpmm's binner gets the "
        "declared categories and spends nothing; its default `proc_epsilon=0.1` would be spent on top of "
        "ε); the ρ each spent, read from its measurements (AIM) or its stages (MST, PrivBayes: ε/2 pure-DP "
        "selection beside the measurements' ρ for (ε/2, δ)), within its own accounting; and its "
        "(ε, δ) → ρ conversion (dpmm's `cdp_rho`) equal to ours (`zcdp_rho`) to 10⁻⁶ (mbi ships none: "
        "our MST is given our ρ). dpmm draws its noise through OpenDP (unseedable): its runs differ "
        "between reruns with the same seed. dpmm AIM is killed after "
        f"{f['aim_timeout_s']:.0f} s (a timed-out AIM is not retried with the other seeds of that table "
        "and ε). Times: fit + sample (for "
        "`factor_gauss` also the in-process encoding and decoding; for the peers inside their process, "
        "without the interpreter's start), single-threaded, on a shared 2-core machine.",
        "",
        f"**The judge** ignores every spec's cells: each continuous column is cut into {j['bins']} "
        f"equal-width intervals over its declared bounds plus one cell per exact value holding "
        f"≥ {j['atom_share']:.0%} of the real training rows; levels and categories as declared. "
        "1-way TVD: mean over columns; 2-way TVD: "
        f"mean over column pairs (at most {j['max_pairs']}, a fixed random sample); association diff: mean "
        f"|real − synthetic| over pairs of the association matrix ({j['association']}); TSTR: "
        "HistGradientBoosting trained on the synthetic rows, ROC-AUC on the real 20 % (TRTR: trained on the "
        "real 80 %); pMSE on the raw decoded values (3-fold HistGradientBoosting propensity; 0 "
        "indistinguishable, 0.25 separable) and on the judge's cells (continuous values replaced by their "
        "judge cell: what a discriminator sees blind to the values inside a cell); atom err: mean "
        "|share real − share synthetic| over every "
        "declared atom and every value holding ≥ 5 % of a continuous column; the last column counts the "
        "columns whose 1-way TVD beats the uniform baseline's (every column drawn uniformly over its "
        "declared domain, scored by the same judge, one draw).",
        "",
        *(provenance(entry, runs) if entry is not None else []),
        *rule_evidence(f),
        f"![quality against ε]({FIGURE_FROM_PAGE})",
        "",
    ]
    for key, t in f["tables"].items():
        full = t["variants"].get("factor_gauss", {"available": True})
        note = "" if full["available"] else f" The full spec does not load yet ({full['reason']})."
        measured = t.get("measured")
        if measured:
            note += f" Measured {measured['date']} by `{measured['command']}`."
        cells = t.get("peer_cells")
        if cells:
            note += " The peers' cells: " + ", ".join(f"{c} {n}" for c, n in cells.items()) + "."
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
        for eps in sorted(t["results"], key=float):
            marks = {m: tree_mark(runs[(key, eps, m)]) for m in t["results"][eps] if (key, eps, m) in runs}
            lines += [f"ε = {eps}:", "", *_table(t, eps, f, marks), ""]
    return lines


def draw(f: dict[str, Any], path: Path) -> Path:
    """One row of panels per table, one panel per metric (TSTR AUC, raw pMSE, pMSE on the
    judge's cells, 2-way TVD, association diff) against ε (log scale), one line per method
    (bars: range over seeds); the uniform baseline dotted grey, TRTR dashed black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = list(f["tables"].values())
    methods = dict(f["methods"])  # and those re-measured into some tables (``run.merge_methods``)
    for t in tables:
        for block in t["results"].values():
            for key, m in block.items():
                methods.setdefault(key, m.get("label", key))
    fig, axes = plt.subplots(
        len(tables), len(PANELS), figsize=(4.2 * len(PANELS), 3.2 * len(tables)), squeeze=False
    )
    for row, t in zip(axes, tables, strict=True):
        eps_keys = sorted(t["results"], key=float)
        for ax, (metric, title) in zip(row, PANELS, strict=True):
            for method in methods:
                color, marker = STYLE.get(method, (None, "x"))
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
                    label = methods[method]
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
            if ax is row[-1]:  # one legend per table, on the last panel
                ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path
