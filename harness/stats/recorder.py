"""Per-thread measurement buffers for the current interval.

A worker appends integers (microseconds) to typed arrays (8 bytes a value, and NumPy reads
them without a copy) and bumps integer counters; at each
interval boundary it hands the whole buffer to its cell (take) and starts a fresh one. Nothing
on the message path locks, allocates a histogram or calls into hdrhistogram.
"""

from __future__ import annotations

from array import array
from typing import Any, NamedTuple

METRICS = ("latency", "service", "delay", "confirm", "connect", "subscribe", "process")
COUNTERS = ("sent", "received", "bytes", "errors", "lost", "duplicated", "reordered",
            "commits", "corrupt", "timeouts", "reconnects", "outage_ms", "foreign", "unsent",
            "late", "refused", "in_doubt", "redelivered", "rebalances", "cpu_us",
            "connect_failed", "untaken", "failed")


class Sample(NamedTuple):
    """What one thread measured in (part of) one interval."""

    values: dict[str, array[int]]
    counters: dict[str, int]
    # In a worker's last sample only: where its streams stood (harness.stats.reports.
    # StreamEnd's fields but the thread's place).
    streams: list[dict[str, Any]] | None = None
    # The first error of each kind in this part of the interval, with its reason.
    reasons: dict[str, str] | None = None
    # What the transport said happened that is no error (a partition assignment), in order.
    notes: list[str] | None = None
    # Per partition: (msg/s, lag) at the transport's last report (harness.modules.interface.
    # feedback.Feedback.partitions), where it reports them.
    partitions: dict[str, tuple[float, int]] | None = None


class Recorder:
    __slots__ = (*METRICS, *COUNTERS, "reasons", "notes", "partitions")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.latency: array[int] = array("q")
        self.service: array[int] = array("q")
        self.delay: array[int] = array("q")
        self.confirm: array[int] = array("q")  # publish to broker confirmation
        self.connect: array[int] = array("q")  # a client's connection, to the broker's answer
        self.subscribe: array[int] = array("q")  # a client's subscription, to its answer
        self.process: array[int] = array("q")  # a slow consumer's time on a message
        self.sent = self.received = self.bytes = self.errors = 0
        self.lost = self.duplicated = self.reordered = self.commits = 0
        self.corrupt = self.timeouts = self.reconnects = self.outage_ms = self.foreign = 0
        self.unsent = self.late = 0
        # Sends counted, then refused by the broker after all, or whose outcome a fault hid
        # (harness.modules.interface.feedback)
        self.refused = self.in_doubt = 0
        # Of those, the sends made in the measured span (harness.stats.figures.taken)
        self.untaken = 0
        # Sends that raised and never left: not counted sent, their numbers not used again
        self.failed = 0
        # Received again after the broker took them back from a consumer (Redis claims)
        self.redelivered = 0
        # Changes of the partitions a consumer group gave this consumer (Kafka)
        self.rebalances = 0
        # A client's connection attempts that failed (--clients; each an error too)
        self.connect_failed = 0
        self.notes: list[str] = []
        self.partitions: dict[str, tuple[float, int]] | None = None
        self.cpu_us = 0  # set by the cell for the group, never by a thread
        self.reasons: dict[str, str] = {}

    def error(self, kind: str, reason: object) -> None:
        """Count an error; the first of each kind in an interval keeps its reason, for the
        log."""
        self.errors += 1
        if kind not in self.reasons:
            self.reasons[kind] = str(reason) or type(reason).__name__

    def take(self) -> Sample:
        sample = Sample({m: getattr(self, m) for m in METRICS},
                        {c: getattr(self, c) for c in COUNTERS}, None, self.reasons or None,
                        self.notes or None, self.partitions)
        self._reset()
        return sample
