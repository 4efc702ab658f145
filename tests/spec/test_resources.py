"""Issue 38, defect 3 ("spent, then crashed"): the resource forecast (``mechanisms.resources``,
``spec.resources``) and its refusal before the rehearsal and the reserve. The forecast only
grows with what drives it (rows, synthetic rows, columns, cells, aim's rounds), so that a
spec under the ceiling never hides a larger one; a refusal names the field that needs the
most, the estimate, the ceiling and where it came from; the ceilings come from the command
line (the environment), else the spec, else the documented defaults."""

from __future__ import annotations

import copy
import dataclasses
import time

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.replicates import LOO_TABLES, REPLICATES, bootstrap, held_out
from dprelease.mechanisms.resources import GB, SECONDS_MARGIN, Shape, need
from dprelease.mechanisms.tables import noisy_tables
from dprelease.spec import load_spec
from dprelease.spec.resources import (
    DEFAULT_MEMORY_GB,
    DEFAULT_SECONDS,
    MEMORY_ENV,
    SECONDS_ENV,
    ResourceRefused,
    ceilings,
    check_resources,
    forecast_resources,
)
from tests.helpers import DEMO_SPEC
from tests.intervals import GENERATED, generated_table
from tests.properties import property_settings


def _spec(tmp_path, **changes):
    doc = copy.deepcopy(DEMO_SPEC)
    doc["dataset"] = {"name": "adult", "path": "data.csv"}
    doc["checks"] = {"target": "income"}
    doc.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_spec(path)


@st.composite
def shapes(draw):
    mechanism = draw(st.sampled_from(sorted(MECHANISMS)))
    p = draw(st.integers(1, 40))
    cells = tuple(draw(st.lists(st.integers(1, 5000), min_size=p, max_size=p)))
    params = MECHANISMS[mechanism].params_type()
    if mechanism == "aim":
        params = dataclasses.replace(params, rounds=draw(st.one_of(st.none(), st.integers(1, 2000))))
    return Shape(
        mechanism=mechanism,
        params=params,
        cells=cells,
        nominal=tuple(draw(st.lists(st.booleans(), min_size=p, max_size=p))),
        file_columns=p + draw(st.integers(0, 5)),
        n=draw(st.one_of(st.none(), st.integers(1, 10**8))),
        m=draw(st.one_of(st.none(), st.integers(1, 10**9))),
        streaming=draw(st.booleans()),
        chunk_rows=draw(st.integers(1_000, 20_000_000)),
        check_rows=draw(st.sampled_from([None, 0, 200, 50_000])),
        target=None if mechanism != "aim" or p < 3 else draw(st.sampled_from([None, 0])),
        workers=draw(st.sampled_from([0, 2])),
        replicates=draw(st.sampled_from([0, 2, 10])),
        held_out=draw(st.sampled_from([0, 1, 48])),
    )


def _grown(s: Shape, what: str, by: int) -> Shape:
    if what == "n":
        return dataclasses.replace(s, n=(s.n or 0) + by)
    if what == "m":
        return dataclasses.replace(s, m=s.synthetic + by)
    if what == "cells":
        return dataclasses.replace(s, cells=(s.cells[0] + by, *s.cells[1:]))
    if what == "column":
        return dataclasses.replace(
            s, cells=(*s.cells, 1 + by % 50), nominal=(*s.nominal, False), file_columns=s.file_columns + 1
        )
    rounds = s.params.total_rounds(s.p)
    return dataclasses.replace(s, params=dataclasses.replace(s.params, rounds=rounds + by))


@pytest.mark.property
@property_settings(300)
@given(shapes(), st.sampled_from(["n", "m", "cells", "column", "rounds"]), st.integers(1, 10**6))
def test_the_forecast_never_falls_as_what_drives_it_grows(shape, what, by):
    if what == "rounds" and shape.mechanism != "aim":
        what = "n"
    bigger = _grown(shape, what, by)
    for prefect in (False, True):
        a, b = need(shape, prefect=prefect), need(bigger, prefect=prefect)
        assert b.memory >= a.memory and b.seconds >= a.seconds, (what, a, b)
        assert a.memory > 0 and a.seconds > 0


def test_synthetic_rows_beyond_the_machine_are_refused_naming_the_field(tmp_path, monkeypatch):
    """Issue 38: 10^12 rows passed validate and the rehearsal, then the release reserved ε = 1
    and died with MemoryError. 10^12 is now beyond the spec's cap (test_size_bounds.py); below
    it, 10^9 rows are refused by the forecast, before the rehearsal and the reserve."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(SECONDS_ENV, raising=False)
    spec = _spec(tmp_path, synthetic_rows=10**9)
    with pytest.raises(ResourceRefused) as e:
        check_resources(spec)
    message = str(e.value)
    assert message.startswith("synthetic_rows: the release would need about ")
    assert "of memory (forecast, from public facts), above the ceiling" in message
    assert "lower synthetic_rows, or raise resources.max_memory_gb (--max-memory)" in message
    assert "Nothing was read, reserved or spent" in message


def test_the_forecast_with_n_refuses_what_the_spec_alone_allows(tmp_path, monkeypatch):
    """n is public: with the fitted rows counted, the input's rows are weighed too."""
    monkeypatch.setenv(MEMORY_ENV, "4")
    spec = _spec(tmp_path)
    check_resources(spec)  # n not counted: the release's terms in n are left out
    assert not forecast_resources(spec, None).release.n_known
    with pytest.raises(ResourceRefused, match=r"^the input's rows \(n\): the release would need about"):
        check_resources(spec, 50_000_000)


