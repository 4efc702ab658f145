"""Hostile and broken input (issue 6): each case gets a clear message naming the column
or field and the rule, a non-zero exit, nothing published and, when no noise was drawn,
no budget spent.

Issue bullet → tests:

* missing file → ``test_cli_refuses_bad_input[missing-file]``
* unreadable or truncated CSV/Parquet → ``test_unreadable_or_truncated_files``
* header mismatch → ``test_header_mismatch``, ``test_cli_refuses_bad_input[header-mismatch]``
* wrong types → ``test_wrong_types``
* NaN/inf in a continuous column → ``test_nan_and_inf_in_a_continuous_column``
* values outside the public bounds → ``test_out_of_bounds_reject``,
  ``test_out_of_bounds_clip_counts_go_to_internal_only``, ``test_policies_end_to_end``
* unknown category → ``test_unknown_category_reject``, ``test_unknown_category_other``,
  ``test_missing_cell_is_governed_by_missing_not_other``, ``test_other_must_be_declared``,
  ``test_cli_refuses_bad_input[unknown-category]``
* empty data → ``test_empty_data``, ``test_cli_refuses_bad_input[empty-data]``
* fewer rows than the mechanism needs → ``test_min_rows_per_mechanism``,
  ``test_holdout_counts_against_min_rows``, ``test_checks_need_rows``
* ε ≤ 0, NaN or absurdly large → ``test_epsilon_out_of_range``, ``test_cli_refuses_bad_epsilon``
* δ ≥ 1/n → ``test_delta_at_least_one_over_n``, ``test_cli_refuses_bad_input[delta-over-1-n]``
* a release id that already exists → ``test_release_id_that_already_exists``
* output directory not writable → ``test_output_directory_not_writable``,
  ``test_write_errors_become_clear_messages``
* output fills up part way → ``test_disk_fills_up_part_way`` (the spend is kept: fail closed),
  ``test_write_errors_become_clear_messages``, ``test_failure_record_on_a_full_disk``
* fuzz of the spec loader → ``tests/flows/test_spec_fuzz.py``
"""

from __future__ import annotations

import copy
import errno
import gzip
import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from prefect.logging import disable_run_logger
from typer.testing import CliRunner

from engines.inputs import InputValidationError, check_rows
from engines.tables import DataError, table_to_bins, table_to_rows
from flows.cli import app
from mechanisms.errors import DPReleaseError
from mechanisms.registry import MECHANISMS
from spec import SpecError, load_spec
from tasks.validate import validate_input
from tests.flows.helpers import DEMO_SPEC, adult_rows, write_spec

TOY_SCHEMA = {
    "x": {"type": "continuous", "bounds": [0.0, 1.0]},
    "k": {"type": "continuous", "bounds": [0, 10], "integer": True},
    "c": {"type": "nominal", "categories": ["a", "b"]},
    "o": {"type": "ordinal", "levels": ["lo", "mid", "hi"], "missing": "NA"},
}
HEADER = "x,k,c,o\n"
GOOD = "0.5,3,a,lo\n0.2,7,b,hi\n"


def _schema(**columns) -> dict:
    """TOY_SCHEMA with some columns' declarations extended (e.g. policies)."""
    out = copy.deepcopy(TOY_SCHEMA)
    for name, extra in columns.items():
        out[name].update(extra)
    return out


def _toy(tmp_path: Path, csv: str, schema: dict | None = None):
    (tmp_path / "data.csv").write_text(csv)
    return load_spec(write_spec(tmp_path, checks={}, schema=schema or TOY_SCHEMA))


def _validate(spec, tmp_path: Path) -> pd.DataFrame:
    with disable_run_logger():
        return validate_input.fn(spec, tmp_path / "internal")


def _no_counts(message: str) -> None:
    """Our messages about the data never carry a count of affected rows or cells."""
    assert not re.search(r"\d+ (rows?|cells?|values?)\b", message), message


# ---------------------------------------------------------------- files and headers


