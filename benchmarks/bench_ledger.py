"""What the SQL budget ledger (``tasks/ledger_db.py``) costs a release, SQLite against
PostgreSQL, in one process.

* One release's ledger calls as ``flows/release.py`` makes them for the demo's
  ``factor_gauss`` release (zCDP, ε = 1, δ = 1e-6, stages marginals/moments at 0.5 each):
  open the ledger, ``reserve``, then per step ``spend`` and ``record_measurements`` (15
  marginal measurements, then 1 moments measurement, each a ``gaussian_mechanism`` on a small
  vector from a seeded numpy Generator), ``ledger_facts`` (the ledger record written into
  ``release.json``), ``finish`` and ``flows.events.budget_facts`` (the figures of the
  ``dprelease.release.completed`` event, which is not emitted). Each call is timed; the two
  databases alternate release by release.
* The dataset already holds 0, 100 or 1,000 earlier released releases (``--quick``: 0 and
  100) and a lifetime budget (ε = 1000, δ = 1e-5: never refused here), so the lifetime check
  reads them all. The earlier releases are copies of one release written through the public
  API, appended with their own release_ids through the ledger's own row writer (the hash
  chain is intact: ``verify_chain`` is checked). Every measured release runs on a fresh copy
  of that ledger (SQLite: a file copy; PostgreSQL: ``CREATE DATABASE … TEMPLATE``), so each
  sees exactly the stated number of earlier releases.
* At the largest size: ``verify_chain`` (the ledger part of ``dprelease audit verify``),
  ``releases()``, ``spend_so_far``, ``lifetime`` and ``entries``; and the same release with no
  lifetime budget declared (as in the demo spec).
* PostgreSQL is a throw-away server started with ``.ci/postgres.sh start`` (loopback) and
  stopped afterwards; when it cannot be started, the figures say so.

``run(quick)`` returns the JSON-serialisable figures; ``render/ledger.py`` writes the section.
``.venv/bin/python benchmarks/bench_ledger.py [--quick]`` runs it and prints the section.
"""

from __future__ import annotations

import glob
import json
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from common import REPO, RESULTS, load_avg, run_command
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from dprelease.ledger import FIELDS, Ledger, budget_facts, ledger_facts
from dprelease.mechanisms import primitives as p
from dprelease.mechanisms.accounting import BudgetPlan, plan_budget

EPSILON, DELTA = 1.0, 1e-6
WEIGHTS = {"marginals": 0.5, "moments": 0.5}
LIFETIME = (1000.0, 1e-5)
DATASET, MECHANISM = "adult", "factor_gauss"
MARGINALS, MARGINAL_SIZE, MOMENTS_SIZE = 15, 16, 105  # 15 columns; 15·14/2 correlations
LEVELS = {False: (0, 100, 1_000), True: (0, 100)}
REPEATS = {False: {0: 20, 100: 20, 1_000: 5}, True: {0: 10, 100: 5}}
"""Measured releases per size (each on a fresh copy of the ledger)."""
NO_LIFETIME_REPEATS = 5
READ_REPEATS = 3
PARTS = ("open", "reserve", "spend", "record", "finish", "calls", "facts", "event", "flow")
"""calls = reserve + 2 spend + 2 record_measurements + finish; flow = open + calls + facts + event."""


def _plan() -> BudgetPlan:
    return plan_budget("zcdp", EPSILON, DELTA, WEIGHTS)


def _measurements(plan: BudgetPlan, seed: int) -> tuple[list[p.Measurement], list[p.Measurement]]:
    rng = np.random.default_rng(seed)
    rho_m = plan.stage("marginals").rho / MARGINALS
    marginals = [
        p.gaussian_mechanism(
            rng.random(MARGINAL_SIZE),
            l2_sensitivity=1.0,
            rho=rho_m,
            rng=rng,
            name=f"marginal_{i}",
            stage="marginals",
        )
        for i in range(MARGINALS)
    ]
    moments = [
        p.gaussian_mechanism(
            rng.random(MOMENTS_SIZE),
            l2_sensitivity=1.0,
            rho=plan.stage("moments").rho,
            rng=rng,
            name="correlation",
            stage="moments",
        )
    ]
    return marginals, moments


