"""Issue 38: ``dprelease.Spec.load`` on a Python mapping meets a YAML file's limits
(``spec.document``) and reads numbers as the numbers they are. Whatever the mapping holds
(cycles, shared lists, a "billion laughs" of references, numpy, ``Decimal`` and ``Fraction``
numbers, keys that are not text, objects a spec never holds), ``Spec.load`` returns a
``Spec`` or raises ``SpecError`` naming the field, within a bounded time and memory; an
accepted spec round-trips (``Spec.load(spec._raw)``) and the spec file ``release()`` writes
(``Spec._write``) reads back, with ``load_spec``, as the same spec."""

from __future__ import annotations

import contextlib
import copy
import re
import reprlib
import signal
import tempfile
import tracemalloc
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

import dprelease
from dprelease.spec import SpecError, load_spec
from dprelease.spec.document import MAX_CHARS, MAX_DEPTH, MAX_NODES, plain_document, spec_text
from dprelease.spec.loading import read_spec_mapping
from dprelease.spec.text import UNWRITABLE
from tests.helpers import DEMO_SPEC
from tests.properties import property_settings

VALID = {**copy.deepcopy(DEMO_SPEC), "dataset": {"name": "adult", "path": "data.csv"}}
SECONDS, MEGABYTES = 30.0, 300
"""Bounds of one load: a refused bomb takes about 1 s (the walk to the 200,001st value),
more on a machine shared by several test runs; the unbounded walk ran for hours."""


@contextlib.contextmanager
def bounded(seconds: float = SECONDS, megabytes: int = MEGABYTES) -> Iterator[None]:
    """Fail if the block runs longer than ``seconds`` (an alarm interrupts it) or its Python
    allocations peak above ``megabytes`` (tracemalloc)."""

    def late(*_):
        raise TimeoutError(f"ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
        assert peak <= megabytes * 2**20, f"peak {peak / 2**20:.0f} MB"
    finally:
        tracemalloc.stop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True, scope="module")
def _imported() -> None:
    """The modules a spec's validation imports on first use, imported before any bounded
    block (tracemalloc slows imports tenfold)."""
    dprelease.Spec.load(VALID)


def _bomb(levels: int, width: int = 9) -> list:
    """A list of ``width`` references to a list of ``width`` references to ... (``levels``
    deep): a few hundred objects that expand to ``width ** levels`` strings."""
    node: list = ["lol"] * width
    for _ in range(levels - 1):
        node = [node] * width
    return node


# ---------------------------------------------------------------- the property

