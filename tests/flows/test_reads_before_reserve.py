"""Nothing of the data file is read before the ledger's ``reserved`` row (issue 38, "Nothing
read before the reserve, for every mechanism"): for every mechanism (``MECHANISMS`` and
``auto``) on every engine that can run it (memory, local, dask), through the CLI's
pre-check (``flows.run.before_prefect``) and the flow, the only opens of the data file
before the reserve are the header's (``engines.header.read_header``, before Prefect
starts) and, under ``mechanism: auto``, the row count's (``engines.header.data_lines``:
line ends or a Parquet footer, never a value), and the count comes after the ledger's
pre-check. With the budget used up, ``auto`` is refused by the ledger (exit 4, a
``refused`` row) whatever the file holds, as a named mechanism is, and nothing is read.

How a read is seen (``Reads``):

* Python's ``open`` audit event (``sys.addaudithook``): builtin ``open``, ``os.open``
  (which raises the same event), ``gzip.open``, and pandas' and fsspec's opens;
* pyarrow opens files in C++ and raises no audit event (checked for ``pyarrow.csv.read_csv``,
  ``pyarrow.parquet.ParquetFile``, ``read_schema``, ``read_metadata`` and
  ``pyarrow.input_stream``), so each library entry point that opens a path (``READERS``) is
  wrapped, and ``test_every_reader_the_product_calls_is_watched`` holds that the product
  calls no other (an AST scan of every module);
* the Dask engine's workers read in other processes, and only on tasks that
  ``DaskEngine.run`` submits: that is wrapped too.

Each read is classed by the product functions on its stack: ``header`` (``read_header``),
``count`` (``data_lines``) or ``values`` (anything else). ``Ledger.refusal`` and
``Ledger.reserve`` on the test's ledger are recorded in the same sequence (the rehearsal's
throwaway ledger is not the test's). The matrix (18 releases on 300 rows) shares one Prefect
server and one Dask cluster, and stops each release once its rows are checked; the module
took 120 to 132 s of wall time (about 62 s of CPU) on the 2-core test machine under a load
average of 4 to 7, most of it aim's and mst's rehearsals (JAX compiles).
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pandas as pd
import pyarrow
import pyarrow.csv
import pyarrow.parquet
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.runners import DaskEngine, LocalEngine
from dprelease.flows import pipeline
from dprelease.ledger import BudgetRefused, Ledger
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.registry import MECHANISMS
from tests.helpers import ROOT, TOY_SCHEMA, cli_text, record_release
from tests.properties import property_settings

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

READERS = {
    ("pyarrow", "input_stream"),
    ("pyarrow", "OSFile"),
    ("pyarrow.csv", "read_csv"),
    ("pyarrow.parquet", "ParquetFile"),
    ("pyarrow.parquet", "read_metadata"),
    ("pyarrow.parquet", "read_schema"),
    ("pyarrow.parquet", "read_table"),
    ("pandas", "read_csv"),
    ("pandas", "read_parquet"),
    ("fsspec", "open"),
}
"""The library entry points that open a path, wrapped while a release is watched."""
_MODULES = {"pyarrow": pyarrow, "pyarrow.csv": pyarrow.csv, "pyarrow.parquet": pyarrow.parquet}
_MODULES |= {"pandas": pd, "fsspec": fsspec}

ENGINES = {"memory": "data.csv", "local": "data.csv.gz", "dask": "data.parquet"}
"""Each engine reads one of the three input formats, so the matrix meets each reader."""
ROWS = 300


# ---------------------------------------------------------------- watching a release


@dataclass
class Reads:
    """The data file's reads and the test ledger's decisions, in the order they happened:
    ``("read", kind, how)`` with kind ``header``, ``count`` or ``values``; ``("refusal",
    reason or None)``; ``("reserved",)`` or ``("refused",)``."""

    data: Path
    ledger: str
    events: list[tuple] = field(default_factory=list)

    def is_data(self, path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return False
        try:
            return Path(os.fsdecode(os.fspath(path))).resolve() == self.data
        except (TypeError, ValueError):
            return False

    def read(self, how: str) -> None:
        stack = _product_frames(sys._getframe(2))
        kind = "header" if "read_header" in stack else "count" if "data_lines" in stack else "values"
        self.events.append(("read", kind, how))

    def reads(self) -> list[tuple]:
        return [e for e in self.events if e[0] == "read"]

    def before_reserve(self) -> list[tuple]:
        """The events before the ``reserved`` row (all of them when there is none)."""
        cut = next((i for i, e in enumerate(self.events) if e == ("reserved",)), len(self.events))
        return self.events[:cut]


def _product_frames(frame: Any) -> list[str]:
    """The names of the product's functions (``dprelease.*``) on the stack from ``frame`` out."""
    names = []
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("dprelease."):
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


