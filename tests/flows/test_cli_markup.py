"""Issue 17: the CLI prints through Rich, which reads ``[...]`` as markup. Text the user
or a file supplied (a spec path, a release id, the pattern it must match, a column name,
a bundle's or a ledger's strings, a help text) is printed literally: no MarkupError (exit
1 instead of the refusal's code), nothing eaten. Issue 30: nor a control character (an
escape sequence setting the window title or the colours): it is shown as ``\x1b``. The
flow is replaced by a tripwire: none of these runs reaches it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import typer.main
from rich.text import Text
from typer.testing import CliRunner

from dprelease.cli.console import console, fail, shown
from dprelease.cli.main import app
from dprelease.ledger import Ledger
from dprelease.spec.columns import CONTROLS
from tests.helpers import TOY_SCHEMA, adult_rows, cli_text, record_release, toy_schema, write_spec
from tests.hostile_specs import CORPUS


@pytest.fixture(autouse=True)
def _no_flow(monkeypatch):
    import dprelease.flows.release

    def tripwire(*args, **kwargs):
        raise AssertionError("the flow started")

    monkeypatch.setattr(dprelease.flows.release, "release", tripwire)
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


# ---------------------------------------------------------------- issue 30: terminal escape sequences

OSC = "\x1b]0;pwned\x07"  # sets the terminal's window title
SGR = "\x1b[31m"  # turns the text red


def _no_controls(output: str) -> None:
    """No control character reaches the terminal but the newline (the CLI's own output is
    plain text here: CliRunner is not a terminal, so Rich emits no styles)."""
    assert not CONTROLS.search(output.replace("\n", "")), repr(output)


def test_shown_escapes_markup_and_control_characters_but_the_newline():
    assert shown(f"a{OSC}[bold]b\x9b\x7f\r\n") == "a\\x1b]0;pwned\\x07\\[bold]b\\x9b\\x7f\\x0d\n"
    with console.capture() as out, pytest.raises(typer.Exit):
        fail(f"column '{OSC}x'", f"rename {SGR}it", 2)
    _no_controls(out.get())
    assert "column '\\x1b]0;pwned\\x07x'" in cli_text(out.get()) and "rename \\x1b[31mit" in cli_text(
        out.get()
    )


def test_validate_shows_an_escape_sequence_in_a_column_name_as_text(tmp_path):
    """Issue 30: a column name with an escape sequence was printed to the terminal raw; the
    spec now refuses it, and the refusal shows it escaped."""
    name = f"x{OSC}"
    (tmp_path / "data.csv").write_text(f'"{name}",k,c\n0.5,3,a\n0.2,7,b\n0.4,2,a\n')
    schema = {name: dict(TOY_SCHEMA["x"]), "k": TOY_SCHEMA["k"], "c": TOY_SCHEMA["c"]}
    spec = write_spec(
        tmp_path, schema=schema, checks={"enabled": False}, privacy={"epsilon": 100.0, "delta": 1e-6}
    )
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    _no_controls(result.output)
    assert "schema.x\\x1b]0;pwned\\x07" in cli_text(result.output)


def test_a_draft_from_a_header_with_an_escape_sequence_is_shown_escaped(tmp_path):
    """``dprelease init`` writes the header's names into the draft (YAML escapes them);
    ``validate`` of the draft names them as visible escapes, never raw."""
    (tmp_path / "data.csv").write_text(f'age,"{SGR}sex{OSC}"\n30,f\n')
    code, text = _run("init", str(tmp_path / "data.csv"))
    assert code == 0, text
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "data.yaml")])
    assert result.exit_code == 2, result.output
    _no_controls(result.output)
    assert "schema.\\x1b[31msex\\x1b]0;pwned\\x07.type" in cli_text(result.output)


def test_audit_show_and_ledger_show_escape_control_characters(tmp_path):
    """A bundle and a ledger are not trusted: their strings reach the terminal escaped."""
    bundle = _bundle(tmp_path, f"d{OSC}", f"st{SGR}age")
    result = CliRunner().invoke(app, ["audit", "show", str(bundle)])
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert "d\\x1b]0;pwned\\x07" in result.output and "st\\x1b[31mage" in result.output
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        record_release(led, "r1", dataset=f"d{SGR}")
    result = CliRunner().invoke(app, ["ledger", "show", "--ledger", url])
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert "d\\x1b[31m" in result.output


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_validate_and_release_refuse_every_hostile_spec_before_anything_runs(case, tmp_path):
    """The hostile corpus (tests/hostile_specs.py) at the CLI: exit 2 naming the field, no
    control character on the terminal, nothing in the output folder (the flow's tripwire
    stays untouched)."""
    spec = case.write(tmp_path, adult_rows(50))
    for args in (["validate", str(spec)], ["release", str(spec), "--out", str(tmp_path / "out")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args[0], result.output)
        _no_controls(result.output)
        assert case.field in cli_text(result.output), (args[0], result.output[-1000:])
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
