"""``write_bundle``: the release document, the manifests, the atomic publish; and the
failure record a failed run leaves instead.

Layout of ``<out>/<release_id>/``:

* ``public/``: ``synthetic.csv`` and/or ``synthetic.parquet``, ``budget_plan.json``,
  ``release.json``, ``README.txt``, ``manifest.json`` (sha256 of every other public file);
* ``internal/``: validation reports (with counts) and ``manifest.json`` — for the steward
  and the auditor only.

Everything is written into a staging folder ``<out>/.staging-<release_id>-<uuid>`` that
is renamed to ``<out>/<release_id>`` as the very last step, so a failed run never
leaves a half-written release.

Policy: ``cache_policy=NO_CACHE, persist_result=False`` (it receives the synthetic
table before publication and writes our own files; Prefect keeps nothing).
"""

from __future__ import annotations

import csv
import errno
import io
import math
import os
import platform
import shutil
import subprocess
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.spec import ReleaseSpec
from mechanisms.accounting import BudgetPlan, zcdp_epsilon
from mechanisms.errors import BudgetError, DPReleaseError
from mechanisms.primitives import Measurement
from mechanisms.registry import MECHANISMS
from tasks.budget import plan_to_dict
from tasks.files import sha256, write_json
from tasks.scrub import scrub_errors