SPEC_KEYS = [
    "dataset",
    "schema",
    "privacy",
    "mechanism",
    "params",
    "epsilon",
    "delta",
    "bounds",
    "categories",
]
ODD = [
    *(np.bool_(True), np.int64(3), np.uint8(7), np.float32(0.5), np.float64(1e-6), np.float16(2)),
    *(Decimal("1.5"), Decimal("NaN"), Decimal("sNaN"), Decimal("1e400"), Decimal("-0"), Fraction(1, 3)),
    *(complex(1, 2), b"bytes", date(2020, 1, 1), datetime(2020, 1, 1, 12), Path("data.csv")),
    *({1, 2}, frozenset(), np.datetime64("2020-01-01"), np.array([0.0, 1.0]), np.array([[1, 2], [3, 4]])),
    *(range(3), "\ud800", "FILL"),
]
BIG = np.zeros(10**6)
"""An array of a million numbers, made once (one drawn per example kept 8 MB each)."""
HUGE = st.sampled_from([(10, 400), (2, 5000)]).map(lambda p: p[0] ** p[1])
"""A 401-digit and a 1,506-digit integer, made when drawn (a strategy's repr holding their
digits made ``--hypothesis-show-statistics`` keep gigabytes of event text)."""
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(ODD),
    HUGE,
    HUGE.map(Fraction),
    st.just(BIG),  # refused by its size before it is made a list
)
keys = st.one_of(
    st.sampled_from(SPEC_KEYS),
    st.text(max_size=6),
    st.integers(-2, 2),
    st.none(),
    st.tuples(st.integers(0, 1)),
    st.floats(),
    st.sampled_from(["\ud800", "a\x1b", "base_dir"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=16,
)
RETYPES = [np.float32, np.float64, lambda v: Decimal(repr(v)), Fraction, np.int64, np.int32, np.array]


def _slots(doc: object, seen: set[int] | None = None) -> Iterator[tuple]:
    """Every (container, key) pair of ``doc``, depth first, each list or mapping once (a
    drawn spec may share them, or hold a cycle or a bomb)."""
    seen = set() if seen is None else seen
    if not isinstance(doc, dict | list) or id(doc) in seen:
        return
    seen.add(id(doc))
    for k in list(doc) if isinstance(doc, dict) else range(len(doc)):
        yield doc, k
        yield from _slots(doc[k], seen)


class Drawn(dict):
    """A drawn spec, shown as the changes that made it: a bomb or a cycle shown in full
    would never end (hypothesis prints a failing example)."""

    changes: list[str]

    def __repr__(self) -> str:
        return f"Drawn(VALID + {self.changes})"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@st.composite
def python_specs(draw) -> Drawn:
    """The valid spec with 1-3 changes: a value replaced or a key added (any drawn value), a
    number or list retyped (numpy, Decimal, Fraction, tuple), then, on the drawn tree, a
    container shared in a second place (a cycle when it holds that place) or a bomb."""
    doc = Drawn(copy.deepcopy(VALID))
    doc.changes = []
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(doc))
        parent, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "add", "retype", "retype", "share", "bomb"]))
        current, change = parent[key], None
        if action == "replace":
            parent[key] = draw(values)
            change = parent[key]
        elif action == "add" and isinstance(current, dict):
            new = draw(keys)
            current[new] = draw(values)
            change = (new, current[new])
        elif action == "retype" and isinstance(current, int | float) and not isinstance(current, bool):
            retype = draw(st.sampled_from(RETYPES))
            with contextlib.suppress(ValueError, OverflowError, TypeError):
                parent[key] = change = retype(current)
        elif action == "retype" and isinstance(current, list):
            retype = draw(st.sampled_from([tuple, np.array]))
            with contextlib.suppress(ValueError):  # a ragged list is no array
                parent[key] = change = retype(current)
        elif action == "share":
            containers = [c for c, _ in slots if isinstance(c, dict | list)]
            parent[key] = draw(st.sampled_from(containers))
            change = (
                f"the list or mapping at slot {next(i for i, c in enumerate(containers) if c is parent[key])}"
            )
        elif action == "bomb":
            levels, width = draw(st.integers(1, 12)), draw(st.integers(2, 9))
            parent[key], change = _bomb(levels, width), f"bomb({levels}, {width})"
        doc.changes.append(f"{action} {key!r}: {reprlib.repr(change)}")
    return doc


_FIELD = re.compile(r"spec field '[^']+'")
_DOCUMENT = ("nested too deeply", "too large to be a release spec", "is a draft with", "must be a mapping")