_WATCHED: list[Reads] = []  # the release being watched (the audit hook cannot be removed)


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _WATCHED and _WATCHED[0].is_data(args[0]):
        _WATCHED[0].read("open")


@functools.cache
def _install_audit_hook() -> None:
    sys.addaudithook(_audit)


def _watching_reader(module: str, name: str, original: Callable) -> Callable:
    def reader(*args: Any, **kwargs: Any) -> Any:
        path = args[0] if args else next(iter(kwargs.values()), None)
        if _WATCHED and _WATCHED[0].is_data(path):
            _WATCHED[0].read(f"{module}.{name}")
        return original(*args, **kwargs)

    return reader


def _watching_ledger(method: str, original: Callable) -> Callable:
    def decide(self: Ledger, **kwargs: Any) -> Any:
        ours = bool(_WATCHED) and self.url == _WATCHED[0].ledger
        try:
            result = original(self, **kwargs)
        except BudgetRefused:
            if ours:
                _WATCHED[0].events.append(("refused",))
            raise
        if ours:
            _WATCHED[0].events.append(("refusal", result) if method == "refusal" else ("reserved",))
        return result

    return decide


def _watching_pass(original: Callable) -> Callable:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _WATCHED and _WATCHED[0].is_data(self.path):
            _WATCHED[0].read(f"{type(self).__name__}.run")
        return original(self, *args, **kwargs)

    return run


@contextmanager
def watching(data: Path, ledger: str) -> Iterator[Reads]:
    """Record every read of ``data`` and every decision of the ledger at ``ledger``."""
    _install_audit_hook()
    with pytest.MonkeyPatch.context() as mp:
        for module, name in READERS:
            target = _MODULES[module]
            mp.setattr(target, name, _watching_reader(module, name, getattr(target, name)))
        for method in ("refusal", "reserve"):
            mp.setattr(Ledger, method, _watching_ledger(method, getattr(Ledger, method)))
        for engine in (LocalEngine, DaskEngine):
            mp.setattr(engine, "run", _watching_pass(engine.run))
        reads = Reads(data.resolve(), ledger)
        _WATCHED.append(reads)
        try:
            yield reads
        finally:
            _WATCHED.clear()


# ---------------------------------------------------------------- the specs of the matrix


def _table(rows: int = ROWS, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.random(rows).round(3),
            "k": rng.integers(0, 11, rows),
            "c": rng.choice(["a", "b"], rows),
            "o": rng.choice(["lo", "mid", "hi", "NA"], rows),
        }
    )


def _write(folder: Path, name: str, data: pd.DataFrame | bytes) -> Path:
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    elif name.endswith(".parquet"):
        data.to_parquet(path, index=False)
    else:
        text = data.to_csv(index=False).encode()
        path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return path


