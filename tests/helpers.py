"""Plain builders and checks shared by the tests (the fixtures are in the conftest.py
files): the demo's public schema on small data, a toy four-column schema and the input
validation task on it, the streaming passes' keys and driver, a ledger release, and what
an end-to-end test asserts about a refused or failed release."""

from __future__ import annotations

import copy
import functools
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dprelease.engines.chunks import Scan
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.latent import latent_code
from dprelease.mechanisms.rowkeys import RowKeys
from dprelease.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = ROOT / "flows" / "demo"
DEMO_SPEC = yaml.safe_load((DEMO_DIR / "adult.yaml").read_text())


# ---------------------------------------------------------------- the demo's schema on small data


def adult_rows(n: int, seed: int = 0) -> pd.DataFrame:
    df = pd.read_csv(DEMO_DIR / "adult.csv.gz", dtype=str, keep_default_na=False)
    return df.sample(n=n, random_state=seed).reset_index(drop=True)


def write_spec(folder: Path, data: pd.DataFrame | None = None, **overrides) -> Path:
    """A spec with the demo schema and checks without gates (small data cannot pass the
    demo's); ``data`` is written to data.csv beside it. With another ``schema``, the
    mechanism is plain factor_gauss unless ``mechanism`` is given."""
    base = {**DEMO_SPEC, "dataset": {"name": "adult", "path": "data.csv"}, "checks": {"target": "income"}}
    if "schema" in overrides:  # the demo's mechanism refines with income, a demo column
        base["mechanism"] = {"name": "factor_gauss", "params": {}}
    spec = {**base, **overrides}
    if data is not None:
        data.to_csv(folder / "data.csv", index=False)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ---------------------------------------------------------------- a toy schema and the input validation task

TOY_SCHEMA = {
    "x": {"type": "continuous", "bounds": [0.0, 1.0]},
    "k": {"type": "continuous", "bounds": [0, 10], "integer": True},
    "c": {"type": "nominal", "categories": ["a", "b"]},
    "o": {"type": "ordinal", "levels": ["lo", "mid", "hi"], "missing": "NA"},
}
TOY_HEADER = "x,k,c,o\n"
TOY_GOOD = "0.5,3,a,lo\n0.2,7,b,hi\n"


def toy_schema(**columns) -> dict:
    """TOY_SCHEMA with some columns' declarations extended or changed (e.g. policies)."""
    out = copy.deepcopy(TOY_SCHEMA)
    for name, extra in columns.items():
        out[name].update(extra)
    return out


def toy_spec(folder: Path, csv: str, schema: dict | None = None):
    """The toy schema's spec (checks off) over ``csv`` written to data.csv."""
    (folder / "data.csv").write_text(csv)
    return load_spec(write_spec(folder, checks={}, schema=schema or TOY_SCHEMA))


def validate(spec, folder: Path) -> pd.DataFrame:
    """The ``validate_input`` task's body, without Prefect; reports go to folder/internal.
    The task refuses with an ``InputRefused`` whose message names no column (Prefect stores
    it); its ``detail``, for the steward, is what these tests check, raised here as the
    ``InputValidationError`` (or ``DataError``) it was."""
    from prefect.logging import disable_run_logger

    from dprelease.engines.inputs import InputRefused, InputValidationError
    from dprelease.tasks.validate import validate_input

    try:
        with disable_run_logger():
            return validate_input.fn(spec, folder / "internal")
    except InputRefused as e:
        assert "column '" not in str(e), str(e)
        raise InputValidationError(e.detail) from e


# ---------------------------------------------------------------- the streaming passes


KEYS = RowKeys(dither=11, holdout=22, sample=33)
PARAMS = fg.FactorGaussParams()


def streaming_spec(folder: Path, rows: int | None = None, fraction: float = 0.0, sample_rows: int = 500):
    """The demo spec over ``rows`` demo rows (all 32,561 by default), with a holdout
    ``fraction`` and a checks sample of ``sample_rows``."""
    data = adult_rows(rows, seed=1) if rows else adult_rows(32561)
    path = write_spec(folder, data, checks={"holdout_fraction": fraction, "sample_rows": sample_rows})
    return load_spec(path)