def _expected(value: object) -> object:
    """What ``plain_document`` makes of an accepted value, written out plainly (the oracle)."""
    if isinstance(value, np.ndarray):
        return _expected(value.tolist())
    if isinstance(value, dict):
        return {str(k): _expected(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_expected(v) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating | Decimal | Fraction):
        return float(value)
    return str(value) if isinstance(value, Path) else value


def _same_spec(loaded, spec) -> None:
    """``loaded`` (from the API's file) is ``spec`` but for where the dataset path resolves."""
    exclude = {"base_dir", "dataset"}
    assert loaded.model_dump(exclude=exclude) == spec.model.model_dump(exclude=exclude)
    assert loaded.dataset.name == spec.dataset and loaded.data_path == spec.data_path.resolve()


@pytest.mark.property
@property_settings(150)
@given(python_specs())
@example({**VALID, "privacy": {**VALID["privacy"], "epsilon": Decimal("1.0")}})  # release() refused its file
@example({**VALID, "privacy": {**VALID["privacy"], "epsilon": np.float32(0.5)}})
def test_a_python_mapping_loads_or_is_refused_naming_the_field_within_bounds(doc):
    with bounded():
        try:
            spec = dprelease.Spec.load(doc)
        except SpecError as e:
            message = str(e)
            assert _FIELD.search(message) or any(s in message for s in _DOCUMENT), message
            assert not UNWRITABLE.search(message.replace("\n", "")), message
            event("refused")
            return
    event("loaded")
    assert spec._raw == _expected(doc)
    assert dprelease.Spec.load(spec._raw).model == spec.model
    with tempfile.TemporaryDirectory() as d:
        _same_spec(load_spec(spec._write(Path(d) / "spec.yaml")), spec)


# ---------------------------------------------------------------- the defects, one by one


def test_a_shared_list_bomb_is_refused_quickly():
    """Issue 38: nine levels of nine references (9⁹ strings expanded, a few hundred objects)
    hung ``Spec.load``; it is refused as too large at the 200,001st value."""
    doc = copy.deepcopy(VALID)
    doc["extra"] = _bomb(9)
    with bounded(), pytest.raises(SpecError, match=r"holds more than 200,000 values \(at extra\.0\.0"):
        dprelease.Spec.load(doc)


def _cycle() -> dict:
    doc = copy.deepcopy(VALID)
    doc["mechanism"]["params"] = params = {}
    params["self"] = params
    return doc


def _deep() -> dict:
    doc = copy.deepcopy(VALID)
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    doc["privacy"]["epsilon"] = nested
    return doc


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (_cycle(), "spec field 'mechanism.params.self': it holds the list or mapping it is in (a cycle)"),
        (_deep(), "is nested too deeply to be a release spec: privacy.epsilon.0.0.0"),
        (None, "spec must be a Spec, the path of a release YAML or a mapping of its fields, not NoneType"),
        (42, "not int"),
        ({**VALID, 1: 2}, "spec field '(top level)': key '1' (int) must be text"),
        ({**VALID, "schema": {**VALID["schema"], ("a",): {}}}, "spec field 'schema': key \"('a',)\" (tuple)"),
        ({**VALID, "privacy": {**VALID["privacy"], "epsilon": {1.0}}}, "a set has no order"),
        (
            {**VALID, "privacy": {**VALID["privacy"], "epsilon": Decimal("sNaN")}},
            "Decimal sNaN is not a float",
        ),
        (
            {**VALID, "privacy": {**VALID["privacy"], "epsilon": Decimal("NaN")}},
            "spec field 'privacy.epsilon'",
        ),
        (
            {**VALID, "privacy": {**VALID["privacy"], "epsilon": np.bool_(True)}},
            "spec field 'privacy.epsilon'",
        ),
        ({**VALID, "privacy": {**VALID["privacy"], "epsilon": 1 + 2j}}, "a complex is not a spec value"),
    ],
    ids=["cycle", "deep", "none", "int", "int-key", "tuple-key", "set", "snan", "nan", "bool", "complex"],
)
def test_what_no_spec_holds_is_a_spec_error_naming_the_field(given, said):
    """Issue 38: a cycle and deep nesting raised RecursionError, ``None`` a TypeError; a
    signalling NaN, a set or a complex number are refused naming the field; NaN and a
    numpy boolean reach the field's own rule (ε is a number, finite)."""
    with bounded(), pytest.raises(SpecError) as refused:
        dprelease.Spec.load(given)
    assert said in str(refused.value), str(refused.value)


@pytest.mark.parametrize(
    ("field", "value", "plain"),
    [
        (("privacy", "epsilon"), Decimal("1.0"), 1.0),
        (("privacy", "epsilon"), np.float32(0.5), 0.5),
        (("privacy", "epsilon"), Fraction(1, 2), 0.5),
        (("privacy", "delta"), np.float64(1e-7), 1e-7),
        (("synthetic_rows",), np.int64(500), 500),
        (("schema", "age", "bounds"), np.array([17, 90]), [17, 90]),
        (("schema", "age", "bounds"), (Decimal(17), np.float32(90)), [17.0, 90.0]),
        (("schema", "sex", "categories"), ("Female", "\U0001f642"), ["Female", "\U0001f642"]),
        (("dataset", "path"), Path("data.csv"), "data.csv"),
    ],
    ids=["decimal", "float32", "fraction", "float64", "int64", "array", "tuple", "emoji", "path"],
)
def test_numbers_are_read_as_plain_numbers_and_release_reads_its_own_spec_file(field, value, plain, tmp_path):
    """Issue 38: a ``Decimal`` or ``numpy.float32`` ε was accepted, then ``release()`` wrote
    it as the text '1.0' (``json.dump(default=str)``) and refused its own spec file; an emoji
    was written as two escaped surrogates, which YAML read back as such. The mapping is made
    plain (float, int, list, text) and the file reads back as the same spec."""
    doc = copy.deepcopy(VALID)
    *parents, last = field
    where = doc
    for k in parents:
        where = where[k]
    where[last] = value
    spec = dprelease.Spec.load(doc)
    got = spec._raw
    for k in field:
        got = got[k]
    assert got == plain and type(got) is type(plain)
    _same_spec(load_spec(spec._write(tmp_path / "spec.yaml")), spec)


