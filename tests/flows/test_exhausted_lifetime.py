"""Issue 30: a lifetime budget that one release uses up. That release publishes; the next
one is refused (exit 4) before the data is read, and nothing is spent; releases started
together leave one published and the others refused; ``dprelease ledger show`` works on
every state a ledger can be in. Before, the headroom's root search at vanishing rho
crashed the release after its noise was drawn, every later refusal, and ``ledger show``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.ledger import Ledger
from dprelease.mechanisms.accounting import plan_budget
from dprelease.mechanisms.discovery import discovery_plan
from tests.helpers import (
    PURE_PLAN,
    ROOT,
    adult_rows,
    assert_nothing_published,
    assert_nothing_spent,
    cli_text,
    ledger_rows,
    record_release,
    write_spec,
)

DPRELEASE = str(Path(sys.executable).parent / "dprelease")
USED_UP = "the lifetime budget is used up: no further release of this dataset fits in it"


def _spec(folder: Path) -> Path:
    """300 demo rows, checks off, epsilon 1 = the lifetime epsilon."""
    privacy = {"epsilon": 1.0, "delta": 1e-6, "lifetime_epsilon": 1.0}
    return write_spec(folder, adult_rows(300), checks={"enabled": False}, privacy=privacy)


def _show(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ledger", "show", *args], terminal_width=200)
    return result.exit_code, cli_text(result.output)


# ---------------------------------------------------------------- `ledger show` on every state


def _non_dp(led: Ledger) -> None:
    not_dp = ["spectral anonymization has no privacy parameter"]
    led.reserve(
        dataset="d", release_id="x", mechanism="spectral", plan=PURE_PLAN, lifetime=None, not_dp=not_dp
    )
    led.mark_unprotected("x")
    led.finish("x", "released")


def _ledgers(folder: Path) -> dict[str, tuple[str, str]]:
    """One SQLite ledger per state, by name: (its URL, what ``ledger show`` must say)."""
    zcdp, big = plan_budget("zcdp", 1.0, 1e-6, {"a": 1.0}), plan_budget("zcdp", 100.0, 1e-6, {"a": 1.0})
    pure = plan_budget("pure", 1.0, 0.0, {"a": 1.0, "b": 2.0, "c": 0.3})
    states = {
        "empty": (lambda led: None, "hash chain intact"),
        "used up under zCDP": (
            lambda led: record_release(led, "r", plan=zcdp, lifetime=(1.0, 1e-6)),
            USED_UP,
        ),
        "used up, pure, delta 0": (
            lambda led: record_release(led, "r", plan=pure, lifetime=(1.0, 0.0)),
            USED_UP,
        ),
        "void": (_non_dp, "guarantee VOID since release 'x'"),
        "discovery's delta set aside, used up": (
            lambda led: record_release(led, "s", plan=discovery_plan(1.0, 1e-7), lifetime=(1.0, 1e-6)),
            USED_UP,
        ),
        "discovery's delta set aside, room left": (
            lambda led: record_release(led, "s", plan=discovery_plan(1.0, 1e-7), lifetime=(5.0, 1e-6)),
            "no release at delta 1e-06 fits any more, but the lifetime budget is not used up",
        ),
        "rho above 355 spent (lifetime epsilon 1000)": (
            lambda led: [record_release(led, f"r{i}", plan=big, lifetime=(1000.0, 1e-6)) for i in range(8)],
            "the next release can take epsilon up to",
        ),
    }
    made = {}
    for i, (name, (build, says)) in enumerate(states.items()):
        url = f"sqlite:///{folder / f'ledger-{i}.db'}"
        with Ledger(url) as led:
            build(led)
        made[name] = (url, says)
    return made


def test_ledger_show_works_on_every_state_of_a_ledger(tmp_path):
    for name, (url, says) in _ledgers(tmp_path).items():
        code, text = _show("--ledger", url)
        assert code == 0 and says in text, (name, text)
        assert (_show("--ledger", url, "--json")[0], name) == (0, name)


# ---------------------------------------------------------------- end to end: the CLI


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_a_release_of_the_whole_lifetime_publishes_and_the_next_is_refused_before_reading(tmp_path):
    spec, out, runner = _spec(tmp_path), tmp_path / "out", CliRunner()
    first = runner.invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "whole"])
    assert first.exit_code == 0, first.output
    assert (out / "whole" / "public" / "synthetic.csv").is_file()
    doc = json.loads((out / "whole" / "public" / "release.json").read_text())
    life = doc["privacy"]["ledger_record"]["lifetime"]
    assert life["next_epsilon_max"] == 0.0 and life["spent_epsilon"] <= 1.0
    (tmp_path / "data.csv").write_text("this is not the data\x00")  # never read: refused first
    second = runner.invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "next"])
    assert second.exit_code == 4, second.output
    assert "The lifetime budget is used up: no further release" in cli_text(second.output)
    assert_nothing_spent(out, "next")
    assert_nothing_published(out, "next")
    assert [r["status"] for r in ledger_rows(out, "next")] == ["refused"]
    code, text = _show("--out", str(out))
    assert code == 0 and "adult: spent epsilon 1 at delta 1e-06" in text and USED_UP in text, text
    shown = runner.invoke(app, ["audit", "show", str(out / "whole")], terminal_width=200)
    assert shown.exit_code == 0 and USED_UP in cli_text(shown.output), shown.output


def _api_env(folder: Path) -> dict[str, str]:
    """This process's environment with the test server's API (``prefect_harness``), and
    no dataset slot: the releases race for the ledger, as the issue's runs did."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if k != "DPRELEASE_DATASET_SLOT"}
    return {
        **env,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_HOME": str(folder / "prefect-home"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "GX_ANALYTICS_ENABLED": "false",
    }


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_releases_started_together_on_a_lifetime_one_release_fills_leave_one_published(tmp_path):
    """Three CLI processes at once: exactly one publishes; the others exit 4 with the
    lifetime's refusal (from the CLI's pre-check or the ledger's reservation, whichever
    they reach first) and spend nothing. Before, they crashed in ``allocate_budget``."""
    spec, out, env = _spec(tmp_path), tmp_path / "out", _api_env(tmp_path)
    procs = {
        rid: subprocess.Popen(
            [DPRELEASE, "release", str(spec), "--out", str(out), "--release-id", rid],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rid in ("a", "b", "c")
    }
    said = {}
    try:
        for rid, p in procs.items():
            said[rid] = "".join(p.communicate(timeout=300))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = {rid: p.returncode for rid, p in procs.items()}
    assert sorted(codes.values()) == [0, 4, 4], (codes, said)
    (published,) = [rid for rid, code in codes.items() if code == 0]
    assert (out / published / "public" / "synthetic.csv").is_file()
    for rid in set(codes) - {published}:
        text = cli_text(said[rid])
        assert "lifetime budget of dataset 'adult'" in text and "used up" in text, text
        assert "Traceback" not in said[rid]
        assert_nothing_spent(out, rid)
        assert_nothing_published(out, rid)
