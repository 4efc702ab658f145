"""What a release's own noisy one-way tables say the public schema could declare better: a
spike inside a cell of a continuous column, and a declared range whose end holds no rows.
Post-processing of published tables: no budget, nothing read of the data.

A continuous column's cell that is not an atom decodes to values spread over its range; a
value the data holds many times (0, a cap, a round number) comes back smeared, and nothing
in the release says so (issue 40: a column with 22.6 % zeros came back with none). With
the one-way table's groups ŷ_g (noisy counts, noise s.d. σ each) over k_g declared cells:

* **spike**: a group holding more than one value whose count per cell is at least
  ``SPIKE_RATIO`` times its densest neighbour's, and at least ``SPIKE_SHARE`` of n, with an
  excess ŷ_g − k_g·d over the neighbour's density d of at least ``Z`` noise s.d.
  (σ·√(1 + k_g²), the neighbour's noise included) — the advice: declare the value an atom,
  or finer cells;
* **empty end**: the lowest (or highest) groups, together at least ``TAIL_CELLS`` of the
  column's value cells, whose summed noisy count is at most ``TAIL_SHARE`` of n, and at most
  ``TAIL_BOUND`` of n ``TAIL_Z`` noise s.d. above it — the advice: bounds that leave it out
  give the rest finer cells; never when a declared atom lies in that range (new bounds would
  cut it: Adult's capital_gain, most of whose rows are its atom 0, has few values from 1 to
  1,910).

Thresholds are about what is worth a steward's attention, not a test with a stated error
rate; ``Z`` and ``TAIL_Z`` keep noise alone from raising them (``tests/mechanisms/test_advice.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from dprelease.mechanisms.queries import cell_span, group_labels
from dprelease.mechanisms.schema import Continuous, Schema
from dprelease.mechanisms.tables import NoisyTable, combined_cells

__all__ = [
    "SPIKE_RATIO",
    "SPIKE_SHARE",
    "TAIL_BOUND",
    "TAIL_CELLS",
    "TAIL_SHARE",
    "TAIL_Z",
    "Advice",
    "Z",
    "advise",
]

SPIKE_RATIO = 4.0
SPIKE_SHARE = 0.02
TAIL_CELLS = 0.25
TAIL_SHARE = 0.01
TAIL_BOUND = 0.05
TAIL_Z = 2.0
Z = 5.0


@dataclass(frozen=True)
class Advice:
    """One thing a steward could declare: the ``column``, the ``kind`` and the message."""

    column: str
    kind: Literal["spike", "empty_end"]
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def advise(tables: Sequence[NoisyTable], schema: Schema, n: int) -> list[Advice]:
    """The advice from the one-way tables of ``schema``'s continuous columns (each
    estimated from every table holding its cells, ``tables.combined_cells``)."""
    out: list[Advice] = []
    for column in schema.columns:
        if not isinstance(column, Continuous) or column.values is not None:
            continue
        own = [t for t in tables if t.columns == (column.name,)]
        if not own:
            continue
        _, values, noise = combined_cells(own[0], tables)
        out += _spikes(column, own[0], np.asarray(values, dtype=float), noise.sd, n)
        out += _empty_ends(column, own[0], np.asarray(values, dtype=float), noise.sd, n)
    return out


def _groups(column: Continuous, table: NoisyTable) -> list[tuple[int, int, float, float]]:
    """(group, declared cells, lowest value, highest value) of each group of value cells, in
    value order; atom-only, missing and empty groups left out."""
    axis = table.axes[0]
    atoms = set(np.flatnonzero(column.atom_cells).tolist()) if column.cell_atoms else set()
    out = []
    for g in range(axis.size):
        spans = [
            s for c in axis.members(g) if int(c) not in atoms and (s := cell_span(column, int(c))) is not None
        ]
        if spans:
            out.append((g, len(spans), min(s[0] for s in spans), max(s[1] for s in spans)))
    return out


def _spikes(column: Continuous, table: NoisyTable, y: np.ndarray, sd: float, n: int) -> list[Advice]:
    groups = _groups(column, table)
    labels = group_labels(column, table.axes[0].groups)
    out = []
    for i, (g, k, lo, hi) in enumerate(groups):
        beside = [groups[j] for j in (i - 1, i + 1) if 0 <= j < len(groups)]
        if lo == hi or y[g] < SPIKE_SHARE * n or not beside:
            continue
        density = max(max(y[h], 0.0) / kh for h, kh, _, _ in beside)
        excess = y[g] - k * density
        if y[g] / k >= SPIKE_RATIO * density and excess >= Z * sd * math.sqrt(1 + k * k):
            ratio = "far more" if density <= 0 else f"{y[g] / k / density:.0f} times as many"
            out.append(
                Advice(
                    column.name,
                    "spike",
                    f"column '{column.name}': {y[g] / n:.1%} of the rows (noisy count) lie in "
                    f"{labels[g]}, {ratio} per cell as beside it, and the release spreads them "
                    "over that range. If one value carries them (0, a cap, a round number), "
                    "declare it: atoms: [<that value>] keeps it exact; else declare finer cells "
                    "there (intervals, or bins).",
                )
            )
    return out


def _empty_ends(column: Continuous, table: NoisyTable, y: np.ndarray, sd: float, n: int) -> list[Advice]:
    groups = _groups(column, table)
    cells = sum(k for _, k, _, _ in groups)
    out = []
    for side, ordered in (("below", groups), ("above", groups[::-1])):
        total, taken, edge, about, most = 0.0, 0, None, 0.0, 0.0
        for j, (g, k, _, _) in enumerate(ordered[:-1]):
            total += y[g]
            upper = max(total, 0.0) + TAIL_Z * sd * math.sqrt(j + 1)
            if total > TAIL_SHARE * n or upper > TAIL_BOUND * n:
                break
            following = ordered[j + 1]
            edge = following[2] if side == "below" else following[3]
            taken, about, most = taken + k, max(total, 0.0), upper
        cut = edge is not None and any(a < edge if side == "below" else a > edge for a in column.cell_atoms)
        if edge is not None and taken >= TAIL_CELLS * cells and not cut:  # new bounds must keep every atom
            end = "lowest" if side == "below" else "highest"
            out.append(
                Advice(
                    column.name,
                    "empty_end",
                    f"column '{column.name}': the noisy counts put about {about:.0f} rows (at most "
                    f"{most:.0f}, {most / n:.1%}, at {TAIL_Z:g} noise s.d.) {side} {edge:.6g}, the {end} "
                    f"{taken} of its {cells} cells. Bounds that leave "
                    "that range out give the rows finer cells (out_of_bounds: clip keeps the few beyond).",
                )
            )
    return out
