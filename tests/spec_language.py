"""A hypothesis strategy over the whole release-spec language (issue 38): every column kind
(``spec/columns.py``) with the extremes of its bounds and lengths, every section
(``spec/sections.py``: privacy with lifetimes and periods of every length, gates, engines,
outputs, resources) and every mechanism of ``mechanisms.registry`` (and ``auto``) with
parameters drawn for each field of its parameter class, typical and extreme.

``specs()`` draws a spec as the mapping a YAML file holds, its ``dataset.path`` a file
beside it (``data.csv`` or ``data.parquet``). ``write_case(doc, folder)`` writes it as
``spec.yaml`` and, when the spec loads, a small table drawn from its own public schema as
the dataset (``engines.rehearsal.write_rehearsal_file``: every declared cell, the bounds);
a spec that does not load gets a one-line placeholder file. Many drawn specs are refused:
a refusal must name its field, which is what the properties check.
"""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from pathlib import Path

import yaml
from hypothesis import strategies as st

from dprelease.mechanisms.registry import MECHANISMS

__all__ = ["specs", "tame_specs", "write_case"]

NAMES = st.sampled_from(["age", "income", "region", "x1", "x_2", "when", "code", "w", "score"])
LABELS = st.text(alphabet="abcXYZ019 -_", min_size=1, max_size=6)


def _labels(lo: int, hi: int) -> st.SearchStrategy[list[str]]:
    """Distinct labels: a few drawn ones, or a generated code list up to ``hi`` long."""
    few = st.lists(LABELS, min_size=lo, max_size=min(hi, 6), unique=True)
    many = st.integers(lo, hi).map(lambda k: [f"c{i}" for i in range(k)])
    return st.one_of(few, few, many)


FINITE = st.sampled_from([0.0, 1.0, -1.0, 0.5, 17.0, 90.0, 1e-300, 1e6, 1e15, -1e15, 1e300, -1e300])


@st.composite
def _bounds(draw: st.DrawFn) -> list[float]:
    lo = draw(FINITE)
    width = draw(st.sampled_from([1e-9, 1.0, 73.0, 1e6, 1e15, 1e300]))
    return [lo, lo + width]


@st.composite
def continuous(draw: st.DrawFn) -> dict:
    bounds = draw(_bounds())
    col: dict = {"type": "continuous", "bounds": bounds}
    if draw(st.booleans()):
        col["integer"] = draw(st.booleans())
    transform = draw(st.sampled_from([None, "none", "log", "asinh"]))
    if transform is not None:
        col["transform"] = transform
    if transform == "asinh" or draw(st.integers(0, 9)) == 0:
        col["scale"] = draw(st.sampled_from([1.0, 1000.0, 1e-9, 1e300]))
    if draw(st.integers(0, 3)) == 0:
        col["atoms"] = draw(st.lists(st.sampled_from([bounds[0], bounds[1], 0.0, 40.0]), max_size=3))
    if draw(st.integers(0, 4)) == 0:
        col["values"] = draw(
            st.lists(st.sampled_from([bounds[0], bounds[1], 1.0, 2.0, 3.0]), min_size=2, max_size=5)
        )
    if draw(st.integers(0, 2)) == 0:
        col["bins"] = draw(st.sampled_from([1, 2, 7, 64, 1024, 1025, 0]))
    if draw(st.integers(0, 3)) == 0:
        col["decimals"] = draw(st.sampled_from([0, 2, 15, 16]))
    if draw(st.integers(0, 3)) == 0:
        col["missing"] = draw(st.sampled_from(["reject", "allowed"]))
    if draw(st.integers(0, 3)) == 0:
        col["out_of_bounds"] = draw(st.sampled_from(["reject", "clip"]))
    return col


DATES = st.sampled_from(
    [
        datetime(1678, 1, 1),
        datetime(1900, 1, 1),
        datetime(1970, 1, 1),
        datetime(2000, 2, 29, 12, 30),
        datetime(2024, 1, 1),
        datetime(2261, 12, 31, 23, 59, 59),
        datetime(1, 1, 1),
    ]
)