def _truncated_parquet(path: Path) -> None:
    pd.DataFrame({"x": [0.5] * 50, "k": [3] * 50, "c": ["a"] * 50, "o": ["lo"] * 50}).to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _truncated_gzip(path: Path) -> None:
    data = gzip.compress((HEADER + GOOD * 2000).encode())
    path.write_bytes(data[: len(data) // 2])


def _not_parquet(path: Path) -> None:
    path.write_text(HEADER + GOOD)


@pytest.mark.parametrize(
    ("name", "make"),
    [("data.parquet", _truncated_parquet), ("data.csv.gz", _truncated_gzip), ("data.parquet", _not_parquet)],
    ids=["truncated-parquet", "truncated-csv-gz", "csv-named-parquet"],
)
def test_unreadable_or_truncated_files(name, make, tmp_path):
    make(tmp_path / name)
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": name})
    )
    with pytest.raises(
        DataError, match=r"dataset file '.*" + re.escape(name) + r"' could not be read \(\w+\)"
    ):
        _validate(spec, tmp_path)


def test_csv_cut_mid_row_names_the_columns_it_lacks(tmp_path):
    """A CSV cut off inside its last row: the short row's cells are missing, and the
    rules name the columns."""
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,3")
    with pytest.raises(InputValidationError, match=re.escape("column 'c': missing values are not allowed")):
        _validate(spec, tmp_path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("x,k,c,o,extra", "the data header has 1 column(s) the schema does not declare"),
        ("x,k,c", "column 'o' is declared in the schema but missing from the data"),
        (
            "x,K,c,o",
            "e.g. when the file has none); column 'k' is declared in the schema but missing",
        ),
        ("x,k,c,o,x", "columns ['x'] appear more than once in the data header"),
        ("x,k,c,o,39,39", "1 column name(s) appear more than once in the data header"),
    ],
    ids=["extra", "missing", "case", "duplicate", "duplicate-undeclared"],
)
def test_header_mismatch(header, message, tmp_path):
    width = len(header.split(","))
    row = ",".join((["0.5", "3", "a", "lo"] + ["0.1"] * 4)[:width])
    spec = _toy(tmp_path, f"{header}\n{row}\n")
    with pytest.raises(DataError, match=re.escape(message)):
        _validate(spec, tmp_path)


def test_a_file_without_header_never_quotes_its_first_record(tmp_path):
    spec = _toy(tmp_path, "0.5,3,secret-a,lo\n0.25,4,b,hi\n")
    with pytest.raises(DataError) as raised:
        _validate(spec, tmp_path)
    message = str(raised.value)
    assert "4 column(s) the schema does not declare" in message
    assert "secret-a" not in message and "0.5" not in message


@pytest.mark.parametrize(
    ("frame", "column", "rule"),
    [
        ({"x": ["0.5", "abc"]}, "x", "values must be numbers"),
        ({"k": [1.5, 2.0]}, "k", "values must be whole numbers (integer: true)"),
        ({"x": [True, False]}, "x", "values must be numbers"),
        ({"c": [1, 2]}, "c", "values must be among the 2 declared categories"),
    ],
    ids=["text-in-number", "fraction-in-integer", "bool-in-number", "numbers-in-category"],
)
def test_wrong_types(frame, column, rule, tmp_path):
    df = pd.DataFrame({"x": [0.5, 0.2], "k": [3, 4], "c": ["a", "b"], "o": ["lo", "hi"]})
    for name, values in frame.items():
        df[name] = values
    df.to_parquet(tmp_path / "data.parquet")
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": "data.parquet"})
    )
    with pytest.raises(InputValidationError, match=re.escape(f"column '{column}': {rule}")) as err:
        _validate(spec, tmp_path)
    _no_counts(str(err.value))


@pytest.mark.parametrize("name", ["data.csv", "data.parquet"])
def test_empty_data(name, tmp_path):
    if name.endswith(".csv"):
        (tmp_path / name).write_text(HEADER)
    else:
        pd.DataFrame({c: pd.Series([], dtype=str) for c in TOY_SCHEMA}).to_parquet(tmp_path / name)
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=TOY_SCHEMA, dataset={"name": "toy", "path": name})
    )
    with pytest.raises(
        InputValidationError, match=re.escape(f"dataset file '{tmp_path / name}' has no data rows")
    ):
        _validate(spec, tmp_path)


# ---------------------------------------------------------------- continuous columns: NaN, inf, bounds


