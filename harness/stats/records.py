"""The records of a run's intervals.jsonl, each defined once: a typed dict per record type
(the fields every writer fills and every reader may rely on; NotRequired: written where they
apply), the schema version they are written with, the functions that make them from what
the engine measured, and the one that reads them back into that shape. The writer, the
reader, the merge and the delivery check all go through here (harness.rundir.schema keeps
which versions this release reads)."""

# No `from __future__ import annotations` here: Python 3.11's TypedDict sees NotRequired only
# in evaluated annotations.
from collections.abc import Iterable
from typing import Any, Literal, NotRequired, TypedDict

from harness.stats.recorder import COUNTERS
from harness.stats.reports import GroupPart, IntervalReport

SCHEMA_VERSION = 5


class _Record(TypedDict):
    v: int  # SCHEMA_VERSION when written
    run: str
    node: str


class _Interval(_Record):
    """What every record of one process's interval begins with."""

    process: int
    interval: int
    start: float  # epoch s
    length: float  # s
    phase: NotRequired[str]  # warmup, measure or drain; read as measure where absent


class ProcessRecord(_Interval):
    type: Literal["process"]
    cpu: float  # % of one core
    pid: NotRequired[int]
    rss: NotRequired[int]  # resident memory, bytes
    rss_start: NotRequired[int]  # in the first interval: before the process made its clients


class CountersRecord(_Interval):
    """Every counter of harness.stats.recorder.COUNTERS besides these fields."""

    type: Literal["counters"]
    group: str
    threads: NotRequired[int]
    threads_up: NotRequired[int]
    clamped: NotRequired[int]
    # Where the transport reports them (Kafka): per partition, "topic[n]" -> [msg/s, lag]
    # (harness.stats.reports.GroupPart.partitions); lag -1 where unknown.
    partitions: NotRequired[dict[str, list[float]]]
    # With --clients: the group's clients in the process, and those connected.
    clients: NotRequired[int]
    clients_up: NotRequired[int]


class HistogramRecord(_Interval):
    type: Literal["histogram"]
    group: str
    tag: str  # <group>.<metric>
    hist: str  # HdrHistogram's compressed base64
    count: NotRequired[int]
    max: NotRequired[int]


class _Slot(_Record):
    """The records that close an interval of a node (written once every process gave it)."""

    interval: int
    start: float
    phase: NotRequired[str]


class HostRecord(_Slot):
    """Read as the interval complete (harness.rundir.reader.Intervals)."""

    type: Literal["host"]
    cpu: float | None  # % of all the machine's cores


class BrokerRecord(_Slot):
    type: Literal["broker"]
    cpu: float | None  # % of one core
    pid: NotRequired[int]
    rss: NotRequired[int]  # resident memory, bytes
    rss_start: NotRequired[int]  # in the first interval: before the run's clients connected


class EventRecord(_Record):
    """A live change (rate, threads, pause): its detail in further fields."""

    type: Literal["event"]
    time: float  # s from the run's start
    action: str


class ReconciliationRecord(_Record):
    """The delivery check's end, per consumer group."""

    type: Literal["reconciliation"]
    group: str
    lost_at_tail: NotRequired[int]
    failed_sends: NotRequired[int]
    in_doubt: NotRequired[int]
    # Of the producers' numbers in doubt, and of those counted failed, how many its
    # consumers received (absent in runs written before the check by sequence)
    in_doubt_arrived: NotRequired[int]
    failed_arrived: NotRequired[int]


class UnionRecord(_Record):
    """What the competing receivers of one destination received, once each."""

    type: Literal["union"]
    destination: str
    received_once: int
    seen: NotRequired[dict[str, str]]  # producer -> packed bits
    # producer -> [messages, numbers failed, numbers in doubt]: this node's sends there
    sends: NotRequired[dict[str, list[Any]]]


RECORDS: dict[str, type] = {
    "process": ProcessRecord, "counters": CountersRecord, "histogram": HistogramRecord,
    "host": HostRecord, "broker": BrokerRecord, "event": EventRecord,
    "reconciliation": ReconciliationRecord, "union": UnionRecord,
}


def required(kind: str) -> tuple[str, ...]:
    """The fields a record of this type always has, in the order they are declared."""
    record = RECORDS[kind]
    return tuple(name for name in record.__annotations__
                 if name in record.__required_keys__ and name != "type")