@st.composite
def dated(draw: st.DrawFn) -> dict:
    kind = draw(st.sampled_from(["date", "datetime"]))
    a, b = draw(DATES), draw(DATES)
    col: dict = {"type": kind, "bounds": [min(a, b).isoformat(), max(a, b).isoformat()]}
    if draw(st.booleans()):
        col["resolution"] = draw(st.sampled_from(["day", "month", "year", "hour", "minute", "second"]))
    if draw(st.integers(0, 2)) == 0:
        col["bins"] = draw(st.sampled_from([1, 12, 1024]))
    if draw(st.integers(0, 3)) == 0:
        col["missing"] = "allowed"
    return col


@st.composite
def categorical(draw: st.DrawFn) -> dict:
    kind = draw(st.sampled_from(["nominal", "ordinal"]))
    values = draw(_labels(1, draw(st.sampled_from([8, 300, 10_001]))))
    col: dict = {"type": kind, ("categories" if kind == "nominal" else "levels"): values}
    if draw(st.integers(0, 2)) == 0:
        col["missing"] = draw(st.sampled_from(["NA", "?", values[0]]))
    if draw(st.integers(0, 3)) == 0:
        col["unknown"] = "other"
        col["other"] = draw(st.sampled_from([values[-1], "zzz"]))
    return col


@st.composite
def one_hot(draw: st.DrawFn) -> dict:
    k = draw(st.sampled_from([1, 2, 3, 256, 257]))
    col: dict = {"type": "one_hot", "columns": [f"oh{i}" for i in range(k)]}
    if draw(st.booleans()):
        col["none"] = draw(st.sampled_from([None, "none", "oh0"]))
    return col


FORMULAS = st.sampled_from(["age * 2", "log(age)", "age - income", "sqrt(abs(w))", "x1 / 0", "-" * 80 + "w"])


def column(draw: st.DrawFn) -> dict:
    kind = draw(
        st.sampled_from(
            ["continuous"] * 3 + ["date", "categorical"] * 2 + ["one_hot", "derived", "id", "drop"]
        )
    )
    if kind == "continuous":
        return draw(continuous())
    if kind == "date":
        return draw(dated())
    if kind == "categorical":
        return draw(categorical())
    if kind == "one_hot":
        return draw(one_hot())
    if kind == "derived":
        return {"type": "derived", "formula": draw(FORMULAS)}
    if kind == "id":
        return {"type": "id", "format": draw(st.sampled_from(["SYN-{:09d}", "R{}", "{}", "X{:020d}"]))}
    return {"type": "drop"}


def _hints(params_type: type) -> dict[str, typing.Any]:
    return typing.get_type_hints(params_type)


def _param_values(name: str, hint: typing.Any, columns: list[str]) -> st.SearchStrategy:
    """Values for a parameter field of type ``hint``: its literals, a column for a target
    or label, typical and extreme numbers."""
    if name in ("target", "label"):
        return st.sampled_from([None, *columns, "nope"])
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    literal = [v for a in options for v in typing.get_args(a) if isinstance(v, str)] + [
        v for v in typing.get_args(hint) if isinstance(v, str)
    ]
    if literal:
        return st.sampled_from([*literal, "bogus"])
    if hint is bool or bool in options:
        return st.booleans()
    if hint is int or int in options:
        return st.sampled_from([None, 0, 1, 2, 3, 8, 64, 10**6, 10**9])
    if hint is float or float in options:
        return st.sampled_from([None, 0.0, 0.5, 1.0, 4.0, 80.0, 1e6, 1e300])
    return st.sampled_from(["corrected", "paper", "unsupervised", "supervised", "bogus", None])


@st.composite
def mechanism(draw: st.DrawFn, columns: list[str]) -> dict:
    name = draw(st.sampled_from([*MECHANISMS, "auto"]))
    if name == "auto":
        return {
            "name": "auto",
            "params": draw(st.fixed_dictionaries({}, optional={"target": st.sampled_from(columns)})),
        }
    hints = _hints(MECHANISMS[name].params_type)
    fields = [f.name for f in dataclasses.fields(MECHANISMS[name].params_type)]
    chosen = draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)) if fields else []
    params = {f: draw(_param_values(f, hints[f], columns)) for f in chosen}
    return {"name": name, "params": {k: v for k, v in params.items() if v is not None}}


