"""Hostile specs refused by the loader (``spec.load_spec`` raises ``SpecError`` naming the
field and the rule, before any data is read): ε ≤ 0, NaN, infinite, absurdly large or not
a number, and the ``out_of_bounds`` / ``unknown`` / ``other`` policies declared wrongly.
Issue 30's limits of the spec language: id formats, date bounds, category counts, the
dataset name's length, control characters in names, YAML anchors and repeated keys.
The CLI's exit code for these is in tests/flows/test_hostile_release.py; the loader's
fuzz in test_spec_fuzz.py; the hostile corpus in tests/hostile_specs.py."""

from __future__ import annotations

import re

import pytest

from dprelease.spec import RELEASE_ID, SpecError, load_spec
from dprelease.spec.columns import CONTROLS
from tests.helpers import TOY_SCHEMA, toy_schema, write_spec


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
        load_spec(write_spec(tmp_path, checks={}, schema=toy_schema(**{column: extra})))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"transform": "asinh"},
            "schema.x.continuous.scale': Value error, transform: asinh needs scale (None)",
        ),
        ({"transform": "asinh", "scale": -5.0}, "transform: asinh needs scale (-5.0) a finite number > 0"),
        ({"transform": "asinh", "scale": float("nan")}, "transform: asinh needs scale (nan) a finite number"),
        (
            {"transform": "asinh", "scale": "1000"},
            "schema.x.continuous.scale': Input should be a valid number",
        ),
        ({"transform": "log", "scale": 10.0}, "scale (10.0) is used only with transform: asinh"),
    ],
    ids=["asinh-without-scale", "negative-scale", "nan-scale", "quoted-scale", "scale-with-log"],
)
def test_the_asinh_scale_is_a_positive_finite_number_declared_with_asinh(extra, message, tmp_path):
    """Issue 33: ``transform: asinh`` needs a public ``scale`` > 0, and only it takes one."""
    schema = toy_schema(x={"bounds": [-1e6, 1e6], **extra})
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(write_spec(tmp_path, checks={}, schema=schema))


def test_asinh_takes_bounds_of_any_sign(tmp_path):
    schema = toy_schema(x={"bounds": [-1e6, 1e6], "transform": "asinh", "scale": 1000})
    column = load_spec(write_spec(tmp_path, checks={}, schema=schema)).public_schema()["x"]
    assert (column.transform, column.scale) == ("asinh", 1000.0)


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


# ---------------------------------------------------------------- issue 30: the spec language's limits


def _refused(tmp_path, **overrides) -> str:
    with pytest.raises(SpecError) as e:
        load_spec(write_spec(tmp_path, checks={}, **overrides))
    return str(e.value)


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("X{0:>999999999}", "must format the number only as [0][width][d|x|X], the width at most 20"),
        ("X{:021d}", "the width at most 20"),
        ("X{:+d}", "must format the number only as"),
        ("X{:,d}", "must format the number only as"),
        ("X{:c}", "must format the number only as"),
        ("X{:{}}", "must format the number only as"),
        ("X{0}{0.__class__.__base__.__subclasses__}", "must hold exactly one integer field"),
        ("X{0.__class__.__init__.__globals__}", "without attribute or index access"),
        ("X{0[0]}", "without attribute or index access"),
        ("X{1}", "use the field {} or {0}"),
        ("X{0!r}", "or a conversion (!r, !s, !a)"),
        ("X{!s}", "or a conversion (!r, !s, !a)"),
        ("X{", "must be a Python format with balanced braces"),
        ("{:09d}", "must hold literal text beside it"),
        ("A,{}", "without a comma or a quote"),
        ('A"{}', "without a comma or a quote"),
        ("A\u00a0{}", "printable literal text"),
    ],
)
def test_an_id_format_is_one_bounded_integer_field_beside_printable_text(fmt, message, tmp_path):
    """Issue 30: the id format was any Python format: a huge width (40 s, 2.1 GB), an
    attribute walk (a memory address in every id, or a raw traceback), a conversion or
    ``:c`` (control characters, commas, quotes in the published ids)."""
    text = _refused(tmp_path, schema=toy_schema() | {"row": {"type": "id", "format": fmt}})
    assert f"spec field 'schema.row.id.format': Value error, format ({fmt!r}) must" in text
    assert message in text