@pytest.mark.parametrize("policy", ["reject", "clip"])
@pytest.mark.parametrize(
    ("cell", "rule"),
    [
        ("NaN", "missing values (empty, NA, NaN) are not allowed in a continuous column"),
        ("", "missing values (empty, NA, NaN) are not allowed in a continuous column"),
        ("inf", "values must lie within the public bounds [0, 1]"),
        ("-inf", "values must lie within the public bounds [0, 1]"),
    ],
    ids=["nan", "empty", "inf", "-inf"],
)
def test_nan_and_inf_in_a_continuous_column(policy, cell, rule, tmp_path):
    """NaN is missing, not out of bounds: an error under both policies. ±inf is out of
    bounds: the bounds rule under reject, the nearer bound under clip."""
    spec = _toy(tmp_path, HEADER + GOOD + f"{cell},3,a,lo\n", _schema(x={"out_of_bounds": policy}))
    if policy == "clip" and "inf" in cell:
        df = _validate(spec, tmp_path)
        assert df["x"].iloc[-1] == (1.0 if cell == "inf" else 0.0)
        return
    with pytest.raises(InputValidationError, match=re.escape(f"column 'x': {rule}")) as err:
        _validate(spec, tmp_path)
    _no_counts(str(err.value))


def test_out_of_bounds_reject(tmp_path):
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,11,a,lo\n")
    with pytest.raises(InputValidationError) as err:
        _validate(spec, tmp_path)
    message = str(err.value)
    assert (
        "column 'k': values must lie within the public bounds [0, 10] (or declare `out_of_bounds: clip`)"
        in (message)
    )
    _no_counts(message)
    assert not (tmp_path / "internal" / "clipping.json").exists()  # no policy declared


def test_out_of_bounds_clip_counts_go_to_internal_only(tmp_path):
    """clip moves values to the *declared* bounds before validation (the suite then
    passes); the count per column is in internal/clipping.json and nowhere else. An
    integer column read as floats because of 1e23 or inf comes back as integers."""
    body = "1.5,3,a,lo\n-inf,12,a,lo\ninf,-1,b,hi\n0.25,99999999999999999999999,a,mid\n0.5,inf,b,lo\n"
    schema = _schema(x={"out_of_bounds": "clip"}, k={"out_of_bounds": "clip"})
    spec = _toy(tmp_path, HEADER + body, schema)
    df = _validate(spec, tmp_path)
    assert df["x"].tolist() == [1.0, 0.0, 1.0, 0.25, 0.5]
    assert df["k"].tolist() == [3, 10, 0, 10, 10] and df["k"].dtype == np.int64
    report = json.loads((tmp_path / "internal" / "clipping.json").read_text())
    assert report["out_of_bounds_clipped"] == {"x": 3, "k": 4}
    assert report["unknown_mapped_to_other"] == {}
    validation = json.loads((tmp_path / "internal" / "validation_input.json").read_text())
    assert all(r["success"] for r in validation["results"])  # the suite ran on the clipped table
    # the policy itself is public (release.json publishes the spec), the counts are not
    assert spec.public_dict()["schema"]["x"]["out_of_bounds"] == "clip"


def test_clip_uses_the_declared_bounds_only(tmp_path):
    """Never data-dependent bounds: values inside the declared range are untouched even
    when they are the data's extremes."""
    spec = _toy(tmp_path, HEADER + "0.1,3,a,lo\n0.9,4,a,lo\n", _schema(x={"out_of_bounds": "clip"}))
    assert _validate(spec, tmp_path)["x"].tolist() == [0.1, 0.9]
    assert json.loads((tmp_path / "internal" / "clipping.json").read_text())["out_of_bounds_clipped"] == {
        "x": 0
    }


def test_clip_leaves_text_to_the_type_rule(tmp_path):
    spec = _toy(tmp_path, HEADER + GOOD + "abc,3,a,lo\n", _schema(x={"out_of_bounds": "clip"}))
    with pytest.raises(InputValidationError, match=re.escape("column 'x': values must be numbers")):
        _validate(spec, tmp_path)


# ---------------------------------------------------------------- categories: unknown, other, missing


def test_unknown_category_reject(tmp_path):
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,3,zz,lo\n0.5,3,a,medium\n")
    with pytest.raises(InputValidationError) as err:
        _validate(spec, tmp_path)
    message = str(err.value)
    assert "column 'c': values must be among the 2 declared categories" in message
    assert "column 'o': values must be among the 4 declared levels" in message  # 3 + the missing token
    assert "`unknown: other`" in message
    _no_counts(message)


