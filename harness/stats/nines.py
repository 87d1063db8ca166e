"""The percentile distribution of a histogram on a "nines" axis, as HdrHistogram's plots draw
it (latency up, percentile across with 90%, 99%, 99.9% ... evenly spaced): the points that the
screen and report.html both plot."""

from __future__ import annotations

import math

from hdrh.histogram import HdrHistogram

from harness.stats.histogram import values_at

# Beyond six nines a run seldom has the samples to say anything.
MAX_NINES = 6.0
STEP = 0.05


def nines_of(percentile: float) -> float:
    """90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1 - percentile / 100) if percentile < 100 else math.inf


def distribution(histogram: HdrHistogram) -> list[tuple[float, int]]:
    """(nines, value) points from 0% up to the percentile the sample count can resolve."""
    total = histogram.get_total_count()
    if not total:
        return []
    top = min(math.log10(total), MAX_NINES) if total > 1 else 0.0
    xs = [i * STEP for i in range(int(top / STEP) + 1)]
    values = values_at(histogram, [100 * (1 - 10 ** -x) for x in xs])
    return [*zip(xs, values, strict=True), (top, histogram.get_max_value())]
