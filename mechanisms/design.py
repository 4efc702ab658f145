"""A public-box design matrix for the projection synthesizers (RON-Gauss, private PCA).

Every column maps into [0, 1] using only the schema:

* continuous: its value on [0, 1] of the public working scale (``MixedRows.unit``);
* ordinal with L levels: level index / (L − 1);
* nominal with M categories: M one-hot coordinates (exactly one is 1).

So a row x has every entry in [0, 1] and ‖x‖₂² ≤ p (one unit of squared norm per schema
column at most: a one-hot block contributes exactly 1), i.e. ‖x‖₂ ≤ √p. ``decode``
inverts it as post-processing: clip to [0, 1]; ordinal = nearest level; nominal = the
largest coordinate of the block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprelease.mechanisms.schema import Continuous, Nominal, Schema
from dprelease.mechanisms.synthesizer import MixedRows

__all__ = ["Design", "design"]


@dataclass(frozen=True)
class Design:
    """Column layout of the design matrix: ``blocks[j]`` is the slice of schema column j."""

    schema: Schema
    blocks: tuple[slice, ...]

    @property
    def width(self) -> int:
        return self.blocks[-1].stop

    @property
    def max_norm(self) -> float:
        """Public bound on ‖x‖₂ for any encoded row: √p."""
        return float(np.sqrt(len(self.schema)))

    def encode(self, rows: MixedRows) -> np.ndarray:
        """(n, width) matrix with entries in [0, 1]."""
        x = np.zeros((len(rows), self.width))
        for j, (c, b) in enumerate(zip(self.schema.columns, self.blocks, strict=True)):
            if isinstance(c, Continuous):
                if rows.unit is None:
                    raise ValueError("the design matrix needs continuous values (MixedRows.unit)")
                x[:, b.start] = rows.unit[:, j]
            elif isinstance(c, Nominal):
                x[np.arange(len(rows)), b.start + rows.bins[:, j]] = 1.0
            else:
                x[:, b.start] = rows.bins[:, j] / (c.n_bins - 1)
        return x

    def decode(self, x: np.ndarray) -> MixedRows:
        """Post-processing of any real matrix back to the schema's numeric view."""
        m = x.shape[0]
        bins = np.zeros((m, len(self.schema)), dtype=np.int32)
        unit = np.full((m, len(self.schema)), np.nan)
        for j, (c, b) in enumerate(zip(self.schema.columns, self.blocks, strict=True)):
            if isinstance(c, Continuous):
                unit[:, j] = np.clip(x[:, b.start], 0.0, 1.0)
                bins[:, j] = c.to_bins(c.from_unit(unit[:, j]))
            elif isinstance(c, Nominal):
                bins[:, j] = np.argmax(x[:, b], axis=1)
            else:
                bins[:, j] = np.rint(np.clip(x[:, b.start], 0.0, 1.0) * (c.n_bins - 1))
        return MixedRows(bins, unit)


def design(schema: Schema) -> Design:
    """The layout for ``schema``: one coordinate per continuous/ordinal column, M per
    nominal column with M categories."""
    blocks, start = [], 0
    for c in schema.columns:
        width = c.n_bins if isinstance(c, Nominal) else 1
        blocks.append(slice(start, start + width))
        start += width
    return Design(schema, tuple(blocks))
