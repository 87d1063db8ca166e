"""A finished run read back from its directory: the manifest's options rebuild the run, and
intervals.jsonl's records are merged per interval by the same code that merged them live, so
that a replay, a table or a model shows exactly the numbers the run showed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.rundir.writer import SCHEMA_VERSION
from harness.spec.group import GroupSpec
from harness.spec.roles import metrics_for
from harness.spec.run import RunSpec
from harness.stats.intervals import IntervalView, RunStats
from harness.stats.recorder import COUNTERS
from harness.stats.reports import GroupPart, IntervalReport


@dataclass
class RecordedRun:
    run: RunSpec
    metrics: dict[int, list[str]]
    manifest: dict[str, Any]
    views: list[IntervalView]
    events: list[tuple[int, str]] = field(default_factory=list)  # (interval, text)
    skipped: int = 0  # lines that did not parse (a run killed mid-write)
    summary: dict[str, Any] = field(default_factory=dict)  # recomputed from the intervals


def run_from_manifest(manifest: dict[str, Any]) -> RunSpec:
    options = dict(manifest["options"])
    groups = [_group(g) for g in options.pop("groups")]
    known = {f.name for f in fields(RunSpec)}
    return RunSpec(groups=groups, **{k: v for k, v in options.items() if k in known})


_GROUP_FIELDS = {f.name for f in fields(GroupSpec)}


def _group(recorded: dict[str, Any]) -> GroupSpec:
    """A group as a manifest recorded it; runs written before transports kept their own
    options apart hold them among the group's fields."""
    values = {k: v for k, v in recorded.items() if k in _GROUP_FIELDS}
    values["options"] = {**{k: v for k, v in recorded.items() if k not in _GROUP_FIELDS},
                         **(recorded.get("options") or {})}
    return GroupSpec(**values)


def load(run_dir: Path) -> RecordedRun:
    """Read a run directory; BadInput names what is missing or wrong."""
    manifest_path, intervals_path = run_dir / "manifest.json", run_dir / "intervals.jsonl"
    for path in (manifest_path, intervals_path):
        if not path.is_file():
            raise BadInput("RUN_DIR", f"{path} does not exist: not a run directory")
    try:
        manifest = json.loads(manifest_path.read_text())
        run = run_from_manifest(manifest)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput("RUN_DIR", f"{manifest_path} is not a harness manifest ({exc})") \
            from None
    if manifest.get("schema") != SCHEMA_VERSION:
        raise BadInput("RUN_DIR", f"{manifest_path}: schema {manifest.get('schema')!r}, this "
                       f"harness reads {SCHEMA_VERSION}")
    records, skipped = [], 0
    with intervals_path.open() as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except ValueError:
                skipped += 1
    stats, views, raw_events = replay(run, records, manifest.get("start"))
    events = []
    for record in raw_events:
        at = int(record["time"] // run.interval)
        detail = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in record.items()
                           if k not in ("type", "v", "run", "node", "time", "action"))
        events.append((at, f"{record['time']:7.1f}s {record['action']} {detail}".rstrip()))
    return RecordedRun(run, stats.metrics, manifest, views, events, skipped, stats.summary())


def replay(run: RunSpec, records: Iterable[dict[str, Any]], origin: float | None
           ) -> tuple[RunStats, list[IntervalView], list[dict[str, Any]]]:
    """A run's records merged per interval by the same code that merged them live (and that
    merges the nodes of a merged run): the statistics, the interval views and the events."""
    names = {g.name: i for i, g in enumerate(run.groups)}
    metrics = {i: metrics_for(g) for i, g in enumerate(run.groups)}
    # interval -> (node, process) -> report, shaped as a cell's interval report
    intervals: dict[int, dict[tuple[str, int], IntervalReport]] = {}
    starts: dict[int, float] = {}
    broker: dict[int, float] = {}
    machine: dict[int, float] = {}
    reconciliation: list[dict[str, Any]] = []
    raw_events: list[dict[str, Any]] = []
    for record in records:
        kind = record.get("type")
        if kind == "event":
            raw_events.append(record)
            continue
        if kind == "broker":
            broker[record["interval"]] = record["cpu"]
            continue
        if kind == "host":
            machine[record["interval"]] = record["cpu"]
            continue
        if kind in ("reconciliation", "union"):
            reconciliation.append(record)
            continue
        if kind not in ("process", "counters", "histogram"):
            continue
        index = record["interval"]
        report = intervals.setdefault(index, {}).get((record["node"], record["process"]))
        if report is None:
            report = intervals[index][record["node"], record["process"]] = IntervalReport(
                record["process"], 0, index, round(record["start"] * 1e9), record["length"],
                False, 0.0, record["phase"], record["node"])
        starts[index] = min(starts.get(index, record["start"]), record["start"])
        if kind == "process":
            report.cpu = record["cpu"]
            continue
        g = names[record["group"]]
        part = report.groups.setdefault(g, GroupPart({}, {}, 0, 0, 0, 0))
        if kind == "counters":
            part.threads_up, part.threads = record["threads_up"], record["threads"]
            part.counters = {k: record.get(k, 0) for k in COUNTERS}
            part.clamped = record.get("clamped", 0)
        else:
            part.histograms[record["tag"][len(record["group"]) + 1:]] = record["hist"]
    origin = origin or min(starts.values(), default=0.0)
    stats = RunStats(run, metrics)
    views = []
    for index in sorted(intervals):
        reports = list(intervals[index].values())
        views.append(stats.merge(index, starts[index] - origin, reports, broker.get(index),
                                 machine.get(index)))
    stats.add_reconciliation(reconciliation)
    return stats, views, raw_events
