"""Issue 17: the CLI prints through Rich, which reads ``[...]`` as markup. Text the user
or a file supplied (a spec path, a release id, the pattern it must match, a column name,
a bundle's or a ledger's strings, a help text) is printed literally: no MarkupError (exit
1 instead of the refusal's code), nothing eaten. The flow is replaced by a tripwire: none
of these runs reaches it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import typer.main
from rich.text import Text
from typer.testing import CliRunner

from flows.cli import app
from flows.console import console, fail
from ledger import Ledger
from tests.helpers import TOY_SCHEMA, cli_text, record_release, toy_schema, write_spec


@pytest.fixture(autouse=True)
def _no_flow(monkeypatch):
    import flows.release

    def tripwire(*args, **kwargs):
        raise AssertionError("the flow started")

    monkeypatch.setattr(flows.release, "release", tripwire)
    monkeypatch.setattr(console, "width", 1000)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, cli_text(result.output)


def test_fail_prints_message_and_hint_as_text():
    with console.capture() as out, pytest.raises(typer.Exit) as exit_:
        fail("spec 'a[/foo]b' and [bold]c[/bold]", "match [a-z0-9][a-z0-9-]*", 2)
    assert exit_.value.exit_code == 2
    text = cli_text(out.get())
    assert "spec 'a[/foo]b' and [bold]c[/bold]" in text and "Next: match [a-z0-9][a-z0-9-]*" in text


@pytest.mark.parametrize("command", ["release", "validate"])
@pytest.mark.parametrize("name", ["nonexist[/foo].yaml", "x[bold]y.yaml", "a[red]b[/red].yaml"])
def test_a_missing_spec_path_is_printed_as_given(command, name, tmp_path):
    spec = tmp_path / name
    code, text = _run(command, str(spec), *(["--out", str(tmp_path / "out")] if command == "release" else []))
    assert code == 2, text
    assert f"spec file '{spec}' does not exist" in text


def test_the_release_id_pattern_is_printed_literally(tmp_path):
    spec = write_spec(tmp_path, release_id="Not_an_id", schema=TOY_SCHEMA, checks={})
    code, text = _run("release", str(spec), "--out", str(tmp_path / "out"))
    assert code == 2, text
    assert "'^[a-z0-9][a-z0-9-]{0,79}$'" in text


def test_a_release_id_with_brackets_is_printed_literally(tmp_path):
    spec = write_spec(tmp_path, schema=TOY_SCHEMA, checks={})
    code, text = _run("release", str(spec), "--out", str(tmp_path / "out"), "--release-id", "x[bold]y[/z]")
    assert code == 2, text
    assert "x[bold]y[/z]" in text


def test_validate_prints_the_spec_path_and_column_names_literally(tmp_path):
    folder = tmp_path / "d[bold]"
    folder.mkdir()
    schema = {"x[/x]": TOY_SCHEMA["x"], "k[bold]": TOY_SCHEMA["k"], "c": TOY_SCHEMA["c"]}
    (folder / "data.csv").write_text('"x[/x]","k[bold]",c\n0.5,3,a\n0.2,7,b\n0.4,2,a\n')
    # ε = 100: at ε = 1 the budget forecast refuses 3 rows (noise s.d. 15.7 ≥ n)
    spec = write_spec(
        folder, schema=schema, checks={"enabled": False}, privacy={"epsilon": 100.0, "delta": 1e-6}
    )
    code, text = _run("validate", str(spec))
    assert code == 0, text
    assert f"{spec}: 9 expectations" in text
    assert "x[/x]" in text and "k[bold]" in text


def test_validate_prints_the_bounds_rule_literally(tmp_path):
    """A rule quoting the public bounds: [a, b] is never read as a tag (it names a column
    and a rule, never a value)."""
    (tmp_path / "data.csv").write_text("x,k,c,o\n0.5,3,a,lo\n0.2,70,b,hi\n")
    spec = write_spec(tmp_path, schema=toy_schema(k={"bounds": [0, 10]}), checks={})
    code, text = _run("validate", str(spec))
    assert code == 2, text
    assert "values must lie within the public bounds [0, 10]" in text


def _bundle(folder: Path, dataset: str, stage: str) -> Path:
    """A release.json with the fields ``audit show`` prints, strings with markup in them."""
    doc = {
        "release_id": "r1",
        "dataset": dataset,
        "status": "released",
        "mechanism": {"name": "factor_gauss"},
        "differentially_private": False,
        "randomness": {"fit_for_publication": True},
        "privacy": {
            "accountant": "pure",
            "input_rows_n_public": 100,
            "ledger": {
                "defects": ["statistic [bold]s[/bold] used without noise"],
                "stages": [{"stage": stage, "weight": 1.0, "epsilon_allocated": 1.0, "epsilon_spent": 1.0}],
                "measurements": [
                    {
                        "stage": stage,
                        "statistic": "m[/i]",
                        "mechanism": "laplace",
                        "sensitivity": 1.0,
                        "sensitivity_norm": "l1",
                        "noise_scale": 1.0,
                        "epsilon": 1.0,
                        "dimension": 3,
                    }
                ],
                "totals": {"epsilon": 1.0, "delta": 0.0, "conversion": "none [pure]"},
            },
        },
    }
    bundle = folder / "r1"
    (bundle / "public").mkdir(parents=True)
    (bundle / "public" / "release.json").write_text(json.dumps(doc))
    return bundle


def test_audit_show_prints_the_bundle_strings_literally(tmp_path):
    """A bundle is not trusted: its strings are printed as they are, never as markup."""
    bundle = _bundle(tmp_path, "d[bold]x[/foo]", "st[red]age")
    code, text = _run("audit", "show", str(bundle))
    assert code == 0, text
    for s in ("'d[bold]x[/foo]'", "statistic [bold]s[/bold] used", "st[red]age", "m[/i]", "none [pure]"):
        assert s in text


def test_ledger_show_prints_the_ledger_strings_literally(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        record_release(led, "r1", dataset="d[/x]")
    code, text = _run("ledger", "show", "--ledger", url)
    assert code == 0, text
    assert text.count("d[/x]") == 2  # the table and the account line


def _help_texts(command, path: str):
    yield path, command.help or ""
    for p in command.params:
        yield f"{path} {p.name}", getattr(p, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from _help_texts(sub, f"{path} {name}")


def test_help_texts_hold_no_markup():
    """Typer renders help as Rich markup: a pattern such as [a-z0-9-] in a help text would
    vanish from --help. Every help text must read the same as markup and as text."""
    for where, help_text in _help_texts(typer.main.get_command(app), "dprelease"):
        assert Text.from_markup(help_text).plain == help_text, where
