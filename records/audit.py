"""``dprelease audit verify``: re-check a release bundle without trusting the operator.

Each check recomputes something from the files (and, with a ledger, from the database)
and compares it with what the bundle claims:

* files: every sha256 in ``public/manifest.json`` (and ``internal/`` when present);
  files on disk but absent from a manifest;
* identity: the folder is named after the release_id its release.json states;
* arithmetic: the plan's split (Σ shares ≤ total, ρ = zCDP(ε, δ) at CKS Cor. 13), every
  measurement's noise scale against its sensitivity and share (σ ≥ Δ₂/√(2ρ), b ≥ Δ₁/ε),
  the per-stage sums, the total and its ρ → (ε, δ) conversion;
* sensitivities, not trusted: every measurement's Δ is re-derived from public facts only
  (the published spec's schema and parameters, the public n, the stages' public facts,
  the gates' compared rows) with the mechanism's own functions
  (``ReleaseSpec.sensitivities``); a recorded Δ or noise scale below the derivation, or a
  statistic the derivation does not know, fails;
* randomness and status: an ``--insecure-seed`` or non-DP release is flagged;
* ledger: the hash chain, the chain head the bundle names (the ledger's identity: a bundle
  names no ledger location in public), the bundle's rows present with the same hashes, one
  ledger row per measurement with the same sensitivity/scale/share, and the closing row's
  seal of both manifests, public and internal (so the files are the ones the pipeline
  wrote, in the folder of the release that wrote them). Which ledger: ``choose_ledger``;
* tables: each published noisy table (``public/tables/``) is a measurement the ledger
  records, with the recorded mechanism, noise scale and number of cells, axes over the
  public schema's declared cells, and its standard errors and intervals re-derived from
  the recorded scale alone.

A *public copy* (a folder holding only what was published: ``release.json`` and
``manifest.json`` at its top, under any name) is checked the same way, except that its
folder name is not an identity and, with ``public=True``, no ledger is looked for: those
two checks are reported as not checked, never as failed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from dprelease.bundle.files import sha256
from dprelease.bundle.format import BUNDLE_FORMATS, check_bundle_format
from dprelease.bundle.privacy_doc import MeasurementRow, unit_of
from dprelease.bundle.release_doc import Discovered, FoundAtoms, ReleaseDocument
from dprelease.mechanisms.accounting import zcdp_delta, zcdp_epsilon, zcdp_rho
from dprelease.records.check import Check, not_checked
from dprelease.records.ledger_choice import choose_ledger
from dprelease.records.table_checks import published_advice, published_replicates, published_tables

if TYPE_CHECKING:
    from dprelease.ledger import Ledger

__all__ = [
    "Check",
    "is_public_copy",
    "load_document",
    "not_checked",
    "period_checks",
    "public_spec",
    "verify_bundle",
]

_REL = 1e-9  # relative tolerance for re-derived floats (the files hold repr-exact doubles)


def is_public_copy(folder: Path) -> bool:
    """A folder holding only a release's published files: release.json at its top."""
    return (folder / "release.json").is_file() and not (folder / "public").is_dir()


def load_document(bundle: Path) -> tuple[ReleaseDocument, Path]:
    """release.json (public, or internal for a gated release, or at the top of a public copy)
    and the folder it is in."""
    if is_public_copy(bundle):
        return ReleaseDocument.from_file(bundle / "release.json"), bundle
    for part in ("public", "internal"):
        path = bundle / part / "release.json"
        if path.is_file():
            return ReleaseDocument.from_file(path), bundle / part
    raise FileNotFoundError(
        f"'{bundle}' has no release.json, public/release.json or internal/release.json; pass a release "
        "bundle folder or a copy of its public/ folder"
    )


