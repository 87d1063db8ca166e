"""What the live screen shows, kept apart from how it is drawn: the merged interval views of a
run (live or replayed) folded into per-group rows, cumulative histograms, rate history and a
log of notable events.

Cumulative figures count, like the summary, every interval after the warm-up (during the
warm-up, the warm-up so far), until the user resets them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from harness.modules.interface.feedback import WAITING
from harness.plan.run import RunSpec
from harness.stats.figures import (
    CLIENT_CPU_LIMIT,
    closed_loop,
    headline_metric,
    metric_label,
    rate,
    role_count,
    us_per_message,
)
from harness.stats.histogram import new_histogram, percentiles
from harness.stats.recorder import COUNTERS
from harness.stats.views import IntervalView

HISTORY = 120  # intervals of rate history kept for the sparkline


@dataclass
class GroupBoard:
    name: str
    module: str
    role: str
    destination: str
    metrics: list[str]
    threads: int
    threads_up: int = 0
    clients: int = 0  # with --clients: the group's clients, and those connected
    clients_up: int = 0
    rate_now: float = 0.0
    cpu: float = 0.0
    last: dict[str, HdrHistogram] = field(default_factory=dict)
    last_counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    cumulative: dict[str, HdrHistogram] = field(default_factory=dict)
    rate_count: int = 0
    rate_seconds: float = 0.0
    rates: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    closed_loop: bool = False
    # Per partition, where the transport reports them: (msg/s, lag) at the last interval.
    partitions: dict[str, tuple[float, int]] | None = None

    @property
    def headline(self) -> str:
        return headline_metric(self.metrics)

    def label(self, metric: str) -> str:
        return metric_label(metric, self.closed_loop)

    @property
    def total(self) -> int:
        return role_count(self.role, self.counters)

    @property
    def us_per_message(self) -> float | None:
        """Client CPU per message since measuring began (harness.stats.figures)."""
        return us_per_message(self.counters["cpu_us"], self.total)

    @property
    def rate_avg(self) -> float:
        return self.rate_count / self.rate_seconds if self.rate_seconds else 0.0

    def reset(self) -> None:
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.cumulative = {m: new_histogram() for m in self.metrics}
        self.rate_count = 0
        self.rate_seconds = 0.0

    def percentiles(self, metric: str, cumulative: bool) -> dict[str, float] | None:
        histogram = (self.cumulative if cumulative else self.last).get(metric)
        if histogram is None or not histogram.get_total_count():
            return None
        return percentiles(histogram)


@dataclass
class NodeBoard:
    """One node of a distributed run: its rates now, its errors so far and its CPU, so that
    a slow or client-bound node stands out."""

    name: str
    rates: dict[str, float] = field(default_factory=dict)  # per group, its role's count/s
    errors: int = 0
    cpu: float = 0.0


class Board:
    def __init__(self, run: RunSpec, metrics: dict[int, list[str]]) -> None:
        self.run = run
        self.groups: dict[str, GroupBoard] = {}
        for i, spec in enumerate(run.groups):
            board = GroupBoard(spec.name, spec.module, spec.role, spec.destination or "",
                               metrics[i], spec.threads * spec.processes,
                               closed_loop=closed_loop(run, i))
            board.reset()
            self.groups[spec.name] = board
        self.elapsed = 0.0
        self.phase = "starting"
        self.cpu = 0.0
        self.broker_cpu: float | None = None
        self.intervals = 0
        self.measuring = False
        self.nodes: dict[str, NodeBoard] = {}  # a distributed run's, as they report

    def add(self, view: IntervalView) -> list[str]:
        """Fold one merged interval in; returns log lines for what deserves the user's eye."""
        if view.phase != "warmup" and not self.measuring:
            self.measuring = True
            self.reset()
        self.intervals += 1
        self.elapsed = view.start + view.length
        self.phase = view.phase
        self.cpu = view.cpu_max
        self.broker_cpu = view.broker_cpu
        log = []
        stamp = f"{self.elapsed:7.1f}s"
        for name, interval in view.groups.items():
            board = self.groups[name]
            board.threads_up, board.threads = interval.threads_up, interval.threads
            board.clients_up, board.clients = interval.clients_up, interval.clients
            board.cpu = interval.cpu
            board.rate_now = rate(interval.count, view.length)
            board.rates.append(board.rate_now)
            board.last = interval.histograms
            board.last_counters = interval.counters
            if interval.partitions:
                board.partitions = interval.partitions
            for key, value in interval.counters.items():
                board.counters[key] += value
            for metric, histogram in interval.histograms.items():
                if histogram.get_total_count():
                    board.cumulative[metric].add(histogram)
            if view.phase != "drain":
                board.rate_count += interval.count
                board.rate_seconds += view.length
            c = interval.counters
            notes = [f"{c[k]} {label}" for k, label in
                     (("errors", "errors"), ("lost", "lost"), ("duplicated", "duplicated"),
                      ("reordered", "reordered"), ("corrupt", "corrupt"),
                      ("reconnects", "reconnects"), ("in_doubt", "sends in doubt"),
                      ("foreign", "foreign (not timed)"))
                     if c[k]]
            if c["outage_ms"]:
                notes.append(f"{c['outage_ms'] / 1000:.1f} s disconnected")
            if notes:
                log.append(f"{stamp} {name}: " + ", ".join(notes))
        for node, part in view.nodes.items():
            board_node = self.nodes.setdefault(node, NodeBoard(node))
            board_node.rates = part.rates(view.length)
            board_node.errors += part.errors
            board_node.cpu = part.cpu
        if view.cpu_max > CLIENT_CPU_LIMIT:
            log.append(f"{stamp} client CPU {view.cpu_max:.0f}% of a core, above "
                       f"{CLIENT_CPU_LIMIT:.0f}%: the client may be the bottleneck")
        return log

    def reset(self) -> None:
        for board in self.groups.values():
            board.reset()
        for node in self.nodes.values():
            node.errors = 0


def partition_text(partitions: dict[str, tuple[float, int]]) -> str:
    """Per-partition rates and lags in a few lines: each topic once, then its partitions as
    [n] rate/s and, for consumers, their lag; a destination whose broker counts what waits
    on it, as its name and that count."""
    topics: dict[str, list[str]] = {}
    for key, (rate_now, lag) in partitions.items():
        if rate_now == WAITING:
            topics.setdefault(key, []).append(f"{lag:,} waiting")
            continue
        topic, _, number = key.rpartition("[")
        text = f"[{number.rstrip(']')}] {rate_now:,.0f}/s" + (f" lag {lag:,}" if lag >= 0
                                                              else "")
        topics.setdefault(topic, []).append(text)
    return "\n".join(f"{topic}: " + "  ".join(parts) for topic, parts in topics.items())
