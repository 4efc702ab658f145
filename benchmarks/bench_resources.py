"""Calibration of the resource forecast (``mechanisms.resources``): peak memory and CPU time
of a release's steps and of its rehearsal, measured one configuration per fresh process.

A *release* configuration runs the release's own steps (``flows.pipeline.release_steps``)
as the rehearsal does, on an n-row table drawn from the public schema, but with the
mechanism's own parameters (not its cheap ``rehearsal_params``), the advisory checks on
every row and ``synthetic_rows`` as the spec asks: the release's work without Prefect's task
machinery (the model's ``PREFECT_*`` terms). A *rehearsal* configuration runs
``flows.rehearsal.rehearse`` itself. Each child prints its CPU time (user + system) and
its peak resident size (VmHWM) beside the forecast, so the table shows the margin.

    .venv/bin/python benchmarks/bench_resources.py            # the whole grid, about 15 min
    .venv/bin/python benchmarks/bench_resources.py --only aim
    .venv/bin/python benchmarks/bench_resources.py --measured benchmarks/resources_measured.json

``benchmarks/resources_measured.json`` keeps the measurements the model was calibrated on;
``tests/spec/test_resources.py`` checks that the forecast bounds every one of them.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = yaml.safe_load((REPO / "flows" / "demo" / "adult.yaml").read_text())

# (label, mode, mechanism, params, schema, n, synthetic_rows, engine)
GRID: list[tuple[str, str, str, dict, str, int, int | None, str]] = [
    ("imports only", "none", "factor_gauss", {}, "adult", 100, None, "memory"),
    ("factor_gauss adult 2k", "release", "factor_gauss", {}, "adult", 2_000, None, "memory"),
    ("factor_gauss adult 100k", "release", "factor_gauss", {}, "adult", 100_000, None, "memory"),
    ("factor_gauss adult 300k", "release", "factor_gauss", {}, "adult", 300_000, None, "memory"),
    ("factor_gauss m=1M", "release", "factor_gauss", {}, "adult", 2_000, 1_000_000, "memory"),
    ("factor_gauss wide 100 20k", "release", "factor_gauss", {}, "wide:100", 20_000, None, "memory"),
    ("factor_gauss local 300k", "release", "factor_gauss", {}, "adult", 300_000, None, "local"),
    ("mst adult 5k", "release", "mst", {}, "adult", 5_000, None, "memory"),
    ("mst adult 50k", "release", "mst", {}, "adult", 50_000, None, "memory"),
    ("aim adult 5k 16 rounds", "release", "aim", {"rounds": 16}, "adult", 5_000, None, "memory"),
    ("aim wide 30 2k 8 rounds", "release", "aim", {"rounds": 8}, "wide:30", 2_000, None, "memory"),
    ("aim cats 5000", "rehearsal", "aim", {}, "cats:5000", 0, None, "memory"),
    ("aim wide 60", "rehearsal", "aim", {}, "wide:60", 0, None, "memory"),
    ("dpfm adult 20k", "release", "dpfm", {}, "adult", 20_000, None, "memory"),
    ("ron_gauss adult 20k", "release", "ron_gauss", {}, "adult", 20_000, None, "memory"),
    ("private_pca adult 20k", "release", "private_pca", {}, "adult", 20_000, None, "memory"),
    ("pcappd adult 20k", "release", "pcappd", {}, "adult", 20_000, None, "memory"),
    ("lda_ppd adult 20k", "release", "lda_ppd", {"target": "income"}, "adult", 20_000, None, "memory"),
    ("spectral adult 20k", "release", "spectral_anonymization", {}, "adult", 20_000, None, "memory"),
    ("private_pca cats 2000 5k", "release", "private_pca", {}, "cats:2000", 5_000, None, "memory"),
    ("factor_gauss rehearsal adult", "rehearsal", "factor_gauss", {}, "adult", 0, None, "memory"),
    ("mst rehearsal adult", "rehearsal", "mst", {}, "adult", 0, None, "memory"),
    ("aim rehearsal adult", "rehearsal", "aim", {}, "adult", 0, None, "memory"),
    ("private_pca rehearsal cats 2000", "rehearsal", "private_pca", {}, "cats:2000", 0, None, "memory"),
]


def schema_of(kind: str) -> dict:
    """``adult`` (the demo's 15 columns), ``wide:P`` (P columns: continuous, nominal of 5,
    ordinal of 4, in turn) or ``cats:K`` (the demo's and a nominal column of K categories)."""
    if kind == "adult":
        return copy.deepcopy(DEMO["schema"])
    name, size = kind.split(":")
    k = int(size)
    if name == "cats":
        wide = {"type": "nominal", "categories": [f"c{i}" for i in range(k)]}
        return {**copy.deepcopy(DEMO["schema"]), "code": wide}
    kinds = [
        {"type": "continuous", "bounds": [0.0, 100.0]},
        {"type": "nominal", "categories": ["a", "b", "c", "d", "e"]},
        {"type": "ordinal", "levels": ["l0", "l1", "l2", "l3"]},
    ]
    return {f"x{j}": copy.deepcopy(kinds[j % 3]) for j in range(k)}


def spec_doc(mechanism: str, params: dict, kind: str, m: int | None, engine: str) -> dict:
    from dprelease.mechanisms.registry import MECHANISMS

    schema = schema_of(kind)
    target = "income" if "income" in schema else None
    pure = "zcdp" not in MECHANISMS[mechanism].notions
    not_dp = bool(MECHANISMS[mechanism].defects(MECHANISMS[mechanism].params_type(**params)))
    return {
        "dataset": {"name": "calib", "path": "data.parquet" if engine != "memory" else "data.csv"},
        "schema": schema,
        "privacy": {
            "epsilon": 1.0,
            "delta": 0.0 if pure else 1e-9,
            "accountant": "pure" if pure else "zcdp",
            "allow_non_dp": not_dp,
        },
        "mechanism": {"name": mechanism, "params": params},
        "synthetic_rows": m,
        "checks": {"target": target} if target else {},
        "engine": {"name": engine},
    }


CHILD = r"""
import dataclasses, json, resource, sys, time
from pathlib import Path
config = json.loads(sys.argv[1])
t0 = time.process_time(); w0 = time.time()
from dprelease.spec import load_spec
from dprelease.flows import rehearsal as reh
from dprelease.flows import pipeline
from dprelease.engines import rehearsal as table
from dprelease.mechanisms.registry import MECHANISMS
spec = load_spec(config["spec"])
n = config["n"]
if config["mode"] == "release":
    table.rehearsal_rows = lambda s: n
    reh.rehearsal_rows = lambda s: n
    pipeline.REHEARSAL_CHECK_ROWS = 10**12
    name = spec.mechanism.name
    MECHANISMS[name] = dataclasses.replace(MECHANISMS[name], rehearsal_params={})
    cut = reh._rehearsal_spec
    reh._rehearsal_spec = lambda s, path, rows: cut(s, path, rows).model_copy(
        update={"synthetic_rows": s.synthetic_rows, "engine": s.engine})
if config["mode"] != "none":
    reh.rehearse(spec)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "cpu": use.ru_utime + use.ru_stime, "wall": time.time() - w0,
    "peak": int(status["VmHWM"].split()[0]) * 1024,
}))
"""


def run(config: tuple, folder: Path) -> dict:
    label, mode, mechanism, params, kind, n, m, engine = config
    doc = spec_doc(mechanism, params, kind, m, engine)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    (folder / doc["dataset"]["path"]).write_text("")  # never read: the steps read their own table
    arg = json.dumps({"spec": str(path), "n": n, "mode": mode})
    started = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        return {"label": label, "error": done.stderr[-1500:]}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"label": label, "mode": mode, "n": n, "m": m, "seconds": time.time() - started, **out}


