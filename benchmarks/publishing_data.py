"""Adult as the DP-PCA / DP-LDA publishing paper prepares it (shared by ``repro_pcappd`` and
``repro_lda_ppd``).

The paper (§4.1): records with a missing value removed; final weight, education, occupation
and nationality dropped; the other categoricals one-hot; continuous columns normalised to
[0, 1]. Here, from the embedded training file ``flows/demo/adult.csv.gz`` (32,561 rows):

* rows with ``?`` in any column are dropped (before dropping columns, as the paper's 45,222
  of the combined train + test files implies): 30,162 rows;
* continuous: age, education_num, capital_gain, capital_loss, hours-per-week, linearly onto
  [0, 1] by their *public* bounds from ``flows/demo/adult.yaml`` (the paper's "normalised";
  the spec's log scale for the capital columns is not used);
* nominal one-hot by the public category lists (``?`` removed): workclass 8 (Never-worked
  included: it has no complete row), marital_status 7, relationship 6, race 5, sex 2 = 28;
* the label income: 2 one-hot coordinates when it is a column (PCA), else a 0/1 target (LDA).

The design matrix is ``mechanisms.design`` of that schema: 5 + 28 = 33 features, 35 with the
label's two coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd
from common import load_adult

from dprelease.engines.tables import table_to_bins, table_to_rows
from dprelease.mechanisms.design import Design, design
from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

DROPPED = ("fnlwgt", "education", "occupation", "native-country")
NUMERIC = ("age", "education_num", "capital_gain", "capital_loss", "hours-per-week")
NOMINAL = ("workclass", "marital_status", "relationship", "race", "sex")
LABEL = "income"
POSITIVE = ">50K"


@dataclass(frozen=True)
class PaperAdult:
    """The complete rows of Adult in the paper's columns, with their public schemas."""

    table: pd.DataFrame
    features: Schema
    with_label: Schema
    rows_csv: int
    rows_dropped: int

    @property
    def n(self) -> int:
        return len(self.table)

    def design(self, label: bool) -> Design:
        return design(self.with_label if label else self.features)

    def rows(self, label: bool, index: np.ndarray | None = None) -> MixedRows:
        """The public numeric view of the (selected) rows (what ``Synthesizer.fit`` takes);
        with the label's column last when ``label``."""
        schema = self.with_label if label else self.features
        sub = self.table[schema.names] if index is None else self.table.iloc[index][schema.names]
        return table_to_rows(sub, table_to_bins(sub, schema), schema)

    def matrix(self, label: bool, index: np.ndarray | None = None) -> np.ndarray:
        """The [0, 1] design matrix of the (selected) rows; with the label's two coordinates
        last when ``label``."""
        return self.design(label).encode(self.rows(label, index))

    def target(self, index: np.ndarray | None = None) -> np.ndarray:
        """income > 50K as 0/1."""
        y = (self.table[LABEL] == POSITIVE).to_numpy(dtype=int)
        return y if index is None else y[index]

    def bins(self, label: bool, index: np.ndarray | None = None) -> np.ndarray:
        """Public bin / category indices of the (selected) rows (``Schema`` column order)."""
        schema = self.with_label if label else self.features
        sub = self.table[schema.names] if index is None else self.table.iloc[index][schema.names]
        return table_to_bins(sub, schema)


def _linear(c: Continuous) -> Continuous:
    return Continuous(c.name, c.lower, c.upper, c.integer, "identity")


def _without(c: Nominal, token: str | None) -> Nominal:
    return Nominal(c.name, tuple(v for v in c.categories if v != token))


@cache
def paper_adult() -> PaperAdult:
    """Adult's complete rows in the paper's columns (cached: read once per process)."""
    adult = load_adult()
    missing = adult.spec.missing_tokens()
    table = adult.table
    incomplete = np.zeros(len(table), dtype=bool)
    for name, token in missing.items():
        incomplete |= (table[name] == token).to_numpy()
    keep = table.loc[~incomplete, [*NUMERIC, *NOMINAL, LABEL]].reset_index(drop=True)
    cols: list[Continuous | Nominal] = []
    for name in (*NUMERIC, *NOMINAL):
        c = adult.schema[name]
        cols.append(_linear(c) if isinstance(c, Continuous) else _without(c, missing.get(name)))  # type: ignore[arg-type]
    label = adult.schema[LABEL]
    assert isinstance(label, Nominal)
    features = Schema(tuple(cols))
    return PaperAdult(
        table=keep,
        features=features,
        with_label=Schema((*features.columns, label)),
        rows_csv=len(table),
        rows_dropped=int(incomplete.sum()),
    )


def describe(data: PaperAdult, label: bool) -> dict[str, object]:
    """Column list and widths, for the report."""
    schema = data.with_label if label else data.features
    lay = design(schema)
    return {
        "rows_csv": data.rows_csv,
        "rows_dropped": data.rows_dropped,
        "rows": data.n,
        "numeric": list(NUMERIC),
        "nominal": {c.name: c.n_bins for c in schema.columns if isinstance(c, Nominal)},
        "dropped": list(DROPPED),
        "width": lay.width,
        "p1": sum(isinstance(c, Continuous) for c in schema.columns),
        "p2": sum(isinstance(c, Nominal) for c in schema.columns),
        "positive_share": float(data.target().mean()),
        "bounds": {c.name: [c.lower, c.upper] for c in schema.columns if isinstance(c, Continuous)},
    }
