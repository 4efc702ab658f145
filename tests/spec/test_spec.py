"""The release spec (``spec.load_spec``, ``ReleaseSpec``): the demo's spec loads, the
engine defaults and the published form, and every wrong field is refused with a
``SpecError`` naming it; an unreadable or missing spec file too."""

import copy
import re

import pytest
import yaml

from dprelease.spec import SpecError, load_spec
from tests.helpers import DEMO_DIR, DEMO_SPEC


def test_demo_spec_loads():
    spec = load_spec(DEMO_DIR / "adult.yaml")
    assert spec.data_path == DEMO_DIR / "adult.csv.gz"
    assert spec.public_schema().names[0] == "age"
    assert spec.missing_tokens() == {"workclass": "?", "occupation": "?", "native-country": "?"}
    assert "?" in spec.public_schema()["workclass"].values
    assert spec.stage_weights() == {"marginals": 0.45, "moments": 0.25, "refine": 0.3, "gates": 0.05}
    assert "path" not in spec.public_dict()["dataset"]


def _mutate(change):
    spec = copy.deepcopy(DEMO_SPEC)
    change(spec)
    return spec


CASES = [
    # (what is wrong, mutation, expected text in the message)
    (
        "epsilon zero",
        lambda s: s["privacy"].update(epsilon=0),
        "spec field 'privacy.epsilon': Input should be greater than 0",
    ),
    ("epsilon NaN", lambda s: s["privacy"].update(epsilon=float("nan")), "spec field 'privacy.epsilon'"),
    (
        "epsilon absurd",
        lambda s: s["privacy"].update(epsilon=1e9),
        "spec field 'privacy.epsilon': Input should be less than or equal to 100",
    ),
    ("delta >= 1", lambda s: s["privacy"].update(delta=1.5), "spec field 'privacy.delta'"),
    (
        "pure with delta",
        lambda s: s["privacy"].update(accountant="pure"),
        "delta must be 0 with accountant 'pure'",
    ),
    (
        "zcdp without delta",
        lambda s: s["privacy"].update(delta=0),
        "delta must be > 0 with accountant 'zcdp'",
    ),
    (
        "unknown mechanism",
        lambda s: s["mechanism"].update(name="magic"),
        "spec field 'mechanism': Value error, name ('magic') must be 'auto' or one of ['",
    ),
    (
        "unknown param",
        lambda s: s["mechanism"].update(params={"rank": 3}),
        "params ['rank'] are not parameters of factor_gauss",
    ),
    (
        "bad param value",
        lambda s: s["mechanism"].update(params={"clip": -1}),
        "params.clip (-1) must be a finite number > 0",
    ),
    (
        "reversed bounds",
        lambda s: s["schema"]["age"].update(bounds=[90, 17]),
        "spec field 'schema.age.continuous.bounds'",
    ),
    ("unknown type", lambda s: s["schema"]["age"].update(type="time"), "spec field 'schema.age'"),
    (
        "numbers as date bounds",
        lambda s: s["schema"]["age"].update(type="date", integer=None) or s["schema"]["age"].pop("integer"),
        "spec field 'schema.age.date.bounds': Value error, bounds ([17, 90]) must be two ISO 8601 dates",
    ),
    (
        "a token as missing on a continuous column",
        lambda s: s["schema"]["age"].update(missing="?"),
        "spec field 'schema.age.continuous.missing': Input should be 'reject' or 'allowed'",
    ),
    (
        "duplicate levels",
        lambda s: s["schema"]["education"].update(levels=["a", "b", "a"]),
        "column 'education': levels must be distinct; repeated: ['a']",
    ),
    (
        "one category",
        lambda s: s["schema"]["sex"].update(categories=["F"]),
        "spec field 'schema.sex.nominal.categories'",
    ),
    (
        "bad release id",
        lambda s: s.update(release_id="Bad_ID"),
        "spec field 'release_id': String should match pattern",
    ),
    (
        "unknown stage",
        lambda s: s.update(allocation={"noise": 1}),
        "allocation stages ['noise'] must be among ['gates', 'marginals', 'moments', 'refine']",
    ),
    (
        "zero weight",
        lambda s: s.update(allocation={"moments": 0}),
        "allocation weights {'moments': 0.0} must be finite numbers > 0",
    ),
    (
        "negative rows",
        lambda s: s.update(synthetic_rows=-5),
        "spec field 'synthetic_rows': Input should be greater than 0",
    ),
    ("unknown key", lambda s: s.update(epsilon=1), "spec field 'epsilon': Extra inputs are not permitted"),
    ("no dataset", lambda s: s.pop("dataset"), "spec field 'dataset': Field required"),
    (
        "unknown gate",
        lambda s: s["checks"].update(gates={"accuracy": {"min": 1}}),
        "gates ['accuracy'] must be among",
    ),
    ("empty gate", lambda s: s["checks"].update(gates={"tvd_1way": {}}), "a gate needs min, max or both"),
    (
        "gate min > max",
        lambda s: s["checks"].update(gates={"tvd_2way": {"min": 1, "max": 0}}),
        "min (1.0) must not exceed max (0.0)",
    ),
    (
        "gate on a classifier's score",
        lambda s: s["checks"].update(gates={"pmse": {"max": 0.1}}),
        "gate 'pmse' cannot stop a release: it comes from a classifier fitted to the confidential rows",
    ),
    (
        "gate on exact matches",
        lambda s: s["checks"].update(gates={"exact_match_rate": {"max": 0}}),
        "gate 'exact_match_rate' cannot stop a release: one record can equal every synthetic row",
    ),
    (
        "gate on a DCR quantile",
        lambda s: s["checks"].update(gates={"dcr_q05": {"min": 0.01}}),
        "gate 'dcr_q05' cannot stop a release: a quantile of nearest-record distances",
    ),
    (
        "gate on TSTR",
        lambda s: s["checks"].update(gates={"tstr_auc": {"min": 0.8}}),
        "It stays in the internal report as an advisory check",
    ),
    (
        "unknown target",
        lambda s: s["checks"].update(target="salary"),
        "checks.target ('salary') must be a column",
    ),
    (
        "gate on membership",
        lambda s: s["checks"].update(gates={"membership_share": {"max": 0.55}}),
        "replacing one held-out record can move it from 1.0 to 0.5",
    ),
    (
        "holdout too large",
        lambda s: s["checks"].update(holdout_fraction=0.9),
        "spec field 'checks.holdout_fraction'",
    ),
    (
        "wasserstein without a continuous column",
        lambda s: (
            s.update(schema={"sex": s["schema"]["sex"], "income": s["schema"]["income"]})
            or s["checks"].update(gates={"wasserstein_max": {"max": 0.1}})
        ),
        "gate wasserstein_max needs a continuous column without missing: allowed in the schema",
    ),
    (
        "paper variant without allow_non_dp",
        lambda s: s.update(
            privacy={"epsilon": 1, "delta": 0, "accountant": "pure"},
            mechanism={"name": "dpfm", "params": {"variant": "paper"}},
        ),
        "mechanism dpfm with these params is NOT differentially private",
    ),
    (
        "paper variant under zcdp",
        lambda s: s.update(
            privacy={"epsilon": 1, "delta": 1e-6, "allow_non_dp": True},
            mechanism={"name": "ron_gauss", "params": {"variant": "paper"}},
        ),
        "a paper-literal variant reproduces a pure ε-DP paper; use privacy.accountant: pure",
    ),
    (
        "anonymization that is not DP",
        lambda s: s.update(
            privacy={"epsilon": 1, "delta": 0, "accountant": "pure"},
            mechanism={"name": "spectral_anonymization"},
        ),
        "mechanism spectral_anonymization with these params is NOT differentially private",
    ),
    (
        "rows of a row-keeping mechanism",
        lambda s: s.update(mechanism={"name": "dpfm"}, synthetic_rows=10),
        "synthetic_rows cannot be set for dpfm",
    ),
    (
        "label of the wrong kind",
        lambda s: s.update(mechanism={"name": "ron_gauss", "params": {"task": "regression", "label": "sex"}}),
        "params.label ('sex') must be a continuous column for task 'regression', not nominal",
    ),
    (
        "stage the schema does not need",
        lambda s: s.update(mechanism={"name": "ron_gauss"}, allocation={"class_counts": 1}),
        "allocation stages ['class_counts'] must be among ['covariance', 'gates', 'mean']",
    ),
    (
        "gates while disabled",
        lambda s: s["checks"].update(enabled=False),
        "checks.gates need checks.enabled: true",
    ),
    (
        "unknown engine",
        lambda s: s.update(engine={"name": "spark"}),
        "spec field 'engine.name': Input should be 'memory', 'local' or 'dask'",
    ),
    (
        "scheduler on the local engine",
        lambda s: s.update(engine={"name": "local", "scheduler": "tcp://h:8786"}),
        "scheduler and workers apply only to name: dask",
    ),
    (
        "workers with a scheduler",
        lambda s: s.update(engine={"name": "dask", "scheduler": "tcp://h:8786", "workers": 4}),
        "workers sets the size of a LocalCluster; a scheduler's cluster has its own",
    ),
    (
        "tiny chunks",
        lambda s: s.update(engine={"name": "local", "chunk_rows": 10}),
        "spec field 'engine.chunk_rows': Input should be greater than or equal to 1000",
    ),
    (
        "streaming a mechanism that needs all rows",
        lambda s: s.update(engine={"name": "dask"}, mechanism={"name": "ron_gauss"}),
        "engine.name 'dask' streams the data in two passes (histograms, then a statistic summed over "
        "chunks), which only ['aim', 'factor_gauss', 'mst'] can use; ron_gauss needs every row in memory",
    ),
    (
        "a format twice",
        lambda s: s.update(output={"formats": ["csv", "csv"]}),
        "spec field 'output.formats': Value error, formats (['csv', 'csv']) must name each format once",
    ),
]