__all__ = [
    "GATES_STATEMENT",
    "NEIGHBOUR_STATEMENT",
    "csv_header",
    "io_error",
    "ledger",
    "release_document",
    "write_bundle",
    "write_csv",
    "write_failure_record",
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
_PACKAGES = ["dprelease", "numpy", "scipy", "pandas", "prefect", "great_expectations", "pydantic"]


def ledger(
    plan: BudgetPlan,
    measurements: list[Measurement],
    *,
    allow_non_dp: bool = False,
    mechanism_defects: list[str] | None = None,
) -> dict:
    """Per-measurement rows, per-stage sums against the plan, and totals; refuses (raises)
    if any stage or the total exceeds what the plan allows, or if a measurement is not DP
    (``defect``) and the spec did not set ``privacy.allow_non_dp``. A value used without
    noise (mechanism ``none``) costs nothing here, which is exactly why it makes the
    release non-DP. ``mechanism_defects`` are reasons the mechanism as a whole is not DP
    (e.g. spectral anonymization, which measures nothing)."""
    rows = [m.ledger_row() for m in measurements]
    defects = [f"mechanism: {d}" for d in mechanism_defects or []]
    defects += [f"{r['stage']}/{r['statistic']}: {r['defect']}" for r in rows if r["defect"]]
    if defects and not allow_non_dp:
        raise BudgetError(
            "measurements that are not differentially private were made without "
            f"privacy.allow_non_dp: {'; '.join(defects)}"
        )
    key = "rho" if plan.notion == "zcdp" else "epsilon"
    stages = []
    for s in plan.stages:
        spent = math.fsum(r[key] or 0.0 for r in rows if r["stage"] == s.stage)
        allowed = s.rho if plan.notion == "zcdp" else s.epsilon
        if spent > allowed:
            raise BudgetError(f"stage '{s.stage}' spent {key} {spent!r} > its allocation {allowed!r}")
        stages.append(
            {"stage": s.stage, "weight": s.weight, f"{key}_allocated": allowed, f"{key}_spent": spent}
        )
    total = math.fsum(st[f"{key}_spent"] for st in stages)
    if plan.notion == "zcdp":
        eps = zcdp_epsilon(total, plan.delta)
        totals = {
            "rho": total,
            "epsilon": eps,
            "delta": plan.delta,
            "conversion": "rho-zCDP -> (epsilon, delta)-DP, Canonne-Kamath-Steinke 2020 Cor. 13",
        }
    else:
        eps = total
        totals = {"epsilon": total, "delta": 0.0, "conversion": "basic composition"}
    if eps > plan.epsilon:
        raise BudgetError(f"total epsilon spent ({eps!r}) exceeds privacy.epsilon ({plan.epsilon!r})")
    status = (
        "differentially private"
        if not defects
        else "NOT differentially private: the totals are what the paper claims, not a guarantee"
    )
    return {"status": status, "defects": defects, "measurements": rows, "stages": stages, "totals": totals}


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


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict:
    out = {"python": platform.python_version()}
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
    ``facts`` are the public facts the synthesis stages reported; ``ledger_record`` where the
    spend is recorded (``ledger_db.ledger_facts``); ``numerics`` how the noise was sampled
    (``primitives.sampler_note``); ``engine`` public facts about where the passes ran;
    ``gates`` the DP gates' public results, decided on ``compared_rows`` real rows.
    Refuses (``BudgetError``) a measurement whose recorded sensitivity is below what the
    public facts give (``ReleaseSpec.sensitivities``, the derivation ``audit verify`` uses)."""
    synth = MECHANISMS[spec.mechanism.name]
    book = ledger(
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
        },
        "privacy": {
            "accountant": plan.notion,
            "neighbour_relation": "replace-one",
            "statement": NEIGHBOUR_STATEMENT,
            "input_rows_n_public": n,
            "rows_fitted": n if n_fitted is None else n_fitted,
            "holdout_fraction": spec.checks.holdout_fraction,
            "synthetic_rows": m,
            "budget_plan": plan_to_dict(plan),
            "ledger": book,
            "numerics": numerics,
            "ledger_record": ledger_record,
        },
        "checks": {
            "gates": gates or [],
            "compared_rows": compared_rows,
            "statement": GATES_STATEMENT,
        },
        "engine": engine or {"name": "memory"},
        "outputs": {
            f"synthetic.{f}": {"rows": m, "format": f, "columns": list(spec.columns)}
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
        "software": {"versions": _versions(), "git_commit": _git_commit()},
        "times": {"started": started.isoformat(), "finished": datetime.now(UTC).isoformat()},
    }


def _readme(doc: dict) -> str:
    t = doc["privacy"]["ledger"]["totals"]
    dp = doc["differentially_private"]
    kind = "differentially private" if dp else "NOT differentially private"
    lines = [
        f"{kind} synthetic data: release {doc['release_id']} of '{doc['dataset']}'",
        "",
        f"Mechanism: {doc['mechanism']['name']}. Privacy: ({t['epsilon']:.6g}, {t['delta']:.3g})-DP"
        f"{'' if dp else ' as the paper claims, NOT as a guarantee,'}"
        f" under the replace-one neighbour relation ({doc['privacy']['accountant']} accounting).",
        f"Rows: {doc['privacy']['synthetic_rows']} synthetic rows. "
        + (
            ROW_ORDER_NOTE
            if doc["mechanism"]["rows_correspond_to_input_rows"]
            else "Freshly sampled; no row corresponds to a person in the input."
        ),
        NEIGHBOUR_STATEMENT,
        "",
        *(
            f"{name:<18} the synthetic data ({out['format']}), the public schema's columns and types"
            for name, out in doc["outputs"].items()
        ),
        "release.json       schema, mechanism, parameters, budget ledger, software versions",
        "budget_plan.json   the budget split fixed before the data was read",
        "manifest.json      sha256 of every file above",
    ]
    void = ((doc["privacy"].get("ledger_record") or {}).get("dataset_guarantee") or {}).get("void_since")
    if void:
        lines += [
            "",
            f"DATASET GUARANTEE VOID: release '{void['release_id']}' of this dataset (from {void['time']}) "
            "was not differentially private, so no composed guarantee covers the dataset's releases since.",
        ]
    if not doc["randomness"]["fit_for_publication"]:
        lines.insert(0, "NOT FIT FOR PUBLICATION: made with a fixed (insecure) seed.")
    if not dp:
        lines[:0] = [
            "NOT DIFFERENTIALLY PRIVATE: a paper-literal variant for comparison only "
            "(privacy.allow_non_dp). Do not publish. Defects:",
            *(f"  - {d}" for d in doc["privacy"]["ledger"]["defects"]),
            "",
        ]
    return "\n".join(lines) + "\n"


_IO_HINTS = {
    errno.ENOSPC: "free space on that device or choose --out on another one",
    errno.EDQUOT: "free space within your quota or choose --out on another device",
    errno.EACCES: "make the folder writable or choose --out with a folder you can write to",
    errno.EPERM: "make the folder writable or choose --out with a folder you can write to",
    errno.EROFS: "the file system is read-only: choose --out on a writable one",
}


def io_error(what: str, folder: Path, e: OSError, after: str = "") -> DPReleaseError:
    """An OSError while writing, as a message that names the folder, the reason and its
    errno code, and says what to do (never a data value: OS messages name paths only)."""
    code = errno.errorcode.get(e.errno) if e.errno else None
    reason = os.strerror(e.errno).lower() if e.errno else (e.strerror or type(e).__name__)
    hint = _IO_HINTS.get(e.errno, "check the folder and its device, or choose another --out")
    return DPReleaseError(
        f"{what} into '{folder}' failed: {reason}{f' ({code})' if code else ''}; nothing was published"
        f"{after}; {hint}"
    )


def csv_header(columns: list[str]) -> bytes:
    """The header line as the csv module writes it (quoted only where needed)."""
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(columns)
    return line.getvalue().encode()


def write_parquet(table: pd.DataFrame, path: Path) -> None:
    """Parquet through pyarrow; a write that fails part way removes the partial file."""
    try:
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path)
    except OSError:
        path.unlink(missing_ok=True)
        raise


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """CSV through pyarrow (≈10× faster than pandas on 1M rows); quotes only where needed.
    A write that fails part way removes the partial file."""
    try:
        with pa.OSFile(str(path), "wb") as sink:
            sink.write(csv_header(list(table.columns)))
            pa_csv.write_csv(
                pa.Table.from_pandas(table, preserve_index=False),
                sink,
                pa_csv.WriteOptions(include_header=False, quoting_style="needed"),
            )
    except OSError:
        path.unlink(missing_ok=True)
        raise


def _manifest(folder: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json")
    write_json(
        folder / "manifest.json",
        {"algorithm": "sha256", "files": {str(p.relative_to(folder)): sha256(p) for p in files}},
    )


@task(name="write_bundle", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def write_bundle(
    staging: Path,
    dest: Path,
    synthetic: pd.DataFrame | None,
    document: dict,
    *,
    publish: bool = True,
    seal: Callable[[str | None, str], None] | None = None,
) -> Path:
    """Write the public files and manifests into ``staging``, then rename it to ``dest``.
    With ``publish=False`` (a gate failed) there is no ``public/``: the record of what was
    spent goes to ``internal/release.json`` beside the budget plan and the reports.
    ``synthetic`` None: a streaming engine has already written the synthetic files into
    ``public/``, chunk by chunk (they are removed with it when a gate failed).
    ``seal`` gets the sha256 of both manifests (public: None when gated) just before
    the rename: the flow writes it into the ledger's closing row.
    An OSError (disk full, not writable) becomes a ``DPReleaseError`` naming the folder and
    the reason; the partial ``public/`` is removed, and the flow's failure record takes
    ``internal/`` and removes the staging folder."""
    public, internal = staging / "public", staging / "internal"
    try:
        if publish:
            if synthetic is not None:
                writers = {"csv": write_csv, "parquet": write_parquet}
                for name, out in document["outputs"].items():
                    writers[out["format"]](synthetic, public / name)
            write_json(public / "release.json", document)
            (public / "README.txt").write_text(_readme(document))
            _manifest(public)
        else:
            os.replace(public / "budget_plan.json", internal / "budget_plan.json")
            shutil.rmtree(public)
            write_json(internal / "release.json", document)
        _manifest(internal)
        if seal is not None:
            seal(sha256(public / "manifest.json") if publish else None, sha256(internal / "manifest.json"))
        if dest.exists():
            raise DPReleaseError(f"release folder '{dest}' appeared during the run; nothing published")
        os.replace(staging, dest)
    except OSError as e:
        shutil.rmtree(public, ignore_errors=True)
        spent = " (any budget this run spent stays spent: its noise was drawn)"
        raise io_error("writing the release bundle", dest.parent, e, spent) from None
    get_run_logger().info(
        "%s %s", "published release bundle" if publish else "kept internal reports in", dest
    )
    return dest


def write_failure_record(
    out_dir: Path, release_id: str, stage: str, error: BaseException, staging: Path | None
) -> Path:
    """``<out>/failures/<release_id>-<utc>/``: failure.json plus whatever ``internal/``
    reports the run had made (for the steward, moved: a rename needs no space on a full
    disk); the staging folder is removed. If the record itself cannot be written, it is
    removed too and a ``DPReleaseError`` says why, and what the run had failed with."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    record = out_dir / "failures" / f"{release_id}-{stamp}"
    if isinstance(error, DPReleaseError):  # our messages name rules, never values
        message = str(error)
    else:  # an unexpected message may quote data: keep it with the internal reports
        message = "unexpected error; the traceback is in internal/traceback.txt"
    try:
        record.mkdir(parents=True)
        if staging is not None and (staging / "internal").is_dir():
            os.replace(staging / "internal", record / "internal")
        if not isinstance(error, DPReleaseError):
            (record / "internal").mkdir(exist_ok=True)
            cause = getattr(error, "original", error)  # a scrubbed error carries the real one
            (record / "internal" / "traceback.txt").write_text("".join(traceback.format_exception(cause)))
        write_json(
            record / "failure.json",
            {
                "release_id": release_id,
                "stage": stage,
                "error": type(getattr(error, "original", error)).__name__,
                "message": message,
                "published": False,
                "time": datetime.now(UTC).isoformat(),
            },
        )
    except OSError as e:
        shutil.rmtree(record, ignore_errors=True)
        after = f" (the run had failed at stage '{stage}': {message})"
        raise io_error("writing the failure record", record.parent, e, after) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return record