def forecast(config: tuple, folder: Path) -> tuple[float, float]:
    """The model's forecast (memory in bytes, seconds) for what the child measured: the
    rehearsal's need, or the release's steps' without Prefect's terms."""
    from dprelease.mechanisms.resources import need
    from dprelease.spec import load_spec
    from dprelease.spec.resources import shape_of

    _, mode, mechanism, params, kind, n, m, engine = config
    doc = spec_doc(mechanism, params, kind, m, engine)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_spec(path)
    phase = need(shape_of(spec, n, rehearsal=mode == "rehearsal"), prefect=False)
    return phase.memory, phase.seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="run the configurations whose label holds this text")
    parser.add_argument("--out", type=Path, default=None, help="write the measurements as JSON here")
    parser.add_argument("--measured", type=Path, default=None, help="measurements to reuse (JSON of --out)")
    args = parser.parse_args()
    known = {r["label"]: r for r in json.loads(args.measured.read_text())["runs"]} if args.measured else {}
    results = []
    print("| run | CPU s | forecast s | peak GB | forecast GB |\n|---|---:|---:|---:|---:|")
    for config in GRID:
        if args.only not in config[0]:
            continue
        with tempfile.TemporaryDirectory() as d:
            r = known.get(config[0]) or run(config, Path(d))
            results.append(r)
            if "error" in r:
                print(f"{r['label']}: ERROR {r['error']}", flush=True)
                continue
            if r["mode"] == "none":
                continue
            memory, seconds = forecast(config, Path(d))
        peak = r["peak"] / 2**30
        row = [r["label"], f"{r['cpu']:.1f}", f"{seconds:.1f}", f"{peak:.2f}", f"{memory / 2**30:.2f}"]
        print("| " + " | ".join(row) + " |", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": results}, indent=1))


if __name__ == "__main__":
    main()