def test_unknown_category_other(tmp_path):
    """Undeclared values map to the declared ``other`` token; counts to internal only."""
    schema = _schema(c={"unknown": "other", "other": "b"}, o={"unknown": "other", "other": "mid"})
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,3,zz,lo\n0.5,3,A,medium\n0.5,3, a,hi\n", schema)
    df = _validate(spec, tmp_path)
    assert df["c"].tolist() == ["a", "b", "b", "b", "b"]
    assert df["o"].tolist() == ["lo", "hi", "lo", "mid", "hi"]
    report = json.loads((tmp_path / "internal" / "clipping.json").read_text())
    assert report["unknown_mapped_to_other"] == {"c": 3, "o": 1}
    assert spec.public_dict()["schema"]["c"] == {
        **TOY_SCHEMA["c"],
        "missing": None,
        "unknown": "other",
        "other": "b",
    }


def test_missing_cell_is_governed_by_missing_not_other(tmp_path):
    """An empty cell becomes the ``missing`` token where one is declared (and the token
    itself is a declared value, not unknown); without one it stays an error, even under
    ``unknown: other``."""
    schema = _schema(c={"unknown": "other", "other": "a"}, o={"unknown": "other", "other": "lo"})
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,3,b,\n0.5,3,b,NA\n", schema)
    assert _validate(spec, tmp_path)["o"].tolist() == ["lo", "hi", "NA", "NA"]
    spec = _toy(tmp_path, HEADER + GOOD + "0.5,3,,lo\n", schema)
    with pytest.raises(InputValidationError, match=re.escape("column 'c': missing values are not allowed")):
        _validate(spec, tmp_path)


@pytest.mark.parametrize(
    ("column", "extra", "message"),
    [
        ("c", {"unknown": "other"}, "spec field 'schema.c.nominal.other': Value error, unknown: other needs"),
        ("c", {"unknown": "other", "other": "z"}, "other ('z') must be one of the declared categories"),
        ("o", {"unknown": "other", "other": "NA"}, "other ('NA') must be one of the declared levels"),
        ("c", {"other": "a"}, "spec field 'schema.c.nominal.other': Value error, other ('a') is used only"),
        (
            "c",
            {"unknown": "map"},
            "spec field 'schema.c.nominal.unknown': Input should be 'reject' or 'other'",
        ),
        ("x", {"out_of_bounds": "wrap"}, "spec field 'schema.x.continuous.out_of_bounds': Input should be"),
        (
            "x",
            {"unknown": "other"},
            "spec field 'schema.x.continuous.unknown': Extra inputs are not permitted",
        ),
    ],
    ids=[
        "other-missing",
        "other-undeclared",
        "other-is-missing-token",
        "other-without-policy",
        "bad-unknown",
        "bad-out-of-bounds",
        "unknown-on-continuous",
    ],
)
def test_other_must_be_declared(column, extra, message, tmp_path):
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(write_spec(tmp_path, checks={}, schema=_schema(**{column: extra})))


# ---------------------------------------------------------------- rows: min_rows, holdout, checks, δ

PURE = {"epsilon": 1.0, "delta": 0.0, "accountant": "pure"}
MECHANISM_CASES = [
    ("factor_gauss", {}, {"epsilon": 1.0, "delta": 1e-6}),
    ("dpfm", {}, PURE),
    ("ron_gauss", {}, PURE),
    ("ron_gauss", {"task": "classification", "label": "income"}, PURE),
    ("ron_gauss", {"task": "regression", "label": "age"}, PURE),
    ("private_pca", {}, PURE),
    ("pcappd", {}, PURE),
    ("lda_ppd", {"target": "income"}, PURE),
    ("spectral_anonymization", {"method": "P"}, {**PURE, "allow_non_dp": True}),
]


def _adult_spec(tmp_path, name="factor_gauss", params=None, privacy=None, **overrides):
    spec = write_spec(
        tmp_path,
        privacy=privacy or {"epsilon": 1.0, "delta": 1e-6},
        mechanism={"name": name, "params": params or {}},
        **{"checks": {"enabled": False}, **overrides},
    )
    return load_spec(spec)


