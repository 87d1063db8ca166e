"""Per-thread measurement buffers for the current interval.

A worker appends integers (microseconds) to typed arrays (8 bytes a value, and NumPy reads
them without a copy) and bumps integer counters; at each
interval boundary it hands the whole buffer to its cell (take) and starts a fresh one. Nothing
on the message path locks, allocates a histogram or calls into hdrhistogram.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

METRICS = ("latency", "service", "delay")
COUNTERS = ("sent", "received", "bytes", "errors", "lost", "duplicated", "reordered",
            "commits", "corrupt", "timeouts", "reconnects", "outage_ms", "foreign", "unsent")


class Sample(NamedTuple):
    """What one thread measured in (part of) one interval."""

    values: dict[str, array[int]]
    counters: dict[str, int]
    # In a worker's last sample only: for a producer, messages sent per producer id; for a
    # consumer that checks sequences, the next number it expected from each producer.
    streams: dict[str, int] | None = None


class Recorder:
    __slots__ = (*METRICS, *COUNTERS)

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.latency: array[int] = array("q")
        self.service: array[int] = array("q")
        self.delay: array[int] = array("q")
        self.sent = self.received = self.bytes = self.errors = 0
        self.lost = self.duplicated = self.reordered = self.commits = 0
        self.corrupt = self.timeouts = self.reconnects = self.outage_ms = self.foreign = 0
        self.unsent = 0

    def take(self) -> Sample:
        sample = Sample({m: getattr(self, m) for m in METRICS},
                        {c: getattr(self, c) for c in COUNTERS})
        self._reset()
        return sample