def _files(bundle: Path) -> list[Check]:
    out = []
    parts = (
        [("public", bundle)] if is_public_copy(bundle) else [(p, bundle / p) for p in ("public", "internal")]
    )
    for part, folder in parts:
        if not folder.is_dir():
            continue
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            out.append(Check("files", f"{part}/manifest.json", False, "missing"))
            continue
        listed = json.loads(manifest.read_text())["files"]
        for rel, digest in sorted(listed.items()):
            p = folder / rel
            ok = p.is_file() and sha256(p) == digest
            out.append(Check("files", f"{part}/{rel}", ok, "sha256 matches" if ok else "changed or missing"))
        extra = sorted(
            str(p.relative_to(folder))
            for p in folder.rglob("*")
            if p.is_file() and p.name != "manifest.json" and str(p.relative_to(folder)) not in listed
        )
        out.append(Check("files", f"{part}/ unlisted files", not extra, ", ".join(extra) or "none"))
    return out


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_REL, abs_tol=1e-300)


def _n(value: float | None) -> float:
    """A number the bundle must state: NaN when it states none (no check on it holds)."""
    return math.nan if value is None else value


def _arithmetic(doc: ReleaseDocument) -> list[Check]:
    plan, book = doc.privacy.budget_plan, doc.privacy.ledger
    zcdp = plan.notion == "zcdp"
    key = unit_of(plan.notion)
    out = []
    total = _n(plan.rho) if zcdp else plan.epsilon
    if zcdp:
        rho = zcdp_rho(plan.epsilon, plan.delta)
        ok = _close(rho, _n(plan.rho)) and zcdp_delta(_n(plan.rho), plan.epsilon) <= plan.delta
        out.append(
            Check("arithmetic", "plan rho from (epsilon, delta)", ok, f"rho={plan.rho!r}, recomputed {rho!r}")
        )
    shares = [_n(s.share(key)) for s in plan.stages]
    weights = [s.weight for s in plan.stages]
    ok = math.fsum(shares) <= total and all(
        _close(sh, total * w / math.fsum(weights)) for sh, w in zip(shares, weights, strict=True)
    )
    out.append(
        Check("arithmetic", "plan split by weight, sum within total", ok, f"sum {math.fsum(shares)!r}")
    )
    allocated = {s.stage: s.share(key) for s in plan.stages}
    for r in book.measurements:
        name = f"{r.stage}/{r.statistic}"
        if r.mechanism == "none":
            out.append(Check("arithmetic", name, False, f"used without noise: {r.defect}"))
            continue
        share = _n(r.share(key))
        need = (
            r.sensitivity / math.sqrt(2 * share)  # Gaussian σ, or Gumbel s = Δ∞/√(2ρ) (ρ = ε²/8)
            if r.mechanism in ("gaussian", "exponential")
            else 2 * r.sensitivity / share  # noisy max: exponential (or Gumbel) noise of scale 2Δu/ε
            if r.mechanism == "noisy_max"
            else r.sensitivity / share
        )
        ok = r.noise_scale >= need * (1 - _REL)
        out.append(Check("arithmetic", name, ok, f"{r.mechanism} scale {r.noise_scale:.6g} >= {need:.6g}"))
    for s in book.stages:
        spent = math.fsum(r.share(key) or 0.0 for r in book.measurements if r.stage == s.stage)
        ok = _close(spent, s.spent(key)) and spent <= _n(allocated.get(s.stage, -1.0))
        out.append(
            Check(
                "arithmetic",
                f"stage {s.stage} sum",
                ok,
                f"{key} {spent:.6g} <= {allocated.get(s.stage)}",
            )
        )
    t = book.totals
    summed = math.fsum(s.spent(key) for s in book.stages)
    if zcdp:
        eps = zcdp_epsilon(summed, t.delta)
        ok = (
            _close(summed, _n(t.rho))
            and _close(eps, t.epsilon)
            and (summed == 0 or zcdp_delta(summed, t.epsilon) <= t.delta)
            and t.epsilon <= plan.epsilon * (1 + _REL)
        )
        detail = f"rho {summed:.6g} -> ({eps:.6g}, {t.delta:g}); claimed epsilon {t.epsilon:.6g}"
    else:
        ok = _close(summed, t.epsilon) and summed <= plan.epsilon
        detail = f"sum of epsilon {summed:.6g}; claimed {t.epsilon:.6g}"
    out.append(Check("arithmetic", "total and conversion", ok, detail))
    return out


