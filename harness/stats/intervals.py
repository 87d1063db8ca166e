"""The controller's statistics: per interval, the reports of all processes merged exactly
(histograms added, counters summed); over the run, cumulative figures per group.

Phases: intervals that start before the warm-up ends are "warmup" and left out of the summary;
intervals that start after the producers were told to stop are "drain": their messages count
in totals and latency, but rates are computed over the "measure" phase only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from harness.spec.group import GroupSpec
from harness.spec.roles import ROLES
from harness.spec.run import RunSpec
from harness.stats.histogram import add_encoded, encode, new_histogram, percentiles
from harness.stats.recorder import COUNTERS
from harness.stats.reports import IntervalReport, StreamEnd

# The ActiveMQ paper's rule: above this a client may itself be the bottleneck.
CLIENT_CPU_LIMIT = 75.0


def run_loss(run: RunSpec, summary: dict[str, Any]) -> int:
    """Messages lost in a run, each counted once: a destination's delivery check (sent
    against received, which also sees competing consumers and tails) where there is one;
    elsewhere (selectors, numbered topics) its consumers' sequence gaps."""
    checked = {d["destination"] for d in summary["delivery"]}
    lost = sum(d["missing"] for d in summary["delivery"])
    for group in run.groups:
        if ROLES[group.role].consumes and ":".join(group.endpoint) not in checked:
            lost += summary["groups"][group.name]["lost"]
    return lost


def headline_metric(metrics: list[str]) -> str:
    return "latency" if "latency" in metrics else "service"


def role_count(role: str, counters: dict[str, int]) -> int:
    """The messages a group's rate counts: received for consumers and for Requestor (round
    trips), sent for producers."""
    return counters["received"] if ROLES[role].consumes else counters["sent"]


@dataclass
class GroupInterval:
    role: str
    counters: dict[str, int]
    histograms: dict[str, HdrHistogram]
    threads_up: int
    threads: int
    producing: int
    cpu: float  # highest CPU% (of one core) among the processes running the group

    @property
    def count(self) -> int:
        return role_count(self.role, self.counters)


@dataclass
class IntervalView:
    index: int
    start: float
    length: float
    phase: str
    groups: dict[str, GroupInterval]
    cpu_max: float
    broker_cpu: float | None = None


@dataclass
class GroupTotals:
    spec: GroupSpec
    metrics: list[str]
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    measured: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    # Every phase, warm-up included: what the delivery check balances.
    everything: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    histograms: dict[str, HdrHistogram] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)

    def count(self, counters: dict[str, int]) -> int:
        return role_count(self.spec.role, counters)


