"""Hostile specs that load (issue 30): each ends published, or refused with nothing spent,
never charged-and-failed. ``tests/hostile_specs.py`` holds the specs that the loader itself
refuses (``tests/flows/test_cli_markup.py`` runs them through validate and release); these
get past it and meet the rehearsal, the readers and the forecast. Before the rehearsal, the
formula cases drew their noise and then failed in ``write_bundle`` (OverflowError) or were
published as empty columns without a word.

Other hostile inputs of the issue live with their subject: a lifetime that one release uses
up (``test_exhausted_lifetime.py``), passwords in ledger URLs (``test_ledger_secrets.py``),
a folder as the data path and a header with a quoted line break (``test_init_cli.py``,
``tests/engines/test_read_refusals.py``), a locked ledger (``tests/ledger/test_secrets.py``),
a bundle folder that is also the ledger (``test_discovery_cli.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from tests.helpers import (
    DEMO_SPEC,
    adult_rows,
    assert_nothing_published,
    assert_nothing_spent,
    cli_text,
    ledger_rows,
    write_spec,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]


def _schema(**extra: dict) -> dict:
    return {**DEMO_SPEC["schema"], **extra}


def _dates(df: pd.DataFrame) -> pd.DataFrame:
    days = np.random.default_rng(0).integers(0, 200_000, len(df))
    df["seen"] = (pd.Timestamp("1678-01-01") + pd.to_timedelta(days, "D")).strftime("%Y-%m-%d")
    return df


@dataclass(frozen=True)
class Case:
    name: str
    outcome: str  # "published" or the words of the refusal (nothing spent)
    spec: dict = field(default_factory=dict)
    data: Callable[[pd.DataFrame], pd.DataFrame] = lambda df: df
    seed: bool = True  # --insecure-seed: numpy's samplers (faster); False: OpenDP's vetted ones


CASES = [
    Case(
        "formula-empty-everywhere",
        "column 'over': formula 'log(age - 200)' gives no finite value for any values",
        {"schema": _schema(over={"type": "derived", "formula": "log(age - 200)"})},
        lambda df: df.assign(over=""),
    ),
    Case(
        "formula-overflows",
        "column 'big': formula 'age ** 400' gives no finite value",
        {"schema": _schema(big={"type": "derived", "formula": "age ** 400"})},
        lambda df: df.assign(big=""),
    ),
    Case(
        "formula-divides-by-zero",
        "column 'z': formula '1 / (age - age)' gives no finite value",
        {"schema": _schema(z={"type": "derived", "formula": "1 / (age - age)"})},
        lambda df: df.assign(z=""),
    ),
    Case(
        "formula-empty-somewhere",
        "published",
        {"schema": _schema(lg={"type": "derived", "formula": "log(capital_gain)"})},
        lambda df: df.assign(lg=""),
    ),
    Case(
        "id-hex-60000-rows",
        "published",
        {"schema": _schema(row={"type": "id", "format": "R-{:x}"}), "synthetic_rows": 60_000},
        lambda df: df.assign(row=[f"person-{i}" for i in range(len(df))]),
    ),
    Case(
        "dates-at-the-engine-edges",
        "published",
        {"schema": _schema(seen={"type": "date", "bounds": ["1678-01-01", "2261-12-31"]})},
        _dates,
    ),
    Case("epsilon-tiny", "the noise", {"privacy": {"epsilon": 0.001, "delta": 1e-6}}),
    Case("epsilon-largest", "published", {"privacy": {"epsilon": 100.0, "delta": 1e-9}}, seed=False),
    Case(
        "categories-at-the-cap",
        "published",
        {"schema": _schema(code={"type": "nominal", "categories": [f"c{i}" for i in range(10_000)]})},
        lambda df: df.assign(code=[f"c{i % 7}" for i in range(len(df))]),
    ),
    Case(
        "local-engine-derived-and-ids",
        "published",
        {
            "schema": _schema(
                row={"type": "id", "format": "S{:012d}"}, older={"type": "derived", "formula": "age + 1"}
            ),
            "engine": {"name": "local", "chunk_rows": 1_000},
        },
        lambda df: df.assign(row="x", older=""),
    ),
    Case(
        "keeps-row-order-with-derived",
        "published",
        {
            "schema": _schema(age2={"type": "derived", "formula": "age * 2", "integer": True}),
            "mechanism": {"name": "dpfm", "params": {}},
            "privacy": {"epsilon": 1.0, "delta": 0.0, "accountant": "pure"},
        },
        lambda df: df.assign(age2=""),
    ),
    Case(
        "a-value-outside-declared-values",
        "column 'kids': values must be among the 4 declared numbers",
        {"schema": _schema(kids={"type": "continuous", "bounds": [0, 3], "values": [0, 1, 2, 3]})},
        lambda df: df.assign(kids=[i % 4 if i != 5 else 2.5 for i in range(len(df))]),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_spec_that_loads_is_published_or_refused_with_nothing_spent(tmp_path, case):
    data = case.data(adult_rows(200))
    spec = write_spec(tmp_path, data, checks={"enabled": False}, **case.spec)
    out = tmp_path / "out"
    args = ["release", str(spec), "--out", str(out), "--release-id", "r"]
    result = CliRunner().invoke(app, args + (["--insecure-seed", "1"] if case.seed else []))
    text = cli_text(result.output)
    if case.outcome == "published":
        assert result.exit_code == 0, text
        assert (out / "r" / "public" / "synthetic.csv").is_file() or (out / "r" / "public").is_dir()
        (row,) = ledger_rows(out, "r")
        assert row["status"] == "released"
        return
    assert result.exit_code in (2, 4), text
    assert case.outcome in text, text
    assert_nothing_published(out, "r")
    assert_nothing_spent(out, "r")
