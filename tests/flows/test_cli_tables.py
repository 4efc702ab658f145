"""Issue 18: ``dprelease mechanisms`` and ``dprelease audit show`` print everything at an
80-column terminal (no cell cut to "…"; the mechanisms' stage weights listed), and both
give the same data as JSON with ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dprelease.bundle.document import accuracy_of
from dprelease.cli.main import app
from dprelease.mechanisms.factor_gauss import FactorGaussParams
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

STATISTICS = ("histogram[marital_status]", "histogram[hours-per-week]", "histogram[native-country]")


def _run(*args: str) -> tuple[int, str]:
    """Run the CLI on an 80-column terminal; its exit code and output."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"}, terminal_width=80)
    return result.exit_code, result.output


def _fits(output: str) -> None:
    assert "…" not in output
    assert max(len(line) for line in output.splitlines()) <= 80


def _bundle(folder: Path) -> tuple[Path, dict]:
    """A zCDP release.json with long statistic names, two stages and a lifetime account."""
    rho = 0.0008118656786512789

    def measurement(stage: str, statistic: str, dim: int) -> dict:
        return {
            "stage": stage,
            "statistic": statistic,
            "mechanism": "gaussian",
            "sensitivity": 1.4142135623730951,
            "sensitivity_norm": "l2",
            "noise_scale": 35.09602323598885,
            "rho": rho,
            "epsilon": None,
            "dimension": dim,
        }

    doc = {
        "release_id": "adult-20261124t062614z",
        "dataset": "adult",
        "status": "released",
        "mechanism": {"name": "factor_gauss"},
        "differentially_private": True,
        "randomness": {"fit_for_publication": True},
        "privacy": {
            "accountant": "zcdp",
            "input_rows_n_public": 30162,
            "ledger": {
                "defects": [],
                "stages": [
                    {"stage": "marginals", "weight": 0.5, "rho_allocated": 3 * rho, "rho_spent": 3 * rho},
                    {"stage": "moments", "weight": 0.5, "rho_allocated": 3 * rho, "rho_spent": 3 * rho},
                ],
                "measurements": [
                    *(measurement("marginals", s, 42) for s in STATISTICS),
                    measurement("moments", "latent_second_moment", 120),
                ],
                "totals": {
                    "rho": 6 * rho,
                    "epsilon": 0.5,
                    "delta": 1e-06,
                    "conversion": "rho-zCDP -> (epsilon, delta)-DP, Canonne-Kamath-Steinke 2020 Cor. 13",
                },
            },
            "ledger_record": {
                "dataset_guarantee": {
                    "void_since": None,
                    "statement": "every release of this dataset so far was differentially private",
                },
                "lifetime": {
                    "epsilon": 1.2,
                    "delta": 1e-06,
                    "spent_epsilon": 0.5,
                    "spent_delta": 1e-06,
                    "rule": "basic composition: sums of epsilon and delta",
                    "next_epsilon_max": 0.7,
                    "next_epsilon_at_delta": 1e-06,
                    "rho_left": 0.02,
                    "releases_counted": 1,
                },
            },
        },
    }
    doc["privacy"]["accuracy"] = accuracy_of(doc["privacy"]["ledger"], 30162)
    bundle = folder / doc["release_id"]
    (bundle / "public").mkdir(parents=True)
    (bundle / "public" / "release.json").write_text(json.dumps(doc))
    return bundle, doc


def test_mechanisms_lists_every_stage_weight_uncut_at_80_columns():
    code, output = _run("mechanisms")
    assert code == 0, output
    _fits(output)
    every_kind = Schema((Continuous("x", 0.0, 1.0), Ordinal("o", ("lo", "hi")), Nominal("c", ("a", "b"))))
    for name, m in MECHANISMS.items():
        assert name in output
        for stage, weight in m.stage_weights(every_kind, m.params_type()).items():
            assert f"{stage}: {weight:.4g}" in output, (name, stage)
    assert "variant = 'corrected'" in output
    assert "╭─ auto ─" in output  # mechanism: auto, and its rule


def test_mechanisms_json_has_the_registry_stage_weights():
    code, output = _run("mechanisms", "--json")
    assert code == 0, output
    listing = {m["name"]: m for m in json.loads(output)}
    assert list(listing) == list(MECHANISMS)
    factor_gauss = listing["factor_gauss"]
    schema = Schema((Continuous("x", 0.0, 1.0),))
    assert factor_gauss["stage_weights"] == MECHANISMS["factor_gauss"].stage_weights(
        schema, FactorGaussParams()
    )
    assert factor_gauss["params"]["clip"] == FactorGaussParams().clip
    assert set(factor_gauss) == {"name", "accountants", "params", "stage_weights", "rows", "description"}


def test_audit_show_prints_full_names_at_80_columns(tmp_path):
    bundle, _ = _bundle(tmp_path)
    code, output = _run("audit", "show", str(bundle))
    assert code == 0, output
    _fits(output)
    for name in (*STATISTICS, "latent_second_moment", "marginals", "moments", "gaussian 35.096"):
        assert name in output, name
    # issue 16: each statistic's expected error: E|e| = σ√(2/π) = 28.0 per count, and a
    # 42-cell histogram of 30,162 rows moves by 42·28.0/(2·30162) = 0.0195 in TVD
    assert "±28, TVD 0.019" in " ".join(output.split())
    assert "expected error" in output


def test_audit_show_json_has_the_bundle_totals(tmp_path):
    bundle, doc = _bundle(tmp_path)
    code, output = _run("audit", "show", str(bundle), "--json")
    assert code == 0, output
    shown = json.loads(output)
    book, record = doc["privacy"]["ledger"], doc["privacy"]["ledger_record"]
    assert shown["totals"] == book["totals"]
    assert shown["stages"] == book["stages"] and shown["measurements"] == book["measurements"]
    assert shown["accuracy"] == doc["privacy"]["accuracy"]
    assert shown["lifetime"] == record["lifetime"]
    assert shown["dataset_guarantee"] == record["dataset_guarantee"]


def test_release_help_lists_each_exit_code_on_its_own_line():
    """Issue 18: the exit codes were one paragraph that wrapped "3 a gate\\n failed" and said
    a data error read nothing."""
    result = CliRunner().invoke(app, ["release", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    assert "3  a gate failed: budget spent, nothing published" in lines
    assert "0  published" in lines and "1  an unexpected error" in lines
    assert "nothing read or spent)" not in result.output.split("4  refused")[0]