@pytest.mark.parametrize("fmt", ["A\n{}", "\x1b[31m{}"])
def test_an_id_format_meets_the_rule_for_text_first(fmt, tmp_path):
    """Issue 38: the id format is text of the spec, so the one rule for text (``spec.text``)
    refuses its control characters, as any string field's."""
    text = _refused(tmp_path, schema=toy_schema() | {"row": {"type": "id", "format": fmt}})
    assert f"spec field 'schema.row.id.format': Value error, {fmt!r} must hold no control characters" in text
    assert not CONTROLS.search(text.replace("\n", ""))


ACCEPTED_IDS = [
    ("SYN-{:09d}", "SYN-000000001", "SYN-000001000"),
    ("X{}", "X1", "X1000"),
    ("{0}-syn", "1-syn", "1000-syn"),
    ("id {:x}", "id 1", "id 3e8"),
    ("R{0:020X}", "R" + "0" * 19 + "1", "R" + "0" * 17 + "3E8"),
    ("a{{b}}{}", "a{b}1", "a{b}1000"),
]


def test_an_id_format_within_the_rule_gives_distinct_identifiers_up_to_the_width_cap(tmp_path):
    """Formats within the rule load and give distinct identifiers; the width cap is 20
    digits (any 64-bit row number), 21 is refused."""
    from dprelease.bundle.published import fresh_identifiers

    for fmt, first, last in ACCEPTED_IDS:
        schema = toy_schema() | {"row": {"type": "id", "format": fmt}}
        spec = load_spec(write_spec(tmp_path, checks={}, schema=schema))
        ids = fresh_identifiers(spec.identifiers()["row"], 0, 1000)
        assert (ids[0], ids[-1]) == (first, last) and len(set(ids)) == 1000, fmt
    text = _refused(tmp_path, schema=toy_schema() | {"row": {"type": "id", "format": "R{0:021X}"}})
    assert "the width at most 20" in text


@pytest.mark.parametrize(
    ("kind", "bounds"),
    [
        ("date", ["0001-01-01", "9999-12-31"]),
        ("date", ["1677-09-21", "2000-01-01"]),
        ("date", ["2000-01-01", "2262-01-01"]),
        ("datetime", ["1600-01-01T00:00:00", "2000-01-01T00:00:00"]),
    ],
)
def test_date_bounds_stay_within_what_the_engine_represents(kind, bounds, tmp_path):
    """Issue 30: [0001-01-01, 9999-12-31] overflowed datetime64[ns]; valid data was then
    refused against bounds nobody declared."""
    schema = toy_schema() | {"d": {"type": kind, "bounds": bounds}}
    text = _refused(tmp_path, schema=schema)
    assert f"spec field 'schema.d.{kind}.bounds'" in text
    assert "must lie within 1678-01-01 and 2261-12-31" in text


@pytest.mark.parametrize(
    ("kind", "resolution", "lo", "hi"),
    [
        ("date", "day", "1678-01-01", "2261-12-31"),
        ("date", "month", "1678-01", "2261-12"),
        ("date", "year", "1678", "2261"),
        ("datetime", "hour", "1678-01-01T00:00", "2261-12-31T23:00"),
        ("datetime", "second", "1678-01-01T00:00:00", "2261-12-31T23:59:59"),
    ],
)
def test_the_widest_date_bounds_work_in_the_reader_and_one_second_more_is_refused(
    kind, resolution, lo, hi, tmp_path
):
    """The widest bounds accepted, [1678-01-01, 2261-12-31T23:59:59], work end to end in
    the reader: a value at each edge, written at any resolution, converts to units within
    the column's bounds. A second beyond either edge is refused."""
    import pandas as pd

    from dprelease.engines.tables import calendar_units

    bounds = ["1678-01-01T00:00:00", "2261-12-31T23:59:59"]
    schema = toy_schema() | {"d": {"type": kind, "bounds": bounds, "resolution": resolution}}
    spec = load_spec(write_spec(tmp_path, checks={}, schema=schema))
    column = spec.public_schema()["d"]
    units = calendar_units(pd.Series([lo, hi, ""]), column)
    assert units.iloc[:2].tolist() == [column.lower, column.upper]
    assert pd.isna(units.iloc[2])
    for wider in (["1677-12-31T23:59:59", bounds[1]], [bounds[0], "2262-01-01T00:00:00"]):
        schema["d"]["bounds"] = wider
        assert "must lie within 1678-01-01 and 2261-12-31" in _refused(tmp_path, schema=schema)


