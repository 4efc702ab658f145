"""Two declaration rules of a continuous column (``schema.Continuous``): its interval
edges and the scale of ``transform: asinh``. Public facts only."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

from dprelease.mechanisms.errors import SchemaError

if TYPE_CHECKING:
    from dprelease.mechanisms.schema import Continuous

__all__ = ["MAX_INTERVALS", "check_edges", "check_scale"]

MAX_INTERVALS = 1024


def check_edges(column: Continuous) -> None:
    """Declared interval edges (``cuts``): strictly increasing, from the lower bound to the
    upper one, at most ``MAX_INTERVALS`` intervals; instead of ``bins`` and ``values``."""
    c, cuts = column, column.cuts
    if cuts is None:
        return
    if c.values is not None or c.intervals is not None:
        raise SchemaError(f"column '{c.name}': edges exclude bins and values (declare one of them)")
    if not 2 <= len(cuts) <= MAX_INTERVALS + 1 or not all(math.isfinite(v) for v in cuts):
        raise SchemaError(f"column '{c.name}': edges must be 2 to {MAX_INTERVALS + 1} finite numbers")
    if (cuts[0], cuts[-1]) != (c.lower, c.upper) or any(b <= a for a, b in itertools.pairwise(cuts)):
        raise SchemaError(
            f"column '{c.name}': edges must increase strictly from the lower bound ({c.lower:g}) "
            f"to the upper bound ({c.upper:g}), e.g. [{c.lower:g}, …, {c.upper:g}]"
        )


def check_scale(column: Continuous) -> None:
    """``scale`` is needed by, and only by, ``transform="asinh"``: a finite number > 0."""
    c = column
    if c.transform == "asinh":
        if c.scale is None or not (math.isfinite(c.scale) and c.scale > 0):
            raise SchemaError(
                f"column '{c.name}': transform 'asinh' needs scale ({c.scale}) a finite number "
                "> 0, the public width of the linear part around 0, e.g. scale: 1000"
            )
    elif c.scale is not None:
        raise SchemaError(f"column '{c.name}': scale ({c.scale}) is used only with transform: asinh")
