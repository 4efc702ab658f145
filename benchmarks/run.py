"""The benchmarks behind BENCHMARKS.md: ``.venv/bin/python benchmarks/run.py [--quick]``.

Items: 1 ``mechanism`` (in-process time on Adult), 2 ``scale`` (1M rows through the CLI;
the slowest, skipped by ``--quick``), 3 ``demo`` (``make demo`` wall time), 4 ``utility``
(1-way TVD and income AUC at ε = 1), 5 ``peers`` (``factor_gauss`` beside smartnoise-synth's
MST and AIM; needs a separate venv, see ``benchmarks/peers.py``, and runs only when named:
``--only peers``), 6–11 the papers' reproductions ``dpfm``, ``ron_gauss``, ``private_pca``,
``pcappd``, ``lda_ppd``, ``spectral``
(``benchmarks/repro_<item>.py``; ``--quick`` runs them with fewer seeds), 12 ``sampler``
(numpy against OpenDP noise throughput, ``benchmarks/bench_sampler.py``), 13 ``ledger`` (the
SQL budget ledger's cost per release, SQLite against a throw-away PostgreSQL,
``benchmarks/bench_ledger.py``), 14 ``stream`` (100k / 1M / 10M-row streaming releases
through the CLI, and Dask against local at 1M, ``benchmarks/bench_stream.py``).
Results are merged into ``benchmarks/results.json`` (items not
rerun keep their last figures) and BENCHMARKS.md is rewritten from it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import REPO, load_adult, machine, now_utc, timed
from bench_report import BENCH_MODULES, ITEMS, REPRODUCTIONS, markdown, section
from peers import DEFAULT_AIM_TIMEOUT_S, DEFAULT_PEER_PYTHON, DEFAULT_SEEDS

RESULTS = REPO / "benchmarks" / "results.json"
MARKDOWN = REPO / "BENCHMARKS.md"
SCALE_ROWS = 1_000_000
SCALE_SEED = 0


def _mechanism(repeats: int, seeds: int) -> dict[str, Any]:
    from bench_inprocess import mechanism_adult

    return mechanism_adult(load_adult(), repeats)


def _scale(repeats: int, seeds: int) -> dict[str, Any]:
    from bench_cli import scale_cli, write_big_adult
    from bench_inprocess import mechanism_file

    with tempfile.TemporaryDirectory(prefix="dprelease-bench-scale-") as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        spec, make_s = timed(lambda: write_big_adult(root / "data", SCALE_ROWS, SCALE_SEED))
        print(f"  wrote {SCALE_ROWS:,} rows in {make_s:.1f} s; timing the mechanism in-process", flush=True)
        inprocess = mechanism_file(spec, repeats, load_repeats=3)
        print("  running the CLI on 1M rows, then on the Adult demo data", flush=True)
        cli = scale_cli(spec, root)
        # Reproducible paths: the temporary root becomes $TMP, the venv a relative path.
        for run in (cli["big"], cli["adult"]):
            run["command"] = (
                run["command"].replace(str(root), "$TMP").replace(str(REPO) + "/", "").replace(str(REPO), ".")
            )
    return {"rows": SCALE_ROWS, "seed": SCALE_SEED, "make_csv_s": make_s, "inprocess": inprocess, "cli": cli}


def _demo(repeats: int, seeds: int) -> dict[str, Any]:
    from bench_cli import demo_runs

    result = demo_runs(warm_repeats=2)
    cmd = result["command"].split(" --out ")[0].replace(str(REPO) + "/", "")
    result["command"] = f"{cmd} --out $TMP/out"
    return result


def _utility(repeats: int, seeds: int) -> dict[str, Any]:
    from bench_inprocess import utility

    return utility(load_adult(), seeds)


def _peers(args: argparse.Namespace) -> dict[str, Any]:
    from peers import peers

    return peers(load_adult(), args.peer_python, args.peer_seeds, args.aim_timeout)


RUNNERS = {"mechanism": _mechanism, "scale": _scale, "demo": _demo, "utility": _utility}
ON_REQUEST = ("peers",)  # run only when named with --only (item 5 needs the peer venv)


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
    parser.add_argument("--seeds", type=int, default=5, help="release seeds of item 4 (default 5)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave the files alone")
    parser.add_argument(
        "--peer-python",
        type=Path,
        default=DEFAULT_PEER_PYTHON,
        help="item 5: python of the venv holding smartnoise-synth (default .venv-peers/bin/python)",
    )
    parser.add_argument(
        "--peer-seeds",
        type=int,
        default=DEFAULT_SEEDS,
        help="item 5: seeds of factor_gauss and MST (default 3)",
    )
    parser.add_argument(
        "--aim-timeout",
        type=float,
        default=DEFAULT_AIM_TIMEOUT_S,
        help="item 5: seconds before the AIM run is killed (default 1800)",
    )
    args = parser.parse_args(argv)

    items = [
        i
        for i in ITEMS
        if (i in args.only if args.only else i not in ON_REQUEST) and not (args.quick and i == "scale")
    ]
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    started = time.perf_counter()
    for item in items:
        print(f"== {item} ...", flush=True)
        t0 = time.perf_counter()
        info = machine()
        if item == "peers":
            figures = _peers(args)
        elif item in REPRODUCTIONS:
            figures = importlib.import_module(f"repro_{item}").run(quick=args.quick)
        elif item in BENCH_MODULES:
            figures = importlib.import_module(f"bench_{item}").run(quick=args.quick)
        else:
            figures = RUNNERS[item](args.repeats, args.seeds)
        command = ".venv/bin/python benchmarks/run.py --only " + item
        if item == "peers" and args.peer_seeds != DEFAULT_SEEDS:
            command += f" --peer-seeds {args.peer_seeds}"
        if item == "peers" and args.aim_timeout != DEFAULT_AIM_TIMEOUT_S:
            command += f" --aim-timeout {args.aim_timeout:g}"
        if item in ("mechanism", "scale") and args.repeats != 5:
            command += f" --repeats {args.repeats}"
        if item in (*REPRODUCTIONS, *BENCH_MODULES) and args.quick:
            command += " --quick"
        if item == "utility" and args.seeds != 5:
            command += f" --seeds {args.seeds}"
        results[item] = {
            "date": now_utc(),
            "machine": info,
            "command": command,
            "elapsed_s": time.perf_counter() - t0,
            "figures": figures,
        }
        print("\n".join(section(item, results[item])), flush=True)
    elapsed = time.perf_counter() - started
    results["_last_run"] = {"date": now_utc(), "items": items, "quick": args.quick, "elapsed_s": elapsed}
    if not args.no_write:
        RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        MARKDOWN.write_text(markdown(results))
        print(f"wrote {MARKDOWN.relative_to(REPO)} and {RESULTS.relative_to(REPO)}")
    print(f"benchmarks/run.py took {elapsed:.0f} s ({', '.join(items)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
