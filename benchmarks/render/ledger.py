"""The section of item 13: the budget ledger's cost per release, SQLite against PostgreSQL, by the
dataset's history: per call, the ratio of the two databases, whole-ledger reads, and a reading."""

from __future__ import annotations

from functools import partial
from itertools import pairwise
from typing import Any

from bench_ledger import MARGINALS, READ_REPEATS

from render.fmt import seconds

_t = partial(seconds, ms_digits=1, s_digits=2)


def _ratio(pg: float, sq: float) -> str:
    return f"{pg / sq:,.2f}×" if sq > 0 else "n/a"


COLUMNS = (
    ("open", "open"),
    ("reserve", "reserve"),
    ("spend_step", "spend (per step)"),
    ("record", "record_measurements (16 rows, 2 calls)"),
    ("finish", "finish"),
    ("calls", "reserve + spend + record + finish"),
    ("facts", "ledger_facts"),
    ("event", "budget_facts (completed event)"),
    ("flow", "**all ledger work of a release**"),
)


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without the '## title' line)."""
    f = figures
    sq, pg = f["backends"]["sqlite"], f["backends"].get("postgresql", {})
    la, pl = f["load_avg_1m"], f["plan"]
    top = sq["levels"][-1]["earlier"]
    reps = ", ".join(f"{int(k):,} earlier: {v}" for k, v in f["repeats"].items())
    lines = [
        f"One release's ledger calls as the flow makes them for the demo's `factor_gauss` release (zCDP, "
        f"ε = {pl['epsilon']:g}, δ = {pl['delta']:g}, ρ = {pl['rho']:.6f}; stages marginals and moments at "
        "0.5 each): open the ledger, `reserve`, then per step `spend` and `record_measurements` "
        f"({MARGINALS} marginal measurements, then 1 moments measurement, from `gaussian_mechanism` "
        "on small vectors with a seeded numpy Generator; building them is not timed), `ledger_facts` "
        "(the ledger record written into release.json), `finish`, and `flows.events.budget_facts` (the "
        "budget figures of the `dprelease.release.completed` event; the event itself is not emitted): "
        f"{f['rows_per_release']} rows per release. The dataset already "
        "holds N earlier releases (each closed as released) and a lifetime budget "
        f"(ε = {f['lifetime'][0]:g}, δ = {f['lifetime'][1]:g}, never refused here: "
        f"after {top:,} releases the ledger composes ε = {sq['spent']['epsilon']:.1f}), so the lifetime "
        "check reads them. The earlier releases are "
        "copies of one release written through the public API, appended under their own release_ids "
        "by the ledger's row writer (hash chain intact); every measured release runs on a fresh copy of "
        "that ledger (SQLite: file copy; PostgreSQL: `CREATE DATABASE … TEMPLATE`), so it sees exactly N. "
        f"Medians over releases ({reps}); the two databases alternate release by release (order flipped "
        f"every other release), in one process, {'quick' if f['quick'] else 'full'} mode; SQLite is a "
        "file in a temporary folder, PostgreSQL a throw-away server on loopback started with "
        f"`.ci/postgres.sh start` (SQLAlchemy {f['sqlalchemy']}, psycopg {f['psycopg']}); load average "
        f"{la['start']} at start, {la['end']} at end; took {f['wall_s']:.0f} s.",
        "",
    ]
    if "error" in pg:
        lines += [f"**PostgreSQL was not measured**: {pg['error']}.", ""]
    backends = [("SQLite", sq)] + ([("PostgreSQL", pg)] if "error" not in pg else [])
    lines += [
        "| database | earlier releases | " + " | ".join(label for _, label in COLUMNS) + " |",
        "|---|---:|" + "---:|" * len(COLUMNS),
    ]
    for _, b in backends:
        for lv in [*b["levels"], {**b["no_lifetime"], "nolife": True}]:
            n = f"{lv['earlier']:,}" + (", **no lifetime declared**" if lv.get("nolife") else "")
            lines.append(
                f"| {b['version']} | {n} | " + " | ".join(_t(lv[k]) for k, _ in COLUMNS[:-1]) + f" | "
                f"**{_t(lv['flow'])}** |"
            )
    if len(backends) == 2:
        lines += [
            "",
            "PostgreSQL / SQLite (same run, ratio of the medians above):",
            "",
            "| earlier releases | " + " | ".join(label for _, label in COLUMNS) + " |",
            "|---:|" + "---:|" * len(COLUMNS),
        ]
        pairs = [*zip(sq["levels"], pg["levels"], strict=True), (sq["no_lifetime"], pg["no_lifetime"])]
        for i, (a, b) in enumerate(pairs):
            n = f"{a['earlier']:,}" + (", no lifetime" if i == len(pairs) - 1 else "")
            lines.append(f"| {n} | " + " | ".join(_ratio(b[k], a[k]) for k, _ in COLUMNS) + " |")
    lines += [
        "",
        f"Reading the whole ledger at {top:,} releases ({sq['rows']:,} rows; median of {READ_REPEATS} "
        "calls):",
        "",
        "| call | SQLite | PostgreSQL | PostgreSQL / SQLite |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (
        ("verify_chain_s", "`verify_chain()` (the ledger part of `audit verify`)"),
        ("releases_s", "`releases()` (`dprelease ledger show`)"),
        ("spend_so_far_s", "`spend_so_far()`"),
        ("lifetime_s", "`lifetime()`"),
        ("entries_s", "`entries(dataset=…)` (every row of the dataset, decoded)"),
    ):
        if key not in sq:
            continue
        if len(backends) == 2:
            lines.append(f"| {label} | {_t(sq[key])} | {_t(pg[key])} | {_ratio(pg[key], sq[key])} |")
        else:
            lines.append(f"| {label} | {_t(sq[key])} | not measured | |")
    chain = [f"{name} {b['chain_problems']} problems" for name, b in backends]
    fills = "; ".join(
        f"{name} {_t(b['fill_s'][str(top)])} for the last {top - b['levels'][-2]['earlier']:,} releases"
        for name, b in backends
        if len(b["levels"]) > 1
    )
    lines += [
        "",
        f"`verify_chain` on the filled ledgers: {', '.join(chain)}. Appending the earlier releases in one "
        f"transaction (set-up, not part of a release): {fills}.",
    ]
    hi = sq["levels"][-1]
    spans = list(pairwise(sq["levels"]))

    def steps(b: dict, key: str) -> list[float]:
        return [(c[key] - a[key]) / (c["earlier"] - a["earlier"]) for a, c in pairwise(b["levels"])]

    def slope(key: str) -> str:
        return ", ".join(
            f"{name} " + " / ".join(f"{x * 1e3:.2f}" for x in steps(b, key)) + " ms" for name, b in backends
        )

    def grows(key: str) -> str:
        return ", ".join(
            f"{name} {_t(b['levels'][0][key])} → {_t(b['levels'][-1][key])}" for name, b in backends
        )

    def at_top(key: str) -> str:
        return ", ".join(f"{name} {_t(b[key])}" for name, b in backends if key in b)

    faster = len(spans) > 1 and all(
        x[-1] > 1.5 * x[-2] for _, b in backends for x in (steps(b, k) for k in ("reserve", "facts", "event"))
    )
    flat = all(
        b["levels"][-1][k] < 2 * b["levels"][0][k]
        for _, b in backends
        for k in ("spend_step", "record", "finish")
    )
    intervals = " / ".join(f"{a['earlier']:,}→{c['earlier']:,}" for a, c in spans)
    lines += [
        "",
        "Reading:",
        "",
        "- With a lifetime budget the ledger's cost grows with the dataset's history"
        + (", faster than linearly" if faster else "")
        + f". What each earlier release adds ({intervals} earlier releases): `reserve` {slope('reserve')}; "
        f"`ledger_facts` {slope('facts')}; `budget_facts` {slope('event')}.",
        "- With a lifetime budget `reserve` reads the dataset's release and budget rows and checks the "
        "hash chain: it re-hashes the rows its decision read and every row written since the last "
        "reservation's checkpoint (the set-up moves the checkpoint to the history's head, as the last "
        "earlier release's `reserve` would have). `ledger_facts` and `budget_facts` each call `lifetime()` "
        "(which reads every row of the dataset, measurements included, to find its budget row), "
        "`spend_so_far()` and `void_since()` (release rows) and `releases()` (every row again). "
        "Those reads at "
        f"{hi['earlier']:,} releases, one call each (table above): `lifetime()` {at_top('lifetime_s')}; "
        f"`spend_so_far()` {at_top('spend_so_far_s')}; `releases()` {at_top('releases_s')}.",
        "- Without a lifetime budget (the demo spec declares none) nothing is composed and `reserve` reads "
        "only the release's own rows and those since the checkpoint, but `ledger_facts` and `budget_facts` "
        "still read the dataset's release rows (`void_since`): at "
        f"{hi['earlier']:,} earlier releases `reserve` "
        + ", ".join(f"{name} {_t(b['no_lifetime']['reserve'])}" for name, b in backends)
        + ", `ledger_facts` "
        + ", ".join(f"{name} {_t(b['no_lifetime']['facts'])}" for name, b in backends)
        + ", `budget_facts` "
        + ", ".join(f"{name} {_t(b['no_lifetime']['event'])}" for name, b in backends)
        + "; all the ledger work of the release "
        + ", ".join(f"{name} {_t(b['no_lifetime']['flow'])}" for name, b in backends)
        + ".",
        "- The writes that read only the release's own rows (indexed by release_id)"
        + (" stay flat" if flat else "")
        + ", from "
        f"{sq['levels'][0]['earlier']:,} to {hi['earlier']:,} earlier releases: "
        f"`spend` per step {grows('spend_step')}; `record_measurements` {grows('record')}; "
        f"`finish` {grows('finish')}. Calls this short move with the shared machine's load: compare "
        "them within one run.",
    ]
    if len(backends) == 2:
        ratios = ", ".join(
            f"{a['earlier']:,} earlier {_ratio(b['flow'], a['flow'])}"
            for a, b in zip(sq["levels"], pg["levels"], strict=True)
        )
        top_ratio = pg["levels"][-1]["flow"] / sq["levels"][-1]["flow"]
        lines.append(
            f"- PostgreSQL / SQLite for the whole ledger work of a release: {ratios}. Opening the ledger "
            "costs PostgreSQL a new connection ("
            + ", ".join(f"{name} {_t(b['levels'][0]['open'])}" for name, b in backends)
            + ")"
            + (
                "; with a long history the ratio nears 1, the time going to the same Python-side work on "
                "the rows."
                if abs(top_ratio - 1) < 0.25
                else "."
            )
        )
    d = f.get("demo")
    if d:
        worst = max(b["levels"][-1]["flow"] for _, b in backends)
        lines.append(
            f"- For scale: item 3's `make demo` (one whole release, no lifetime budget) took "
            f"{d['warm_median_s']:.1f} s (median, measured {d['date']} at commit {d['commit']}"
            + {True: "", False: ", before the SQL ledger existed", None: ""}[d.get("had_sql_ledger")]
            + "). The ledger with no history is "
            f"{max(b['levels'][0]['flow'] for _, b in backends) / d['warm_median_s']:.2%} of that; with no "
            f"lifetime budget and {hi['earlier']:,} earlier releases "
            f"{max(b['no_lifetime']['flow'] for _, b in backends) / d['warm_median_s']:.1%}; with a "
            f"lifetime budget and {hi['earlier']:,} earlier releases it is {_t(worst)}, "
            f"{worst / d['warm_median_s']:.0%} of a whole demo release."
        )
    else:
        lines.append(
            "- Item 3's `make demo` figure is not in benchmarks/results.json; the costs stand alone."
        )
    return lines
