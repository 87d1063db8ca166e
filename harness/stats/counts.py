"""A histogram's counts decoded once, to add to other histograms at NumPy's speed.

A merge adds every node's histogram of every interval to the interval's sum and to the node's
whole-run sum: decoding the text is most of that work (base64, zlib, varints), and the
package's decode() also builds a histogram of 188 KB for it. Counts decodes the text into a
scratch array of its thread's and keeps only the entries that are not zero (an interval's
histogram reaches a few hundred of its 23,552 counts), which then add to any number of
histograms of the same layout by one NumPy operation each.
"""

from __future__ import annotations

import base64
import struct
import threading
import zlib
from functools import cache

import numpy as np
from hdrh.codec import V2_COMPRESSION_COOKIE_BASE, V2_ENCODING_COOKIE_BASE
from hdrh.histogram import HdrHistogram
from pyhdrh import decode as _decode_counts

from harness.stats.histogram import (
    HIGHEST_US,
    LOWEST_US,
    SIGNIFICANT_DIGITS,
    counts_view,
    decode,
    new_histogram,
)

_scratch = threading.local()
_EXTERNAL = struct.Struct(">II")  # cookie, length of what follows
_PAYLOAD = struct.Struct(">IIIIQQd")  # cookie, length, offset, digits, lowest, highest, ratio
_COOKIE_BASE = ~0xF0  # the cookie's bits that name the format (the rest: the word size)
_LAYOUT = (LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS, 0)


@cache
def _edges() -> tuple[list[int], list[int], int]:
    """Per counts index, the lowest and the highest value it stands for; and how many."""
    histogram = new_histogram()
    low = [histogram.get_value_from_index(i) for i in range(histogram.counts_len)]
    return low, [histogram.get_highest_equivalent_value(v) for v in low], histogram.counts_len


class Counts:
    """One histogram's counts (of the harness's layout) from its lowest index with a count
    to its highest: one contiguous slice, which adds to another histogram's counts at the
    speed of memory."""

    __slots__ = ("start", "total", "values")

    def __init__(self, start: int, values: np.ndarray, total: int) -> None:
        self.start, self.values, self.total = start, values, total

    @classmethod
    def decode(cls, text: str) -> Counts:
        """Raises (ValueError, zlib.error, binascii.Error) on a text that does not decode."""
        raw = base64.b64decode(text)
        cookie, length = _EXTERNAL.unpack_from(raw)
        if cookie & _COOKIE_BASE != V2_COMPRESSION_COOKIE_BASE or length != len(raw) - 8:
            raise ValueError("not an HdrHistogram V2 compressed histogram")
        data = zlib.decompress(memoryview(raw)[8:])
        cookie, _, offset, digits, lowest, highest, _ = _PAYLOAD.unpack_from(data)
        if cookie & _COOKIE_BASE != V2_ENCODING_COOKIE_BASE:
            raise ValueError("not an HdrHistogram V2 payload")
        if (lowest, highest, digits, offset) != _LAYOUT:
            return cls.of(_converted(text))
        size = _edges()[2]
        scratch = getattr(_scratch, "counts", None)
        if scratch is None:
            scratch = _scratch.counts = np.zeros(size, dtype=np.uint64)
            _scratch.address = scratch.ctypes.data
        found = _decode_counts(data, _PAYLOAD.size, _scratch.address, size, 8)
        if not found["total"]:
            return cls(0, scratch[:0].copy(), 0)
        start, end = found["min_nonzero_index"], found["max_nonzero_index"] + 1
        used = scratch[:end]
        values = used[start:].copy()
        used.fill(0)
        return cls(start, values, found["total"])

    @classmethod
    def of(cls, histogram: HdrHistogram) -> Counts:
        counts = counts_view(histogram)
        if not histogram.get_total_count():
            return cls(0, counts[:0].copy(), 0)
        indexes = np.flatnonzero(counts)
        start, end = int(indexes[0]), int(indexes[-1]) + 1
        return cls(start, counts[start:end].copy(), int(histogram.get_total_count()))

    def add_to(self, histogram: HdrHistogram) -> None:
        """Add these counts to histogram, as histogram.add() would."""
        if not self.total:
            return
        end = self.start + self.values.size
        counts_view(histogram)[self.start:end] += self.values
        low, high, _ = _edges()
        histogram.total_count += self.total
        histogram.min_value = min(histogram.min_value, low[self.start])
        histogram.max_value = max(histogram.max_value, high[end - 1])


def _converted(text: str) -> HdrHistogram:
    """A histogram of another range or precision, in the harness's layout (the package's
    own way: value by value)."""
    histogram = new_histogram()
    histogram.add(decode(text))
    return histogram


def add_text(histogram: HdrHistogram, text: str) -> None:
    """Add an encoded histogram to histogram, as histogram.add(decode(text)) does, without
    making a histogram of it. Raises on a text that does not decode."""
    Counts.decode(text).add_to(histogram)


class Tally:
    """Counts added up over many histograms, held only over the indexes they reached (a
    node's whole run of one tag, in a merge task: a few thousand counts, not 23,552)."""

    def __init__(self) -> None:
        self.sum = Counts(0, np.zeros(0, dtype=np.uint64), 0)

    def add(self, counts: Counts) -> None:
        if not counts.total:
            return
        mine = self.sum
        low, high = counts.start, counts.start + counts.values.size
        end = mine.start + mine.values.size
        if not mine.total:
            mine.start, mine.values = low, counts.values.copy()
        else:
            if low < mine.start or high > end:
                start, stop = min(low, mine.start), max(high, end)
                grown = np.zeros(stop - start, dtype=np.uint64)
                grown[mine.start - start:end - start] = mine.values
                mine.start, mine.values = start, grown
            mine.values[low - mine.start:high - mine.start] += counts.values
        mine.total += counts.total

    def histogram(self) -> HdrHistogram:
        histogram = new_histogram()
        self.sum.add_to(histogram)
        return histogram
