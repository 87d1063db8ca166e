"""What a cell (the groups of one process) tells the controller, as typed records: they
cross from child processes through a pipe, so they are plain picklable dataclasses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from harness.modules.interface.feedback import WAITING
from harness.stats.counts import Counts, add_text
from harness.stats.histogram import decode, new_histogram


@dataclass
class GroupPart:
    """One group's share of one interval in one process."""

    counters: dict[str, int]
    histograms: dict[str, str]  # metric -> HdrHistogram's compressed base64
    clamped: int  # values outside the histogram's range, clamped into it
    threads_up: int
    threads: int
    producing: int  # threads still producing
    # Per partition ("topic[n]"), where the transport reports them: (msg/s, lag) summed over
    # the group's clients at their last report in the interval (add_partitions); and per
    # destination whose broker says what waits on it, (WAITING, that count).
    partitions: dict[str, tuple[float, int]] | None = None
    # With --clients: the group's clients, and those connected at the interval's end.
    clients: int = 0
    clients_up: int = 0

    def histogram(self, metric: str) -> HdrHistogram:
        """The metric's histogram, decoded once however many outputs read it; read-only.
        A cell in the controller's own process leaves the histograms it encoded here, so
        that they are never decoded at all (remember); a merge leaves their counts (keep)."""
        decoded = self.__dict__.setdefault("_decoded", {})
        histogram = decoded.get(metric)
        if histogram is None:
            counts = self.__dict__.get("_counts", {}).get(metric)
            if counts is None:
                histogram = decode(self.histograms[metric])
            else:
                histogram = new_histogram()
                counts.add_to(histogram)
            decoded[metric] = histogram
        return histogram

    def add_to(self, target: HdrHistogram, metric: str) -> None:
        """Add the metric's histogram to target, decoding it only if it was not already."""
        counts = self.__dict__.get("_counts", {}).get(metric)
        if counts is not None:
            counts.add_to(target)
            return
        decoded = self.__dict__.get("_decoded", {}).get(metric)
        if decoded is None:
            add_text(target, self.histograms[metric])
        elif decoded.get_total_count():
            target.add(decoded)

    def keep(self, metric: str, counts: Counts) -> None:
        """The metric's histogram, already decoded as counts (harness.stats.counts)."""
        self.__dict__.setdefault("_counts", {})[metric] = counts

    def remember(self, histograms: dict[str, HdrHistogram]) -> None:
        self.__dict__["_decoded"] = histograms

    def __getstate__(self) -> dict[str, Any]:
        # Across a pipe the text is what travels: the decoded copies stay behind.
        state = dict(self.__dict__)
        state.pop("_decoded", None)
        state.pop("_counts", None)
        return state


@dataclass
class StreamEnd:
    """Where a thread's streams stood at the end: a producer's messages sent, or what a
    sequence-checked consumer last saw of each producer."""

    group: int
    thread: int
    process: int
    positions: dict[str, int]  # producer id -> messages
    # A producer's numbers whose send failed (never used again), by producer id.
    failed: dict[str, list[int]] = field(default_factory=dict)
    # A producer's numbers whose outcome a fault hid (in doubt), by producer id.
    doubt: dict[str, list[int]] = field(default_factory=dict)
    # A sequence-checked consumer's numbers counted lost, by producer id.
    lost: dict[str, list[int]] = field(default_factory=dict)
    # A competing consumer's numbers received, a bit each, by producer id.
    seen: dict[str, bytes] = field(default_factory=dict)


@dataclass
class IntervalReport:
    process: int
    pid: int
    index: int
    start_ns: int  # epoch ns
    length_s: float
    final: bool
    cpu: float  # % of one core
    phase: str = "measure"  # warmup, measure or drain (harness.stats.timeline)
    node: str = ""  # the node that measured it; empty for this node
    groups: dict[int, GroupPart] = field(default_factory=dict)
    # --rate-steps: the step the interval is in (harness.plan.steps.step_at), -1 for none
    step: int = -1
    # The process's resident memory, bytes, at the report (0: unknown), and in the first
    # report also before it made its clients (rss_start).
    rss: int = 0
    rss_start: int = 0
    streams: list[StreamEnd] = field(default_factory=list)  # with the final report
    floor: str | None = None  # the floor probe's histogram, with the final report

    @property
    def producing(self) -> int:
        return sum(part.producing for part in self.groups.values())


@dataclass
class StatusReport:
    """Sent as soon as a process's producers have all finished."""

    process: int
    producing: int
    ended_ns: int = 0  # epoch ns at which its last producer ended


@dataclass
class BalanceReport:
    """While draining, a few times a second: per group, the messages its finished producers
    sent (successfully) and its consumers received so far, so that the controller can end
    the drain as soon as every checked destination has received everything."""

    process: int
    sent: dict[int, int]
    received: dict[int, int]


@dataclass
class LogReport:
    process: int
    message: str
    failed: bool = False  # a thread ended by an error it could not count: the run is incomplete
    abandoned: tuple[str, ...] = ()  # threads left in a client call after the stop


@dataclass
class DoneReport:
    process: int
    lost: str | None = None  # why the process ended without reporting its end


Report = IntervalReport | StatusReport | BalanceReport | LogReport | DoneReport


def add_partitions(many: Iterable[dict[str, Any] | None]) -> dict[str, tuple[float, int]] | None:
    """Per-partition gauges of several clients (threads, processes, nodes) as one: the rates
    and the known lags added up (competing consumers hold a partition each; subscribers each
    read all of them, as the rate they receive at adds up); a lag none knows stays -1. A
    destination's waiting count (rate WAITING: a queue's depth, which its competing consumers
    each read alike) is the largest any of them read, not their sum. None where none
    reported any."""
    out: dict[str, tuple[float, int]] = {}
    for partitions in many:
        for key, (rate, lag) in (partitions or {}).items():
            if rate == WAITING:
                out[key] = (WAITING, max(lag, out.get(key, (WAITING, -1))[1]))
                continue
            was_rate, was_lag = out.get(key, (0.0, -1))
            out[key] = (was_rate + rate, lag + max(was_lag, 0) if lag >= 0 else was_lag)
    return dict(sorted(out.items(), key=lambda kv: _partition_order(kv[0]))) or None


def _partition_order(key: str) -> tuple[str, int]:
    """topic[n] by topic, then by n as a number."""
    topic, _, number = key.rpartition("[")
    return (topic, int(number.rstrip("]"))) if number.rstrip("]").isdigit() else (key, -1)
