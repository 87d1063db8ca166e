"""A finished run read back from its directory: the manifest's options rebuild the run, and
intervals.jsonl's records are merged per interval by the same code that merged them live, so
that a replay, a table or a model shows exactly the numbers the run showed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from harness.errors import BadInput
from harness.plan.group import GroupSpec, metrics_for
from harness.plan.options import in_scope
from harness.plan.run import RunSpec
from harness.rundir.live import LIVE
from harness.rundir.schema import READABLE, REQUIRED, problem, upgrade
from harness.stats.intervals import RunStats
from harness.stats.records import into_reports
from harness.stats.reports import IntervalReport
from harness.stats.views import IntervalView
from harness.textfiles import read_text


@dataclass
class RecordedRun:
    """A run directory's manifest and the run it describes; its intervals are read as they
    are needed (replay()), never held: a run of any length reads in the same memory."""

    run: RunSpec
    metrics: dict[int, list[str]]
    manifest: dict[str, Any]
    path: Path  # intervals.jsonl

    def replay(self, histograms: bool = True, follow: bool = False) -> Replay:
        """A fresh pass over the run's intervals (Replay.views()); with follow, of a run
        still going, to its end (its summary.json written)."""
        summary = self.path.parent / "summary.json"
        # A distributed run going writes its intervals to live.jsonl (rundir.live), which
        # it removes once its summary is written: then its merged intervals.jsonl is all.
        live = self.path.parent / LIVE
        records: Records
        if follow:
            # Over once live.jsonl is gone: the merge writes its summary.json before the
            # driver's own, which comes last.
            records = Followed(live, lambda: not live.exists(), self.path) \
                if live.is_file() else Followed(self.path, summary.is_file)
        else:
            records = Records(live if live.is_file() and not self.path.is_file() else self.path)
        return Replay(self.run, records, self.manifest.get("start"), histograms)


def run_from_manifest(manifest: dict[str, Any]) -> RunSpec:
    options = dict(manifest["options"])
    groups = [_group(g) for g in options.pop("groups")]
    known = {f.name for f in fields(RunSpec)}
    # Runs written before the transports' run-wide options stood apart (the loopback
    # broker's capacity, delay and faults) hold them among the run's fields.
    theirs = {o.name for o in in_scope("run") if o.transports}
    apart = {k: v for k, v in options.items() if k in theirs}
    values = {k: v for k, v in options.items() if k in known}
    if apart:
        values["options"] = {**apart, **(values.get("options") or {})}
    return RunSpec(groups=groups, **values)


_GROUP_FIELDS = {f.name for f in fields(GroupSpec)}


def _group(recorded: dict[str, Any]) -> GroupSpec:
    """A group as a manifest recorded it; runs written before transports kept their own
    options apart hold them among the group's fields."""
    values = {k: v for k, v in recorded.items() if k in _GROUP_FIELDS}
    values["options"] = {**{k: v for k, v in recorded.items() if k not in _GROUP_FIELDS},
                         **(recorded.get("options") or {})}
    return GroupSpec(**values)


def load(run_dir: Path) -> RecordedRun:
    """Read a run directory's manifest; BadInput names what is missing or wrong."""
    manifest_path, intervals_path = run_dir / "manifest.json", run_dir / "intervals.jsonl"
    for path in (manifest_path, intervals_path):
        if not path.is_file() and not (path == intervals_path and (run_dir / LIVE).is_file()):
            raise BadInput("RUN_DIR", f"{path} does not exist: not a run directory")
    try:
        manifest = json.loads(read_text(manifest_path, "RUN_DIR"))
        run = run_from_manifest(manifest)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput("RUN_DIR", f"{manifest_path} is not a harness manifest ({exc})") \
            from None
    if manifest.get("schema") not in READABLE:
        raise BadInput("RUN_DIR", f"{manifest_path}: schema {manifest.get('schema')!r}, this "
                       f"release reads {', '.join(map(str, READABLE))}")
    return RecordedRun(run, {i: metrics_for(g) for i, g in enumerate(run.groups)}, manifest,
                       intervals_path)