def test_each_array_is_read_as_its_own_list():
    """Lists made from numpy arrays were remembered by id, and a freed list's id given to
    the next: three arrays read as the first one three times."""
    doc = plain_document({"a": np.array([1, 2]), "b": np.array([3, 4, 5]), "c": np.array([6])}, "m")
    assert doc == {"a": [1, 2], "b": [3, 4, 5], "c": [6]}
    shared = [0.0, 1.0]
    assert plain_document({"a": shared, "b": shared}, "m") == {"a": [0.0, 1.0], "b": [0.0, 1.0]}


# ---------------------------------------------------------------- one limit, counted alike


def _both(doc: dict, tmp_path: Path) -> tuple[str, str]:
    """What ``plain_document`` and the YAML reader (on the API's file of ``doc``) say: the
    document read back, or the limit it breaks."""
    out = []
    for read in (lambda: plain_document(doc, "m"), lambda: read_spec_mapping(_file(doc, tmp_path))):
        try:
            out.append("accepted" if read() == doc else "changed")
        except SpecError as e:
            said = str(e)
            out.append(
                "depth"
                if "nested too deeply" in said
                else "nodes"
                if "values" in said
                else "chars"
                if "characters of text" in said
                else said
            )
    return out[0], out[1]


def _file(doc: dict, tmp_path: Path) -> Path:
    path = tmp_path / "doc.yaml"
    path.write_text(spec_text(doc), encoding="utf-8")
    return path


def _nested(depth: int) -> dict:
    inner: object = 0
    for _ in range(depth - 2):  # the root mapping is level 1, its key and value level 2
        inner = [inner]
    return {"a": inner}


SMALL = {"MAX_NODES": 1_000, "MAX_CHARS": 2_000}
"""Limits small enough to read a document at them quickly from YAML (200,000 nodes take
PyYAML about 20 s): the counting is the same code at any limit."""


@pytest.mark.parametrize(
    ("name", "at_limit"),
    [
        ("depth", lambda extra: _nested(MAX_DEPTH + extra)),
        ("nodes", lambda extra: {"a": ["x"] * (SMALL["MAX_NODES"] - 3 + extra)}),  # root, key, list, items
        ("nodes", lambda extra: {"a": [{"k": i} for i in range((SMALL["MAX_NODES"] - 3 + extra) // 3)]}),
        ("chars", lambda extra: {"a": "x" * (SMALL["MAX_CHARS"] - 1 + extra)}),
        ("chars", lambda extra: {"a": [0.1] * ((SMALL["MAX_CHARS"] - 1 + extra) // 3)}),  # '0.1'
        ("chars", lambda extra: {"\U0001f642" * 900: "\U0001f642" * (SMALL["MAX_CHARS"] - 900 + extra)}),
    ],
    ids=["depth", "nodes", "nodes-in-mappings", "chars", "chars-of-numbers", "chars-of-a-key"],
)
def test_a_file_and_a_mapping_meet_the_same_limits(name, at_limit, tmp_path, monkeypatch):
    """A document at a limit is read alike from a mapping and from the API's file of it;
    one node, level or character more is refused by both, for the same reason."""
    import dprelease.spec.document as document

    for limit, value in SMALL.items():
        monkeypatch.setattr(document, limit, value)
    below, above = at_limit(0), at_limit(1)
    if name != "depth" and above == below:  # a step of 3 nodes or characters at a time
        above = at_limit(3)
    assert _both(below, tmp_path) == ("accepted", "accepted")
    assert _both(above, tmp_path) == (name, name)


def test_the_apis_file_of_any_document_within_the_limits_fits_a_spec_file():
    """The file cap (``MAX_FILE_BYTES``) holds the API's file of the largest documents: every
    character escaped (6 bytes), or every node with its punctuation."""
    from dprelease.spec.document import MAX_FILE_BYTES

    widest = [
        {"a": "\x85" * (MAX_CHARS - 1)},  # \u0085: 6 bytes a character
        {"a": [""] * (MAX_NODES - 3)},  # "", : 4 bytes a node
        {"a": [[]] * (MAX_NODES - 3)},
        {"a": [None] * ((MAX_NODES - 5) // 2), "b": ["\x85"] * ((MAX_NODES - 5) // 2)},
    ]
    for doc in widest:
        plain_document(doc, "m")
        assert len(spec_text(doc).encode("utf-8")) <= MAX_FILE_BYTES


def test_a_file_larger_than_any_spec_is_refused_before_it_is_parsed(tmp_path):
    from dprelease.spec.document import MAX_FILE_BYTES

    path = tmp_path / "huge.yaml"
    path.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with bounded(5.0), pytest.raises(SpecError, match="too large to be a release spec"):
        read_spec_mapping(path)
