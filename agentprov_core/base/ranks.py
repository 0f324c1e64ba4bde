"""Percentiles by nearest rank: the value at rank ceil(q x n) of the sorted values, never
interpolated, so every figure reported is one that was measured (the estimate's cell
statistics, the concurrency sweep's seconds per cell)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of ``values`` by nearest rank; None when there are
    none."""
    s = sorted(values)
    if not s:
        return None
    return s[max(0, math.ceil(q * len(s)) - 1)]
