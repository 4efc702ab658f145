"""The release document (``public/release.json``) and the plain-language README that
travel with a release: what was released, how, under which guarantee, by which software.
No data path and no raw value ever enters them."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from importlib import metadata

from dprelease._version import __version__, commit
from dprelease.bundle.format import BUNDLE_FORMAT
from dprelease.bundle.release_doc import Columns, ReleaseDocument
from dprelease.mechanisms.accounting import BudgetPlan, account
from dprelease.mechanisms.accuracy import expected_error
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.spec import ReleaseSpec

IDENTIFIERS_STATEMENT = (
    "identifier columns (type: id) are never read into the model; each synthetic row gets a fresh "
    "identifier from the declared format and its position, which matches no real record"
)

__all__ = [
    "GATES_STATEMENT",
    "IDENTIFIERS_STATEMENT",
    "NEIGHBOUR_STATEMENT",
    "accuracy_of",
    "readme",
    "release_document",
]

NEIGHBOUR_STATEMENT = (
    "Neighbouring data sets differ by replacing one record (bounded DP). Under this "
    "relation the number of input rows n is identical on neighbours, so it is treated as "
    "public: it is used without noise and published here; it is not protected."
)


GATES_STATEMENT = (
    "Each gate's metric was released with noise (the 'gates' stage of the budget plan, on the "
    "compared_rows real rows the release was fitted on) and the decision to publish was taken on the "
    "noisy value, so publication is itself differentially private. Every other check is advisory and "
    "internal: it never changed what was published."
)


ROW_ORDER_NOTE = (
    "synthetic row i is computed from fitted input row i (plus noise); the rows keep the input's "
    "order and count. The guarantee above still holds, but an analyst must not read a row as a "
    "fresh draw."
)


_PACKAGES = ["numpy", "scipy", "pandas", "prefect", "great_expectations", "pydantic"]


def _check_sensitivities(measurements: list[Measurement], derived: dict) -> None:
    """Every noisy statistic's recorded Δ must be at least the public derivation's."""
    for m in measurements:
        want = derived.get(m.name)
        if want is None or want.stage != m.stage:
            raise BudgetError(
                f"internal error: statistic '{m.stage}/{m.name}' has no sensitivity derived from public "
                "facts; nothing was published"
            )
        bound = want.bound(m.norm)
        if bound is None or m.sensitivity < bound * (1 - 1e-12):
            raise BudgetError(
                f"internal error: statistic '{m.stage}/{m.name}' was measured with sensitivity "
                f"{m.sensitivity!r} ({m.norm}) below the derived {bound!r}; nothing was published"
            )
    missing = sorted(set(derived) - {m.name for m in measurements})
    if missing:
        raise BudgetError(f"internal error: statistics {missing} were derived but never measured")


def accuracy_of(book: dict, n_fitted: int) -> list[dict]:
    """``privacy.accuracy``: per measurement of the ledger, the error its noise implies
    (``mechanisms.accuracy.expected_error``; no data: the noise scale, the dimension and
    the public n of fitted rows)."""
    return [
        expected_error(r["statistic"], r["mechanism"], r["noise_scale"], r["dimension"], n_fitted)
        for r in book["measurements"]
    ]


def _versions() -> dict:
    out = {"python": platform.python_version(), "dprelease": __version__}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def release_document(
    spec: ReleaseSpec,
    release_id: str,
    plan: BudgetPlan,
    measurements: list[Measurement],
    *,
    n: int,
    m: int,
    facts: dict,
    insecure_seed: int | None,
    started: datetime,
    status: str = "released",
    n_fitted: int | None = None,
    ledger_record: dict | None = None,
    numerics: str = "",
    engine: dict | None = None,
    gates: list[dict] | None = None,
    compared_rows: int | None = None,
) -> dict:
    """``public/release.json``: what was released and how; no data path, no raw value.
    ``n_fitted`` < n when ``checks.holdout_fraction`` keeps rows out of the release.
    ``facts`` are the public facts the synthesis stages reported; ``ledger_record`` which
    ledger recorded the spend, by its chain head, never where it is (``ledger.ledger_facts``);
    ``numerics`` how the noise was sampled (``primitives.sampler_note``); ``engine`` public
    facts about where the passes ran; ``gates`` the DP gates' public results, decided on
    ``compared_rows`` real rows.
    Refuses (``BudgetError``) a measurement whose recorded sensitivity is below what the
    public facts give (``ReleaseSpec.sensitivities``, the derivation ``audit verify`` uses)."""
    synth = MECHANISMS[spec.mechanism.name]
    book = account(
        plan,
        measurements,
        allow_non_dp=spec.privacy.allow_non_dp,
        mechanism_defects=synth.defects(spec.mechanism_params()),
    )
    if not book["defects"]:
        derived = spec.sensitivities(n if n_fitted is None else n_fitted, facts, compared_rows)
        _check_sensitivities(measurements, derived)
    in_order = synth.keeps_row_order
    return {
        "bundle_format": BUNDLE_FORMAT,
        "release_id": release_id,
        "dataset": spec.dataset.name,
        "status": status,
        "differentially_private": not book["defects"],
        "spec": spec.public_dict(),
        "mechanism": {
            "name": spec.mechanism.name,
            "params": spec.mechanism.params,
            "facts": facts,
            "rows_correspond_to_input_rows": in_order,
            "rows_note": ROW_ORDER_NOTE if in_order else "synthetic rows are fresh draws",
            "chosen_by": None if spec.auto_choice is None else spec.auto_choice.as_dict(),
        },
        "privacy": {
            "accountant": plan.notion,
            "neighbour_relation": "replace-one",
            "statement": NEIGHBOUR_STATEMENT,
            "input_rows_n_public": n,
            "rows_fitted": n if n_fitted is None else n_fitted,
            "holdout_fraction": spec.checks.holdout_fraction,
            "synthetic_rows": m,
            "budget_plan": plan.as_dict(),
            "ledger": book,
            "accuracy": accuracy_of(book, n if n_fitted is None else n_fitted),
            "numerics": numerics,
            "ledger_record": ledger_record,
        },
        "checks": {
            "gates": gates or [],
            "compared_rows": compared_rows,
            "statement": GATES_STATEMENT,
        },
        "columns": {
            "modelled": spec.public_schema().names,
            "identifiers": spec.identifiers(),
            "dropped": spec.dropped_columns(),
            "one_hot": {name: list(columns) for name, (columns, _) in spec.one_hot().items()},
            "derived": {name: d.formula for name, d in spec.derived().items()},
            "statement": IDENTIFIERS_STATEMENT,
        },
        "engine": engine or {"name": "memory"},
        "outputs": {
            f"synthetic.{f}": {"rows": m, "format": f, "columns": spec.output_columns()}
            for f in spec.output_formats
        },
        "randomness": (
            {"source": "os-entropy", "fit_for_publication": True}
            if insecure_seed is None
            else {
                "source": "insecure-seed",
                "seed": insecure_seed,
                "fit_for_publication": False,
                "warning": "a fixed seed makes the noise reproducible by anyone who knows it; "
                "do not publish this release",
            }
        ),
        "software": {"versions": _versions(), "git_commit": commit()},
        "times": {"started": started.isoformat(), "finished": datetime.now(UTC).isoformat()},
    }


def readme(doc: ReleaseDocument) -> str:
    """``public/README.txt``: the release in plain words, from its document."""
    t = doc.privacy.ledger.totals
    dp = doc.differentially_private
    kind = "differentially private" if dp else "NOT differentially private"
    cols = doc.columns or Columns()
    record = doc.privacy.record
    lines = [
        f"{kind} synthetic data: release {doc.release_id} of '{doc.dataset}'",
        "",
        f"Mechanism: {doc.mechanism.name}. Privacy: ({t.epsilon:.6g}, {t.delta:.3g})-DP"
        f"{'' if dp else ' as the paper claims, NOT as a guarantee,'}"
        f" under the replace-one neighbour relation ({doc.privacy.accountant} accounting).",
        f"Rows: {doc.privacy.synthetic_rows} synthetic rows. "
        + (
            ROW_ORDER_NOTE
            if doc.mechanism.rows_correspond_to_input_rows
            else "Freshly sampled; no row corresponds to a person in the input."
        ),
        NEIGHBOUR_STATEMENT,
        "",
        *(
            f"{name:<18} the synthetic data ({out.format}), the public schema's columns and types"
            for name, out in doc.outputs.items()
        ),
        *([f"Left out of the release (type: drop): {', '.join(cols.dropped)}."] if cols.dropped else []),
        *(
            f"One-hot group {name} ({', '.join(columns)}): modelled as one category, at most one set per row."
            for name, columns in cols.one_hot.items()
        ),
        *(
            f"Derived column {name} = {formula}: computed from the synthetic values, never modelled."
            for name, formula in cols.derived.items()
        ),
        *(
            [f"Identifiers {', '.join(cols.identifiers)}: {IDENTIFIERS_STATEMENT}"]
            if cols.identifiers
            else []
        ),
        *(
            [
                f"tables/            the {doc.tables.count} noisy count tables the mechanism measured, "
                f"with standard errors and {doc.tables.level:.0%} intervals (tables/index.json "
                "says how); `dprelease query` answers a count with its interval from them",
                "report.html        a report built from these files only: what the release protects, what "
                "it can answer, a picture of every measured table",
            ]
            if doc.tables
            else []
        ),
        "release.json       schema, mechanism, parameters, budget ledger, software versions",
        "budget_plan.json   the budget split fixed before the data was read",
        "manifest.json      sha256 of every file above",
    ]
    if record.policy:  # bundles from before issue 32 lack it
        policy = record.policy
        lines += ["", f"Privacy unit: {policy.privacy_unit}.", f"Budget policy: {policy.covers}."]
    head = record.chain_head
    if head:  # bundles from before issue 38 lack it
        lines += [
            "",
            f"Budget ledger: its chain head was row {head.seq}, sha256 {head.hash}, when this bundle "
            "was sealed; `dprelease audit verify` checks the bundle against it.",
        ]
    void = record.dataset_guarantee.void_since if record.dataset_guarantee else None
    if void:
        lines += [
            "",
            f"DATASET GUARANTEE VOID: release '{void.release_id}' of this dataset (from {void.time}) "
            "was not differentially private, so no composed guarantee covers the dataset's releases since.",
        ]
    if not doc.randomness.fit_for_publication:
        lines.insert(0, "NOT FIT FOR PUBLICATION: made with a fixed (insecure) seed.")
    if not dp:
        lines[:0] = [
            "NOT DIFFERENTIALLY PRIVATE: a paper-literal variant for comparison only "
            "(privacy.allow_non_dp). Do not publish. Defects:",
            *(f"  - {d}" for d in doc.privacy.ledger.defects),
            "",
        ]
    return "\n".join(lines) + "\n"
