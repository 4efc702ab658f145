"""``dprelease discover DATA --epsilon E``: a draft's bounds, atoms and category sets
discovered under DP (``mechanisms.discovery``), charged to the dataset's ledger as a
release of its own (stage ``schema``), with a bundle ``<release_id>/public`` that
``dprelease audit verify`` checks like any release's.

Order, as in a release: whatever can fail without a value of the data fails first (the
ledger's and the bundle folder's places, ``_check_places``); then the whole plan is
reserved in the ledger before a value is read (a refusal reads and spends nothing); the
stage is recorded as spent before the noise is drawn; the closing ``released`` row seals
the bundle's manifests (``public/``; ``internal/``, which says where the ledger is).
Columns are discovered only where the kind is known from public facts (a Parquet type or
``--kind``): whether a CSV column parses as numbers is a property of the values, so it is
never guessed.

Only what a spec can declare is published (``declarable``): a category the spec's rule for
text refuses (``spec.text``: a control character, a lone surrogate, more than 1,000
characters...) or spelled as the draft's placeholder ``FILL`` is withheld from the bundle and
the draft, and its rows map to the draft's ``(other)``; the bundle and the draft say how many
were. The categories are the output of a DP selection, so filtering them and counting what
was withheld is post-processing: it costs no budget.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import ValidationError

from dprelease.bundle.files import PRIVATE_DIR, PUBLIC_DIR, make_dir, sha256, write_json
from dprelease.bundle.format import BUNDLE_FORMAT
from dprelease.bundle.ledger_record import LEDGER_RECORD, write_ledger_record
from dprelease.bundle.release_doc import DISCOVERY_KIND, ReleaseDocument
from dprelease.bundle.staging import check_out
from dprelease.bundle.write import io_error
from dprelease.engines.header import DataError, input_format
from dprelease.engines.tables import numbers
from dprelease.mechanisms.accounting import BudgetPlan
from dprelease.mechanisms.discovery import (
    MAX_LEVEL,
    DiscoveredAtoms,
    DiscoveredBounds,
    DiscoveredCategories,
    discover_categories,
    discover_numeric,
    discovery_plan,
)
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.primitives import Measurement
from dprelease.mechanisms.randomness import noise_rngs
from dprelease.spec.draft import FILL, is_placeholder
from dprelease.spec.sections import DISCOVERY, MAX_NAME, STAMP, DatasetSpec
from dprelease.spec.text import text_problem

__all__ = ["DISCOVERABLE", "Discovery", "discover"]

DISCOVERABLE = ("continuous", "integer", "nominal")
MECHANISM = DISCOVERY_KIND


@dataclass(frozen=True)
class Discovery:
    """What a discovery published: ``atoms`` holds the numeric columns whose atoms were
    discovered (none when ``--atom-share`` is 0); ``categories`` the declarable categories
    (``declarable``), and ``withheld`` how many others each column's selection returned."""

    release_id: str
    bundle: Path
    bounds: dict[str, DiscoveredBounds]
    atoms: dict[str, DiscoveredAtoms]
    categories: dict[str, DiscoveredCategories]
    epsilon: float
    delta: float
    withheld: dict[str, int] = field(default_factory=dict)


WITHHELD = (
    "text the spec refuses (a control character, a lone surrogate, a line separator, a bidirectional "
    "control, a noncharacter or more than 1,000 characters) or the draft's placeholder FILL"
)
"""What a spec cannot declare as a category: what ``declarable`` withholds."""


def declarable(found: DiscoveredCategories) -> tuple[DiscoveredCategories, int]:
    """``found`` with only the categories a spec can declare (the rule for text of
    ``spec.text``, and not the placeholder ``FILL``), and how many were withheld.
    Post-processing of the DP selection: the measurement, which the ledger records, is
    kept whole."""
    kept = tuple(c for c in found.categories if text_problem(c) is None and not is_placeholder(c))
    return dataclasses.replace(found, categories=kept), len(found.categories) - len(kept)