def _release(url: str, rid: str, plan: BudgetPlan, seed: int, lifetime: tuple[float, float] | None) -> dict:
    """One release's ledger calls, in the flow's order; seconds per part."""
    marginals, moments = _measurements(plan, seed)  # not timed: the mechanism's work
    spec = SimpleNamespace(dataset=SimpleNamespace(name=DATASET))
    t: dict[str, Any] = {"spend_steps": [], "record_steps": []}
    t0 = time.perf_counter()
    led = Ledger(url)
    t["open"] = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        led.reserve(dataset=DATASET, release_id=rid, mechanism=MECHANISM, plan=plan, lifetime=lifetime)
        t["reserve"] = time.perf_counter() - t0
        for stage, ms in (("marginals", marginals), ("moments", moments)):
            t0 = time.perf_counter()
            led.spend(rid, [stage], plan)
            t1 = time.perf_counter()
            led.record_measurements(rid, ms)
            t["spend_steps"].append(t1 - t0)
            t["record_steps"].append(time.perf_counter() - t1)
        t0 = time.perf_counter()
        ledger_facts(led, spec.dataset.name, rid)
        t["facts"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        led.finish(rid, "released", {"manifest_sha256": "0" * 64, "bundle": f"/releases/{rid}"})
        t["finish"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        budget_facts(led, DATASET, rid)  # the figures of the dprelease.release.completed event
        t["event"] = time.perf_counter() - t0
    finally:
        led.close()
    t["spend"], t["record"] = sum(t["spend_steps"]), sum(t["record_steps"])
    t["calls"] = t["reserve"] + t["spend"] + t["record"] + t["finish"]
    t["flow"] = t["open"] + t["calls"] + t["facts"] + t["event"]
    return t


def _template(tmp: Path, plan: BudgetPlan) -> tuple[dict, list[dict]]:
    """The budget row and the rows of one release, written through the public API."""
    url = f"sqlite:///{tmp / 'template-source.db'}"
    _release(url, "template", plan, 0, LIFETIME)
    with Ledger(url) as led:
        rows = led.entries()
    budget = next(r for r in rows if r["kind"] == "budget")
    return budget, [r for r in rows if r["release_id"] == "template"]


def _fields(row: dict) -> dict:
    return {k: row[k] for k in FIELDS if k not in ("seq", "time", "prev_hash", "hash")}


def _fill(url: str, budget: dict | None, rows: list[dict], start: int, stop: int) -> float:
    """Append releases ``start``…``stop - 1`` (copies of ``rows``) in one transaction, then
    verify the chain and move the reservation checkpoint to its head, as the last of those
    releases' ``reserve`` would have (so a measured ``reserve`` checks its own history's
    release rows, not the whole chain)."""
    t0 = time.perf_counter()
    with Ledger(url) as led:
        with led._txn() as t:
            if budget is not None:
                t.append(**_fields(budget))
            for i in range(start, stop):
                for r in rows:
                    t.append(**{**_fields(r), "release_id": f"earlier-{i:05d}"})
        assert led.checkpoint() == []
    return time.perf_counter() - t0


class _SQLite:
    name, key = "SQLite", "sqlite"

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def url(self, db: str) -> str:
        return f"sqlite:///{self.tmp / (db + '.db')}"

    def copy(self, template: str, work: str) -> str:
        dst = self.tmp / (work + ".db")
        dst.unlink(missing_ok=True)
        shutil.copyfile(self.tmp / (template + ".db"), dst)
        return self.url(work)

    def version(self) -> str:
        return f"SQLite {sqlite3.sqlite_version}"

    def close(self) -> None:
        pass


class _Postgres:
    name, key = "PostgreSQL", "postgresql"

    def __init__(self, base_url: str) -> None:
        self.base = make_url(base_url)
        self.admin = create_engine(self.base, isolation_level="AUTOCOMMIT")

    def url(self, db: str) -> str:
        with self.admin.connect() as c:
            if c.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": db}).first() is None:
                c.execute(text(f'CREATE DATABASE "{db}"'))
        return self.base.set(database=db).render_as_string(hide_password=False)

    def copy(self, template: str, work: str) -> str:
        with self.admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{work}"'))
            c.execute(text(f'CREATE DATABASE "{work}" TEMPLATE "{template}"'))
        return self.base.set(database=work).render_as_string(hide_password=False)

    def version(self) -> str:
        with self.admin.connect() as c:
            return " ".join(c.execute(text("SELECT version()")).scalar_one().split()[:2])

    def close(self) -> None:
        self.admin.dispose()


@contextmanager
def _postgres() -> Iterator[tuple[str | None, str | None]]:
    """(URL, None) of a throw-away server, or (None, why not); stopped on exit."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        yield None, "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
        return
    script = str(REPO / ".ci" / "postgres.sh")
    try:
        proc = subprocess.run(["bash", script, "start"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        yield None, f"`.ci/postgres.sh start` failed: {type(e).__name__}: {e}"
        return
    env = dict(re.findall(r"export (\w+)='([^']*)'", proc.stdout))
    if proc.returncode or "DPRELEASE_TEST_POSTGRES_URL" not in env:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        if env.get("PG_TEST_DIR"):
            subprocess.run(["bash", script, "stop", env["PG_TEST_DIR"]], capture_output=True, timeout=120)
        yield None, f"`.ci/postgres.sh start` exited with {proc.returncode}: {tail}"
        return
    try:
        yield env["DPRELEASE_TEST_POSTGRES_URL"], None
    finally:
        subprocess.run(["bash", script, "stop", env["PG_TEST_DIR"]], capture_output=True, timeout=120)


def _medians(runs: list[dict]) -> dict[str, Any]:
    out = {k: statistics.median(r[k] for r in runs) for k in PARTS}
    out["spend_step"] = statistics.median(s for r in runs for s in r["spend_steps"])
    out["n"] = len(runs)
    out["flow_min"], out["flow_max"] = min(r["flow"] for r in runs), max(r["flow"] for r in runs)
    return out


def _alternate(bs: list, j: int) -> list:
    """The databases in turn, the order flipped every other round (load drift hits both)."""
    return bs if j % 2 == 0 else bs[::-1]


def _releases(bs: list, template: str, n: int, tag: str, plan: BudgetPlan, seed: int, lifetime) -> dict:
    """``n`` releases per database, each on a fresh copy of ``template``, alternating."""
    runs: dict[str, list[dict]] = {b.key: [] for b in bs}
    for j in range(n):
        for b in _alternate(bs, j):
            url = b.copy(template, "ledger_work")
            runs[b.key].append(_release(url, f"{tag}-{j:02d}", plan, seed + j, lifetime))
    return {k: _medians(v) for k, v in runs.items()}


READS = {
    "verify_chain_s": lambda led: led.verify_chain(),
    "releases_s": lambda led: led.releases(DATASET),
    "spend_so_far_s": lambda led: led.spend_so_far(DATASET, LIFETIME[1]),
    "lifetime_s": lambda led: led.lifetime(DATASET),
    "entries_s": lambda led: led.entries(dataset=DATASET),
}


def _measure(bs: list, quick: bool, plan: BudgetPlan, budget: dict, rows: list[dict]) -> dict[str, dict]:
    levels, repeats = LEVELS[quick], REPEATS[quick]
    out: dict[str, dict] = {b.key: {"version": b.version(), "levels": [], "fill_s": {}} for b in bs}
    have = 0
    for level in levels:
        for b in bs:
            first = budget if level == levels[0] else None
            out[b.key]["fill_s"][str(level)] = _fill(b.url("ledger_template"), first, rows, have, level)
        have = level
        meds = _releases(bs, "ledger_template", repeats[level], f"measured-{level}", plan, 1000, LIFETIME)
        for b in bs:
            m = meds[b.key]
            out[b.key]["levels"].append({"earlier": level, **m})
            print(
                f"  {b.name}, {level:,} earlier: reserve {m['reserve'] * 1e3:,.1f} ms, ledger_facts "
                f"{m['facts'] * 1e3:,.1f} ms, event {m['event'] * 1e3:,.1f} ms, "
                f"all {m['flow'] * 1e3:,.1f} ms (median of {m['n']})",
                flush=True,
            )
    leds = {b.key: Ledger(b.url("ledger_template")) for b in bs}
    try:
        times: dict[str, dict[str, list[float]]] = {b.key: {k: [] for k in READS} for b in bs}
        last: dict[str, dict[str, Any]] = {b.key: {} for b in bs}
        for j in range(READ_REPEATS):
            for b in _alternate(bs, j):
                for key, fn in READS.items():
                    t0 = time.perf_counter()
                    last[b.key][key] = fn(leds[b.key])
                    times[b.key][key].append(time.perf_counter() - t0)
        for b in bs:
            o, r = out[b.key], last[b.key]
            o.update({k: statistics.median(v) for k, v in times[b.key].items()})
            o["rows"] = leds[b.key].head()[0]
            o["chain_problems"] = len(r["verify_chain_s"])
            o["releases_listed"] = len(r["releases_s"])
            o["spent"] = {"epsilon": r["spend_so_far_s"].epsilon, "rule": r["spend_so_far_s"].rule}
            print(
                f"  {b.name}, {have:,} releases ({o['rows']:,} rows): "
                f"verify_chain {o['verify_chain_s']:.3f} s, releases() {o['releases_s']:.3f} s, "
                f"spend_so_far {o['spend_so_far_s']:.3f} s",
                flush=True,
            )
    finally:
        for led in leds.values():
            led.close()
    # The same release with no lifetime declared (the demo spec): a ledger without a budget row.
    for b in bs:
        out[b.key]["fill_nolife_s"] = _fill(b.url("ledger_template_nolife"), None, rows, 0, have)
    meds = _releases(bs, "ledger_template_nolife", NO_LIFETIME_REPEATS, "nolife", plan, 2000, None)
    for b in bs:
        out[b.key]["no_lifetime"] = {"earlier": have, **meds[b.key]}
    return out


def _demo_context() -> dict[str, Any] | None:
    """Item 3's stored `make demo` figure (a whole release, for scale)."""
    try:
        entry = json.loads(RESULTS.read_text())["demo"]
        commit = entry["machine"]["commit"]
        out = {"warm_median_s": entry["figures"]["warm_median_s"], "date": entry["date"], "commit": commit}
    except (OSError, KeyError, ValueError):
        return None
    # Did that commit have the SQL ledger at all? (None: unknown) It lived in tasks/ledger_db.py
    # before the restructuring of issue 15, in ledger/store.py since.
    codes = [
        subprocess.run(
            ["git", "cat-file", "-e", f"{commit.split('+')[0]}:{path}"], cwd=REPO, capture_output=True
        ).returncode
        for path in ("ledger/store.py", "tasks/ledger_db.py")
    ]
    out["had_sql_ledger"] = True if 0 in codes else (False if set(codes) == {128} else None)
    return out


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises SystemExit, so the PostgreSQL server and the temporary files are removed."""

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(quick: bool = False) -> dict[str, Any]:
    t_start = time.perf_counter()
    load_start = load_avg()
    plan = _plan()
    with (
        _sigterm_unwinds(),
        tempfile.TemporaryDirectory(prefix="dprelease-bench-ledger-") as tmp,
        _postgres() as (pg_url, why),
    ):
        budget, rows = _template(Path(tmp), plan)
        bs: list[Any] = [_SQLite(Path(tmp))]
        if pg_url is None:
            print(f"  PostgreSQL not measured: {why}", flush=True)
        else:
            bs.append(_Postgres(pg_url))
        try:
            backends: dict[str, Any] = _measure(bs, quick, plan, budget, rows)
        finally:
            for b in bs:
                b.close()
    if pg_url is None:
        backends["postgresql"] = {"error": why}
    return {
        "command": run_command("ledger", quick),
        "quick": quick,
        "sqlalchemy": version("sqlalchemy"),
        "psycopg": version("psycopg"),
        "plan": {"epsilon": EPSILON, "delta": DELTA, "rho": plan.spent_rho, "weights": WEIGHTS},
        "lifetime": list(LIFETIME),
        "rows_per_release": len(rows),
        "repeats": {str(k): v for k, v in REPEATS[quick].items()},
        "backends": backends,
        "demo": _demo_context(),
        "load_avg_1m": {"start": load_start, "end": load_avg()},
        "wall_s": time.perf_counter() - t_start,
    }


if __name__ == "__main__":
    from render import standalone

    sys.exit(standalone("ledger", run))