class Records:
    """The records of an intervals.jsonl, read line by line, each brought up to the current
    schema. A line that does not parse (a run killed mid-write) is counted and left out; a
    record this release cannot read is BadInput naming the file, the line and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped = 0

    def lines(self, f: BinaryIO) -> Iterator[bytes]:
        yield from f

    def open(self) -> BinaryIO:
        return self.path.open("rb")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self.open() as f:
            for number, line in enumerate(self.lines(f), 1):
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.skipped += 1
                    continue
                wrong = problem(record)
                if wrong is not None:
                    raise BadInput("RUN_DIR", f"{self.path}, line {number}: {wrong}")
                if record.get("type") in REQUIRED:
                    yield upgrade(record)


class Followed(Records):
    """The records of a run still going (`harness view --follow`): at the end of the file,
    wait for more until `ended()` says the run is over, then read what is left. A line is
    taken once its newline is written, so a write caught halfway is never mistaken for a
    torn one."""

    POLL_S = 0.2

    def __init__(self, path: Path, ended: Callable[[], bool], instead: Path | None = None
                 ) -> None:
        super().__init__(path)
        self.ended = ended
        self.instead = instead  # read if path is gone before it is opened

    def open(self) -> BinaryIO:
        try:
            return super().open()
        except FileNotFoundError:
            if self.instead is None:
                raise
            self.path = self.instead
            return super().open()

    def lines(self, f: BinaryIO) -> Iterator[bytes]:
        held, over = b"", False
        while True:
            line = f.readline()
            if line.endswith(b"\n"):
                yield held + line
                held = b""
            elif line:
                held += line
            elif over:  # read to the end after the run was over: all there is
                if held:
                    yield held
                return
            else:
                over = self.ended()  # asked before the last reads: nothing written is missed
                if not over:
                    time.sleep(self.POLL_S)


def event_text(record: dict[str, Any]) -> str:
    """An event (a live change of rate, threads or pause) as the log shows it."""
    detail = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in record.items()
                       if k not in ("type", "v", "run", "node", "time", "action"))
    return f"{record['time']:7.1f}s {record['action']} {detail}".rstrip()


@dataclass
class Interval:
    """One interval's reports, as a cell's interval reports: one per node and process."""

    reports: dict[tuple[str, int, str], IntervalReport]
    start: float  # epoch s: the earliest report's
    broker_cpu: float | None
    machine_cpu: float | None
    broker_memory: dict[str, int] | None = None  # the broker record's rss and rss_start


def interval_of(records: Iterable[dict[str, Any]], groups: dict[str, int]) -> Interval | None:
    """An interval's records as its reports; None if no process reported in it. Where
    several nodes give the host's or the broker's CPU, the busiest."""
    reports: dict[tuple[str, int, str], IntervalReport] = {}
    cpu: dict[str, float | None] = {"broker": None, "host": None}
    memory: dict[str, int] = {}
    start = None
    for record in records:
        kind = record["type"]
        if kind in cpu:
            if record["cpu"] is not None:
                cpu[kind] = max(cpu[kind] or 0.0, record["cpu"])
            if kind == "broker":
                memory.update({k: record[k] for k in ("rss", "rss_start") if k in record})
            continue
        into_reports(record, reports, groups)
        start = record["start"] if start is None else min(start, record["start"])
    if start is None:
        return None
    return Interval(reports, start, cpu["broker"], cpu["host"], memory or None)


class Intervals:
    """Records grouped into their intervals, each given once complete, in order.

    An interval is complete once its host record is read: the controller writes it after
    every process's report of that interval (and the broker's record right after it), so
    only the intervals still open are held. A record of an interval already given was not
    merged live either (the controller had moved on): it is counted in `late`, left out.
    Events and the end's reconciliation records are kept aside as they are read."""

    def __init__(self, records: Iterable[dict[str, Any]]) -> None:
        self.records = records
        self.events: list[dict[str, Any]] = []
        self.reconciliation: list[dict[str, Any]] = []
        self.late = 0

    def __iter__(self) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        opened: dict[int, list[dict[str, Any]]] = {}
        done = -1  # every interval up to this one is given
        closing = -1  # a host record was read up to this one: given at the next record
        for record in self.records:
            kind = record["type"]
            if closing > done and not (kind == "broker" and record["interval"] <= closing):
                for index in sorted(i for i in opened if i <= closing):
                    yield index, opened.pop(index)
                done = closing
            if kind == "event":
                self.events.append(record)
            elif kind in ("reconciliation", "union"):
                self.reconciliation.append(record)
            elif record["interval"] <= done:
                self.late += 1
            else:
                opened.setdefault(record["interval"], []).append(record)
                if kind == "host":
                    closing = max(closing, record["interval"])
        for index in sorted(opened):
            yield index, opened.pop(index)


class Replay:
    """A run's records merged interval by interval as they are read (harness.rundir.reader.
    Intervals), by the same code that merged them live (and that merges the nodes of a
    merged run). histograms=False reads counters only (the trends of a profile's results)."""

    def __init__(self, run: RunSpec, records: Iterable[dict[str, Any]],
                 origin: float | None, histograms: bool = True) -> None:
        self.run = run
        self.records = records
        self.origin = origin
        self.stats = RunStats(run, {i: metrics_for(g) for i, g in enumerate(run.groups)})
        self.names = {g.name: i for i, g in enumerate(run.groups)}
        self.intervals = Intervals(records if histograms else
                                   (r for r in records if r["type"] != "histogram"))

    @property
    def skipped(self) -> int:
        return getattr(self.records, "skipped", 0)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.intervals.events

    def views(self) -> Iterator[IntervalView]:
        """Every interval's merged view in order; the statistics are complete once this
        ends."""
        for index, records in self.intervals:
            interval = interval_of(records, self.names)
            if interval is None:
                continue
            if self.origin is None:
                self.origin = interval.start
            yield self.stats.merge(index, interval.start - self.origin,
                                   list(interval.reports.values()), interval.broker_cpu,
                                   interval.machine_cpu, interval.broker_memory)
        self.stats.add_reconciliation(self.intervals.reconciliation)
