"""Where a run's intervals go. The controller hands every sink, in this order: each
process's report of an interval as it comes (with its records, harness.stats.records), each
interval once every process gave it, merged (Closed), the live changes (events), the
delivery check's end records, and then closes it. A sink overrides what it uses.

The run directory's files are a sink (RunFiles); so are the interval lines and the
live screen (given to the controller as its on_interval), and a node's stream to the driver
of a distributed run. A new output is a Sink subclass in a file of its own and one line:
its class in RUN_DIR_SINKS where it writes into the run directory, or appended to a
controller's `sinks` by the command that wants it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.rundir.writer import RunWriter
from harness.stats.reports import IntervalReport
from harness.stats.views import IntervalView


@dataclass
class Closed:
    """An interval every process has reported, merged."""

    index: int
    start: float  # epoch s: its earliest report's
    view: IntervalView
    reports: list[IntervalReport]
    machine_cpu: float | None  # % of all the machine's cores
    broker: tuple[int, float] | None  # the broker's pid and CPU, where measured
    broker_memory: dict[str, int] | None = None  # its rss (and rss_start), where measured


@dataclass(frozen=True)
class Where:
    """What a run-directory sink is made with."""

    run_dir: Path
    run_id: str
    node: str
    base_time: float  # epoch s: the run's start


class Sink:
    def report(self, report: IntervalReport, records: list[dict[str, Any]]) -> None:
        """One process's report of an interval, as it comes, and its records."""

    def interval(self, closed: Closed) -> None:
        """An interval every process has reported, merged, in order."""

    def event(self, record: dict[str, Any]) -> None:
        """A live change: rate, threads, pause."""

    def end(self, records: list[dict[str, Any]]) -> None:
        """The delivery check's reconciliation and union records."""

    def close(self) -> None:
        """The run is over: nothing more comes."""

    def summarize(self, summary: dict[str, Any]) -> None:
        """The run's summary, before summary.json is written: a sink may add its part."""


class RunFiles(Sink):
    """intervals.jsonl and <node>.hlog (harness.rundir.writer): every record as it comes,
    and each interval's histograms, every process's merged, one per tag, as HdrHistogram's
    log tools expect."""

    def __init__(self, where: Where) -> None:
        self.writer = RunWriter(where.run_dir, where.run_id, where.node, where.base_time)

    def report(self, report: IntervalReport, records: list[dict[str, Any]]) -> None:
        self.writer.write_interval(records, [])

    def interval(self, closed: Closed) -> None:
        view = closed.view
        hlog = [(f"{name}.{metric}", closed.start, view.length, histogram.get_max_value(),
                 group.text(metric))
                for name, group in view.groups.items()
                for metric, histogram in group.histograms.items()]
        self.writer.close_interval(closed.index, closed.start, view.phase, closed.machine_cpu,
                                   closed.broker, hlog, closed.broker_memory)

    def event(self, record: dict[str, Any]) -> None:
        self.writer.write_interval([record], [])

    def end(self, records: list[dict[str, Any]]) -> None:
        self.writer.write_interval(records, [])

    def close(self) -> None:
        self.writer.close()


class Shown(Sink):
    """Each merged interval to a callback: the interval lines, the live screen."""

    def __init__(self, show: Callable[[IntervalView], None]) -> None:
        self.show = show

    def interval(self, closed: Closed) -> None:
        self.show(closed.view)


RUN_DIR_SINKS: tuple[Callable[[Where], Sink], ...] = (RunFiles,)