PERIODS = st.sampled_from(
    ["P1M", "P1D", "P3M", "P1W", "P100Y", "P101Y", "P1200M", "P5218W", "P9999D", "P8030Y", "P0M", "1M"]
)


@st.composite
def privacy(draw: st.DrawFn) -> dict:
    accountant = draw(st.sampled_from(["zcdp", "zcdp", "pure"]))
    out: dict = {
        "epsilon": draw(st.sampled_from([1e-6, 0.1, 1.0, 5.0, 100.0, 100.5])),
        "delta": 0.0 if accountant == "pure" else draw(st.sampled_from([1e-9, 1e-6, 0.5])),
        "accountant": accountant,
    }
    policy = draw(st.sampled_from([None, "lifetime", "period"]))
    if policy == "lifetime":
        out["lifetime_epsilon"] = draw(st.sampled_from([1.0, 50.0, 1000.0]))
    if policy == "period":
        out["period"] = {"length": draw(PERIODS), "epsilon": draw(st.sampled_from([1.0, 100.0, 1000.0]))}
        if draw(st.booleans()):
            out["period"]["disjoint"] = True
    if draw(st.integers(0, 9)) == 0:
        out["allow_non_dp"] = True
    return out


@st.composite
def specs(draw: st.DrawFn, path: str = "data.csv") -> dict:
    """A spec over the whole language, as a YAML mapping (``dataset.path`` ``path``, or
    ``data.parquet``)."""
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    wide = draw(st.integers(0, 14)) == 0  # sometimes many columns
    if wide:
        names = [f"v{j}" for j in range(draw(st.sampled_from([30, 60, 200])))]
    schema = {}
    for name in names:
        schema[name] = (
            {"type": "nominal", "categories": ["a", "b", "c"]}
            if wide and draw(st.booleans())
            else column(draw)
        )
    if draw(st.booleans()):
        path = "data.parquet"
    doc: dict = {
        "dataset": {"name": draw(st.sampled_from(["d", "survey-2024", "a" * 56])), "path": path},
        "schema": schema,
        "privacy": draw(privacy()),
        "mechanism": draw(mechanism(names)),
    }
    if draw(st.integers(0, 2)) == 0:
        doc["synthetic_rows"] = draw(st.sampled_from([1, 2, 50, 10_000, 10**6, 10**9, 10**9 + 1, 10**12]))
    checks: dict = {}
    if draw(st.booleans()):
        checks["enabled"] = draw(st.booleans())
    if draw(st.integers(0, 2)) == 0:
        checks["holdout_fraction"] = draw(st.sampled_from([0.0, 0.01, 0.2, 0.5]))
    if draw(st.integers(0, 3)) == 0:
        checks["sample_rows"] = draw(st.sampled_from([100, 5_000_000]))
    if draw(st.integers(0, 2)) == 0:
        checks["target"] = draw(st.sampled_from(names))
    if draw(st.integers(0, 3)) == 0:
        gates = draw(st.lists(st.sampled_from(["tvd_1way", "tvd_2way", "wasserstein_max"]), unique=True))
        checks["gates"] = {g: {"max": draw(st.sampled_from([0.01, 0.5, 1.0]))} for g in gates}
    if checks:
        doc["checks"] = checks
    engine = draw(st.sampled_from([None, "memory", "local", "dask"]))
    if engine is not None:
        doc["engine"] = {"name": engine}
        if engine != "memory" and draw(st.booleans()):
            doc["engine"]["chunk_rows"] = draw(st.sampled_from([1_000, 20_000_000]))
        if engine == "dask":
            doc["engine"]["workers"] = 1
    if draw(st.integers(0, 3)) == 0:
        doc["output"] = {
            "formats": draw(
                st.lists(st.sampled_from(["csv", "parquet"]), min_size=1, max_size=2, unique=True)
            )
        }
    if draw(st.integers(0, 3)) == 0:
        doc["resources"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "max_memory_gb": st.sampled_from([0.5, 16, 4096]),
                    "max_seconds": st.sampled_from([10, 3600.0]),
                },
            )
        )
    return doc