def _spec(folder: Path, mechanism: str, engine: str, data_file: str, **privacy: Any) -> Path:
    """The toy schema's spec for ``mechanism`` (its accountant, the parameters it needs, and
    ``allow_non_dp`` where it is not DP) on ``engine``, checks off, a quarter held out."""
    synth = MECHANISMS.get(mechanism)
    zcdp = synth is None or "zcdp" in synth.notions
    params = {  # what each needs; aim and mst cut to a few iterations (reads do not depend on them)
        "ron_gauss": {"task": "classification", "label": "c"},
        "lda_ppd": {"target": "c"},
        "aim": {"rounds": 2, "round_iters": 10, "iters": 50},
        "mst": {"iters": 50},
    }
    spec = {
        "dataset": {"name": "toy", "path": data_file},
        "schema": TOY_SCHEMA,
        "privacy": {
            "epsilon": 1.0,
            "delta": 1e-6 if zcdp else 0.0,
            "accountant": "zcdp" if zcdp else "pure",
            "allow_non_dp": bool(synth and synth.defects(synth.params_type(**params.get(mechanism, {})))),
            **privacy,
        },
        "mechanism": {"name": mechanism, "params": params.get(mechanism, {})},
        "checks": {"enabled": False, "holdout_fraction": 0.25},
        "engine": {"name": engine, "chunk_rows": 1_000},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


MATRIX = [
    pytest.param(name, engine, id=f"{name}-{engine}")
    for name in [*MECHANISMS, "auto"]
    for engine in ENGINES
    if engine == "memory" or name == "auto" or MECHANISMS[name].streaming is not None
]


# ---------------------------------------------------------------- the invariant, through the CLI and the flow


class Stopped(Exception):
    """Raised once the release has read its data and checked its rows: what follows (the
    noise, the bundle) reads nothing of the data file before the reserve, which is past."""


def _stop_after_the_rows_check(original: Callable) -> Callable:
    def checked(r: Any, *args: Any, **kwargs: Any) -> None:
        original(r, *args, **kwargs)
        if not r.rehearsal:
            raise Stopped

    return checked


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(("mechanism", "engine"), MATRIX)
def test_nothing_is_read_before_the_reserve(tmp_path, monkeypatch, mechanism, engine, request):
    """A release through ``dprelease release`` into an out folder whose ledger exists (so
    both pre-checks ask it), stopped once the data is read and its rows checked: before the
    ``reserved`` row the data file was opened for its header and, under ``auto``, for its
    row count after the ledger's pre-check, and for nothing else; its values were read
    after it. Reaching the stop means ``check_rows`` passed, which under ``auto`` holds the
    rule's n and fitted rows to the release's on every engine."""
    data = _write(tmp_path, ENGINES[engine], _table())
    spec = _spec(tmp_path, mechanism, engine, data.name)
    if engine == "dask":
        loaded = yaml.safe_load(spec.read_text())
        loaded["engine"]["scheduler"] = request.getfixturevalue("dask_cluster")
        spec.write_text(yaml.safe_dump(loaded, sort_keys=False))
    out = tmp_path / "out"
    url = f"sqlite:///{out / 'ledger.db'}"
    Ledger(url).close()
    monkeypatch.setattr(pipeline, "_rows_checked", _stop_after_the_rows_check(pipeline._rows_checked))
    with watching(data, url) as reads:
        result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r"])
    (record,) = (out / "failures").glob("r-*/failure.json")
    assert json.loads(record.read_text())["error"] == "Stopped", cli_text(result.output)
    before = reads.before_reserve()
    assert ("reserved",) in reads.events, reads.events
    allowed = {"header", "count"} if mechanism == "auto" else {"header"}
    assert [e for e in before if e[0] == "read" and e[1] not in allowed] == [], before
    assert ("read", "header", "open" if engine != "dask" else "pyarrow.parquet.read_schema") in before
    counts = [i for i, e in enumerate(before) if e[:2] == ("read", "count")]
    if mechanism == "auto":
        assert counts, before
        decisions = [e for e in before[: counts[0]] if e[0] != "read"]
        assert decisions and decisions[-1] == ("refusal", None), before  # the pre-check came first
    assert any(e[:2] == ("read", "values") for e in reads.events[len(before) :]), reads.events  # seen


# ---------------------------------------------------------------- refused, whatever the file holds

MALFORMED = st.one_of(
    st.binary(max_size=300),  # anything at all
    st.lists(  # lines of the toy columns' values, some cells broken or quoted across lines
        st.lists(
            st.sampled_from(
                ["0.5", "3", "a", "lo", "NA", "", '"', '"x\ny"', "zz", "1e999", "\r", ",", "\x00"]
            ),
            min_size=1,
            max_size=6,
        ).map(",".join),
        max_size=8,
    ).map(lambda lines: ("x,k,c,o\n" + "\n".join(lines)).encode()),
)


def _used_up(out: Path) -> str:
    """A ledger whose lifetime budget for ``toy`` (ε = 1, zCDP at δ = 10⁻⁶) is spent."""
    url = f"sqlite:///{out / 'ledger.db'}"
    with Ledger(url) as led:
        plan = plan_budget("zcdp", 1.0, 1e-6, {"a": 1.0})
        record_release(led, "earlier", plan=plan, lifetime=(1.0, 1e-6), dataset="toy")
    return url


@pytest.mark.property
@pytest.mark.parametrize("mechanism", ["auto", "factor_gauss"])
@given(content=MALFORMED)
@property_settings(8)
def test_a_used_up_budget_refuses_whatever_the_file_holds(tmp_path_factory, monkeypatch, mechanism, content):
    """``dprelease release`` with the budget used up: exit 4 and a ``refused`` row (naming
    ``auto`` when the rule has not chosen yet), whatever the records hold, as for a named
    mechanism, and the data file is not opened at all (the refusal comes before the header).
    Before, ``auto`` parsed the file first: a malformed record gave exit 2 and no row."""
    folder = tmp_path_factory.mktemp("used-up")
    data = _write(folder, "data.csv", content)
    spec = _spec(folder, mechanism, "memory", data.name, lifetime_epsilon=1.0)
    out = folder / "out"
    url = _used_up(out)
    monkeypatch.setattr("dprelease.flows.release.release", _tripwire)
    with watching(data, url) as reads:
        result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "next"])
    assert result.exit_code == 4, cli_text(result.output)
    assert "lifetime budget" in cli_text(result.output)
    assert reads.reads() == [], reads.events
    with Ledger(url, create=False) as led:
        (row,) = led.entries(release_id="next")
    assert (row["status"], row["mechanism"]) == ("refused", mechanism)


