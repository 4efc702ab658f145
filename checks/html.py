"""``internal/report.html``: one self-contained page for the steward and the auditor —
per-column marginals, the two association matrices, the DCR histograms, the gates, the
budget and the dataset's lifetime account. Pictures are matplotlib PNGs embedded as base64;
a picture with more than one series has a legend on each of its panels and an HTML key.
Column names and categories are drawn as they are (``parse_math=False``: a category such as
``$50k-$75k`` is not TeX; cut after 40 characters) and escaped in the HTML. Confidential: internal only.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from dprelease.mechanisms.accuracy import describe
from dprelease.mechanisms.schema import Continuous, Schema

__all__ = ["render_report"]

_REAL, _SYN = "#1f77b4", "#ff7f0e"
_MARGINAL_SERIES = (("real", _REAL), ("synthetic", _SYN))
_DCR_SERIES = (
    ("dcr_synthetic_to_real", _SYN, "synthetic → closest real"),
    ("dcr_real_to_real", _REAL, "real → closest other real (reference)"),
)
_MARKS = "¹²³⁴⁵⁶⁷⁸⁹"
_MEASUREMENT_COLUMNS = ("stage", "statistic", "mechanism", "sensitivity", "noise_scale")
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0} td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.pass{color:#137333;font-weight:600} .fail{color:#c5221f;font-weight:600}
.note{color:#555;font-size:.9em} img{max-width:100%} figure{margin:0}
.key span{display:inline-block;width:1.4em;height:.8em;margin:0 .4em 0 1em;vertical-align:middle}
"""


