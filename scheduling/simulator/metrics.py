"""Small exact statistics used by the outputs (no numpy: the package stays dependency-free)."""

from __future__ import annotations

import math


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty list)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def histogram_percentile(hist: dict[float, int], q: float) -> float:
    total = sum(hist.values())
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * total))
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        if seen >= rank:
            return value
    return max(hist)


def r(value: float, digits: int = 3) -> float:
    """Round for output; -0.0 becomes 0.0 so that output bytes never depend on a sign of zero."""
    out = round(value, digits)
    return out + 0.0
