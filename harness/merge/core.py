"""The exact merge of one run's run directories, as plain functions and classes over its
records, so that the Spark job (harness.merge.spark) runs them in its executors, a
partition at a time, and `harness report` runs them in one process.

Every interval of every node goes on one epoch grid of the statistics interval: slot =
round(start / interval). The map side reads one node's lines at a time, checks every record
against the schema and hands its line on keyed by its slot. The reduce side gets a range of
slots in order and merges each slot's records, every node's and process's, by the same code
that merged them live (harness.stats.intervals.RunStats), keeping running sums only
(SlotMerger): the run's statistics, each node's histograms per tag (decoded once for both,
harness.stats.counts), the report's series a bucket of slots at a time, the nodes' measured
spans. Histograms are added, never percentiles averaged; none is held per interval, so
memory does not grow with the run's length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from hdrh.histogram import HdrHistogram

from harness.modules.interface.roles import ROLES
from harness.plan.group import metrics_for
from harness.plan.run import RunSpec
from harness.rundir.reader import Interval, interval_of, run_from_manifest
from harness.rundir.schema import READABLE, REQUIRED, SCHEMA_VERSION, problem, upgrade
from harness.rundir.writer import hlog_line
from harness.stats.counts import Counts, Tally
from harness.stats.figures import rate
from harness.stats.histogram import encode, new_histogram, percentiles
from harness.stats.intervals import RunStats
from harness.stats.records import closing_records
from harness.stats.views import IntervalView

PROBLEM = -1  # the slot key of a record this release cannot read: sorted first
END = 1 << 62  # the slot key of what belongs to no slot: sorted after every slot
ROW_COLUMNS = ("run", "interval_start", "t", "phase", "tag", "group", "metric", "count",
               "rate", "p50", "p90", "p99", "p99.9", "max", "hist")
LATENCY = ("p50", "p90", "p99", "p99.9", "max")
# The report draws at most this many points a series; a longer run's points each stand
# for a bucket of intervals, their histograms added.
MAX_POINTS = 2000
SKIPPED = ("truncated_lines", "corrupt_histograms")


def slot_of(start: float, interval: float) -> int:
    return int(start / interval + 0.5)


@dataclass
class RunLayout:
    """What every task needs of one run: its groups, its grid and how its slots are cut
    into partitions (in order: partition p holds slots before partition p + 1's) and into
    the report's buckets (never across two partitions)."""

    run: str
    name: str
    spec: RunSpec
    interval: float
    nodes: list[dict[str, Any]]  # the manifests
    first: int  # the earliest node's first slot
    last: int  # the last slot, as far as the manifests tell
    partitions: int = 1
    bucket: int = 1  # slots a point of the report's series
    block: int = 1 << 40  # slots a partition

    def cut(self, partitions: int) -> RunLayout:
        """The layout for this many partitions (at most one a bucket)."""
        slots = max(self.last - self.first + 1, 1)
        self.bucket = -(-slots // MAX_POINTS)
        buckets = -(-slots // self.bucket)
        self.partitions = max(min(partitions, buckets), 1)
        self.block = self.bucket * -(-buckets // self.partitions)
        return self

    def partition(self, slot: int) -> int:
        if slot >= END:
            return self.partitions - 1
        return min(max((slot - self.first) // self.block, 0), self.partitions - 1)

    @property
    def base_time(self) -> float:
        return self.first * self.interval

    @property
    def roles(self) -> dict[str, str]:
        return {g.name: g.role for g in self.spec.groups}


def layouts_from(manifests: list[dict[str, Any]]) -> tuple[dict[str, RunLayout], list[str]]:
    """Each run's layout (one partition), and the problems that make the inputs
    unmergeable. A manifest's `_path` names its directory; `_end` is the epoch second the
    node last wrote its intervals, where the manifest gives no end."""
    problems = []
    runs: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for m in manifests:
        source = m.get("_path", "?")
        if m.get("schema") not in READABLE:
            problems.append(f"{source}: schema version {m.get('schema')!r}; this merge reads "
                            + ", ".join(map(str, READABLE)))
            continue
        run, node = m["run_id"], m["node"]
        if (run, node) in seen:
            problems.append(f"{source}: node {node!r} of run {run} is given twice")
            continue
        seen.add((run, node))
        nodes = runs.setdefault(run, [])
        if nodes and nodes[0]["options"]["interval"] != m["options"]["interval"]:
            problems.append(f"{source}: statistics interval {m['options']['interval']} s, "
                            f"other nodes of run {run} use {nodes[0]['options']['interval']} s")
            continue
        nodes.append(m)
    layouts = {}
    for run, nodes in runs.items():
        interval = nodes[0]["options"]["interval"]
        starts = [m["start"] for m in nodes if m.get("start")]
        if not starts:
            continue  # no node began measuring: nothing to merge
        ends = [m.get("end") or m.get("_end") or m["start"] for m in nodes if m.get("start")]
        first = slot_of(min(starts), interval)
        layouts[run] = RunLayout(run, nodes[0].get("name", run), run_from_manifest(nodes[0]),
                                 interval, nodes, first,
                                 max(slot_of(max(ends), interval), first))
    return layouts, problems


# -- the map side: one node's lines ---------------------------------------------------------
def read_lines(lines: Iterable[str], source: str, layout: RunLayout
               ) -> Iterator[tuple[int, Any]]:
    """(slot, text) for the shuffle from one node's lines: the run's records by their slot,
    as their lines, consecutive lines of one slot joined (a node writes an interval's
    records together: the shuffle moves a few large items instead of many small ones, and
    a line parses again in a few microseconds); a record this release cannot read keyed
    PROBLEM as ("problem", source, line, what); the run's reconciliation records keyed END;
    after the last line, keyed END, how many lines did not parse ("skipped", {kind: n})."""
    truncated = 0
    interval = layout.interval
    run: list[str] = []
    current = PROBLEM
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            truncated += 1
            continue
        wrong = problem(record)
        if wrong is not None:
            yield PROBLEM, ("problem", source, line, wrong)
            continue
        kind = record.get("type")
        if kind not in REQUIRED or kind == "event" or record["run"] != layout.run:
            continue
        slot = END if kind in ("reconciliation", "union") else \
            slot_of(record["start"], interval)
        if slot != current and run:
            yield current, "\n".join(run)
            run = []
        current = slot
        run.append(line)
    if run:
        yield current, "\n".join(run)
    yield END, ("skipped", {"truncated_lines": truncated})


def figures_of(histogram: HdrHistogram) -> dict[str, Any]:
    """A whole run's count and percentiles of one node's tag."""
    return {"count": histogram.get_total_count(), **percentiles(histogram)}


def node_figures(figures: Iterable[tuple[tuple[str, str], dict[str, Any]]]
                 ) -> dict[str, dict[str, Any]]:
    """((node, tag), figures) as {node: {tag: figures}}, those with a count only."""
    out: dict[str, dict[str, Any]] = {}
    for (node, tag), values in sorted(figures):
        if values["count"]:
            out.setdefault(node, {})[tag] = values
    return out


# -- the reduce side: a range of slots, in order ----------------------------------------------
@dataclass
class Bucket:
    """What the report draws of a bucket of consecutive slots."""

    t: float  # seconds from the run's first slot
    seconds: float = 0.0
    received: int = 0
    node_received: dict[str, int] = field(default_factory=dict)
    node_seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # per node, the busiest process
    broker_cpu: float | None = None
    histograms: dict[str, HdrHistogram] = field(default_factory=dict)  # per tag, added
    latency: dict[str, list[int | None]] = field(default_factory=dict)  # per tag, LATENCY

    def point(self) -> dict[str, Any]:
        for tag, histogram in self.histograms.items():
            p = percentiles(histogram)
            self.latency[tag] = [p[k] for k in LATENCY]
        return {"t": self.t, "received": rate(self.received, self.seconds),
                "nodes": {n: rate(c, self.node_seconds[n]) for n, c in
                          self.node_received.items()},
                "cpu": self.cpu, "broker_cpu": self.broker_cpu, "latency": self.latency}


@dataclass
class Partial:
    """What a partition of slots leaves once merged: its statistics (running sums), the
    report's points of its buckets, each node's measured span within it."""

    stats: RunStats
    points: list[dict[str, Any]]
    spans: dict[str, list[float]]  # node -> [begin, end] epoch s of its measured intervals

    def absorb(self, other: Partial) -> None:
        self.stats.absorb(other.stats)
        self.points += other.points
        for node, (begin, end) in other.spans.items():
            low, high = self.spans.get(node, [begin, end])
            self.spans[node] = [min(low, begin), max(high, end)]


class SlotMerger:
    """Merges a run's slots, given in order, each with every node's records of it."""

    def __init__(self, layout: RunLayout) -> None:
        self.layout = layout
        self.groups = {g.name: i for i, g in enumerate(layout.spec.groups)}
        self.consumers = {i for i, g in enumerate(layout.spec.groups) if ROLES[g.role].consumes}
        self.stats = RunStats(layout.spec, {i: metrics_for(g) for i, g in
                                            enumerate(layout.spec.groups)})
        self.points: list[dict[str, Any]] = []
        self.spans: dict[str, list[float]] = {}
        self.bucket: Bucket | None = None
        self.bucket_index = -1
        # Each node's histograms after the warm-up, per tag, added up as they come.
        self.tallies: dict[tuple[str, str], Tally] = {}
        self.corrupt = 0  # histograms that did not decode, left out

    def slot(self, slot: int, records: list[dict[str, Any]], lines: list[str] | None = None
             ) -> tuple[list[tuple[Any, ...]], str, str]:
        """One slot merged: its rows (ROW_COLUMNS, one per tag with data), its .hlog lines
        and, given the records' lines, the merged run's records of it (intervals.jsonl
        lines, every node's, renumbered on the run's grid)."""
        layout = self.layout
        index = slot - layout.first
        out = []
        kept = []
        for n, record in enumerate(records):
            kind = record["type"]
            if kind == "histogram" and not self._decoded(record):
                continue
            if lines is not None and kind not in ("host", "broker"):
                out.append(_renumbered(record, lines[n], index))
            record["interval"] = index
            kept.append(record)
        interval = interval_of(kept, self.groups)
        if interval is None:
            return [], "", ""
        view = self.stats.merge(index, interval.start - layout.base_time,
                                list(interval.reports.values()), interval.broker_cpu,
                                interval.machine_cpu, interval.broker_memory)
        if lines is not None:
            broker = None if interval.broker_cpu is None else (None, interval.broker_cpu)
            out += map(_compact, closing_records(layout.run, "merged", index,
                                                 slot * layout.interval, view.phase,
                                                 interval.machine_cpu, broker,
                                                 interval.broker_memory))
        rows, hlog, latency = self._rows(slot, view)
        self._measured(interval)
        self._draw(slot, view, interval, latency)
        return rows, "".join(hlog).rstrip("\n"), "\n".join(out)

    def _decoded(self, record: dict[str, Any]) -> bool:
        """Decode a histogram record's counts once for every sum it goes to (the slot's,
        the node's); False if it does not decode."""
        try:
            counts = Counts.decode(record["hist"])
        except Exception:  # any way a corrupt text fails to decode
            self.corrupt += 1
            return False
        record["_counts"] = counts
        if record["phase"] != "warmup":
            key = (record["node"], record["tag"])
            tally = self.tallies.get(key)
            if tally is None:
                tally = self.tallies[key] = Tally()
            tally.add(counts)
        return True

    def _rows(self, slot: int, view: IntervalView
              ) -> tuple[list[tuple[Any, ...]], list[str], dict[str, list[int | None]]]:
        layout = self.layout
        start = slot * layout.interval
        rows, hlog, latency = [], [], {}
        for name, group in view.groups.items():
            for metric, histogram in group.histograms.items():
                count = histogram.get_total_count()
                if not count:
                    continue
                p = percentiles(histogram)
                text = group.text(metric)
                tag = f"{name}.{metric}"
                latency[tag] = [p[k] for k in LATENCY]
                rows.append((layout.run, start, start - layout.base_time, view.phase, tag,
                             name, metric, count, rate(count, view.length),
                             *(p[k] for k in LATENCY), text))
                hlog.append(hlog_line(layout.base_time, tag, start, view.length,
                                      histogram.get_max_value(), text, view.phase))
        return rows, hlog, latency

    def _measured(self, interval: Interval) -> None:
        for report in interval.reports.values():
            if report.phase == "measure":
                begin = report.start_ns / 1e9
                end = begin + report.length_s
                low, high = self.spans.get(report.node, [begin, end])
                self.spans[report.node] = [min(low, begin), max(high, end)]

    def _draw(self, slot: int, view: IntervalView, interval: Interval,
              latency: dict[str, list[int | None]]) -> None:
        """The slot into its bucket of the report's series (latency: its percentiles per
        tag, which are the bucket's where a bucket is one slot)."""
        layout = self.layout
        number = max(slot - layout.first, 0) // layout.bucket
        if number != self.bucket_index:
            self._close_bucket()
            self.bucket_index = number
            self.bucket = Bucket(number * layout.bucket * layout.interval)
        bucket = self.bucket
        assert bucket is not None
        bucket.seconds += view.length
        for report in interval.reports.values():
            node = report.node
            received = sum(part.counters["received"] for g, part in report.groups.items()
                           if g in self.consumers)
            bucket.received += received
            bucket.node_received[node] = bucket.node_received.get(node, 0) + received
            bucket.cpu[node] = max(bucket.cpu.get(node, 0.0), report.cpu)
        for node in {r.node for r in interval.reports.values()}:
            bucket.node_seconds[node] = bucket.node_seconds.get(node, 0.0) + view.length
        if interval.broker_cpu is not None:
            bucket.broker_cpu = max(bucket.broker_cpu or 0.0, interval.broker_cpu)
        if layout.bucket == 1:
            bucket.latency = latency
            return
        for name, group in view.groups.items():
            for metric, histogram in group.histograms.items():
                if histogram.get_total_count():
                    tag = f"{name}.{metric}"
                    target = bucket.histograms.get(tag)
                    if target is None:
                        target = bucket.histograms[tag] = new_histogram()
                    target.add(histogram)

    def _close_bucket(self) -> None:
        if self.bucket is not None:
            self.points.append(self.bucket.point())
            self.bucket = None

    def finish(self) -> Partial:
        self._close_bucket()
        return Partial(self.stats, self.points, self.spans)

    def node_sums(self) -> dict[tuple[str, str], HdrHistogram]:
        """Each node's whole run after the warm-up, per tag, of the slots merged here."""
        return {key: tally.histogram() for key, tally in self.tallies.items()}


def _renumbered(record: dict[str, Any], line: str, index: int) -> str:
    """A record's line with its interval number on the merged run's grid: the line itself
    with the number replaced where it is of the current schema (no encoding again)."""
    if record["v"] == SCHEMA_VERSION:
        was = f'"interval":{record["interval"]},'
        at = line.find(was)
        if at >= 0:
            return f'{line[:at]}"interval":{index},{line[at + len(was):]}'.rstrip("\n")
    return _compact({**{k: v for k, v in record.items() if not k.startswith("_")},
                     "v": SCHEMA_VERSION, "interval": index})


def _compact(record: dict[str, Any]) -> str:
    return orjson.dumps(record).decode()


def merge_slots(items: Iterable[tuple[int, Any]], layout: RunLayout
                ) -> Iterator[tuple[Any, ...]]:
    """A partition of the shuffle, sorted by slot, merged: ("slot", slot, rows, hlog text,
    intervals.jsonl text) for each slot, then what the driver gathers: ("partial",
    Partial), ("node_sum", (node, tag), text) of each node's tags, ("skipped", counts), and
    from the last partition ("reconcile", records); a record this release cannot read is
    ("problem", source, line, what) and nothing else of its partition is merged."""
    merger = SlotMerger(layout)
    current: int | None = None
    lines: list[str] = []
    reconcile: list[dict[str, Any]] = []
    last = False  # the partition that gets what belongs to no slot
    truncated = 0
    for slot, value in items:
        if slot == PROBLEM:
            yield value
            return
        if slot != current and lines:
            assert current is not None
            yield ("slot", current, *_merged(merger, current, lines))
            lines = []
        current = slot
        if slot < END:
            lines += value.split("\n")
            continue
        last = True
        if isinstance(value, str):
            reconcile += [upgrade(orjson.loads(line)) for line in value.split("\n")]
        else:
            truncated += value[1]["truncated_lines"]
    if lines:
        assert current is not None
        yield ("slot", current, *_merged(merger, current, lines))
    yield ("partial", merger.finish())
    for key, histogram in merger.node_sums().items():
        yield ("node_sum", key, encode(histogram))
    yield ("skipped", {"truncated_lines": truncated, "corrupt_histograms": merger.corrupt})
    if last:
        yield ("reconcile", reconcile)


def _merged(merger: SlotMerger, slot: int, lines: list[str]
            ) -> tuple[list[tuple[Any, ...]], str, str]:
    return merger.slot(slot, [upgrade(orjson.loads(line)) for line in lines], lines)
