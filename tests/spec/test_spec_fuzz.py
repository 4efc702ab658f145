"""Fuzz the spec loader: whatever the YAML file holds, ``load_spec`` returns a usable
``ReleaseSpec`` or raises ``SpecError`` naming the field (or, for a file that is not a
YAML mapping, saying so); never any other exception.

Deterministic for CI: ``derandomize=True`` (examples derived from the test's name, no
example database) and a bounded number of examples.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dprelease.spec import ReleaseSpec, SpecError, load_spec
from tests.helpers import DEMO_SPEC

# Hypothesis warns when the global `random` state changes while a strategy draws. Ours never
# touch it, but the session's Prefect harness keeps background threads (API client, event
# workers) that do, so the warning fired at random in a full run (seen once in CI).
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)

FUZZ = settings(
    derandomize=True,
    database=None,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# A valid spec (the demo's, data path irrelevant: load_spec does not read the data).
VALID = {**copy.deepcopy(DEMO_SPEC), "dataset": {"name": "adult", "path": "data.csv"}}

ODD_STRINGS = [
    "",
    " ",
    "nan",
    "NaN",
    "inf",
    "-inf",
    ".inf",
    "1e309",
    "~",
    "null",
    "yes",
    "0x1F",
    "é",
    "🙂",
    "\u202e",
    "a\x00b",
    "../../etc/passwd",
    "factor_gauss ",
    "ZCDP",
    "continuous",
    "nominal",
    "ordinal",
    "reject",
    "clip",
    "other",
    "*",
    "%s",
    "{}",
    "[]",
]
ODD_NUMBERS = [
    math.nan,
    math.inf,
    -math.inf,
    0,
    -0.0,
    -1,
    1e-320,
    1e308,
    10**30,
    -(10**30),
    2**63,
    0.5,
    1,
    2,
    100,
    100.0000001,
]
KEYS = [
    "release_id",
    "dataset",
    "schema",
    "privacy",
    "mechanism",
    "allocation",
    "synthetic_rows",
    "checks",
    "base_dir",
    "name",
    "path",
    "type",
    "bounds",
    "levels",
    "categories",
    "missing",
    "out_of_bounds",
    "unknown",
    "other",
    "epsilon",
    "delta",
    "accountant",
    "allow_non_dp",
    "lifetime_epsilon",
    "params",
    "gates",
    "target",
    "holdout_fraction",
    "enabled",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(ODD_NUMBERS),
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(-3, 3), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


def _paths(doc, prefix=()):
    """Every path (tuple of keys/indices) to a value inside ``doc``, the root included."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(VALID) if p]


@st.composite
def mutated_specs(draw):
    """The valid spec with 1-3 mutations: drop a key, replace a value (any type), or
    add a key."""
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = draw(values)
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(keys)] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return doc


_FIELD = re.compile(r"spec field '[^']+'")
_FILE_LEVEL = (
    "is not valid YAML",
    "must contain a YAML mapping",
    "is not UTF-8 text",
    "nested too deeply",
    "YAML anchors and aliases",
    "is stated twice in one mapping",
)


def _check(text: str | bytes) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            spec = load_spec(path)
        except SpecError as e:
            message = str(e)
            assert "spec" in message
            assert _FIELD.search(message) or any(s in message for s in _FILE_LEVEL), message
            return "refused"
    assert isinstance(spec, ReleaseSpec)
    # a spec that loads must be usable: its schema, weights and public form (strict JSON)
    spec.public_schema()
    spec.stage_weights()
    json.dumps(spec.public_dict(), allow_nan=False)
    return "loaded"


def _dump(doc) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


def test_the_valid_spec_loads():
    assert _check(_dump(VALID)) == "loaded"


def test_deep_nesting_and_non_utf8_are_spec_errors():
    assert _check("dataset: " + "[" * 5000 + "]" * 5000) == "refused"
    assert _check(b"privacy: {epsilon: \xff}") == "refused"


@FUZZ
@given(mutated_specs())
def test_mutated_specs(doc):
    event(_check(_dump(doc)))  # about 1 in 10 mutated specs still loads


@FUZZ
@given(values)
def test_random_documents(doc):
    event(_check(_dump(doc)))


@FUZZ
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_random_text_and_bytes(raw):
    event(_check(raw))


ID_LITERALS = st.lists(
    st.sampled_from(["SYN-", "X", "é", " ", "{{", "}}", ",", "'", '"', "\n", "\x1b", "{", "}"]), max_size=2
).map("".join)
ID_FIELDS = st.sampled_from(
    [
        *("{}", "{0}", "{:09d}", "{:x}", "{:020X}"),
        *("{1}", "{:021d}", "{:>999}", "{:c}", "{!r}", "{0!s}", "{0.real}", "{0[0]}", "{:+d}", "{:,}"),
        *("{:{}}", "{:n}", "{:%}", "{}{}", ""),
    ]
)


@FUZZ
@given(st.tuples(ID_LITERALS, ID_FIELDS, ID_LITERALS).map("".join))
def test_an_id_format_loads_only_if_its_identifiers_are_distinct_short_and_csv_safe(fmt):
    """Issue 30: a loaded id format gives distinct identifiers of bounded length, printable
    and without a comma or a quote, for any row number up to 2⁶³; any other is refused
    naming the field."""
    from dprelease.bundle.published import fresh_identifiers

    doc = copy.deepcopy(VALID)
    doc["schema"]["row"] = {"type": "id", "format": fmt}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        path.write_text(_dump(doc), encoding="utf-8")
        try:
            load_spec(path)
        except SpecError as e:
            assert "spec field 'schema.row.id.format'" in str(e), str(e)
            event("refused")
            return
    event("loaded")
    ids = fresh_identifiers(fmt, 0, 1000) + fresh_identifiers(fmt, 2**63 - 1, 1)
    assert len(set(ids)) == len(ids)
    for i in ids:
        assert i.isprintable() and not set(i) & set(",'\"") and len(i) <= len(fmt) + 20, (fmt, i)