def test_the_ceilings_come_from_the_command_line_then_the_spec_then_the_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.delenv(SECONDS_ENV, raising=False)
    default = ceilings(_spec(tmp_path))
    assert default.memory <= DEFAULT_MEMORY_GB * GB and default.seconds == DEFAULT_SECONDS
    assert "the default" in default.memory_from
    declared = ceilings(_spec(tmp_path, resources={"max_memory_gb": 32, "max_seconds": 7200}))
    assert (declared.memory, declared.seconds) == (32 * GB, 7200)
    assert declared.memory_from == "resources.max_memory_gb"
    monkeypatch.setenv(MEMORY_ENV, "2.5")
    monkeypatch.setenv(SECONDS_ENV, "60")
    given_ = ceilings(_spec(tmp_path, resources={"max_memory_gb": 32, "max_seconds": 7200}))
    assert (given_.memory, given_.seconds, given_.memory_from) == (2.5 * GB, 60, "--max-memory")


def test_a_rehearsal_forecast_above_the_ceiling_is_refused_first(tmp_path, monkeypatch):
    monkeypatch.setenv(SECONDS_ENV, "5")
    with pytest.raises(ResourceRefused, match=r"its rehearsal would need about .* of time"):
        check_resources(_spec(tmp_path))


@pytest.mark.parametrize("bad", [True, "8GB", 0, -1, float("inf")])
def test_a_ceiling_in_the_spec_must_be_a_positive_number(tmp_path, bad):
    from dprelease.spec import SpecError

    with pytest.raises(SpecError, match=r"spec field 'resources\.max_memory_gb'"):
        _spec(tmp_path, resources={"max_memory_gb": bad})


def test_every_mechanism_has_its_terms():
    from dprelease.mechanisms.resources import MECHANISM_TERMS

    assert set(MECHANISM_TERMS) == set(MECHANISMS)


def _calibration_runs():
    import json

    from tests.helpers import ROOT

    runs = json.loads((ROOT / "benchmarks" / "resources_measured.json").read_text())["runs"]
    return [r for r in runs if r["mode"] != "none"]


@pytest.mark.parametrize("run", _calibration_runs(), ids=lambda r: r["label"])
def test_the_forecast_bounds_every_calibration_run(run, tmp_path):
    """The model's forecast exceeds each measured run of ``benchmarks/bench_resources.py``
    (the release's steps without Prefect, or the rehearsal): CPU time and peak memory."""
    import importlib.util

    from tests.helpers import ROOT

    loaded = importlib.util.spec_from_file_location(
        "bench_resources", ROOT / "benchmarks" / "bench_resources.py"
    )
    assert loaded is not None and loaded.loader is not None
    bench = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(bench)
    config = next(c for c in bench.GRID if c[0] == run["label"])
    memory, seconds = bench.forecast(config, tmp_path)
    assert seconds >= run["cpu"] and memory >= run["peak"], (seconds, memory, run)


def test_the_replicates_term_bounds_the_replicates_cpu_time():
    """The query intervals' replicates (10 refits, the held-out draws) are forecast: their
    CPU time, measured through the flow's own functions on a 5,000-row table, stays under
    the term (with the margin every term gets)."""
    synth = MECHANISMS["factor_gauss"]
    params = synth.params_type(target="band")
    plan = plan_budget("zcdp", 1.0, 1e-6, synth.stage_weights(GENERATED, params))
    table = generated_table(5000, 0)
    bins = table_to_bins(table, GENERATED)
    fit = synth.fit(
        table_to_rows(table, bins, GENERATED), GENERATED, plan, params, m=5000, rng=np.random.default_rng(0)
    )
    started = time.process_time()
    bootstrap(synth, fit.rows.bins, GENERATED, plan, params, 5000, REPLICATES, 0)
    held_out(synth, fit.stages[1].state, GENERATED, params, noisy_tables(fit.measurements), 5000, 0)
    spent = time.process_time() - started
    shape = Shape(
        "factor_gauss",
        params,
        tuple(GENERATED.n_bins),
        tuple(False for _ in GENERATED.columns),
        6,
        5000,
        None,
        replicates=REPLICATES,
        held_out=LOO_TABLES,
    )
    term = next(t for t in need(shape, prefect=False).terms if t.field == "the query intervals' replicates")
    assert spent <= SECONDS_MARGIN * term.seconds, (spent, term.seconds)
    print(f"replicates: {spent:.2f} s of CPU, forecast {SECONDS_MARGIN * term.seconds:.2f} s")
