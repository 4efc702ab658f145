"""``public/report.html``: what an analyst needs to read a release, built from its published
files only (``release.json`` and ``tables/``), so that anyone holding them rebuilds the same
page (``render_public_report`` on a copy gives the same bytes; the tests hold it to that).

It says in plain words what ε, δ and the privacy unit protect; which column pairs were
measured directly, which the model inferred, and which it cannot preserve; the accuracy of
each noisy statistic; a picture of every measured table (distributions as bars with their
intervals, pairs as heatmaps with each cell's interval on hover and the table's standard
error in its caption); and the measured cells whose intervals are widest relative to their
counts. The pictures are HTML and CSS, with no script and no image file: the page is one
self-contained file. Every string from the bundle is escaped.
"""

from __future__ import annotations

import html
import json
import math
from itertools import combinations
from pathlib import Path

import pandas as pd

from dprelease.bundle.release_doc import Columns, ReleaseDocument
from dprelease.bundle.tables import INDEX
from dprelease.mechanisms.accuracy import describe

__all__ = ["REPORT", "render_public_report"]

REPORT = "report.html"
_WIDEST = 10
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;line-height:1.45}
h1{font-size:1.5em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.05em;margin:1.4em 0 .3em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ddd;padding:.2em .5em;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:.9em}
.bars td{border:none;padding:.1em .4em} .track{position:relative;width:420px;height:14px;background:#f4f4f4}
.bar{position:absolute;top:2px;height:10px;background:#4a7fb5}
.err{position:absolute;top:6px;height:2px;background:#111}
.heat td{width:2.2em;height:1.4em;font-size:.75em;color:#111;border:1px solid #fff}
.tag{display:inline-block;padding:0 .4em;border-radius:3px;background:#eef}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _plain_privacy(doc: ReleaseDocument) -> str:
    priv = doc.privacy
    t = priv.ledger.totals
    eps, delta = float(t.epsilon), float(t.delta)
    policy = priv.record.policy
    unit = "one row of the input table" if policy is None else policy.privacy_unit
    return (
        f"<p>This release is <b>({eps:.4g}, {delta:.3g})-differentially private</b> "
        f"({_e(priv.accountant)} accounting). In plain words: whether or not any one "
        f"privacy unit ({_e(unit)}) was replaced by another, every file published here would have "
        f"been about as likely, within a factor of e<sup>ε</sup> = {math.exp(eps):.3g}, except with a "
        f"probability of at most δ = {delta:.3g}. An observer who sees all of it learns little more "
        "about any one person than they would have without that person's record.</p>"
        f"<p class=note>{_e(priv.statement)} "
        f"{_e('' if policy is None else policy.covers)}</p>"
        f"<p>Counts are of <b>the {priv.rows_fitted:,} rows the mechanism was fitted on</b> "
        f"(of {priv.input_rows_n_public:,} input rows; n is public under replace-one), "
        f"and the synthetic table has {priv.synthetic_rows:,} rows.</p>"
    )


def _fit_for(doc: ReleaseDocument, index: dict) -> str:
    cols = doc.columns or Columns()
    modelled = list(cols.modelled)
    measured: dict[frozenset[str], list[str]] = {}
    for t in index["tables"]:
        for pair in combinations(t["columns"], 2):
            measured.setdefault(frozenset(pair), []).append(t["name"])
    pairs = [frozenset(p) for p in combinations(modelled, 2)]
    direct = [p for p in pairs if p in measured]
    inferred = [p for p in pairs if p not in measured]

    def names(ps: list[frozenset[str]]) -> str:
        return ", ".join(" × ".join(_e(c) for c in sorted(p, key=modelled.index)) for p in ps) or "none"

    cannot = [
        *(
            f"{_e(n)} = {_e(f)} (derived: computed from the synthetic values)"
            for n, f in cols.derived.items()
        ),
        *(f"{_e(n)} (an identifier: fresh values, linked to nothing)" for n in cols.identifiers),
        *(f"{_e(n)} (dropped: not released)" for n in cols.dropped),
    ]
    return (
        f"<p><b>Measured directly</b> ({len(direct)} of {len(pairs)} column pairs): their joint counts were "
        f"measured with noise and published in tables/; counts over them have exact intervals.</p>"
        f"<p class=note>{names(direct)}</p>"
        f"<p><b>Inferred by the model, never measured</b> ({len(inferred)} pairs): the synthetic rows' "
        f"association between these columns comes from the {_e(doc.mechanism.name)} model's "
        "assumptions, not from the data. A deterministic link between two of them (a code and its label, "
        "a total and its parts) is not preserved; check such a pair before relying on it. A count over "
        "them gets an interval from the model's replicates (method: model) where the release published "
        "them, else wide Fréchet bounds (method: bounds).</p>"
        f"<p class=note>{names(inferred)}</p>"
        + (f"<p><b>Not modelled</b>: {'; '.join(cannot)}.</p>" if cannot else "")
        + _advice(doc)
    )


def _advice(doc: ReleaseDocument) -> str:
    """The noisy tables' advice (``mechanisms.advice``): where the release smooths what the
    data holds, because the schema did not declare it."""
    if not doc.advice:
        return ""
    items = "".join(f"<li>{_e(a.message)}</li>" for a in doc.advice)
    return (
        "<p><b>Shapes the release does not keep</b>: the noisy one-way tables show a value the data "
        "holds many times inside a cell (its synthetic values are spread over the cell), or an end of "
        "a declared range with no rows (its cells are wasted). Advice to the data steward:</p>"
        f"<ul>{items}</ul>"
    )


def _accuracy(doc: ReleaseDocument) -> str:
    rows = "".join(
        f"<tr><td>{_e(a.statistic)}</td><td>{_e(describe(a.as_mapping()))}</td></tr>"
        for a in doc.privacy.accuracy or ()
    )
    return (
        "<p>The error the noise alone puts on each statistic before any post-processing (from its "
        "recorded scale; no data):</p>"
        f"<table><tr><th>statistic</th><th>expected error</th></tr>{rows}</table>"
    )


def _bars(frame: pd.DataFrame, label: str, n: int) -> str:
    top = max(float(frame["combined_upper"].max()), 1.0)
    rows = []
    for _, r in frame.iterrows():
        est, lo, hi = (float(r[k]) for k in ("combined_count", "combined_lower", "combined_upper"))
        w = max(est, 0.0) / top * 100
        a, b = max(lo, 0.0) / top * 100, max(hi, 0.0) / top * 100
        rows.append(
            f"<tr><td>{_e(r[label])}</td><td><div class=track title='{est:,.0f} ({lo:,.0f} to {hi:,.0f})'>"
            f"<div class=bar style='width:{w:.2f}%'></div>"
            f"<div class=err style='left:{a:.2f}%;width:{max(b - a, 0.3):.2f}%'></div></div></td>"
            f"<td>{est:,.0f}</td><td>{est / n:.2%}</td><td>{lo:,.0f} to {hi:,.0f}</td></tr>"
        )
    return (
        "<table class=bars><tr><th>value</th><th>count (bar) and interval (line)</th><th>count</th>"
        f"<th>share</th><th>interval</th></tr>{''.join(rows)}</table>"
    )


def _heat(frame: pd.DataFrame, first: str, second: str) -> str:
    wide = frame.pivot_table(
        index=first, columns=second, values="combined_count", sort=False, aggfunc="first"
    )
    low = frame.pivot_table(index=first, columns=second, values="combined_lower", sort=False, aggfunc="first")
    high = frame.pivot_table(
        index=first, columns=second, values="combined_upper", sort=False, aggfunc="first"
    )
    top = max(float(wide.to_numpy().max()), 1.0)
    head = "".join(f"<th>{_e(c)}</th>" for c in wide.columns)
    body = []
    values, lows, highs = wide.to_numpy(float), low.to_numpy(float), high.to_numpy(float)
    for ii, i in enumerate(wide.index):
        cells = []
        for jj, c in enumerate(wide.columns):
            est, lo, hi = values[ii, jj], lows[ii, jj], highs[ii, jj]
            alpha = min(max(est, 0.0) / top, 1.0)
            certain = "" if lo > 0 else ";outline:1px dashed #c33"
            cells.append(
                f"<td style='background:rgba(74,127,181,{alpha:.3f}){certain}' "
                f"title='{_e(i)} × {_e(c)}: {est:,.0f} ({lo:,.0f} to {hi:,.0f})'>{est:,.0f}</td>"
            )
        body.append(f"<tr><th>{_e(i)}</th>{''.join(cells)}</tr>")
    return (
        f"<table class=heat><tr><th>{_e(first)} \\ {_e(second)}</th>{head}</tr>{''.join(body)}</table>"
        "<p class=note>Colour: the count; a dashed outline: a cell whose interval reaches 0. Hover a "
        "cell for its interval.</p>"
    )


def _tables(folder: Path, index: dict, n: int) -> str:
    parts = []
    for t in index["tables"]:
        frame = pd.read_csv(folder / t["file"], keep_default_na=False)
        labels = [c for c in frame.columns if c not in _VALUE_COLUMNS]
        caption = (
            f"<h3>{_e(t['name'])} <span class=tag>{_e(t['stage'])}</span></h3><p class=note>s.e. per cell "
            f"{t['noise']['cell_se']:.3g} ({_e(t['noise']['mechanism'])} noise); combined from "
            f"{_e(', '.join(t['combined_from']))}: s.e. {t['combined_se']:.3g}; "
            f"{index['level']:.0%} intervals. File: {_e(t['file'])}</p>"
        )
        if len(labels) == 1:
            picture = _bars(frame, labels[0], n)
        elif len(labels) == 2:
            picture = _heat(frame, labels[0], labels[1])
        else:
            picture = f"<p>A table of {len(labels)} columns: its cells are in the file.</p>"
        parts.append(caption + picture)
    return "".join(parts)


_VALUE_COLUMNS = {
    "noisy_count",
    "se",
    "lower",
    "upper",
    "combined_count",
    "combined_se",
    "combined_lower",
    "combined_upper",
}


def _widest(index: dict) -> str:
    """The tables whose cells are known least precisely: the half-width of one cell's
    combined interval, and the count below which a cell is known to worse than ±10 %."""
    widths = {t["name"]: t["combined_half_width"] for t in index["tables"]}
    rows = "".join(
        f"<tr><td>{_e(name)}</td><td>±{hw:,.0f}</td><td>{10 * hw:,.0f}</td></tr>"
        for name, hw in sorted(widths.items(), key=lambda kv: -kv[1])[:_WIDEST]
    )
    return (
        "<p>Each measured cell is known to within its half-width, whatever its size: a small count is "
        "known relatively worse. The tables with the widest intervals per cell, and the count below "
        "which one of their cells is known to worse than ±10 %:</p>"
        f"<table><tr><th>table</th><th>half-width per cell</th><th>±10 % above</th></tr>{rows}</table>"
        "<p>A sum of k cells has a half-width about √k times a cell's. A count over columns never "
        "measured together (above) has no such interval: `dprelease query` then gives wide bounds.</p>"
    )


def render_public_report(folder: Path) -> str:
    """The report of the published files in ``folder`` (a bundle's ``public/`` or a copy)."""
    doc = ReleaseDocument.from_file(folder / "release.json")
    index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    n = int(index["rows_fitted"])
    pictures = _tables(folder, index, n)
    sections = [
        ("What this release protects", _plain_privacy(doc)),
        ("What the data is fit for", _fit_for(doc, index)),
        ("The widest intervals", _widest(index)),
        ("Accuracy of each noisy statistic", _accuracy(doc)),
        ("The measured tables", pictures),
    ]
    body = "".join(f"<h2>{_e(title)}</h2>{content}" for title, content in sections)
    flag = (
        ""
        if doc.randomness.fit_for_publication
        else "<p><b>NOT FIT FOR PUBLICATION</b> (made with a fixed seed).</p>"
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>Release {_e(doc.release_id)}: public report</title><style>{_CSS}</style></head><body>"
        f"<h1>Release {_e(doc.release_id)} of '{_e(doc.dataset)}': "
        "what it protects and what it can answer</h1>"
        f"{flag}<p class=note>Built from the published files only (release.json, tables/); "
        "`dprelease query` answers any count with its interval, and `dprelease audit verify --public` "
        f"re-checks every number. Mechanism: {_e(doc.mechanism.name)}.</p>{body}</body></html>"
    )
