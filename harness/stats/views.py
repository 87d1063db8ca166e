"""What one interval shows, merged over processes and nodes: each group's counts and
histograms, each node's share. RunStats (harness.stats.intervals) makes them; every output
reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from harness.stats.figures import rate, role_count, us_per_message
from harness.stats.histogram import encode
from harness.stats.reports import IntervalReport


@dataclass
class GroupInterval:
    role: str
    counters: dict[str, int]
    histograms: dict[str, HdrHistogram]
    threads_up: int
    threads: int
    producing: int
    cpu: float  # highest CPU% (of one core) among the processes running the group
    # Histograms already encoded, where one process measured the metric: the .hlog's text.
    texts: dict[str, str] = field(default_factory=dict)
    # Per partition, where the transport reports them: (msg/s, lag) (GroupPart.partitions).
    partitions: dict[str, tuple[float, int]] | None = None
    clients: int = 0  # with --clients: the group's clients, and those connected
    clients_up: int = 0

    @property
    def lag(self) -> int | None:
        """The consumers' lag over every partition whose lag is known; None if none is."""
        known = [lag for _, lag in (self.partitions or {}).values() if lag >= 0]
        return sum(known) if known else None

    def text(self, metric: str) -> str:
        """The metric's histogram, encoded."""
        return self.texts.get(metric) or encode(self.histograms[metric])

    @property
    def count(self) -> int:
        return role_count(self.role, self.counters)

    @property
    def us_per_message(self) -> float | None:
        return us_per_message(self.counters["cpu_us"], self.count)


@dataclass
class NodeInterval:
    """One node's share of an interval: enough to see a slow or client-bound node."""

    counts: dict[str, int]  # per group, what its role counts (sent or received)
    errors: int
    cpu: float  # highest CPU% (of one core) among the node's processes

    def rates(self, seconds: float) -> dict[str, float]:
        """Each group's rate on this node over an interval of `seconds`."""
        return {name: rate(count, seconds) for name, count in self.counts.items()}


@dataclass
class IntervalView:
    index: int
    start: float
    length: float
    phase: str
    groups: dict[str, GroupInterval]
    cpu_max: float
    broker_cpu: float | None = None
    machine_cpu: float | None = None  # % of all the client machine's cores
    # Where the reports came from more than one node: each node's share.
    nodes: dict[str, NodeInterval] = field(default_factory=dict)
    # --backlog: the backlog at the interval's end, its unit, and whether the consumers were
    # held through the interval.
    backlog: tuple[int, str, bool] | None = None


def view_phase(reports: list[IntervalReport]) -> str:
    """The phase an interval shows: measuring if any process (or node) measured in it."""
    phases = {r.phase for r in reports}
    for phase in ("measure", "warmup", "drain"):
        if phase in phases:
            return phase
    return "measure"
