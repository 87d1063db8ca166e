"""HDR histograms: microseconds, 1 us to 1 h, 3 significant digits.

Workers never call the package's pure-Python record_value (about 3 us a call) on the message
path: they append integers to a list, and fold() adds a whole interval's values to a histogram
at once, computing the counts-array index of every value with NumPy exactly as record_value
does and adding a bincount to the counts array in place.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterable, Sequence
from functools import cache

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def _acyclic(histogram: HdrHistogram) -> HdrHistogram:
    """The histogram with its encoder's reference back to it made weak.

    The package's histogram and its encoder point at each other, so that a histogram no
    longer used waits for the cyclic garbage collector; a cell freezes what survives each
    interval (harness.engine.cell), and a frozen cycle is never collected: every interval's
    histograms (188 KB of counts each) stayed until the run's end. Without the cycle,
    reference counting frees each one as soon as its last user lets go."""
    histogram.encoder.histogram = weakref.proxy(histogram)
    return histogram


def new_histogram() -> HdrHistogram:
    return _acyclic(HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS))


@cache
def empty() -> tuple[str, HdrHistogram]:
    """An empty histogram and its text, made once and shared: an idle metric's interval
    costs neither a new histogram (a 190 KB counts array) nor an encoding. Read-only."""
    histogram = new_histogram()
    return encode(histogram), histogram


def counts_view(histogram: HdrHistogram) -> np.ndarray:
    """The histogram's counts as a NumPy array sharing its memory (made once a histogram)."""
    view = histogram.__dict__.get("_counts_view")
    if view is None:
        view = histogram.__dict__["_counts_view"] = np.ctypeslib.as_array(histogram.counts)
    return view


def counts_indexes(histogram: HdrHistogram, values: np.ndarray) -> np.ndarray:
    """The counts-array index of each value, as HdrHistogram._counts_index_for computes it."""
    masked = values | histogram.sub_bucket_mask
    # frexp gives the bit length exactly for integers below 2**53 (values here are below 2**32).
    _, pow2ceiling = np.frexp(masked.astype(np.float64))
    bucket = pow2ceiling.astype(np.int64) - histogram.unit_magnitude \
        - (histogram.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values >> (bucket + histogram.unit_magnitude)
    return ((bucket + 1) << histogram.sub_bucket_half_count_magnitude) \
        + (sub_bucket - histogram.sub_bucket_half_count)


def fold(histogram: HdrHistogram, values: Sequence[int] | np.ndarray) -> int:
    """Add values (microseconds) to histogram in bulk; returns how many were out of range.

    Values outside 0..HIGHEST_US (a negative latency from clock skew, or more than an hour)
    are clamped to the range and counted, never dropped.
    """
    array = np.asarray(values, dtype=np.int64)
    if array.size == 0:
        return 0
    lo = int(array.min())
    hi = int(array.max())
    clamped = 0
    if lo < 0 or hi > HIGHEST_US:
        clamped = int(np.count_nonzero((array < 0) | (array > HIGHEST_US)))
        array = np.clip(array, 0, HIGHEST_US)
        lo = max(lo, 0)
        hi = min(hi, HIGHEST_US)
    # As long as the highest index, not the whole counts array: an interval's values touch
    # a few of its 23,552 counts, and the rest of its 184 KiB would be written for nothing.
    added = np.bincount(counts_indexes(histogram, array))
    counts = counts_view(histogram)[:added.size]
    np.add(counts, added, out=counts, casting="unsafe")
    histogram.total_count += int(array.size)
    histogram.min_value = min(histogram.min_value, lo)
    histogram.max_value = max(histogram.max_value, hi)
    return clamped


def fold_many(histogram: HdrHistogram, chunks: Iterable[Sequence[int]]) -> int:
    """Fold several buffers (lists, or typed arrays of 'q' read without a copy)."""
    arrays = [np.frombuffer(c, dtype=np.int64) if isinstance(c, array) else
              np.asarray(c, dtype=np.int64) for c in chunks if len(c)]
    if not arrays:
        return 0
    return fold(histogram, arrays[0] if len(arrays) == 1 else np.concatenate(arrays))


def encode(histogram: HdrHistogram) -> str:
    return histogram.encode().decode("ascii")


def decode(text: str) -> HdrHistogram:
    return _acyclic(HdrHistogram.decode(text))


def values_at(histogram: HdrHistogram, points: Sequence[float]) -> list[int]:
    """The value at each percentile, exactly as HdrHistogram's get_value_at_percentile gives
    it, from one NumPy cumulative sum instead of a Python loop over the counts per query.

    The sum runs only up to the highest value's count (a few thousand of the 23,552), and
    each target is a uint64 as the sums are: compared with a Python int, NumPy would convert
    the whole array to floating point for every query."""
    counts = counts_view(histogram)
    total = histogram.get_total_count()
    end = histogram.counts_len
    if total:
        end = min(end, histogram.get_counts_array_index(histogram.max_value) + 1)
    cumulative = np.cumsum(counts[:end])
    if end < histogram.counts_len and int(cumulative[-1]) < total:
        cumulative = np.cumsum(counts[:histogram.counts_len])  # max_value was not the highest
    out = []
    for percentile in points:
        target = np.uint64(histogram.get_target_count_at_percentile(percentile))
        index = int(np.searchsorted(cumulative, target))
        value = histogram.get_value_from_index(index)
        out.append(int(histogram.get_highest_equivalent_value(value) if percentile else
                       histogram.get_lowest_equivalent_value(value)))
    return out


def percentiles(histogram: HdrHistogram,
                points: Sequence[float] = PERCENTILES) -> dict[str, int | None]:
    """p50 ... p99.9 and max in microseconds; None for an empty histogram."""
    keys = [f"p{p:g}" for p in points] + ["max"]
    if histogram.get_total_count() == 0:
        return dict.fromkeys(keys)
    values = dict(zip(points, values_at(histogram, points), strict=True))
    out: dict[str, int | None] = {f"p{p:g}": int(values[p]) for p in points}
    out["max"] = int(histogram.get_max_value())
    return out