class RunStats:
    def __init__(self, run: RunSpec, metrics: dict[int, list[str]]) -> None:
        self.run = run
        self.groups = [GroupTotals(g, metrics[i]) for i, g in enumerate(run.groups)]
        for totals in self.groups:
            totals.histograms = {m: new_histogram() for m in totals.metrics}
        self.measured_seconds = 0.0
        self.cpu: list[float] = []
        self.broker_cpu: list[float] = []
        self.intervals = 0
        self.tails: dict[str, int] = {}

    def merge(self, index: int, start: float, phase: str, reports: list[IntervalReport],
              broker_cpu: float | None) -> IntervalView:
        """Merge one interval's reports from every process, and add it to the totals."""
        length = max((r.length_s for r in reports), default=0.0)
        views: dict[str, GroupInterval] = {}
        for g, totals in enumerate(self.groups):
            parts = [r.groups[g] for r in reports if g in r.groups]
            if not parts:
                continue
            counters = dict.fromkeys(COUNTERS, 0)
            histograms = {m: new_histogram() for m in totals.metrics}
            for part in parts:
                for name, value in part.counters.items():
                    counters[name] += value
                    totals.everything[name] += value
                for metric, text in part.histograms.items():
                    add_encoded(histograms[metric], text)
            cpu = max(r.cpu for r in reports if g in r.groups)
            views[totals.spec.name] = GroupInterval(
                totals.spec.role, counters, histograms, sum(p.threads_up for p in parts),
                sum(p.threads for p in parts), sum(p.producing for p in parts), cpu)
            if phase != "warmup":
                for name, value in counters.items():
                    totals.counters[name] += value
                    if phase == "measure":
                        totals.measured[name] += value
                for metric, histogram in histograms.items():
                    if histogram.get_total_count():
                        totals.histograms[metric].add(histogram)
                totals.cpu.append(cpu)
        cpu_max = max((r.cpu for r in reports), default=0.0)
        if phase == "measure":
            self.measured_seconds += length
        if phase != "warmup":
            self.cpu.append(cpu_max)
            if broker_cpu is not None:
                self.broker_cpu.append(broker_cpu)
        self.intervals += 1
        return IntervalView(index, start, length, phase, views, cpu_max, broker_cpu)

    def summary(self) -> dict[str, Any]:
        seconds = self.measured_seconds
        groups: dict[str, Any] = {}
        # Every message a group sent was received by the broker, and every message a group
        # received was dispatched by it (replies included).
        sent_rate = sum(t.measured["sent"] for t in self.groups) / seconds if seconds else 0.0
        received_rate = sum(t.measured["received"] for t in self.groups) / seconds \
            if seconds else 0.0
        for totals in self.groups:
            spec = totals.spec
            rate = totals.count(totals.measured) / seconds if seconds else 0.0
            entry: dict[str, Any] = {
                "module": spec.module, "destination": spec.destination,
                "lost_at_tail": self.tails.get(spec.name, 0),
                "threads": spec.threads, "processes": spec.processes,
                "rate": rate, **totals.counters,
                "headline": headline_metric(totals.metrics),
                "client_cpu_max": max(totals.cpu, default=0.0),
            }
            for metric, histogram in totals.histograms.items():
                entry[metric] = percentiles(histogram)
                entry.setdefault("histograms", {})[metric] = encode(histogram)
            groups[spec.name] = entry
        cpu_max = max(self.cpu, default=0.0)
        result: dict[str, Any] = {
            "measured_seconds": seconds,
            "groups": groups,
            # The ActiveMQ paper's definitions: received by the broker (= sent by producers),
            # dispatched (= received by consumers), overall = both, r = dispatched / received.
            "throughput": {
                "received_by_broker": sent_rate, "dispatched": received_rate,
                "overall": sent_rate + received_rate,
                "replication_grade": received_rate / sent_rate if sent_rate else None,
            },
            "client_cpu": {"max": cpu_max,
                           "mean": sum(self.cpu) / len(self.cpu) if self.cpu else 0.0,
                           "limit": CLIENT_CPU_LIMIT, "bottleneck": cpu_max > CLIENT_CPU_LIMIT},
            "delivery": self.delivery(),
        }
        if self.broker_cpu:
            import os
            mean = sum(self.broker_cpu) / len(self.broker_cpu)
            rate = received_rate or sent_rate
            # WMB report: CPU ms/msg = (CPUs * 1000 * %CPU/100) / rate, with %CPU of the whole
            # machine; psutil gives % of one core, so CPUs cancel out. (The report used 1024.)
            result["broker_cpu"] = {
                "mean": mean, "max": max(self.broker_cpu), "cpus": os.cpu_count(),
                "cpu_ms_per_msg": (1000 * mean / 100) / rate if rate else None,
            }
        return result

    def reconcile(self, streams: list[StreamEnd]) -> dict[str, int]:
        """Add to each consumer group's lost what no sequence gap could show: the messages
        after the last one it saw from each producer. Returns the addition per group.

        Only for consumers that see whole streams (sequence-checked) and run to the end (no
        -mg); a consumer expects every producer sending to its destination (in its own process
        on the loopback broker, whose broker is per process).
        """
        produced = [s for s in streams if ROLES[self.run.groups[s.group].role].produces]
        tails: dict[str, int] = {}
        for seen in streams:
            spec = self.run.groups[seen.group]
            if spec.role not in ("Receiver", "Subscriber") or spec.messages or spec.selector \
                    or spec.destination_max is not None:
                continue
            tail = 0
            for source in produced:
                producer = self.run.groups[source.group]
                if producer.role not in ("Sender", "Publisher") or \
                        (producer.transport, producer.destination) != \
                        (spec.transport, spec.destination) or \
                        (spec.embedded and source.process != seen.process):
                    continue
                for producer_id, count in source.positions.items():
                    tail += max(count - seen.positions.get(producer_id, 0), 0)
            tails[spec.name] = tails.get(spec.name, 0) + tail
        for totals in self.groups:
            tail = tails.get(totals.spec.name, 0)
            totals.counters["lost"] += tail
            totals.everything["lost"] += tail
        self.tails = tails
        return tails

    def delivery(self) -> list[dict[str, Any]]:
        """Per destination: every message a producer sent against what consumers received.

        Catches what per-producer sequence checks cannot see: losses at the tail of a stream
        and losses on queues with competing consumers.
        """
        out = []
        destinations: dict[tuple[str, str, str], dict[str, int]] = {}
        for totals in self.groups:
            spec = totals.spec
            key = spec.endpoint
            kind = key[1]
            entry = destinations.setdefault(key, {"sent": 0, "received": 0, "duplicated": 0,
                                                  "subscribers": 0, "consumers": 0,
                                                  "producers": 0, "filtered": 0})
            if spec.selector or (spec.destination_max is not None and kind == "topic"):
                entry["filtered"] += 1  # what each consumer should get is not known here
            if spec.role in ("Sender", "Publisher"):
                entry["sent"] += totals.everything["sent"]
                entry["producers"] += 1
            elif spec.role in ("Receiver", "Subscriber"):
                entry["received"] += totals.everything["received"]
                entry["duplicated"] += totals.everything["duplicated"]
                entry["consumers"] += 1
                if kind == "topic":
                    entry["subscribers"] += spec.threads * spec.processes
        for (transport, kind, name), entry in destinations.items():
            if not entry["producers"] or not entry["consumers"] or entry["filtered"]:
                continue  # with selectors, what each consumer should get is not known here
            embedded = [g.spec.processes for g in self.groups
                        if g.spec.transport == transport and g.spec.embedded]
            if embedded and kind == "topic":
                # Each process has its own embedded broker: a subscriber sees only the
                # publishers of its own process.
                processes = max(embedded)
                expected = entry["sent"] * entry["subscribers"] // processes
            elif kind == "topic":
                expected = entry["sent"] * entry["subscribers"]
            else:
                expected = entry["sent"]
            delivered = entry["received"] - entry["duplicated"]
            out.append({"destination": f"{transport}:{kind}:{name}", "expected": expected,
                        "received": entry["received"], "duplicated": entry["duplicated"],
                        "missing": max(expected - delivered, 0),
                        "unexpected": max(delivered - expected, 0)})
        return out