def _read(path: Path, kinds: dict[str, str]) -> dict[str, np.ndarray]:
    """The discovered columns' values: numbers (empty cells NaN) or text (empty None).
    Errors name the column and the rule, never a value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(kinds)
    try:
        if input_format(path) == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path, columns=names)
        else:
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(
                path,
                convert_options=pcsv.ConvertOptions(
                    include_columns=names, column_types=dict.fromkeys(names, pa.string())
                ),
            )
    except Exception as e:  # parser errors may quote raw values: report the kind only
        raise DataError(f"dataset file '{path}' could not be read ({type(e).__name__})") from None
    out = {}
    for name, kind in kinds.items():
        col = table.column(name)
        if kind == "nominal":
            out[name] = np.asarray(pc.cast(col, pa.string()).to_pylist(), dtype=object)
            continue
        values = numbers(col)  # the release's own reader: the same missing tokens and rules
        if not pd.api.types.is_numeric_dtype(values):
            raise DataError(
                f"column '{name}' was declared {kind} (--kind or its Parquet type), but holds values that "
                "are not numbers; declare it nominal, or leave its kind out to keep it FILL"
            )
        out[name] = values.to_numpy(dtype=float, na_value=np.nan)
    return out


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite ledger URL (absolute); None for another database, or for a
    string that is not a URL (opening the ledger names that problem, before the reserve)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser().resolve()


def _check_places(out: Path, ledger_url: str) -> None:
    """The checks that need no value of the data, made before the reserve: a SQLite
    ledger's file is neither ``out`` nor a folder above it (the bundle goes into a folder
    below ``out``) nor below a file; ``out`` is a folder this process can write to
    (``bundle.staging.check_out``: created if absent, then probed)."""
    db = _sqlite_file(ledger_url)
    if db is not None:
        folder = out.expanduser().resolve()
        if db == folder or db in folder.parents:
            raise DPReleaseError(
                f"--ledger ({db}) must be a file apart from --bundle-out ({out}), the folder that receives "
                f"the bundle; pass --ledger {out / 'ledger.db'}, or leave --ledger out for that default"
            )
        above = next((p for p in db.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise DPReleaseError(
                f"--ledger ({db}) must be in a folder, but '{above}' is a file; pass --ledger with a path "
                "in a folder you can write to"
            )
    check_out(out)


def _write_bundle(bundle: Path, doc: dict, ledger_url: str) -> tuple[Path, Path]:
    """``<bundle>/public/`` (world-readable: 0755, files 0644) with release.json, and
    ``<bundle>/internal/`` (its owner's only: 0700, 0600) with where the ledger is
    (``write_ledger_record``), each with its manifest; returns both manifests."""
    public = make_dir(make_dir(bundle, PUBLIC_DIR) / "public", PUBLIC_DIR)
    internal = make_dir(bundle / "internal", PRIVATE_DIR)
    ReleaseDocument.from_json(doc).write(public / "release.json")  # the bytes write_json gives
    write_ledger_record(internal, ledger_url)
    for folder, name in ((public, "release.json"), (internal, LEDGER_RECORD)):
        write_json(folder / "manifest.json", {"algorithm": "sha256", "files": {name: sha256(folder / name)}})
    return public / "manifest.json", internal / "manifest.json"


def discovery_release_id(dataset: str, now: datetime | None = None) -> str:
    """``<dataset>-schema-<UTC time>``; refuses a dataset name a spec would refuse (lowercase
    letters, digits and '-', at most ``MAX_NAME`` characters), before anything is reserved."""
    try:
        DatasetSpec(name=dataset, path=Path("."))
    except ValidationError:
        raise DPReleaseError(
            f"the dataset name ({dataset!r}, --name or the file's stem) must be lowercase letters, digits "
            f"and '-', starting with a letter or digit, at most {MAX_NAME} characters: pass --name"
        ) from None
    return f"{dataset}{DISCOVERY}{(now or datetime.now(UTC)).strftime(STAMP)}"


def discover(
    data: Path,
    kinds: dict[str, str],
    *,
    dataset: str,
    epsilon: float,
    delta: float,
    ledger_url: str,
    out: Path,
    lifetime: tuple[float, float] | None,
    seed: int | None = None,
    atom_share: float = 0.0,
) -> Discovery:
    """Discover bounds and atoms (continuous, integer) and categories (nominal) of
    ``kinds``' columns under (ε, δ)-DP: ε split evenly over the columns
    (``mechanisms.discovery``: a numeric column's ε in thirds, each bound and the atoms, or
    with ``atom_share`` 0 in halves, each bound), δ over the partition selections."""
    from dprelease.ledger import Ledger, ledger_facts

    if not kinds:
        raise DPReleaseError("no column of a discoverable kind (continuous, integer, nominal) is known")
    if not (atom_share == 0 or 0 < atom_share < 1):
        raise DPReleaseError(
            f"--atom-share ({atom_share}) must be 0 (no atoms) or a number between 0 and 1 (exclusive): "
            "the least share of the rows a value holds to be declared an atom, e.g. 0.05"
        )
    selections = sum(k == "nominal" or atom_share > 0 for k in kinds.values())
    plan = discovery_plan(epsilon, delta, selections=selections)
    stamp = datetime.now(UTC)
    release_id = discovery_release_id(dataset, stamp)
    bundle = out / release_id
    if bundle.exists():
        raise DPReleaseError(f"'{bundle}' already exists; wait a second and run again")
    _check_places(out, ledger_url)
    share = plan.stage("schema").split(len(kinds))
    delta_each = plan.delta / max(selections, 1)
    with Ledger(ledger_url) as led:
        led.reserve(dataset=dataset, release_id=release_id, mechanism=MECHANISM, plan=plan, lifetime=lifetime)
        try:
            values = _read(data, kinds)
        except DPReleaseError as e:
            # as a release's failure row: the step and the error's kind, never its message
            led.finish(release_id, "failed", {"stage": "read", "error": type(e).__name__})
            raise
        n = len(next(iter(values.values())))
        (rng,) = noise_rngs(seed, 1)
        bounds: dict[str, DiscoveredBounds] = {}
        atoms: dict[str, DiscoveredAtoms] = {}
        categories: dict[str, DiscoveredCategories] = {}
        withheld: dict[str, int] = {}
        made = []
        with led.spending(release_id, ["schema"], plan) as record:
            for (name, kind), budget in zip(kinds.items(), share, strict=True):
                if kind == "nominal":
                    found = discover_categories(values[name], budget, delta_each, name, rng=rng)
                    categories[name], withheld[name] = declarable(found)
                    made.append(found.measurement)
                else:
                    b, a = discover_numeric(
                        values[name],
                        budget,
                        delta_each,
                        name,
                        integer=kind == "integer",
                        share=atom_share,
                        rng=rng,
                    )
                    bounds[name] = b
                    made += b.measurements
                    if a is not None:
                        atoms[name] = a
                        made.append(a.measurement)
            record(made)
        found_all = Discovery(release_id, bundle, bounds, atoms, categories, epsilon, plan.delta, withheld)
        doc = _document(found_all, dataset, stamp, n, plan, made, delta_each, seed)
        doc["privacy"]["ledger_record"] = ledger_facts(led, dataset, release_id)
        try:
            manifests = _write_bundle(bundle, doc, led.url)
        except OSError as e:  # e.g. a full disk: the places were checked before the reserve
            shutil.rmtree(bundle, ignore_errors=True)
            led.finish(release_id, "failed", {"stage": "write_bundle", "error": type(e).__name__})
            spent = " (the budget this discovery spent stays spent: its noise was drawn)"
            raise io_error("writing the discovery bundle", out, e, spent) from None
        public, internal = map(sha256, manifests)
        led.finish(
            release_id, "released", {"public_manifest_sha256": public, "internal_manifest_sha256": internal}
        )
    return found_all


def _selection(threshold: float, measurement: Measurement, delta: float) -> dict:
    """A partition selection's facts in the bundle: what an auditor needs to re-derive its
    threshold (``records.audit``) and its cost."""
    return {
        "threshold": threshold,
        "epsilon": measurement.epsilon,
        "delta": delta,
        "rule": "Laplace partition selection: count + Lap(2/epsilon) > threshold",
    }


def _numeric(b: DiscoveredBounds, a: DiscoveredAtoms | None, delta: float) -> dict:
    """A numeric column's entry in the bundle: its bounds and, under ``atoms``, its atoms
    (no such entry when the atoms were off)."""
    entry = {
        "kind": "bounds",
        "bounds": [b.lower, b.upper],
        "quantile_level": b.level,
        "epsilon": math.fsum(m.epsilon or 0.0 for m in b.measurements),
        "rule": "report noisy max (exponential noise) on the public grid of two-digit numbers "
        "(mechanisms.discovery.GRID), levels q and 1 - q",
    }
    if a is None:
        return entry
    return {
        **entry,
        "atoms": {
            "atoms": list(a.atoms),
            "min_share": a.share,
            **_selection(a.threshold, a.measurement, delta),
            "rule": "Laplace partition selection on the exact finite values: count + Lap(2/epsilon) > "
            "threshold = max(1 + (2/epsilon) ln(1/delta), min_share * rows)",
        },
    }


def _document(
    found: Discovery,
    dataset: str,
    stamp: datetime,
    n: int,
    plan: BudgetPlan,
    made: list[Measurement],
    delta_each: float,
    seed: int | None,
) -> dict:
    spent = math.fsum(m.epsilon or 0.0 for m in made)
    return {
        "bundle_format": BUNDLE_FORMAT,
        "kind": MECHANISM,
        "release_id": found.release_id,
        "dataset": dataset,
        "created": stamp.isoformat(),
        "statement": (
            f"Bounds{', atoms' if found.atoms else ''} and category sets of dataset '{dataset}', discovered "
            f"under ({plan.epsilon:g}, {plan.delta:g})-differential privacy (replace-one neighbours; the row "
            "count n is public) for a draft release spec. Only the values under 'discovered' were "
            "published; noisy counts were not."
        ),
        "status": "published",
        "mechanism": {"name": MECHANISM, "facts": {}},
        "differentially_private": True,
        "randomness": {"fit_for_publication": seed is None, "seed": seed},
        "rows": n,
        "discovered": {
            **{name: _numeric(b, found.atoms.get(name), delta_each) for name, b in found.bounds.items()},
            **{
                name: {
                    "kind": "categories",
                    "categories": list(c.categories),
                    **_selection(c.threshold, c.measurement, delta_each),
                    "withheld": found.withheld.get(name, 0),
                    "withheld_rule": f"categories a spec cannot declare are not published: {WITHHELD}",
                }
                for name, c in found.categories.items()
            },
        },
        "privacy": {
            "accountant": "pure",
            "input_rows_n_public": n,
            "budget_plan": plan.as_dict(),
            "ledger": {
                "defects": [],
                "stages": [
                    {
                        "stage": "schema",
                        "weight": 1.0,
                        "epsilon_allocated": plan.epsilon,
                        "epsilon_spent": spent,
                    }
                ],
                "totals": {"epsilon": spent, "delta": plan.delta, "conversion": "basic composition"},
                "measurements": [m.ledger_row() for m in made],
            },
        },
    }


OTHER = "(other)"
"""The category a draft adds for the values partition selection did not publish."""


MAX_ATOMS = 64
"""The most atoms a column may declare (``spec.columns.ContinuousSpec.atoms``)."""


def _number(v: float, integer: bool) -> str:
    """A bound or atom as YAML 1.1 reads it back: an integer, or a float (``1e-05`` would be
    text; PyYAML writes ``1.0e-05``)."""
    import yaml

    return str(int(v)) if integer else yaml.safe_dump(float(v)).split("\n")[0]


def _draft_atoms(b: DiscoveredBounds, a: DiscoveredAtoms, integer: bool) -> tuple[list[float], bool]:
    """The atoms the draft declares (sorted), and whether any found was left out. Left out
    (post-processing; the bounds are not widened, so they stay the private quantiles the
    draft describes): an atom beyond a bound, which the spec refuses and ``clip`` would
    move to the bound anyway; a fraction in an integer column, which the spec refuses; past
    ``MAX_ATOMS``, those with the smallest noisy counts."""
    fits = [i for i, v in enumerate(a.atoms) if b.lower <= v <= b.upper and (not integer or v.is_integer())]
    kept = sorted(fits, key=lambda i: -a.measurement.value[i])[:MAX_ATOMS]
    return [a.atoms[i] for i in sorted(kept)], len(kept) < len(a.atoms)


def _atoms_note(a: DiscoveredAtoms, atoms: list[float], dropped: bool) -> str:
    """The draft.confirm sentence on a column's atoms: the rule they passed, what was left out."""
    left = (
        f" (those beyond the bounds, fractions in an integer column or past {MAX_ATOMS} are left "
        "out: see the bundle)"
        if dropped
        else ""
    )
    return (
        f" Atoms (values with a cell of their own) are declared for the exact values more than {a.share:g} "
        f"of the rows and about {a.threshold:.0f} rows hold{left}"
        + ("" if atoms or dropped else " (none was found)")
        + "; add any a codebook names."
    )


def draft_entries(found: Discovery, kinds: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """Each discovered column's draft line: (schema body, comment, what to confirm). A
    column whose atoms were off (``--atom-share 0``) gets neither atoms nor their note."""
    from dprelease.spec.draft import yaml_scalar

    out = {}
    where = f"discovered under DP in {found.release_id}"
    for name, b in found.bounds.items():
        integer = kinds[name] == "integer"
        a = found.atoms.get(name)
        atoms, dropped = _draft_atoms(b, a, integer) if a is not None else ([], False)
        body = (
            f"type: continuous, bounds: [{_number(b.lower, integer)}, {_number(b.upper, integer)}], "
            + ("integer: true, " if integer else "")
            + (f"atoms: [{', '.join(_number(v, integer) for v in atoms)}], " if atoms else "")
            + "out_of_bounds: clip"
        )
        small = (
            f" n is too small for this epsilon (the level is at its cap {MAX_LEVEL:g}): the bounds may be "
            "far from the data."
            if b.level >= MAX_LEVEL
            else ""
        )
        out[name] = (
            body,
            f"bounds {where} (private quantiles {b.level:.3g} and {1 - b.level:.3g})"
            + (", and atoms" if atoms else ""),
            f"bounds {where}: about {b.level:.1%} of the values lie beyond each and are clipped; "
            "widen them if a codebook gives the true range; add `missing: allowed` if values may be "
            "missing (whether any are was not looked at)."
            + small
            + (_atoms_note(a, atoms, dropped) if a is not None else ""),
        )
    for name, c in found.categories.items():
        kept = [v for v in c.categories if v != OTHER]  # the draft adds (other) itself
        withheld = found.withheld.get(name, 0)
        if not kept and withheld:  # the kind's placeholder stays, saying why
            out[name] = (
                f"type: nominal, categories: {FILL}",
                f"categories {where}: none a spec can declare",
                f"categories {where}: the {withheld} found cannot be declared in a spec ({WITHHELD}); "
                "fill the categories from a codebook",
            )
        if not kept:
            continue
        listed = ", ".join(yaml_scalar(v) for v in (*kept, OTHER))
        out[name] = (
            f"type: nominal, categories: [{listed}], unknown: other, other: {yaml_scalar(OTHER)}",
            f"categories {where}",
            f"categories {where}: only those with about {c.threshold:.0f} or more rows were found; "
            f"rarer ones are mapped to {OTHER}"
            + (
                f"; {withheld} more passed the selection but a spec cannot declare them ({WITHHELD}): their "
                f"rows map to {OTHER}"
                if withheld
                else ""
            )
            + ". Add any a codebook lists",
        )
    return out