def _identity(bundle: Path, doc: ReleaseDocument) -> list[Check]:
    if is_public_copy(bundle):
        return [
            not_checked("identity", "folder named after its release_id", "a public copy may have any name")
        ]
    ok = bundle.resolve().name == doc.release_id
    return [
        Check(
            "identity",
            "folder named after its release_id",
            ok,
            f"folder '{bundle.resolve().name}', release_id '{doc.release_id}'",
        )
    ]


def public_spec(doc: ReleaseDocument):
    """The release's spec rebuilt from its published form (the data path is not published
    and not needed: nothing here reads data)."""
    from dprelease.spec import ReleaseSpec

    raw = {**doc.spec, "dataset": {"name": doc.dataset, "path": "not-published"}}
    if isinstance(raw.get("engine"), dict) and raw["engine"].get("scheduler"):
        raw["engine"] = {**raw["engine"], "scheduler": "tcp://not-published:0"}
    return ReleaseSpec.model_validate(raw)


def _derived(doc: ReleaseDocument) -> list[Check]:
    """Each measurement's Δ and noise scale against the Δ derived from public facts."""
    measured = doc.privacy.ledger.measurements
    try:
        spec = public_spec(doc)
        compared = None if doc.checks is None else doc.checks.compared_rows
        derived = spec.sensitivities(doc.privacy.rows_fitted, dict(doc.mechanism.facts), compared)
    except Exception as e:
        return [Check("sensitivity", "derivation from public facts", False, f"{type(e).__name__}: {e}")]
    out = []
    for r in measured:
        name = f"{r.stage}/{r.statistic}"
        want = derived.get(r.statistic)
        if want is None or want.stage != r.stage:
            out.append(
                Check("sensitivity", name, False, "no derivation from public facts knows this statistic")
            )
            continue
        bound = want.bound(r.sensitivity_norm)
        zcdp = r.mechanism in ("gaussian", "exponential")
        share = r.rho if zcdp else r.epsilon
        if bound is None or r.mechanism == "none" or not share:
            out.append(Check("sensitivity", name, False, f"{r.mechanism} on {r.sensitivity_norm}: no bound"))
            continue
        need = (
            bound / math.sqrt(2 * share)
            if zcdp
            else 2 * bound / share
            if r.mechanism == "noisy_max"
            else bound / share
        )
        ok = r.sensitivity >= bound * (1 - _REL) and r.noise_scale >= need * (1 - _REL)
        out.append(
            Check(
                "sensitivity",
                name,
                ok,
                f"derived {r.sensitivity_norm} {bound:.6g} (recorded {r.sensitivity:.6g}); "
                f"scale {r.noise_scale:.6g} >= {need:.6g}",
            )
        )
    missing = sorted(set(derived) - {r.statistic for r in measured})
    if missing:
        out.append(
            Check("sensitivity", "derived statistics measured", False, f"not in the ledger: {missing}")
        )
    return out


def _status(doc: ReleaseDocument) -> list[Check]:
    rnd = doc.randomness
    return [
        Check(
            "status",
            "randomness",
            rnd.fit_for_publication,
            "OS entropy"
            if rnd.fit_for_publication
            else f"--insecure-seed {rnd.seed}: not fit for publication",
        ),
        Check(
            "status",
            "differentially private",
            doc.differentially_private,
            "yes" if doc.differentially_private else "; ".join(doc.privacy.ledger.defects),
        ),
    ]


