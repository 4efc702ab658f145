"""The audit of ``public/tables/``: each table is a measurement the release recorded, and
every number beside the noisy counts follows from the recorded noise scale alone.

For each table of ``tables/index.json``: the ledger (``release.json``'s measurements) has a
measurement of that name and stage with the same mechanism, noise scale and number of
cells; each axis names a column of the public schema and groups exactly its declared cells
(every group used); the index's ``cell_se`` is σ (Gaussian) or √2·b (Laplace); the file's
sha256 is in the manifest (the files check); its ``se`` column is ``cell_se`` and its
``lower``/``upper`` are ``noisy_count`` ∓ the noise quantile at the index's level; the
``combined_*`` columns are re-computed from the tables named in ``combined_from`` by the
same inverse-variance rule (``mechanisms.tables.combine``).

For ``replicates/`` (``published_replicates``): the file holds K × n rows (n the rows fitted)
of every schema column, each a declared cell of its column; every model check names a
published table and carries that table's recorded noise variance per cell (se²), so the
calibration a query makes from them rests on the ledger's noise.

``published_advice``: ``release.json``'s advice is re-derived from the published tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.bundle.privacy_doc import MeasurementRow
from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.bundle.tables import INDEX
from dprelease.mechanisms.advice import advise
from dprelease.mechanisms.axes import Axis
from dprelease.mechanisms.schema import Schema
from dprelease.mechanisms.tables import NoisyTable, combined_cells
from dprelease.records.check import Check

__all__ = ["load_tables", "published_advice", "published_replicates", "published_tables"]

_TOL = 1e-6  # the CSV holds decimal text of the doubles: relative tolerance


def load_tables(folder: Path) -> tuple[dict, list[NoisyTable]]:
    """``tables/index.json`` of a published folder and its tables (noisy counts from the CSV
    files, shaped by the axes)."""
    index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    tables = []
    for entry in index["tables"]:
        axes = tuple(Axis(a["column"], np.asarray(a["groups"])) for a in entry["axes"])
        frame = pd.read_csv(folder / entry["file"], keep_default_na=False)
        values = frame["noisy_count"].to_numpy(float).reshape([a.size for a in axes])
        noise = entry["noise"]
        tables.append(
            NoisyTable(entry["name"], entry["stage"], axes, values, noise["mechanism"], noise["scale"])
        )
    return index, tables


def published_tables(folder: Path, doc: ReleaseDocument) -> list[Check]:
    """The checks of the module doc; none for a release that published no tables (made
    before they were, or gated)."""
    if not doc.tables or not (folder / INDEX).is_file():
        return []
    try:
        index, tables = load_tables(folder)
    except (OSError, ValueError, KeyError) as e:
        return [Check("tables", "tables/index.json and its files", False, f"{type(e).__name__}: {e}")]
    recorded = {(r.stage, r.statistic): r for r in doc.privacy.ledger.measurements}
    schema = _schema(doc)
    out = []
    for entry, table in zip(index["tables"], tables, strict=True):
        problems = _entry_problems(entry, table, recorded, schema)
        problems += _file_problems(folder, entry, table, tables, index["level"])
        out.append(
            Check(
                "tables",
                entry["file"],
                not problems,
                "; ".join(problems)
                or f"{table.mechanism} scale {table.scale:.6g} as recorded; se and intervals re-derived",
            )
        )
    return out


def published_advice(folder: Path, doc: ReleaseDocument, schema: Schema) -> list[Check]:
    """``release.json``'s ``advice`` is exactly what the published tables give
    (``mechanisms.advice``: post-processing of public tables, nothing else); none for a
    bundle made before advice was published."""
    if not doc.has("advice") or not (folder / INDEX).is_file():
        return []
    try:
        index, tables = load_tables(folder)
    except (OSError, ValueError, KeyError) as e:
        return [Check("advice", "release.json advice", False, f"{type(e).__name__}: {e}")]
    derived = [a.as_dict() for a in advise(tables, schema, int(index["rows_fitted"]))]
    held = [a.as_mapping() for a in doc.advice or ()]
    same = doc.advice is not None and derived == held
    detail = (
        f"{len(derived)} item(s), re-derived from tables/"
        if same
        else f"release.json holds {len(held)} item(s), tables/ give {len(derived)}"
    )
    return [Check("advice", "release.json advice", same, detail)]


def _schema(doc: ReleaseDocument) -> dict[str, int]:
    """Declared cells per column of the published schema."""
    from dprelease.records.audit import public_spec

    return {c.name: c.n_bins for c in public_spec(doc).public_schema().columns}


def _entry_problems(
    entry: dict, table: NoisyTable, recorded: dict[tuple[str, str], MeasurementRow], cells: dict[str, int]
) -> list[str]:
    row = recorded.get((table.stage, table.name))
    if row is None:
        return [f"no measurement {table.stage}/{table.name} in the ledger"]
    problems = []
    if row.mechanism != table.mechanism or not math.isclose(row.noise_scale, table.scale, rel_tol=1e-12):
        problems.append(
            f"noise {table.mechanism} {table.scale:g}, recorded {row.mechanism} {row.noise_scale:g}"
        )
    if row.dimension != table.values.size:
        problems.append(f"{table.values.size} cells, recorded dimension {row.dimension}")
    for a in table.axes:
        if cells.get(a.column) != len(a.groups):
            problems.append(
                f"axis {a.column}: {len(a.groups)} cells, the schema declares {cells.get(a.column)}"
            )
    if not math.isclose(entry["noise"]["cell_se"], table.cell_sd, rel_tol=1e-12):
        problems.append(f"cell_se {entry['noise']['cell_se']:g}, the scale gives {table.cell_sd:g}")
    return problems


def _file_problems(
    folder: Path, entry: dict, table: NoisyTable, tables: list[NoisyTable], level: float
) -> list[str]:
    frame = pd.read_csv(folder / entry["file"], keep_default_na=False)
    hw = table.noise(1).half_width(level)
    problems = []
    if not np.allclose(frame["se"], table.cell_sd, rtol=_TOL):
        problems.append("se column differs from the recorded scale")
    noisy = frame["noisy_count"].to_numpy(float)
    if not (
        np.allclose(frame["lower"], noisy - hw, rtol=_TOL, atol=_TOL * hw)
        and np.allclose(frame["upper"], noisy + hw, rtol=_TOL, atol=_TOL * hw)
    ):
        problems.append(f"lower/upper differ from noisy_count -/+ {hw:.6g}")
    family, value, noise = combined_cells(table, tables)
    if [t.name for t in family] != entry["combined_from"]:
        problems.append(
            f"combined_from {entry['combined_from']}, the tables on its cells are {[t.name for t in family]}"
        )
    if not np.allclose(frame["combined_count"], np.ravel(value), rtol=_TOL, atol=_TOL * max(noise.sd, 1.0)):
        problems.append("combined_count differs from the inverse-variance combination")
    if not np.allclose(frame["combined_se"], noise.sd, rtol=_TOL):
        problems.append("combined_se differs from the combination's")
    if not np.isclose(entry["combined_half_width"], noise.half_width(level), rtol=_TOL):
        problems.append("combined_half_width differs from the combination's noise quantile")
    return problems


def published_replicates(folder: Path, doc: ReleaseDocument) -> list[Check]:
    """The checks of ``replicates/`` (see the module doc); none for a release without them."""
    from dprelease.bundle.replicates import read_replicates

    if not doc.replicates:
        return []
    try:
        spec_columns = _schema(doc)
        index, cells = read_replicates(folder, list(spec_columns))
        _, tables = load_tables(folder)
    except (OSError, ValueError, KeyError) as e:
        return [Check("replicates", "replicates/ and its index", False, f"{type(e).__name__}: {e}")]
    problems = []
    fitted = doc.privacy.rows_fitted
    if index["rows"] != fitted or cells.shape[0] != index["replicates"]:
        problems.append(f"{index['replicates']} replicates of {index['rows']} rows; {fitted} fitted")
    for j, (name, k) in enumerate(spec_columns.items()):
        if cells.size and int(cells[..., j].max()) >= k:
            problems.append(f"column {name}: a cell index past its {k} declared cells")
    variance = {t.name: t.cell_sd**2 for t in tables}
    for h in index["checks"]:
        want = variance.get(h["table"])
        if want is None or not math.isclose(h["noise_var"], want, rel_tol=1e-9):
            problems.append(f"check on {h['table']}: noise variance {h['noise_var']:g}, recorded {want}")
            break
    return [
        Check(
            "replicates",
            "replicates/",
            not problems,
            "; ".join(problems)
            or f"{index['replicates']} replicates of {index['rows']} rows; "
            f"{len(index['checks'])} model checks on the recorded noise",
        )
    ]