def _run_four_stages(spec, n: int, seed: int = 0) -> pd.DataFrame:
    """encode → estimate → sample → decode on n real rows, without Prefect."""
    from engines.tables import rows_to_table
    from mechanisms.accounting import plan_budget

    schema, params, synth = spec.public_schema(), spec.mechanism_params(), MECHANISMS[spec.mechanism.name]
    p = spec.privacy
    plan = plan_budget(p.accountant, p.epsilon, p.delta, spec.stage_weights())
    df = adult_rows(n, seed=seed)
    for c in schema.columns:
        if c.kind == "continuous":
            df[c.name] = df[c.name].astype(float)
    rng = np.random.default_rng(seed)
    bins = table_to_bins(df, schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoded = synth.encode(table_to_rows(df, bins, schema), schema, plan, params, rng)
        moments = synth.estimate(encoded.state, plan, params, rng)
        sampled = synth.sample(moments.state, params, n, rng)
        return rows_to_table(synth.decode(sampled.state, schema, params, rng), schema, rng=rng)


@pytest.mark.parametrize(
    ("name", "params", "privacy"), MECHANISM_CASES, ids=lambda v: v if isinstance(v, str) else None
)
def test_min_rows_per_mechanism(name, params, privacy, tmp_path):
    """n = min_rows − 1 is refused before any noise, naming the mechanism and the rule;
    n = min_rows runs the mechanism's four stages."""
    spec = _adult_spec(tmp_path, name, params, privacy)
    need = MECHANISMS[name].min_rows(spec.public_schema(), spec.mechanism_params())
    assert need == 2  # what the code needs: private_pca's covariance; one row has no spread
    with pytest.raises(
        InputValidationError, match=rf"mechanism {name} needs at least {need} fitted rows \(min_rows\)"
    ):
        check_rows(spec, need - 1)
    check_rows(spec, need)
    for seed in range(3):
        assert len(_run_four_stages(spec, need, seed)) == need


def test_private_pca_really_needs_two_rows(tmp_path):
    """The minimum is what the code requires: one row fails inside private_pca."""
    spec = _adult_spec(tmp_path, "private_pca", {}, PURE)
    with pytest.raises(ValueError, match="n >= 2"):
        _run_four_stages(spec, 1)


def test_holdout_counts_against_min_rows(tmp_path):
    """min_rows applies to the fitted rows, n − ⌊h·n⌋, as in the flow's holdout split."""
    spec = _adult_spec(tmp_path, checks={"enabled": False, "holdout_fraction": 0.5})
    check_rows(spec, 3)  # ⌊1.5⌋ = 1 held out, 2 fitted: enough
    with pytest.raises(InputValidationError) as err:  # 1 held out, 1 fitted
        check_rows(spec, 2)
    message = str(err.value)
    assert "needs at least 2 fitted rows (min_rows); the input has 2 rows, 1 fitted" in message
    assert "held out by checks.holdout_fraction 0.5" in message and "lower checks.holdout_fraction" in message


def test_checks_need_rows(tmp_path):
    """The post-release checks need 2 fitted and 2 synthetic rows and a non-empty holdout;
    refused before any noise rather than failing after it."""
    spec = _adult_spec(tmp_path, checks={"target": "income", "holdout_fraction": 0.2})
    with pytest.raises(
        InputValidationError, match=re.escape("checks.holdout_fraction (0.2) keeps no row out of 4")
    ):
        check_rows(spec, 4)
    check_rows(spec, 5)
    spec = _adult_spec(tmp_path, checks={"target": "income"}, synthetic_rows=1)
    with pytest.raises(
        InputValidationError, match=re.escape("synthetic_rows (1): the post-release checks need")
    ):
        check_rows(spec, 100)
    spec = _adult_spec(tmp_path, synthetic_rows=1)  # checks disabled: one synthetic row is fine
    check_rows(spec, 100)


@pytest.mark.parametrize(
    ("delta", "n", "refused"),
    [
        (0.01, 100, True),  # δ = 1/n
        (0.01, 5000, True),  # more rows make 1/n smaller
        (0.01, 99, False),
        (1e-6, 10**6, True),
        (1e-6, 10**6 + 1, True),
        (1e-6, 999_999, False),
    ],
)
def test_delta_at_least_one_over_n(delta, n, refused, tmp_path):
    spec = _adult_spec(tmp_path, privacy={"epsilon": 1.0, "delta": delta})
    if not refused:
        check_rows(spec, n)
        return
    with pytest.raises(InputValidationError) as err:
        check_rows(spec, n)
    message = str(err.value)
    assert f"privacy.delta ({delta:g}) must be below 1/n = {1 / n:.3g} for the n = {n} input rows" in message
    assert "publish a whole record in the clear" in message
    assert f"privacy.delta ≤ 1/(10 n) = {1 / (10 * n):.3g}" in message and "Nothing was spent" in message


def test_pure_dp_has_no_delta_to_check(tmp_path):
    check_rows(_adult_spec(tmp_path, privacy=PURE), 2)


# ---------------------------------------------------------------- ε


@pytest.mark.parametrize(
    ("epsilon", "message"),
    [
        (0, "Input should be greater than 0"),
        (-1, "Input should be greater than 0"),
        (float("nan"), "Input should be a finite number"),
        (float("inf"), "Input should be a finite number"),
        (1e9, "Input should be less than or equal to 100"),
        ("lots", "Input should be a valid number"),
        (None, "Input should be a valid number"),
    ],
    ids=["zero", "negative", "nan", "inf", "absurd", "text", "null"],
)
def test_epsilon_out_of_range(epsilon, message, tmp_path):
    with pytest.raises(SpecError, match=re.escape(f"spec field 'privacy.epsilon': {message}")):
        load_spec(write_spec(tmp_path, privacy={"epsilon": epsilon, "delta": 1e-6}))


def _text(output: str) -> str:
    """The CLI's words without rich's panel borders and line wrapping."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", output).split())


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    """A wide terminal, so that rich never folds a long path inside a message."""
    import flows.cli

    monkeypatch.setattr(flows.cli.console, "width", 1000)


def test_cli_refuses_bad_epsilon(tmp_path):
    """A spec error stops the CLI before Prefect starts or any data is read (exit 2)."""
    spec = write_spec(tmp_path, adult_rows(50), privacy={"epsilon": float("nan"), "delta": 1e-6})
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out)])
    assert result.exit_code == 2
    text = _text(result.output)
    assert "spec field 'privacy.epsilon'" in text and "nothing was read or spent" in text
    assert not out.exists()


# ---------------------------------------------------------------- writing: full disk, not writable


def _staging(out: Path) -> Path:
    staging = out / ".staging-r-0000"
    (staging / "public").mkdir(parents=True)
    (staging / "internal").mkdir()
    (staging / "internal" / "validation_input.json").write_text("{}")
    return staging


@pytest.mark.parametrize(
    ("code", "reason", "hint"),
    [
        (errno.ENOSPC, "no space left on device (ENOSPC)", "free space on that device or choose --out"),
        (errno.EACCES, "permission denied (EACCES)", "choose --out with a folder you can write to"),
        (errno.EROFS, "read-only file system (EROFS)", "choose --out on a writable one"),
        (errno.EIO, "input/output error (EIO)", "check the folder and its device, or choose another --out"),
    ],
    ids=["ENOSPC", "EACCES", "EROFS", "EIO"],
)
def test_write_errors_become_clear_messages(code, reason, hint, tmp_path, monkeypatch):
    """An OSError part way through write_bundle is a DPReleaseError naming the folder, the
    reason and what to do; the partial public/ is gone and nothing is at the destination."""
    import bundle.write as bundle

    def fail_part_way(table, path):
        path.write_text("age,sex\n1,")  # a partial file, then the device gives up
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(bundle, "write_csv", fail_part_way)
    out = tmp_path / "out"
    staging = _staging(out)
    with pytest.raises(DPReleaseError) as err:
        document = {"outputs": {"synthetic.csv": {"format": "csv"}}}
        bundle.write_bundle_files(staging, out / "r", pd.DataFrame({"a": [1]}), document)
    message = str(err.value)
    assert message.startswith(
        f"writing the release bundle into '{out}' failed: {reason}; nothing was published"
    )
    assert hint in message and "stays spent" in message
    assert not (out / "r").exists() and not (staging / "public").exists()
    assert (staging / "internal" / "validation_input.json").is_file()  # for the failure record


def test_write_csv_removes_its_partial_file(tmp_path, monkeypatch):
    import bundle.write as bundle

    def full(table, sink, options):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(bundle.pa_csv, "write_csv", full)
    with pytest.raises(OSError) as err:
        bundle.write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path / "s.csv")  # the header is written first
    assert err.value.errno == errno.ENOSPC and not (tmp_path / "s.csv").exists()


def test_failure_record_on_a_full_disk(tmp_path, monkeypatch):
    """If even the failure record cannot be written, it is removed, the staging folder is
    removed, and the message says why and what the run had failed with."""
    import bundle.write as bundle

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(bundle, "write_json", full)
    out = tmp_path / "out"
    staging = _staging(out)
    original = DPReleaseError("writing the release bundle into 'x' failed: no space left on device (ENOSPC)")
    with pytest.raises(DPReleaseError) as err:
        bundle.write_failure_record(out, "r", "write_bundle", original, staging)
    message = str(err.value)
    assert message.startswith(f"writing the failure record into '{out / 'failures'}' failed: no space left")
    assert "the run had failed at stage 'write_bundle': writing the release bundle" in message
    assert not staging.exists() and list((out / "failures").iterdir()) == []


def test_failure_record_moves_the_internal_reports(tmp_path):
    from bundle.write import write_failure_record

    out = tmp_path / "out"
    staging = _staging(out)
    record = write_failure_record(out, "r", "validate_input", DataError("column 'x': rule"), staging)
    assert (record / "internal" / "validation_input.json").is_file() and not staging.exists()
    assert json.loads((record / "failure.json").read_text())["message"] == "column 'x': rule"


# ---------------------------------------------------------------- end to end, under Prefect
# (the session's prefect_harness is in tests/conftest.py)


def _ledger_rows(out: Path, release_id: str) -> list[dict]:
    db = out / "ledger.db"
    if not db.exists():
        return []
    from ledger import Ledger

    ledger = Ledger(f"sqlite:///{db}")
    try:
        return [r for r in ledger.releases(dataset=None) if r["release_id"] == release_id]
    finally:
        ledger.close()


def _assert_nothing_spent(out: Path, release_id: str) -> None:
    for r in _ledger_rows(out, release_id):
        assert r["status"] in ("refused", "failed"), r
        assert r["epsilon"] == 0.0 and r["delta"] == 0.0, r
        assert not [s for s in r["stages"] if s.get("status") == "spent"], r


def _assert_nothing_published(out: Path, release_id: str) -> None:
    assert not (out / release_id).exists()
    if out.is_dir():
        assert not list(out.glob(".staging-*"))


def _bad_input(kind: str, folder: Path) -> tuple[Path, str]:
    """A spec whose data breaks one rule, and the words the message must hold."""
    data = adult_rows(300)
    if kind == "missing-file":
        path = write_spec(folder, dataset={"name": "adult", "path": "nowhere.csv"}, checks={"enabled": False})
        return path, f"dataset file '{folder / 'nowhere.csv'}' does not exist; fix dataset.path in the spec"
    if kind == "header-mismatch":
        data = data.rename(columns={"sex": "gender"})
        words = "the data header has 1 column(s) the schema does not declare"
    elif kind == "unknown-category":
        data.loc[5, "race"] = "Martian"
        words = "column 'race': values must be among the 5 declared categories"
    elif kind == "empty-data":
        data = data.iloc[:0]
        words = "has no data rows"
    else:  # delta-over-1-n: 300 rows, δ = 0.01 ≥ 1/300
        path = write_spec(folder, data, privacy={"epsilon": 1.0, "delta": 0.01}, checks={"enabled": False})
        return path, "privacy.delta (0.01) must be below 1/n = 0.00333 for the n = 300 input rows"
    return write_spec(folder, data, checks={"enabled": False}), words


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "kind", ["missing-file", "header-mismatch", "unknown-category", "empty-data", "delta-over-1-n"]
)
def test_cli_refuses_bad_input(kind, tmp_path):
    spec, words = _bad_input(kind, tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "bad"])
    text = _text(result.output)
    assert result.exit_code == 2, text
    assert words in text and "nothing was published" in text
    _assert_nothing_published(out, "bad")
    _assert_nothing_spent(out, "bad")
    assert len(_ledger_rows(out, "bad")) == 1  # the attempt is on record, charged nothing


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_release_id_that_already_exists(tmp_path):
    """A second run with a published release_id is refused and charged nothing: the
    first release's charge is unchanged, its bundle untouched."""
    from flows.release import release

    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    release(str(spec), str(out), release_id="r1", insecure_seed=1)
    before = _ledger_rows(out, "r1")
    manifest = (out / "r1" / "public" / "manifest.json").read_text()
    assert before[0]["status"] == "released" and before[0]["epsilon"] > 0
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r1"])
    assert result.exit_code == 2 and "release 'r1' already exists" in _text(result.output)
    # moved away on disk, the id is still taken in the ledger
    (out / "r1").rename(tmp_path / "r1-moved")
    result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "r1"])
    assert result.exit_code != 0 and "r1" in _text(result.output) and "already exists" in _text(result.output)
    assert not (out / "r1").exists() and not list(out.glob(".staging-*"))
    after = _ledger_rows(out, "r1")
    assert [(r["status"], r["epsilon"], r["delta"]) for r in after] == [
        (r["status"], r["epsilon"], r["delta"]) for r in before
    ]
    assert (tmp_path / "r1-moved" / "public" / "manifest.json").read_text() == manifest


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_output_directory_not_writable(tmp_path):
    """--out below a regular file fails for root too (chmod does not stop root); where
    the tests do not run as root, a folder without write permission is tried as well."""
    spec = write_spec(tmp_path, adult_rows(50), checks={"enabled": False})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    outs = [blocker / "out"]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        outs.append(locked)
    for out in outs:
        result = CliRunner().invoke(app, ["release", str(spec), "--out", str(out), "--release-id", "w"])
        text = _text(result.output)
        assert result.exit_code == 2, text
        assert f"output folder '{out}' is not writable" in text and "pass --out" in text
        _assert_nothing_published(out, "w")
        _assert_nothing_spent(out, "w")


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_disk_fills_up_part_way(tmp_path, monkeypatch):
    """ENOSPC while writing synthetic.csv, after the noise was drawn: nothing is
    published, no staging folder is left, the failure record says what happened, and the
    spend is KEPT in the ledger (fail closed)."""
    import bundle.write as bundle
    from flows.release import release

    def fill_up(table, path):
        path.write_text(",".join(table.columns) + "\n1,2")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bundle, "write_csv", fill_up)
    spec = write_spec(tmp_path, adult_rows(300), checks={"enabled": False})
    out = tmp_path / "out"
    with pytest.raises(
        DPReleaseError, match=re.escape("failed: no space left on device (ENOSPC); nothing was published")
    ):
        release(str(spec), str(out), release_id="full", insecure_seed=2)
    _assert_nothing_published(out, "full")
    (record,) = list((out / "failures").iterdir())
    failure = json.loads((record / "failure.json").read_text())
    assert failure["stage"] == "write_bundle" and "ENOSPC" in failure["message"]
    (row,) = _ledger_rows(out, "full")
    assert row["status"] == "failed" and row["epsilon"] > 0 and row["delta"] > 0  # the spend is kept


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_policies_end_to_end(tmp_path):
    """clip and other in a real release: the release runs, release.json publishes the
    policies, the counts are in internal/clipping.json only (not in public/, not on the
    terminal)."""
    data = adult_rows(300)
    data.loc[[3, 8], "age"] = ["150", "-4"]
    data.loc[[1, 2, 4], "race"] = "Martian"
    raw = copy.deepcopy(DEMO_SPEC["schema"])
    raw["age"]["out_of_bounds"] = "clip"
    raw["race"].update(unknown="other", other="Other")
    spec = write_spec(tmp_path, data, schema=raw, checks={"enabled": False})
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["release", str(spec), "--out", str(out), "--release-id", "pol", "--insecure-seed", "4"]
    )
    assert result.exit_code == 0, result.output
    clipping = json.loads((out / "pol" / "internal" / "clipping.json").read_text())
    assert clipping["out_of_bounds_clipped"]["age"] == 2 and clipping["unknown_mapped_to_other"] == {
        "race": 3
    }
    doc = json.loads((out / "pol" / "public" / "release.json").read_text())
    assert doc["spec"]["schema"]["age"]["out_of_bounds"] == "clip"
    assert doc["spec"]["schema"]["race"]["other"] == "Other"
    public_text = " ".join(p.read_text() for p in (out / "pol" / "public").glob("*.json"))
    assert "clipping" not in public_text and "mapped_to_other" not in public_text
    assert "clip" not in _text(result.output).lower()
    assert "clipping.json" in json.loads((out / "pol" / "internal" / "manifest.json").read_text())["files"]
    assert yaml.safe_load(spec.read_text())["schema"]["age"]["out_of_bounds"] == "clip"