def _tripwire(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the flow started")


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("engine", ["memory", "local"])
def test_the_flow_refuses_auto_before_counting(tmp_path, monkeypatch, engine):
    """The flow alone (a deployment's run, no CLI pre-check) with the budget used up and a
    record no reader takes: ``BudgetRefused`` recorded as a ``refused`` row naming ``auto``
    and a failure record, and the data file is never opened."""
    from dprelease.flows.release import release

    data = _write(tmp_path, "data.csv", b'x,k,c,o\n0.5,3,a,lo\n"unclosed,1,b\n0.2,7,b,hi,extra\n')
    spec = _spec(tmp_path, "auto", engine, data.name, lifetime_epsilon=1.0)
    out = tmp_path / "out"
    url = _used_up(out)
    with watching(data, url) as reads, pytest.raises(BudgetRefused, match="lifetime budget"):
        release(str(spec), str(out), release_id="next")
    assert reads.reads() == [] and reads.events[-1] == ("refused",), reads.events
    with Ledger(url, create=False) as led:
        (row,) = led.entries(release_id="next")
    assert (row["status"], row["mechanism"]) == ("refused", "auto")
    (record,) = (out / "failures").glob("next-*/failure.json")
    assert json.loads(record.read_text())["error"] == "BudgetRefused"


# ---------------------------------------------------------------- the watch sees every reader


_READER_NAME = re.compile(r"read_\w+|ParquetFile|OSFile|input_stream|memory_map|open\w*|dataset")
_PACKAGES = ("bundle", "checks", "cli", "discovery", "dprelease", "engines", "expectations", "flows")
_PACKAGES += ("ledger", "mechanisms", "records", "spec", "tasks")


def _readers_called(path: Path) -> set[tuple[str, str]]:
    """(library module, function) for each call in ``path`` to a function of pyarrow,
    pandas or fsspec whose name says it opens or reads something."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    alias: dict[str, str] = {}
    direct: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
                direct[a.asname or a.name] = (node.module, a.name)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in alias:
            where, name = alias[f.value.id], f.attr
        elif isinstance(f, ast.Name) and f.id in direct:
            where, name = direct[f.id]
        else:
            continue
        if where.split(".")[0] in ("pyarrow", "pandas", "fsspec") and _READER_NAME.fullmatch(name):
            found.add((where, name))
    return found


def test_every_reader_the_product_calls_is_watched():
    """Every pyarrow, pandas or fsspec function the product calls to open or read a file
    is one ``watching`` wraps, so the matrix above sees every read its releases make.
    (fsspec's ``read_block`` reads an already open file: it opens nothing.)"""
    called = set().union(*(_readers_called(p) for pkg in _PACKAGES for p in (ROOT / pkg).rglob("*.py")))
    assert called - READERS - {("fsspec.utils", "read_block")} == set()
    assert called & READERS == READERS  # each wrapped reader is used: none is stale