TAME_COLUMNS = st.sampled_from(
    [
        {"type": "continuous", "bounds": [0.0, 100.0]},
        {"type": "continuous", "bounds": [17.0, 90.0], "integer": True, "atoms": [40.0]},
        {"type": "continuous", "bounds": [0.0, 1e6], "transform": "log", "bins": 16, "missing": "allowed"},
        {"type": "continuous", "bounds": [-1e4, 1e4], "transform": "asinh", "scale": 1000.0, "decimals": 2},
        {"type": "date", "bounds": ["1920-01-01", "2010-12-31"]},
        {"type": "datetime", "bounds": ["2024-01-01T00:00:00", "2024-12-31T23:59:59"], "resolution": "hour"},
        {"type": "nominal", "categories": ["a", "b", "c"], "missing": "NA"},
        {"type": "nominal", "categories": ["x", "y"], "unknown": "other", "other": "y"},
        {"type": "ordinal", "levels": ["lo", "mid", "hi"]},
        {"type": "one_hot", "columns": ["oh_a", "oh_b", "oh_c"]},
        {"type": "id", "format": "SYN-{:09d}"},
        {"type": "drop"},
    ]
)


@st.composite
def tame_specs(draw: st.DrawFn) -> dict:
    """Specs most of which load: the same sections and every mechanism, with declarations a
    steward would write (for the end-to-end property, whose examples are releases)."""
    names = draw(st.lists(NAMES, min_size=2, max_size=5, unique=True))
    schema = {name: draw(TAME_COLUMNS) for name in names}
    categorical = [n for n, c in schema.items() if c["type"] in ("nominal", "ordinal")]
    name = draw(st.sampled_from([*MECHANISMS, "auto"]))
    pure = name != "auto" and "zcdp" not in MECHANISMS[name].notions
    params = {"target": draw(st.sampled_from(categorical))} if categorical and draw(st.booleans()) else {}
    if name == "lda_ppd" and categorical:
        params = {"target": categorical[0]}
    doc: dict = {
        "dataset": {"name": "d", "path": draw(st.sampled_from(["data.csv", "data.parquet"]))},
        "schema": schema,
        "privacy": {
            "epsilon": draw(st.sampled_from([5.0, 50.0, 100.0])),
            "delta": 0.0 if pure else 1e-9,
            "accountant": "pure" if pure else "zcdp",
            "allow_non_dp": name == "spectral_anonymization",
        },
        "mechanism": {
            "name": name,
            "params": params if name in ("auto", "aim", "factor_gauss", "lda_ppd") else {},
        },
        "checks": {"enabled": draw(st.booleans()), "holdout_fraction": draw(st.sampled_from([0.0, 0.2]))},
        "engine": {"name": draw(st.sampled_from(["memory", "memory", "local"]))},
    }
    if draw(st.booleans()):
        doc["synthetic_rows"] = draw(st.sampled_from([50, 1000]))
    if doc["checks"]["enabled"] and draw(st.booleans()):
        doc["checks"]["gates"] = {"tvd_1way": {"max": 1.0}}
    return doc


class _Plain(yaml.SafeDumper):
    """A dumper that writes a value drawn twice out twice: the spec loader refuses aliases."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def write_case(doc: dict, folder: Path) -> Path:
    """Write ``doc`` as ``folder/spec.yaml`` and its dataset beside it: a table drawn from
    its public schema when it loads (``engines.rehearsal``), else a placeholder line."""
    from dprelease.engines.rehearsal import write_rehearsal_file
    from dprelease.mechanisms.errors import DPReleaseError
    from dprelease.spec import load_spec

    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "spec.yaml"
    spec_path.write_text(yaml.dump(doc, Dumper=_Plain, sort_keys=False, allow_unicode=True))
    data = folder / doc["dataset"]["path"]
    try:
        spec = load_spec(spec_path)
        if spec.mechanism.name == "auto":
            spec = spec.resolve(64)
        made, _ = write_rehearsal_file(spec, folder)
        made.rename(data)
    except (DPReleaseError, ValueError, OverflowError):
        data.write_text("x\n1\n")
    return spec_path