def _ledger(doc: ReleaseDocument, bundle: Path, url: str) -> list[Check]:
    from dprelease.ledger import Ledger, LedgerError, spent_charge

    out = []
    rid = doc.release_id
    record = doc.privacy.record
    try:
        with Ledger(url, create=False) as led:  # an audit never creates a ledger
            problems, stamped = led.verify_chain(), led.format
            hashes = {r.seq: r.hash for r in led.rows()} if record.chain_head else {}
            rows = {r.seq: r for r in led.rows(release_id=rid)}
            void = led.void_since(doc.dataset)
            period = period_checks(led, doc)
    except LedgerError as e:
        return [Check("ledger", "cross-check", False, str(e))]
    out.append(Check("ledger", "format", True, f"{stamped.format} ({stamped.written_by})"))
    out.append(Check("ledger", "hash chain", not problems, "; ".join(problems) or "intact"))
    if record.chain_head:  # bundles from before issue 38 name the ledger's URL instead
        seq, digest = record.chain_head.seq, record.chain_head.hash
        same = hashes.get(seq) == digest
        out.append(
            Check(
                "ledger",
                "the bundle's chain head",
                same,
                f"row {seq}, sha256 {digest[:16]}…"
                + ("" if same else ": not in this ledger (another ledger, or a rewritten chain)"),
            )
        )
    out += period
    out.append(
        Check(
            "ledger",
            "dataset guarantee",
            void is None,
            "every release of the dataset was DP"
            if void is None
            else f"VOID since release '{void['release_id']}' (not differentially private)",
        )
    )
    missing = [r.seq for r in record.rows if r.seq not in rows or rows[r.seq].hash != r.hash]
    recorded = doc.privacy.ledger_record is not None and bool(doc.privacy.ledger_record.as_mapping())
    out.append(
        Check(
            "ledger",
            "bundle rows in the ledger",
            recorded and not missing,
            f"missing or different: {missing}" if missing else f"{len(record.rows)} rows",
        )
    )
    measured = sorted(
        (r.stage, r.statistic, r.sensitivity, r.noise_scale, r.rho, r.epsilon)
        for r in rows.values()
        if r.kind == "measurement"
    )
    claimed = sorted(
        (r.stage, r.statistic, r.sensitivity, r.noise_scale, r.rho, r.epsilon)
        for r in doc.privacy.ledger.measurements
    )
    out.append(
        Check(
            "ledger",
            "measurements match",
            measured == claimed,
            f"{len(measured)} ledger rows, {len(claimed)} in the bundle",
        )
    )
    closing = [r for r in rows.values() if r.kind == "release" and r.status in ("released", "gated")]
    if closing:
        charge = spent_charge(rows.values())
        said = _n(closing[-1].epsilon)
        ok = _close(charge.epsilon, said) and charge.delta == closing[-1].delta
        out.append(
            Check(
                "ledger",
                "closing row's charge",
                ok,
                f"spent stages compose to {charge.epsilon:.6g}; the row says {said:.6g}",
            )
        )
    where = f"{closing[-1].status} row {closing[-1].seq}" if closing else "no released/gated row"
    for part in ("public", "internal"):
        path = bundle / part / "manifest.json"
        found = sha256(path) if path.is_file() else None
        ok = bool(closing) and closing[-1].detail_of(f"{part}_manifest_sha256") == found
        out.append(Check("ledger", f"closing row seals {part}/manifest.json", ok, where))
    return out


def period_checks(led: Ledger, doc: ReleaseDocument) -> list[Check]:
    """A release under a period budget: the ledger holds the bundle's policy, the release was
    reserved in the period the bundle names, and the releases the ledger's rows put in that
    period compose (``compose_lifetime``, at the period's δ) within the period's ε."""
    stated = doc.privacy.record.period
    if not stated:
        return []
    budget, at = led.period_budget(doc.dataset), led.reserved_at(doc.release_id)
    held = None if budget is None else (str(budget.length), budget.epsilon, budget.delta, budget.disjoint)
    same = held == (stated.length, stated.epsilon, stated.delta, stated.disjoint)
    policy = Check("ledger", "period budget", same, f"ledger {held}, bundle {stated.length}")
    if budget is None or at is None or not same:
        return [policy]
    label = budget.length.label(at)
    named = stated.this_period.period
    spend, count = led.period_spend(doc.dataset, budget, at)
    return [
        policy,
        Check("ledger", "release's period", label == named, f"reserved in {label}; the bundle says {named}"),
        Check(
            "ledger",
            "period account",
            spend.epsilon <= budget.epsilon,
            f"{count} release(s) in {label} compose to epsilon {spend.epsilon:.6g} at delta {budget.delta:g} "
            f"(budget {budget.epsilon:g})",
        ),
    ]


def _selection(
    rows: dict[str, MeasurementRow], statistic: str, found: Discovered | FoundAtoms, floor: float
) -> Check:
    """A partition selection (categories, or a numeric column's atoms): Laplace with
    Δ₁ = 2 and a threshold ≥ max(1 + b·ln(1/δ), ``floor``)."""
    r = rows.get(statistic)
    need = math.inf if r is None else max(1 + r.noise_scale * math.log(1 / _n(found.delta)), floor)
    ok = (
        r is not None
        and r.mechanism == "laplace"
        and r.sensitivity >= 2
        and _n(found.threshold) >= need * (1 - _REL)
    )
    return Check("sensitivity", f"schema/{statistic}", ok, f"Δ₁ 2, threshold >= {need}")