def _png(fig: Figure, key: Sequence[tuple[str, str]] = (), *, tight: bool = True) -> str:
    """The figure as an embedded PNG; with more than one series in ``key`` ((label,
    colour) pairs), inside a ``<figure>`` whose caption is the HTML key of the series.
    Figures are built without pyplot (no global state, no figure manager);
    ``tight=False`` for a figure laid out already (``bbox_inches="tight"``
    draws it twice)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight" if tight else None)
    img = f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'
    if len(key) < 2:
        return img
    swatches = "".join(
        f'<span style="background:{color}"></span>{html.escape(label)}' for label, color in key
    )
    return f'<figure><figcaption class="key">Key:{swatches}</figcaption>{img}</figure>'


def _labels(col) -> list[str]:
    return [_short(v) for v in (col.cell_labels() if isinstance(col, Continuous) else col.values)]


def _short(label: str, most: int = 40) -> str:
    """A label as a figure shows it: at most ``most`` characters (a category may have 1,000)."""
    return label if len(label) <= most else label[: most - 1] + "…"


def _marginals(real: np.ndarray, syn: np.ndarray, schema: Schema) -> str:
    cols = 3
    rows = math.ceil(len(schema) / cols)
    fig = Figure(figsize=(15, 3.1 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    (real_label, real_color), (syn_label, syn_color) = _MARGINAL_SERIES
    for ax, (j, c) in zip(axes.flat, enumerate(schema.columns), strict=False):
        k = c.n_bins
        p = np.bincount(real[:, j], minlength=k) / len(real)
        q = np.bincount(syn[:, j], minlength=k) / len(syn)
        x = np.arange(k)
        if k > 20:
            ax.step(x, p, where="mid", color=real_color, label=real_label, linewidth=2.4, alpha=0.8)
            ax.step(x, q, where="mid", color=syn_color, label=syn_label, linewidth=1.2, linestyle="--")
        else:
            ax.bar(x - 0.2, p, 0.4, color=real_color, label=real_label)
            ax.bar(x + 0.2, q, 0.4, color=syn_color, label=syn_label)
        labels = _labels(c)
        ticks = x if k <= 20 else x[:: max(1, k // 8)]
        ax.set_xticks(
            ticks, [labels[t] for t in ticks], rotation=45, ha="right", fontsize=7, parse_math=False
        )
        ax.set_title(f"{_short(c.name)} ({c.kind})", fontsize=10, parse_math=False)
        ax.set_ylim(0, 1.3 * max(p.max(), q.max()))  # room for the legend above the series
        ax.legend(fontsize=7, framealpha=0.7)
    for ax in list(axes.flat)[len(schema) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.set_layout_engine(None)  # keeps tight_layout's positions; savefig then draws once, not twice
    return _png(fig, _MARGINAL_SERIES, tight=False)


def _heatmaps(utility: dict, schema: Schema) -> str:
    """The two association matrices; an undefined entry (null: a column with one value)
    is drawn grey with a cross, never as 0."""
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="#d0d0d0")
    fig = Figure(figsize=(15, 6.5))
    axes = fig.subplots(1, 2)
    for ax, key in zip(axes, ("real", "synthetic"), strict=True):
        a = np.array(utility["corr_diff"][key], dtype=float)  # null → NaN
        im = ax.imshow(np.ma.masked_invalid(a), vmin=-1, vmax=1, cmap=cmap)
        rows, cols = np.nonzero(~np.isfinite(a))
        ax.scatter(cols, rows, marker="x", color="#555555", s=12, linewidths=0.8)
        names = [_short(n) for n in schema.names]
        ax.set_xticks(range(len(schema)), names, rotation=90, fontsize=7, parse_math=False)
        ax.set_yticks(range(len(schema)), names, fontsize=7, parse_math=False)
        ax.set_title(f"{key} association", fontsize=11)
    fig.colorbar(im, ax=axes, shrink=0.8)
    return _png(fig)


def _dcr(linkage: dict) -> str:
    fig = Figure(figsize=(9, 3.6))
    ax = fig.subplots()
    for key, color, label in _DCR_SERIES:
        h = linkage[key]["histogram"]
        counts = np.array(h["counts"], dtype=float)
        ax.stairs(counts / counts.sum(), h["edges"], color=color, label=label, linewidth=1.6)
    ax.set_xlabel("Gower distance to the closest record")
    ax.set_ylabel("share of rows")
    ax.legend(fontsize=8)
    return _png(fig, [(label, color) for _, color, label in _DCR_SERIES])


def _table(rows: list[dict], columns: list[str]) -> str:
    """An HTML table of ``rows``' ``columns``; a value that does not apply (None) is "—",
    never a blank cell (the caller's notes say why)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if c == "passed":
                cells.append(f'<td class="{"pass" if v else "fail"}">{"pass" if v else "FAIL"}</td>')
            else:
                text = "—" if v is None else _number(v) if isinstance(v, float) else str(v)
                cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _number(v: float) -> str:
    return f"{v:.6g}" if math.isfinite(v) else "undefined"


def _defined(value: float | None, reason: str | None) -> float | str:
    """A metric's value, or "undefined: <reason>" when the check could not define it."""
    return f"undefined: {reason}" if value is None else value


def _summary(utility: dict, linkage: dict) -> list[dict]:
    corr = utility["corr_diff"]
    rows = [
        {"metric": "mean 1-way TVD (public bins)", "value": utility["tvd_1way"]["mean"]},
        {
            "metric": f"mean 2-way TVD ({utility['tvd_2way']['pairs']} pairs)",
            "value": utility["tvd_2way"]["mean"],
        },
        {
            "metric": f"mean |association difference| ({corr['pairs'] - corr['undefined_pairs']} of "
            f"{corr['pairs']} pairs defined)",
            "value": _defined(corr["mean"], corr["undefined"] or "no column pairs"),
        },
        {
            "metric": "pMSE (0 best, 0.25 separable)",
            "value": _defined(utility["pmse"]["pmse"], utility["pmse"]["undefined"]),
        },
    ]
    if t := utility.get("tstr"):
        rows += [
            {
                "metric": f"TSTR {t['metric']} for {t['target']}",
                "value": _defined(t["tstr"], t["undefined"].get("tstr")),
            },
            {
                "metric": f"TRTR {t['metric']} (real → real)",
                "value": _defined(t["trtr"], t["undefined"].get("trtr")),
            },
        ]
    rows += [
        {"metric": "exact-match rate", "value": linkage["exact_match_rate"]},
        {"metric": "unique exact-match rate", "value": linkage["unique_exact_match_rate"]},
        {
            "metric": "DCR 5th percentile (synthetic → real)",
            "value": linkage["dcr_synthetic_to_real"]["quantiles"]["q05"],
        },
        {
            "metric": "DCR 5th percentile (real → real)",
            "value": linkage["dcr_real_to_real"]["quantiles"]["q05"],
        },
        {
            "metric": "correct-link rate",
            "value": "n/a: output rows are fresh draws"
            if linkage["correct_link_rate"] is None
            else linkage["correct_link_rate"],
        },
        {
            "metric": "membership share (0.5 ideal)",
            "value": "n/a: no holdout"
            if linkage["membership_share"] is None
            else linkage["membership_share"],
        },
    ]
    return rows


def _gates(gates: list[dict]) -> str:
    """The gates' table; a missing bound is "—" with a note."""
    if not gates:
        return "<p>No gates declared.</p>"
    table = _table(gates, ["gate", "min", "max", "noisy_value", "noise_sd", "passed"])
    if any(g["min"] is None or g["max"] is None for g in gates):
        table += "<p class='note'>— in min or max: no bound on that side.</p>"
    return table


def _footnoted(notes: dict[str, str], reason: str) -> str:
    """A dash with the footnote mark of ``reason`` (a new mark for a new reason)."""
    return "—" + notes.setdefault(reason, _MARKS[len(notes)])


def _footnotes(notes: dict[str, str]) -> str:
    return "".join(f"<p class='note'>{mark} {html.escape(reason)}.</p>" for reason, mark in notes.items())


def _budget(ledger: dict, accuracy: dict[str, dict]) -> str:
    """This release's account in its accountant's own unit — ρ per stage and measurement
    under zCDP, ε under pure DP — with each measurement's expected error (``accuracy`` by
    statistic), and its total (ε, δ) with the conversion used."""
    t = ledger["totals"]
    zcdp = "rho" in t
    key, unit, name = ("rho", "ρ (zCDP)", "zCDP") if zcdp else ("epsilon", "ε (pure DP)", "pure")
    symbol = unit[0]
    notes: dict[str, str] = {}
    stages = [
        {
            "stage": s["stage"],
            "weight": s["weight"],
            f"{unit} allocated": s[f"{key}_allocated"],
            f"{unit} spent": s[f"{key}_spent"],
        }
        for s in ledger["stages"]
    ]
    rows = []
    for m in ledger["measurements"]:
        cost = m[key]
        if cost is None:
            cost = _footnoted(
                notes,
                "used without noise: it costs no budget, which is why the release is not differentially "
                "private"
                if m["mechanism"] == "none"
                else f"this row records no {symbol}; the {name} accountant adds only {symbol}, so it "
                "charged this row nothing",
            )
        rows.append(
            {
                **{c: m[c] for c in _MEASUREMENT_COLUMNS},
                unit: cost,
                "expected error": describe(accuracy.get(m["statistic"])),
            }
        )
    total = (
        f"ρ = {t['rho']:.6g}, which is (ε, δ) = ({t['epsilon']:.6g}, {t['delta']:.3g})"
        if zcdp
        else f"ε = {t['epsilon']:.6g}, δ = {t['delta']:.3g}"
    )
    return "\n".join(
        [
            f"<p>Accountant: <b>{name}</b>. This release is {html.escape(ledger['status'])}.</p>",
            _table(stages, ["stage", "weight", f"{unit} allocated", f"{unit} spent"]),
            _table(rows, [*_MEASUREMENT_COLUMNS, unit, "expected error"]),
            _footnotes(notes),
            "<p class='note'>Expected error: E|noise| per entry, and for a count table the total "
            "variation the noise alone moves it by, before post-processing. It follows from the noise "
            "scale alone (no data) and is published in release.json (privacy.accuracy).</p>",
            f"<p>Release total: {total} ({html.escape(t['conversion'])}).</p>",
        ]
    )


def _lifetime(record: dict | None) -> str:
    """The dataset's lifetime account from ``privacy.ledger_record``: its budget, what its
    releases spent so far (this one included), what the next release can take, and
    whether the dataset's guarantee is void."""
    if record is None:
        return "<p>release.json has no ledger record: the dataset's lifetime account is not known.</p>"
    parts = []
    void = (record.get("dataset_guarantee") or {}).get("void_since")
    if void:
        parts.append(
            f"<p class='fail'>The dataset's guarantee is VOID since release "
            f"'{html.escape(void['release_id'])}' ({html.escape(str(void['time']))}): that release was "
            "not differentially private, so no composed (ε, δ) guarantee holds for the dataset since.</p>"
        )
    life = record.get("lifetime")
    if life is None:
        parts.append("<p>No lifetime budget is set for this dataset: nothing caps its releases' spend.</p>")
        return "\n".join(parts)
    rho = (
        "no ρ: the lifetime δ is 0, so only basic composition applies"
        if life["rho_left"] is None
        else f"ρ left {life['rho_left']:.6g}"
    )
    parts.append(
        f"<p>Lifetime budget of the dataset: (ε, δ) = ({life['epsilon']:.6g}, {life['delta']:.3g}). "
        f"Spent so far with this release (releases counted: {life['releases_counted']}): (ε, δ) = "
        f"({life['spent_epsilon']:.6g}, {life['spent_delta']:.3g}), by {html.escape(life['rule'])}. "
        + (
            "The lifetime budget is used up: no further release of this dataset fits.</p>"
            if life.get("used_up")
            else f"The next release can take ε up to {life['next_epsilon_max']:.6g} at δ "
            f"{life['next_epsilon_at_delta']:.3g} ({rho}).</p>"
        )
    )
    return "\n".join(parts)


def _section(draw, *args) -> str:
    """A section of the report, or a note saying it could not be drawn (an advisory check
    that failed leaves an ``error`` in its report instead of its figures)."""
    try:
        return draw(*args)
    except Exception as e:
        return f"<p class='note'>This section could not be drawn ({html.escape(type(e).__name__)}).</p>"


def render_report(
    real_bins: np.ndarray,
    syn_bins: np.ndarray,
    schema: Schema,
    utility: dict,
    linkage: dict,
    gates: list[dict],
    document: dict,
) -> str:
    """The whole page, from the two tables' public bins and the checks' reports."""
    led = document["privacy"]["ledger"]
    t = led["totals"]
    status = (
        "no gates declared"
        if not gates
        else "all gates passed"
        if all(g["passed"] for g in gates)
        else "STOPPED BY A GATE"
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>dprelease report "
        f"{html.escape(document['release_id'])}</title><style>{_CSS}</style></head><body>",
        f"<h1>Release {html.escape(document['release_id'])} — internal report</h1>",
        "<p class='note'>CONFIDENTIAL: computed from the input data without noise. For the "
        "steward and the auditor; never publish this file.</p>",
        f"<p>Mechanism <b>{html.escape(document['mechanism']['name'])}</b>, "
        f"({t['epsilon']:.6g}, {t['delta']:.3g})-DP, {document['privacy']['synthetic_rows']} "
        f"synthetic rows. Gates: <b>{status}</b>.</p>",
        "<h2>Gates (differentially private)</h2>",
        "<p class='note'>Each gated metric was released with noise (the 'gates' stage of the "
        "budget) and the decision taken on the noisy value; everything below the gates is "
        "advisory: it never changed what was published.</p>",
        _gates(gates),
        "<h2>Summary (advisory)</h2>",
        _section(lambda: _table(_summary(utility, linkage), ["metric", "value"])),
        "<h2>Marginals on the public bins</h2>",
        _section(_marginals, real_bins, syn_bins, schema),
        "<h2>Association matrices</h2>",
        _section(
            lambda: (
                f"<p class='note'>{html.escape(utility['corr_diff']['method'])}. Grey cells marked × "
                "are undefined: a column that takes one value in the compared rows has no association "
                "(0/0).</p>"
            )
        ),
        _section(_heatmaps, utility, schema),
        "<h2>Distance to the closest record</h2>",
        _section(
            lambda: (
                f"<p class='note'>{html.escape(linkage['distance'])}. A synthetic curve far left of "
                "the reference means synthetic rows sit closer to real rows than real rows sit to "
                "each other.</p>"
            )
        ),
        _section(_dcr, linkage),
        "<h2>Budget</h2>",
        _budget(led, {a["statistic"]: a for a in document["privacy"].get("accuracy") or []}),
        "<h2>Lifetime budget of the dataset</h2>",
        _lifetime(document["privacy"].get("ledger_record")),
        "</body></html>",
    ]
    return "\n".join(parts)