def latent_code_of(schema, counts):
    """The factor_gauss code of these per-column histograms, over the declared cells."""
    from dprelease.mechanisms.factor_gauss import Code
    from dprelease.mechanisms.resolution import Cells

    cells = Cells(tuple(np.arange(c.n_bins) for c in schema.columns))
    dists = [c / c.sum() for c in counts]
    latent = latent_code(dists, [c.kind == "nominal" for c in schema.columns])
    return Code(latent, cells.with_private(schema, dists))


def two_passes(engine, job, code):
    """Pass 1 (the scan: histograms, validation, samples) and pass 2 (ZᵀZ for ``code``)."""
    scan = engine.run(job.scan, functools.partial(Scan.combine, k=job.sample_rows))
    total = engine.run(functools.partial(job.statistic, state=fg.MomentSums(code), params=PARAMS), np.add)
    return scan, total


# ---------------------------------------------------------------- the ledger


PURE_PLAN = plan_budget("pure", 1.0, 0.0, {"a": 1.0, "b": 1.0})


def without_software(detail: dict) -> dict:
    """A ledger row's ``detail`` without ``software`` (the version and commit every row names)."""
    return {k: v for k, v in detail.items() if k != "software"}


def record_release(led, rid, plan=PURE_PLAN, lifetime=None, status="released", dataset="d"):
    """Reserve, spend every stage of ``plan`` and finish a release in ``led``."""
    led.reserve(dataset=dataset, release_id=rid, mechanism="m", plan=plan, lifetime=lifetime)
    led.spend(rid, [s.stage for s in plan.stages], plan)
    return led.finish(rid, status)


# ---------------------------------------------------------------- faults injected into the real run only


def in_rehearsal() -> bool:
    """Is the caller running inside ``dprelease.flows.rehearsal.rehearse`` (the rehearsal before the
    reserve, on a table drawn from the public schema)?"""
    frame = sys._getframe(1)
    while frame is not None:
        where = frame.f_code.co_name, frame.f_globals.get("__name__")
        if where == ("rehearse", "dprelease.flows.rehearsal"):
            return True
        frame = frame.f_back
    return False


def real_run_only(original, replacement):
    """``replacement`` in the release's real run, ``original`` in its rehearsal: a fault that
    only the confidential data or the environment of the real run can cause (a value a library
    chokes on, a full disk), which no rehearsal could meet."""

    def patched(*args, **kwargs):
        return (original if in_rehearsal() else replacement)(*args, **kwargs)

    patched.fn = getattr(original, "fn", None)  # a Prefect task's function, as the rehearsal calls it
    return patched


# ---------------------------------------------------------------- end to end: the CLI, the bundle, the ledger


def cli_text(output: str) -> str:
    """The CLI's words without rich's panel borders and line wrapping."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", output).split())


def ledger_rows(out: Path, release_id: str) -> list[dict]:
    """The rows of ``release_id`` in the SQLite ledger of ``out`` (none if it has none)."""
    db = out / "ledger.db"
    if not db.exists():
        return []
    from dprelease.ledger import Ledger

    ledger = Ledger(f"sqlite:///{db}")
    try:
        return [r for r in ledger.releases(dataset=None) if r["release_id"] == release_id]
    finally:
        ledger.close()


def assert_nothing_spent(out: Path, release_id: str) -> None:
    for r in ledger_rows(out, release_id):
        assert r["status"] in ("refused", "failed"), r
        assert r["epsilon"] == 0.0 and r["delta"] == 0.0, r
        assert not [s for s in r["stages"] if s.get("status") == "spent"], r


def assert_nothing_published(out: Path, release_id: str) -> None:
    assert not (out / release_id).exists()
    if out.is_dir():
        assert not list(out.glob(".staging-*"))