def _discovery(doc: ReleaseDocument) -> list[Check]:
    """A ``schema`` discovery's statistics against their derivation (``mechanisms.discovery``):
    each bound by report noisy max with Δu = 1 at the level the public n and its ε
    give; each category set, and each numeric column's atoms (absent when they were off, or
    before atoms were discovered), by partition selection with Δ₁ = 2 and a threshold
    τ ≥ 1 + b·ln(1/δ) (for atoms also ≥ min_share·n); every partition selection in the
    ledger's rows listed, and their δ within the plan's (0 when none ran)."""
    from dprelease.mechanisms.discovery import quantile_level

    rows = {r.statistic: r for r in doc.privacy.ledger.measurements}
    n = doc.rows or 0
    out = []
    deltas = {}
    for name, found in (doc.discovered or {}).items():
        if found.kind == "bounds":
            made = [rows.get(f"bound[{name},{side}]") for side in ("lower", "upper")]
            ok = all(r is not None and r.mechanism == "noisy_max" and r.sensitivity >= 1 for r in made)
            first = made[0]
            level = quantile_level(n, _n(first.epsilon)) if ok and first else None
            ok = ok and level is not None and _close(level, _n(found.quantile_level))
            out.append(Check("sensitivity", f"schema/bounds[{name}]", ok, f"Δu 1, level {level}"))
            if found.atoms is not None:
                atoms = found.atoms
                deltas[f"atoms[{name}]"] = atoms.delta
                out.append(_selection(rows, f"atoms[{name}]", atoms, atoms.min_share * n))
            continue
        deltas[f"categories[{name}]"] = _n(found.delta)
        out.append(_selection(rows, f"categories[{name}]", found, 0.0))
    out.append(_selection_deltas(rows, deltas, doc.privacy.budget_plan.delta))
    return out


def _selection_deltas(rows: dict[str, MeasurementRow], deltas: dict[str, float], plan_delta: float) -> Check:
    """Every partition selection the ledger recorded (a Laplace row) is listed in the bundle
    with its δ, and those δ sum to at most the plan's."""
    ran = {s for s, r in rows.items() if r.mechanism == "laplace"}
    total = math.fsum(deltas.values())
    ok = ran <= deltas.keys() and total <= plan_delta * (1 + _REL)
    unlisted = f"; not listed: {', '.join(sorted(ran - deltas.keys()))}" if ran - deltas.keys() else ""
    return Check("arithmetic", "partition selections' delta", ok, f"{total:g} <= {plan_delta:g}{unlisted}")


def verify_bundle(bundle: Path, ledger_url: str | None, *, public: bool = False) -> list[Check]:
    """All checks; the bundle passes when every ``ok`` is True. The ledger: ``ledger_url``,
    else the one ``choose_ledger`` finds; none with ``public`` (only what was published is
    checked, and the ledger cross-check is reported as not checked)."""
    doc, folder = load_document(bundle)
    found = check_bundle_format(doc, f"at {bundle}")
    derived = _discovery(doc) if doc.is_discovery else _derived(doc)
    checks = [Check("format", "bundle format", True, f"{found}: {BUNDLE_FORMATS[found]}")]
    checks += _files(bundle) + _identity(bundle, doc) + _arithmetic(doc) + derived + _status(doc)
    checks += published_tables(folder, doc) + published_replicates(folder, doc)
    if not doc.is_discovery and doc.has("advice"):
        checks += published_advice(folder, doc, public_spec(doc).public_schema())
    if public and ledger_url is None:
        return [*checks, not_checked("ledger", "cross-check", "no ledger: only what was published")]
    chosen = choose_ledger(bundle, doc, ledger_url)
    if chosen.url is None:
        checks.append(Check("ledger", "cross-check", False, f"ledger not found: {chosen.origin}"))
    else:
        checks += _ledger(doc, bundle, chosen.url)
    return checks