@pytest.mark.parametrize("kind", ["nominal", "ordinal"])
def test_a_column_declares_at_most_10000_categories(kind, tmp_path):
    """Issue 30: 100,000 categories were released (ε spent) and hung in validate_output."""
    field = "categories" if kind == "nominal" else "levels"
    values = [f"v{i}" for i in range(10_000)]
    spec = load_spec(
        write_spec(tmp_path, checks={}, schema=toy_schema() | {"z": {"type": kind, field: values}})
    )
    assert spec.public_schema()["z"].n_bins == 10_000
    text = _refused(tmp_path, schema=toy_schema() | {"z": {"type": kind, field: [*values, "one more"]}})
    assert f"spec field 'schema.z.{kind}.{field}': Value error, {field} must number at most 10,000" in text


def test_a_dataset_name_leaves_room_for_the_release_ids_stamp(tmp_path):
    """Issue 30: a 300-character dataset.name was later blamed on an unwritable folder. The
    longest name leaves room for a release's stamp and a schema discovery's."""
    from dprelease.discovery.schema import discovery_release_id

    spec = load_spec(write_spec(tmp_path, checks={}, dataset={"name": "a" * 56, "path": "data.csv"}))
    assert RELEASE_ID.fullmatch(spec.resolved_release_id())
    assert RELEASE_ID.fullmatch(discovery_release_id(spec.dataset.name))
    text = _refused(tmp_path, dataset={"name": "a" * 57, "path": "data.csv"})
    assert "spec field 'dataset.name': Value error, name must be at most 56 characters" in text


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"\x1b]0;pwned\x07": {"type": "continuous", "bounds": [0, 1]}}, "schema.\\x1b]0;pwned\\x07.[key]"),
        ({"c": {"type": "nominal", "categories": ["a", "\x1b[31mb"]}}, "schema.c.nominal.categories.1"),
        ({"o": {"type": "ordinal", "levels": ["lo", "hi\r"]}}, "schema.o.ordinal.levels.1"),
        (
            {"c": {"type": "nominal", "categories": ["a", "b"], "missing": "\x9b2J"}},
            "schema.c.nominal.missing",
        ),
        (
            {"g": {"type": "one_hot", "columns": ["a", "b\x7f"]}},
            "schema.g.one_hot.columns.1",
        ),
        ({"g": {"type": "one_hot", "columns": ["a", "b"], "none": "\x00"}}, "schema.g.one_hot.none"),
    ],
    ids=["column-name", "category", "level", "missing-token", "indicator", "none-token"],
)
def test_names_and_categories_hold_no_control_characters(schema, field, tmp_path):
    """Issue 30: a column name with an escape sequence went from a CSV header through
    ``dprelease init`` into the spec and to the terminal. The refusal shows it escaped."""
    text = _refused(tmp_path, schema={**TOY_SCHEMA, **schema})
    assert f"spec field '{field}': Value error, " in text and "must hold no control characters" in text
    assert not CONTROLS.search(text.replace("\n", ""))


def _yaml_refused(tmp_path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    return str(e.value)


def test_yaml_anchors_and_aliases_are_refused_before_they_expand(tmp_path):
    """Issue 30: nine levels of nine aliases hung validate and release at 100 % CPU (the
    full bomb is in tests/hostile_specs.py; four levels here), and a benign anchor is
    refused too: a release spec needs none."""
    bomb = "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(3)
    )
    spec = write_spec(tmp_path, checks={})
    text = _yaml_refused(tmp_path, spec.read_text() + 'a: &a ["lol", "lol"]\n' + bomb)
    assert "YAML anchors and aliases (&name, *name) are not allowed in a release spec" in text
    benign = spec.read_text().replace("privacy:", "privacy: &p", 1)
    assert "anchors and aliases" in _yaml_refused(tmp_path, benign)


def test_a_key_stated_twice_is_refused_naming_it_and_its_line(tmp_path):
    """Issue 30: two privacy: blocks (ε 0.5, then ε 50) loaded as ε 50."""
    spec = write_spec(tmp_path, checks={}, privacy={"epsilon": 0.5, "delta": 1e-6})
    lines = spec.read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("privacy:"))
    text = _yaml_refused(tmp_path, spec.read_text() + "privacy: {epsilon: 50.0, delta: 1.0e-6}\n")
    assert (
        f"line {len(lines) + 1}: key 'privacy' is stated twice in one mapping (first on line {first})" in text
    )
    nested = "schema:\n  x: {type: continuous, bounds: [0, 1], bounds: [0, 2]}\n"
    assert "line 2: key 'bounds' is stated twice" in _yaml_refused(tmp_path, nested)