def report_records(report: IntervalReport, run: str, node: str, groups: list[str],
                   start: float, phase: str) -> list[dict[str, Any]]:
    """One process's report of an interval as its process, counters and histogram records
    (groups: each group's name by index)."""
    base = {"v": SCHEMA_VERSION, "run": run, "node": node, "process": report.process,
            "interval": report.index, "start": start, "length": report.length_s,
            "phase": phase}
    if report.step >= 0:
        base["step"] = report.step
    records: list[dict[str, Any]] = [{"type": "process", **base, "pid": report.pid,
                                      "cpu": report.cpu}]
    if report.rss:
        records[0]["rss"] = report.rss
    if report.rss_start:
        records[0]["rss_start"] = report.rss_start
    for g, part in report.groups.items():
        name = groups[g]
        counters = {"type": "counters", **base, "group": name, **part.counters,
                    "threads": part.threads, "threads_up": part.threads_up,
                    "clamped": part.clamped}
        if part.clients:
            counters["clients"], counters["clients_up"] = part.clients, part.clients_up
        if part.partitions:
            counters["partitions"] = {key: [round(rate, 1), lag]
                                      for key, (rate, lag) in part.partitions.items()}
        records.append(counters)
        for metric, encoded in part.histograms.items():
            histogram = part.histogram(metric)
            count = histogram.get_total_count()
            records.append({"type": "histogram", **base, "group": name,
                            "tag": f"{name}.{metric}", "count": count,
                            "max": histogram.get_max_value() if count else 0,
                            "hist": encoded})
    return records


def closing_records(run: str, node: str, index: int, start: float, phase: str,
                    machine_cpu: float | None, broker: tuple[int | None, float] | None,
                    broker_memory: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """The records that close an interval: the host's CPU, which a reader takes as the
    interval complete, and right after it the broker's (pid, CPU, and its memory: rss and
    in the first interval rss_start) where measured."""
    common = {"v": SCHEMA_VERSION, "run": run, "node": node, "interval": index,
              "start": start, "phase": phase}
    records: list[dict[str, Any]] = [{"type": "host", **common, "cpu": machine_cpu}]
    if broker is not None:
        pid, cpu = broker
        records.append({"type": "broker", **common, **({} if pid is None else {"pid": pid}),
                        "cpu": cpu, **(broker_memory or {})})
    return records


def event_record(run: str, node: str, time: float, action: str,
                 **detail: Any) -> dict[str, Any]:
    return {"type": "event", "v": SCHEMA_VERSION, "run": run, "node": node, "time": time,
            "action": action, **detail}


def end_records(run: str, node: str, bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The delivery check's reconciliation and union records, as written."""
    return [{**body, "v": SCHEMA_VERSION, "run": run, "node": node} for body in bodies]


def into_reports(record: dict[str, Any],
                 reports: dict[tuple[str, int, str], IntervalReport],
                 groups: dict[str, int]) -> GroupPart | None:
    """A process, counters or histogram record added back to its interval's reports (one
    per node, process and phase, shaped as a cell's interval report): report_records read
    back. Returns the group's part it went to. groups: group name -> index. The phase is
    part of the key for a merge's slot, which may hold a node's interval cut short at the
    stop and its first interval of the drain."""
    key = (record["node"], record["process"], record["phase"])
    report = reports.get(key)
    if report is None:
        report = reports[key] = IntervalReport(
            record["process"], 0, record["interval"], round(record["start"] * 1e9),
            record["length"], False, 0.0, record["phase"], record["node"],
            step=record.get("step", -1))
    if record["type"] == "process":
        report.cpu = record["cpu"]
        report.rss, report.rss_start = record.get("rss", 0), record.get("rss_start", 0)
        return None
    g = groups[record["group"]]
    part = report.groups.get(g)
    if part is None:
        part = report.groups[g] = GroupPart(dict.fromkeys(COUNTERS, 0), {}, 0, 0, 0, 0)
    if record["type"] == "counters":
        part.threads_up, part.threads = record.get("threads_up", 0), record.get("threads", 0)
        part.counters = {k: record[k] for k in COUNTERS}
        part.clamped = record.get("clamped", 0)
        part.clients, part.clients_up = record.get("clients", 0), record.get("clients_up", 0)
        if "partitions" in record:
            part.partitions = {key: (rate, int(lag))
                               for key, (rate, lag) in record["partitions"].items()}
    else:
        metric = record["tag"][len(record["group"]) + 1:]
        part.histograms[metric] = record["hist"]
        if "_counts" in record:  # decoded already (a merge: harness.stats.counts)
            part.keep(metric, record["_counts"])
    return part