def test_engine_defaults_and_the_published_spec(tmp_path):
    spec = load_spec(DEMO_DIR / "adult.yaml")
    assert spec.engine.name == "memory" and spec.output_formats == ["csv"]
    doc = _mutate(lambda s: s.update(engine={"name": "dask", "scheduler": "tcp://10.1.2.3:8786"}))
    doc["dataset"]["path"] = str(DEMO_DIR / "adult.csv.gz")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(doc))
    streaming = load_spec(tmp_path / "spec.yaml")
    assert streaming.output_formats == ["parquet"] and streaming.engine.chunk_rows == 250_000
    published = streaming.public_dict()["engine"]
    assert published["scheduler"] == "set (address not published)" and "10.1.2.3" not in str(published)


@pytest.mark.parametrize(("case", "change", "message"), CASES, ids=[c[0] for c in CASES])
def test_spec_errors_name_the_field(case, change, message, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_mutate(change)))
    with pytest.raises(SpecError, match=re.escape(message)):
        load_spec(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [("privacy: [1, 2", "is not valid YAML"), ("- a\n- b\n", "must contain a YAML mapping")],
)
def test_unreadable_specs(text, message, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def test_a_quoted_number_is_refused_and_an_unquoted_exponent_is_a_number(tmp_path):
    """Issue 18: ``epsilon: "1.0"`` was read as 1.0 without a word; ``delta: 1e-6`` (YAML 1.1
    reads it as text) must stay a number."""
    doc = yaml.safe_load((DEMO_DIR / "adult.yaml").read_text())
    doc["dataset"]["path"] = str(DEMO_DIR / "adult.csv.gz")
    quoted = tmp_path / "quoted.yaml"
    doc["privacy"]["epsilon"] = "1.0"
    quoted.write_text(yaml.safe_dump(doc))
    with pytest.raises(
        SpecError, match=re.escape("spec field 'privacy.epsilon': Input should be a valid number")
    ):
        load_spec(quoted)
    plain = tmp_path / "plain.yaml"
    doc["privacy"].update(epsilon=1, delta="DELTA")
    plain.write_text(yaml.safe_dump(doc).replace("DELTA", "1e-6"))
    assert "delta: 1e-6" in plain.read_text()
    assert load_spec(plain).privacy.delta == 1e-6
