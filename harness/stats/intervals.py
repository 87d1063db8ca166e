"""The controller's statistics: per interval, the reports of all processes merged exactly
(histograms added, counters summed); over the run, cumulative figures per group, as
harness.stats.figures defines them.

Each report carries its own phase (harness.stats.timeline): "warmup" is left out of the
summary; "drain" counts in totals and latency; rates are over the "measure" phase only, node
by node (a merged run's nodes each have their own span).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from harness.modules.interface.roles import ROLES
from harness.plan.backlog import parse_backlog
from harness.plan.group import GroupSpec
from harness.plan.run import RunSpec, run_steps
from harness.plan.steps import asked_rates, parse_steps, step_bounds
from harness.stats.backlog import FillAndDrain, warmup_left
from harness.stats.balance import Balance
from harness.stats.figures import (
    BROKER_CPU_LABEL,
    CLIENT_CPU_LIMIT,
    broker_cpu_ms_per_received,
    client_bottleneck,
    closed_loop,
    cores,
    headline_metric,
    kept,
    mean,
    outcomes,
    per_core_rate,
    span_count,
    summed_rate,
    taken,
    us_per_message,
)
from harness.stats.histogram import decode, empty, encode, new_histogram, percentiles
from harness.stats.memory import Memory
from harness.stats.recorder import COUNTERS
from harness.stats.reports import IntervalReport, add_partitions
from harness.stats.slo import targets
from harness.stats.views import GroupInterval, IntervalView, NodeInterval, view_phase


@dataclass
class GroupTotals:
    spec: GroupSpec
    metrics: list[str]
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    # The measured phase's counters, per node: each node's rate is over its own span.
    measured: dict[str, dict[str, int]] = field(default_factory=dict)
    # Every phase, warm-up included: what the delivery check balances.
    everything: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    histograms: dict[str, HdrHistogram] = field(default_factory=dict)
    cpu: list[float] = field(default_factory=list)
    clamped: int = 0  # samples outside the histograms' range, clamped into it
    # The consumers' lag at the last interval that knew it: (interval index, lag).
    lag: tuple[int, int] | None = None

    def count(self, counters: dict[str, int]) -> int:
        return span_count(self.spec.role, counters)

    def absorb(self, other: GroupTotals) -> None:
        """Add the totals of other intervals of the same group."""
        _add(self.counters, other.counters)
        _add(self.everything, other.everything)
        for node, counters in other.measured.items():
            _add(self.measured.setdefault(node, dict.fromkeys(COUNTERS, 0)), counters)
        for metric, histogram in other.histograms.items():
            if histogram.get_total_count():
                if metric not in self.histograms:  # a step's, made as its samples come
                    self.histograms[metric] = new_histogram()
                self.histograms[metric].add(histogram)
        self.cpu += other.cpu
        self.clamped += other.clamped
        if other.lag is not None and (self.lag is None or other.lag[0] > self.lag[0]):
            self.lag = other.lag

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (a merge's partial statistics cross from Spark's executors): the
        # histograms travel encoded, a few KB each instead of their 188 KB of counts.
        return {**self.__dict__, "histograms": {m: encode(h) for m, h in
                                                self.histograms.items()}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.histograms = {m: decode(text) for m, text in state["histograms"].items()}


def _add(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, 0) + value


class RunStats(Balance):
    def __init__(self, run: RunSpec, metrics: dict[int, list[str]]) -> None:
        self.run = run
        self.metrics = metrics
        self.groups = [GroupTotals(g, metrics[i]) for i, g in enumerate(run.groups)]
        for totals in self.groups:
            totals.histograms = {m: new_histogram() for m in totals.metrics}
        self.node_seconds: dict[str, float] = {}  # measured seconds, per node
        self.cpu: list[float] = []
        self.machine_cpu: list[float] = []
        self.broker_cpu: list[float] = []
        self.memory = Memory()
        self.abandoned: list[str] = []  # threads left in a client call after the stop
        self.intervals = 0
        self.tails: dict[str, int] = {}
        self.received_once: dict[str, int] = {}  # per destination of competing receivers
        self.by_sequence: dict[str, list[int]] = {}  # per destination (balance.Outcomes)
        self.reconciled: set[str] = set()  # the consumer groups whose streams were
        # Every node's share is here (one node, or a merge of them all): a real broker's
        # destination can be balanced. A node of a multi-node run sees only its share.
        self.every_node = run.nodes == 1
        # --rate-steps: where each step ends (seconds from the start of the run), and each
        # step's totals per group (the measured intervals' counts; the samples of every
        # interval after the warm-up, the drain's in the last step's) and seconds per node.
        steps = run_steps(run)
        self.step_ends = step_bounds(steps, run.warmup) if steps else []
        self.steps = [[GroupTotals(g, metrics[i], histograms={})
                       for i, g in enumerate(run.groups)] for _ in self.step_ends]
        self.step_seconds: list[dict[str, float]] = [{} for _ in self.step_ends]
        # --backlog: the fill and the drain; released: the last interval merged brought the
        # backlog to the goal (the controller then releases the consumers).
        self.fill: FillAndDrain | None = None
        if run.backlog:
            self.fill = FillAndDrain(run, *parse_backlog(run.backlog))
        self.released = False

    def merge(self, index: int, start: float, reports: list[IntervalReport],
              broker_cpu: float | None, machine_cpu: float | None = None,
              broker_memory: dict[str, int] | None = None) -> IntervalView:
        """Merge one interval's reports from every process (and node), and add each to the
        totals of its own phase; broker_memory: the broker's rss (and rss_start), bytes."""
        length = max((r.length_s for r in reports), default=0.0)
        steps = self._add_spans(reports)
        views: dict[str, GroupInterval] = {}
        for g, totals in enumerate(self.groups):
            parts = [(r, r.groups[g]) for r in reports if g in r.groups]
            if parts:
                views[totals.spec.name] = self._merge_group(g, totals, parts, steps, index)
        phase = view_phase(reports)
        cpu_max = max((r.cpu for r in reports), default=0.0)
        nodes = self._nodes(reports)
        self._mark(index, reports, views, broker_memory)
        if phase == "measure":
            self.cpu.append(cpu_max)
            if broker_cpu is not None:
                self.broker_cpu.append(broker_cpu)
            if machine_cpu is not None:
                self.machine_cpu.append(machine_cpu)
        self.intervals += 1
        backlog = None
        if self.fill is not None:
            held = not self.fill.reached
            self.released = self.fill.add(index, start, length,
                                          {name: v.counters for name, v in views.items()})
            backlog = (self.fill.now, self.fill.unit, held)
        return IntervalView(index, start, length, phase, views, cpu_max, broker_cpu,
                            machine_cpu, dict(sorted(nodes.items())), backlog)

    def _add_spans(self, reports: list[IntervalReport]) -> dict[int, int]:
        """Each node's measured seconds (and each step's) of this interval; returns each
        report's step (by id), as the process that measured it said."""
        spans: dict[tuple[str, int], float] = {}
        for report in reports:
            if report.phase == "measure":
                key = (report.node, report.start_ns)
                spans[key] = max(spans.get(key, 0.0), report.length_s)
        for (node, _), seconds in spans.items():
            self.node_seconds[node] = self.node_seconds.get(node, 0.0) + seconds
        # Each report's step, as the process that measured it said (a merge's slot may
        # hold nodes' intervals of two steps); the warm-up's in none.
        steps = {id(r): min(r.step, len(self.step_ends) - 1) for r in reports
                 if self.step_ends and r.step >= 0 and r.phase != "warmup"}
        step_spans: dict[tuple[int, str, int], float] = {}
        for report in reports:
            if report.phase == "measure" and id(report) in steps:
                key3 = (steps[id(report)], report.node, report.start_ns)
                step_spans[key3] = max(step_spans.get(key3, 0.0), report.length_s)
        for (step, node, _), seconds in step_spans.items():
            self.step_seconds[step][node] = self.step_seconds[step].get(node, 0.0) + seconds
        return steps

    def _merge_group(self, g: int, totals: GroupTotals, parts: list[tuple[IntervalReport, Any]],
                     steps: dict[int, int], index: int) -> GroupInterval:
        """One group's parts of the interval merged into its view, and added to the totals
        of their phases (the warm-up's to `everything` only)."""
        counters = dict.fromkeys(COUNTERS, 0)
        for report, part in parts:
            phase = report.phase
            totals.clamped += part.clamped
            for name, value in part.counters.items():
                counters[name] += value
                totals.everything[name] += value
                if phase != "warmup":
                    totals.counters[name] += value
            if phase == "measure":
                measured = totals.measured.setdefault(report.node,
                                                      dict.fromkeys(COUNTERS, 0))
                for name, value in part.counters.items():
                    measured[name] += value
            elif part.counters.get("untaken"):
                # The broker's word on sends of the measured span, come after it (at the
                # close): it belongs to the span's count.
                measured = totals.measured.setdefault(report.node,
                                                      dict.fromkeys(COUNTERS, 0))
                measured["untaken"] += part.counters["untaken"]
        histograms: dict[str, HdrHistogram] = {}
        texts: dict[str, str] = {}
        for metric in totals.metrics:
            each = [(r, p) for r, p in parts if metric in p.histograms]
            if len(each) == 1:  # one process measured it: its histogram is the interval's
                report, part = each[0]
                histograms[metric] = histogram = part.histogram(metric)
                texts[metric] = part.histograms[metric]
                if report.phase != "warmup" and histogram.get_total_count():
                    totals.histograms[metric].add(histogram)
                continue
            if not each:
                texts[metric], histograms[metric] = empty()
                continue
            histograms[metric] = histogram = new_histogram()
            for _, part in each:
                part.add_to(histogram, metric)
            if all(report.phase != "warmup" for report, _ in each):
                if histogram.get_total_count():
                    totals.histograms[metric].add(histogram)
                continue
            for report, part in each:  # the warm-up's parts left out of the totals
                if report.phase != "warmup":
                    part.add_to(totals.histograms[metric], metric)
        if steps:
            self._add_to_steps(g, [(r, p) for r, p in parts if id(r) in steps], steps,
                               histograms)
        cpu = max(r.cpu for r, _ in parts)
        view = GroupInterval(
            totals.spec.role, counters, histograms, sum(p.threads_up for _, p in parts),
            sum(p.threads for _, p in parts), sum(p.producing for _, p in parts), cpu,
            texts, add_partitions(p.partitions for _, p in parts),
            sum(p.clients for _, p in parts), sum(p.clients_up for _, p in parts))
        if (lag := view.lag) is not None:
            totals.lag = (index, lag)
        if any(r.phase == "measure" for r, _ in parts):
            totals.cpu.append(cpu)
        return view

    def _nodes(self, reports: list[IntervalReport]) -> dict[str, NodeInterval]:
        """Per node, where there are several, what it counted and its CPU this interval."""
        nodes: dict[str, NodeInterval] = {}
        if len({r.node for r in reports}) > 1:
            for report in reports:
                node = nodes.setdefault(report.node, NodeInterval(
                    {t.spec.name: 0 for t in self.groups}, 0, 0.0))
                node.cpu = max(node.cpu, report.cpu)
                for g, part in report.groups.items():
                    totals = self.groups[g]
                    node.counts[totals.spec.name] += totals.count(part.counters)
                    node.errors += part.counters["errors"]
        return nodes

    def _mark(self, index: int, reports: list[IntervalReport],
              views: dict[str, GroupInterval], broker_memory: dict[str, int] | None) -> None:
        """The processes' and the broker's memory, and the clients connected, at this
        interval."""
        for report in reports:
            self.memory.mark(f"{report.node}/{report.process}", index, report.rss,
                             report.rss_start)
        if broker_memory:
            self.memory.mark("broker", index, broker_memory.get("rss", 0),
                             broker_memory.get("rss_start", 0))
        self.memory.clients(index, sum(v.clients_up for v in views.values()))

    def _add_to_steps(self, g: int, parts: list[tuple[IntervalReport, Any]],
                      steps: dict[int, int], histograms: dict[str, HdrHistogram]) -> None:
        """A group's parts of an interval to their steps' totals: counts of the measured
        ones, samples of all (the interval's histograms where every part is in one step)."""
        if not parts:
            return
        for report, part in parts:
            if report.phase == "measure":
                step = self.steps[steps[id(report)]][g]
                _add(step.measured.setdefault(report.node, dict.fromkeys(COUNTERS, 0)),
                     {**part.counters, "untaken": 0})  # a step counts its sends as made
        one = {steps[id(r)] for r, _ in parts}
        if len(one) == 1:
            step = self.steps[one.pop()][g]
            for metric, histogram in histograms.items():
                if histogram.get_total_count():
                    if metric not in step.histograms:
                        step.histograms[metric] = new_histogram()
                    step.histograms[metric].add(histogram)
            return
        for report, part in parts:
            step = self.steps[steps[id(report)]][g]
            for metric in part.histograms:
                if metric not in step.histograms:
                    step.histograms[metric] = new_histogram()
                part.add_to(step.histograms[metric], metric)

    def absorb(self, other: RunStats) -> None:
        """Add the statistics of other intervals of the same run, merged apart (a merge's
        partitions): afterwards this holds what merging all of them here would have."""
        for mine, theirs in zip(self.groups, other.groups, strict=True):
            mine.absorb(theirs)
        _add(self.node_seconds, other.node_seconds)
        self.cpu += other.cpu
        self.machine_cpu += other.machine_cpu
        self.broker_cpu += other.broker_cpu
        self.memory.absorb(other.memory)
        self.intervals += other.intervals
        _add(self.tails, other.tails)
        _add(self.received_once, other.received_once)
        for destination, theirs in other.by_sequence.items():
            mine_outcomes = self.by_sequence.setdefault(destination, [0, 0, 0])
            for k, value in enumerate(theirs):
                mine_outcomes[k] += value
        self.reconciled |= other.reconciled
        for mine_step, their_step in zip(self.steps, other.steps, strict=True):
            for mine, theirs in zip(mine_step, their_step, strict=True):
                mine.absorb(theirs)
        for seconds, theirs in zip(self.step_seconds, other.step_seconds, strict=True):
            _add(seconds, theirs)
        if self.fill is not None and other.fill is not None:
            self.fill.absorb(other.fill)

    def measured_seconds(self) -> float:
        """The measured span; of the longest, where nodes measured different spans."""
        return max(self.node_seconds.values(), default=0.0)

    def _rate(self, totals: list[GroupTotals], count: Any) -> float:
        """Over the given groups, the sum of each node's count over its own span."""
        return summed_rate(
            (sum(count(t, t.measured.get(node, {})) for t in totals), seconds)
            for node, seconds in self.node_seconds.items())

    def _cost(self, totals: GroupTotals) -> dict[str, float | None]:
        """A group's client CPU per message over the measured span, and what one core
        would sustain at that cost."""
        cpu_us = sum(c.get("cpu_us", 0) for c in totals.measured.values())
        count = sum(totals.count(c) for c in totals.measured.values())
        us = us_per_message(cpu_us, count)
        return {"client_us_per_msg": us, "per_core_rate": per_core_rate(us)}

    def _cores(self) -> float:
        """The client cores the run kept busy: each node's processes' CPU time over its
        measured span, summed over nodes."""
        return sum(cores(sum(t.measured.get(node, {}).get("cpu_us", 0) for t in self.groups),
                         seconds) for node, seconds in self.node_seconds.items())

    def summary(self) -> dict[str, Any]:
        groups: dict[str, Any] = {}
        # The broker received what it kept of every group's sends, and dispatched every
        # message a group received (replies included).
        sent_rate = self._rate(self.groups, lambda t, c: taken(c))
        received_rate = self._rate(self.groups, lambda t, c: c.get("received", 0))
        # The replication grade of the run's every send: the copies received (once each) of
        # what the broker kept, warm-up and drain included, so that a backlog carried across
        # the measured span's edges neither lifts nor lowers it.
        copies = sum(t.everything["received"] - t.everything["duplicated"]
                     for t in self.groups)
        sends = sum(kept(t.everything) for t in self.groups)
        # The rate each producing group was asked for (a stepped run's are its steps').
        aims = {} if self.step_ends else targets(self.run, max(len(self.node_seconds), 1))
        for i, totals in enumerate(self.groups):
            spec = totals.spec
            entry: dict[str, Any] = {
                "module": spec.module, "destination": spec.destination,
                "lost_at_tail": self.tails.get(spec.name, 0),
                "threads": spec.threads, "processes": spec.processes,
                "rate": self._rate([totals], lambda t, c: t.count(c)),
                # What the rate counts, over the same measured span (the counters below go
                # on through the drain).
                "count": sum(totals.count(c) for c in totals.measured.values()),
                **totals.counters,
                "clamped": totals.clamped,
                # What the broker took of the measured span's sends (harness.stats.figures)
                "taken": sum(taken(c) for c in totals.measured.values()),
                "headline": headline_metric(totals.metrics),
                "closed_loop": closed_loop(self.run, i),
                "client_cpu_max": max(totals.cpu, default=0.0),
                **self._cost(totals),
            }
            if spec.name in aims:
                entry["target"] = aims[spec.name]
            if ROLES[spec.role].produces:  # every send, in one outcome each
                entry["outcomes"] = outcomes(totals.everything, spec.confirmed)
            if totals.lag is not None:  # the broker's count, where the transport reads it
                entry["lag"] = totals.lag[1]
            for metric, histogram in totals.histograms.items():
                entry[metric] = percentiles(histogram)
                entry.setdefault("histograms", {})[metric] = encode(histogram)
            if spec.clients:
                entry["clients"] = spec.clients
                # Connections made in the measured span (each client's first, and again
                # after an outage).
                entry["connects"] = totals.histograms["connect"].get_total_count()
            groups[spec.name] = entry
        cpu_max = max(self.cpu, default=0.0)
        machine_max = max(self.machine_cpu, default=None)
        result: dict[str, Any] = {
            "measured_seconds": self.measured_seconds(),
            "node_seconds": dict(self.node_seconds),
            "groups": groups,
            # The ActiveMQ paper's definitions: received by the broker (= sent by producers),
            # dispatched (= received by consumers), overall = both, r = dispatched / received.
            "throughput": {
                "received_by_broker": sent_rate, "dispatched": received_rate,
                "overall": sent_rate + received_rate,
                "replication_grade": copies / sends if sends else None,
            },
            "client_cpu": {"max": cpu_max, "mean": mean(self.cpu), "limit": CLIENT_CPU_LIMIT,
                           "cores": self._cores(), "machine_max": machine_max,
                           "bottleneck": client_bottleneck(cpu_max, machine_max)},
            "delivery": self.delivery(),
        }
        if unchecked := self.unchecked():
            result["unchecked"] = unchecked
        if left := self.warmup_left():
            result["warmup_backlog"] = left
        if self.abandoned:
            result["abandoned_threads"] = sorted(self.abandoned)
        if self.step_ends:
            result["steps"] = self.step_summary()
        if self.fill is not None:
            result["backlog"] = self.fill.summary()
        if memory := self.memory.summary():
            result["memory"] = memory
        if self.broker_cpu:
            import os
            broker_mean = mean(self.broker_cpu)
            result["broker_cpu"] = {
                "mean": broker_mean, "max": max(self.broker_cpu), "cpus": os.cpu_count(),
                "label": BROKER_CPU_LABEL,
                "cpu_ms_per_received_msg": broker_cpu_ms_per_received(broker_mean, sent_rate),
            }
        return result

    def step_summary(self) -> list[dict[str, Any]]:
        """Each rate step's figures, as the run's are defined (harness.stats.figures) but over
        the step's own measured intervals: per group its rate asked (stepped groups: the
        messages its schedule asked for in the step over the step's seconds), its rate,
        count and percentiles."""
        steps = run_steps(self.run)
        assert steps is not None
        out = []
        for i, (step, totals) in enumerate(zip(steps, self.steps, strict=True)):
            seconds = self.step_seconds[i]
            begin = self.run.warmup + sum(s.seconds for s in steps[:i])
            entry: dict[str, Any] = {"step": i + 1, "begin": begin,
                                     "end": begin + step.seconds,
                                     "seconds": max(seconds.values(), default=0.0),
                                     "groups": {}}
            for t in totals:
                spec = t.spec
                group: dict[str, Any] = {
                    "rate": summed_rate((t.count(t.measured.get(node, {})), s)
                                        for node, s in seconds.items()),
                    "count": sum(t.count(c) for c in t.measured.values())}
                if spec.rate_steps:
                    group["asked"] = asked_rates(parse_steps(spec.rate_steps))[i]
                for metric, histogram in t.histograms.items():
                    group[metric] = percentiles(histogram)
                entry["groups"][spec.name] = group
            out.append(entry)
        return out

    def warmup_left(self) -> dict[str, int]:
        """The backlog the warm-up left, where it lifts a measured rate (harness.stats.
        backlog.warmup_left): by the end of each process's own warm-up."""
        measured: dict[str, dict[str, int]] = {}
        for t in self.groups:
            span = measured[t.spec.name] = dict.fromkeys(COUNTERS, 0)
            for counters in t.measured.values():
                _add(span, counters)
        return warmup_left(
            self.run, {t.spec.name: {k: v - t.counters[k] for k, v in t.everything.items()}
                       for t in self.groups}, measured)
