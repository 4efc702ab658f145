"""The one fit road (issue 41, ``engines/road.py``): the flow's tasks wrap its steps, the
Python API runs it in memory (no file written), and it runs the mechanism's steps in their
order, each noisy step inside its spend bracket."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import pyarrow as pa
import pytest

import dprelease
from dprelease.engines import road
from dprelease.mechanisms.primitives import Measurement, release_streams

ROWS = 600


@pytest.fixture(scope="module")
def demo() -> tuple[dprelease.Spec, pd.DataFrame]:
    spec = dprelease.Spec.demo()
    return spec, pd.read_csv(spec.data_path).head(ROWS)


class _Recorder:
    """``road.Steps`` that calls each step directly and records what happened, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def run(self, step: road.RoadStep, fn: Callable[..., object], *args: object) -> object:
        self.log.append(f"run {step}")
        return fn(*args)

    @contextmanager
    def spending(self, step: road.Spend) -> Iterator[Callable[[tuple[Measurement, ...]], None]]:
        self.log.append(f"open {step}")
        yield lambda measurements: self.log.append(f"record {step} {len(measurements)}")
        self.log.append(f"close {step}")


def test_the_road_runs_each_noisy_step_inside_its_bracket(demo) -> None:
    spec, data = demo
    model = spec.model
    table = road.checked_input(model, pa.Table.from_pandas(data, preserve_index=False))
    steps = _Recorder()
    fit = road.synthesise(model, model.budget_plan(), table, release_streams(0), steps)
    assert [e for e in steps.log if e.startswith(("open", "run", "close"))] == [
        "open encode", "run encode", "close encode",
        "open estimate", "run estimate_private_moments", "close estimate",
        "open sample", "run project_and_sample", "close sample",
        "run decode",
    ]  # fmt: skip
    recorded = sum(int(e.split()[-1]) for e in steps.log if e.startswith("record"))
    assert recorded == sum(len(s.measurements) for s in fit.stages) > 0
    assert len(fit.synthetic) == fit.m == len(table)


def test_the_flow_s_tasks_wrap_the_road_s_steps() -> None:
    """Each Prefect task of a step calls the road's function (not a copy of it)."""
    from dprelease.tasks.synthesis import TASKS

    called = {
        "encode": road.encode_step,
        "estimate_private_moments": road.estimate_step,
        "project_and_sample": road.sample_step,
        "decode": road.decode_step,
        "place_on_value_grid": road.grid_step,
    }
    assert set(TASKS) == set(called) == set(road.RoadStep.__args__)
    for step, fn in called.items():
        source = inspect.getsource(inspect.unwrap(TASKS[step].fn))
        assert f"road.{fn.__name__}(" in source, step
        assert list(inspect.signature(inspect.unwrap(TASKS[step].fn)).parameters) == list(
            inspect.signature(fn).parameters
        ), step


def test_synthesize_reads_a_dataframe_in_memory(demo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's in-process fit writes nothing to disk: the table goes to the reader in memory."""
    spec, data = demo

    def no_file(*args: object, **kwargs: object) -> None:
        raise AssertionError("synthesize wrote the DataFrame to a file")

    monkeypatch.setattr("dprelease.engines.frames.write_frame", no_file)
    monkeypatch.setattr("dprelease.api.write_frame", no_file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dprelease.NotForPublication)
        out = dprelease.synthesize(data, spec, seed=0)
        again = dprelease.synthesize(data, spec, seed=0)
    assert len(out) == len(data)
    pd.testing.assert_frame_equal(out, again)
