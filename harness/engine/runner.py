"""The controller: lays a run out into cells (processes), starts them on a common clock,
merges their interval reports, writes the run directory, and stops everything gracefully.

Stop sequence: producers stop (run length reached, every producer done with -mg, or the first
Ctrl-C / SIGTERM); consumers drain until idle or until --drain seconds pass; the last partial
interval is written and the summary printed. A second Ctrl-C stops at once: what was written
stays complete and parseable.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from harness.clock import epoch_ns
from harness.engine import open_files
from harness.engine.cell import CellPlan
from harness.engine.processes import ChildCell, LocalCell
from harness.errors import StartFailure
from harness.modules.interface.roles import ROLES
from harness.plan.group import metrics_for
from harness.plan.run import RunSpec
from harness.plan.topology import endpoints, exclusive_consumers
from harness.rundir.sinks import RUN_DIR_SINKS, Closed, Shown, Sink, Where
from harness.rundir.writer import (
    host_facts,
    make_run_dir,
    scrub,
    write_json_atomic,
)
from harness.stats.histogram import decode, new_histogram, percentiles
from harness.stats.intervals import RunStats
from harness.stats.records import SCHEMA_VERSION, end_records, event_record, report_records
from harness.stats.reports import (
    BalanceReport,
    DoneReport,
    IntervalReport,
    LogReport,
    Report,
    StatusReport,
    StreamEnd,
)
from harness.stats.slo import judged_exit
from harness.stats.timeline import Timeline
from harness.stats.views import IntervalView

START_MARGIN_S = 0.3
# A stop decided during the run (an interrupt, the last producer done) is announced this far
# ahead, so that every process cuts its intervals at the same instant.
STOP_MARGIN_S = 0.05
# The longest the controller waits for a report before it looks at the clock and at what was
# asked of it (an interrupt, a live change): in a one-process run its looks are the
# measuring process's CPU (contrib/bench/RESULTS.md, "Idle looks").
LOOK_S = 0.25


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    exit_code: int
    stopped_by: str


def floor_summary(floors: dict[int, str]) -> dict[str, Any]:
    """The harness's floor (harness.engine.floor) over all processes, and per process."""
    merged = new_histogram()
    per_process = {}
    for process, encoded in sorted(floors.items()):
        histogram = decode(encoded)
        per_process[str(process)] = percentiles(histogram)
        if histogram.get_total_count():
            merged.add(histogram)
    return {"what": "paced wake-up and thread hand-off latency in each measuring process "
                    "under the run's load, us: latencies below this are the harness's own",
            "samples": merged.get_total_count(), **percentiles(merged),
            "processes": per_process}


def plan_cells(run: RunSpec, run_id: str) -> list[CellPlan]:
    """Which groups run in which process.

    Loopback groups share the embedded broker, so they run together, P copies for
    --processes P. Every other group runs in processes of its own, so that unthrottled
    producers never steal the interpreter lock from the threads timestamping receipts.
    """
    plans: list[CellPlan] = []
    embedded = [i for i, g in enumerate(run.groups) if g.embedded]
    if embedded:
        for copy in range(run.groups[embedded[0]].processes):
            plans.append(CellPlan(run, run_id, len(plans), embedded, copy=copy))
    for i, group in enumerate(run.groups):
        if not group.embedded:
            for copy in range(group.processes):
                plans.append(CellPlan(run, run_id, len(plans), [i], copy=copy))
    for plan in plans:
        plan.exclusive = exclusive_consumers(run, plan.group_indexes)
    return plans


@dataclass
class _Progress:
    """The run loop's state: what each process has reported so far."""

    live: set[int]  # processes still running
    pending: dict[int, dict[int, IntervalReport]] = field(default_factory=dict)
    finals: dict[int, int] = field(default_factory=dict)  # process -> its final interval
    producing: dict[int, int] = field(default_factory=dict)  # process -> producing threads
    done: set[int] = field(default_factory=set)
    streams: list[StreamEnd] = field(default_factory=list)
    floors: dict[int, str] = field(default_factory=dict)
    next_index: int = 0  # the next interval to merge and show
    stopped_by: str = "running"
    exit_code: int = 0
    drain_sent: bool = False
    stop_sent: bool = False
    ended: float = 0.0  # epoch s at which the last producer ended (-mg)
    balance: dict[int, BalanceReport] = field(default_factory=dict)  # while draining


class Signals:
    """Ctrl-C and SIGTERM call on_signal: the first asks for a graceful stop, the second for
    an immediate one. Only the main thread may install handlers."""

    def __init__(self, on_signal: Callable[[], None]) -> None:
        self.on_signal = on_signal
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.on_signal()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class LiveControls(ABC):
    """A run the live screen shows and steers, on one machine or on many. The p, + and -
    keys: what a run does with them is its own (_pause, _set_rate), what they say is the
    same."""

    run: RunSpec
    run_id: str
    run_dir: Path
    metrics: dict[int, list[str]]  # each group's histogram metrics
    on_interval: Callable[[IntervalView], None]
    on_log: Callable[[str], None]
    sinks: list[Sink]  # where each interval goes (harness.rundir.sinks)
    rates: list[float]  # each group's rate per thread; 0 = unthrottled
    stop_at: float | None
    start_s: float | None
    paused: bool
    everywhere = ""  # where the change applies, for the message
    broker: psutil.Process | None  # the broker's process, when it runs on this machine

    def _broker_cpu(self) -> float | None:
        if self.broker is None:
            return None
        try:
            return self.broker.cpu_percent(None)
        except psutil.Error:
            return None

    def _broker_rss(self) -> int:
        if self.broker is None:
            return 0
        try:
            return int(self.broker.memory_info().rss)
        except psutil.Error:
            return 0

    @abstractmethod
    def _pause(self, paused: bool) -> None:
        """Pause (or resume) every producer."""

    @abstractmethod
    def _set_rate(self, g: int, factor: float) -> None:
        """Apply group g's new rate per thread, self.rates[g] (factor times the last)."""

    @abstractmethod
    def _threads(self, g: int) -> int:
        """Group g's producing threads in all."""

    @abstractmethod
    def prepare(self) -> None:
        """Everything up to the start: StartFailure if the run cannot start."""

    @abstractmethod
    def measure(self) -> RunResult:
        """The run, from the start to its files; on the thread that shows it or not."""

    @abstractmethod
    def request_stop(self, reason: str = "interrupt") -> None:
        """The first request stops gracefully, the second at once; the reason is what the
        summary's stopped_by says."""

    @abstractmethod
    def add_thread(self, g: int) -> str:
        """The t key: one more thread for group g, or why not."""

    def toggle_pause(self) -> str:
        if self.stop_at is not None or self.start_s is None:
            return "p: the producers are not running"
        self.paused = not self.paused
        self._pause(self.paused)
        return f"producers paused{self.everywhere} (p resumes)" if self.paused else \
            f"producers resumed{self.everywhere}; schedules restart from now"

    def change_rate(self, g: int, factor: float) -> str:
        group = self.run.groups[g]
        if self.stop_at is not None or self.start_s is None:
            return "+/-: the producers are not running"
        if not ROLES[group.role].produces:
            return f"+/-: {group.name} is a {group.role}; its rate is what arrives"
        if not self.rates[g]:
            return f"+/-: {group.name} runs unthrottled (no -rt or --rate): there is no " \
                   "rate to change"
        self.rates[g] *= factor
        self._set_rate(g, factor)
        return f"{group.name}: rate {self.rates[g]:,.1f}/s per thread{self.everywhere}, " \
               f"{self.rates[g] * self._threads(g):,.1f}/s for the group"


class Controller(LiveControls):
    def __init__(self, run: RunSpec, on_interval: Callable[[IntervalView], None],
                 on_log: Callable[[str], None], isolate: bool = False,
                 run_dir: Path | None = None) -> None:
        """isolate: run even a single cell in a child process, so that whatever else this
        process does (the live screen) never takes the interpreter lock from the workers.
        run_dir: write there (a node of a distributed run) instead of a new directory under
        the run's output."""
        self.run = run
        self.on_interval = on_interval
        self.on_log = on_log
        open_files.check(run)  # before the run directory: a refused run leaves none
        self.run_id = run.run_id or uuid.uuid4().hex[:12]
        self.started = time.time()
        if run_dir is None:
            self.run_dir = make_run_dir(run.output, run.name, self.started)
        else:
            run_dir.mkdir(parents=True, exist_ok=True)
            self.run_dir = run_dir
        # A node of a distributed run starts when the nodes agreed (epoch ns of this
        # machine's clock), records its clock's offset from the driver, and hands each
        # interval's reports on as its processes give them.
        self.start_at_ns: int | None = None
        self.clock: dict[str, Any] = {"source": "monotonic_ns + epoch offset taken at start",
                                      "reference_node": run.node, "offset_estimate_s": 0.0}
        # Where each interval goes: the run directory's files (from the start, _begin), the
        # interval lines or the live screen (on_interval, which the screen may set later), and
        # what a command adds (a node's stream to its driver).
        self.sinks: list[Sink] = [Shown(lambda view: self.on_interval(view))]
        self.plans = plan_cells(run, self.run_id)
        self.reports: queue.Queue[Report] = queue.Queue()
        cell_type = LocalCell if len(self.plans) == 1 and not isolate else ChildCell
        self.cells = [cell_type(plan, self.reports) for plan in self.plans]
        self.stop_requests = 0
        self.stop_reason = "interrupt"
        self.start_s: float | None = None
        self.start_ns = 0
        self.stop_at: float | None = None
        self.paused = False
        self.rates = [g.per_thread_rate for g in run.groups]
        self.added = [0] * len(run.groups)
        self.commands: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self.metrics = {i: metrics_for(g) for i, g in enumerate(run.groups)}
        self.names = [g.name for g in run.groups]
        self.has_producers = any(ROLES[g.role].produces for g in run.groups)
        # The run ends when its producers do only where each has a message count: a paced
        # producer's last send falls up to a gap before the stop, and its span still runs
        # to the stop (at 1 msg/s, ending at the last send overstated the rate by 14%).
        self.ends_by_count = self.has_producers and all(
            g.messages for g in run.groups if ROLES[g.role].produces)
        # The drain may end early only if every consumer's destination is balanced.
        self.checked_points = [p for p in endpoints(run).values() if p.checked]
        checked = {(p.transport, p.kind, p.name) for p in self.checked_points}
        # A node of a distributed run sees only its own share of what a real broker's
        # destination was sent and delivered: it drains for as long as it was told.
        self.balanced_drain = bool(checked) and all(
            g.endpoint in checked and (g.embedded or run.nodes == 1)
            for g in run.groups if ROLES[g.role].consumes)
        self.stats = RunStats(run, self.metrics)
        self.broker = psutil.Process(run.broker_pid) if run.broker_pid else None
        self.broker_rss_start = self._broker_rss()  # before the run's clients connect
        self.manifest: dict[str, Any] = {
            "schema": SCHEMA_VERSION, "run_id": self.run_id, "name": run.name,
            "node": run.node, "host": host_facts(), "options": recorded_options(run),
            "layout": [{"process": p.process_index,
                        "groups": [run.groups[g].name for g in p.group_indexes]}
                       for p in self.plans],
            "created": self.started, "status": "starting",
        }
        write_json_atomic(self.run_dir / "manifest.json", self.manifest)

    # -- helpers
    def _broadcast(self, command: str, *args: Any) -> None:
        for cell in self.cells:
            getattr(cell, command)(*args)

    # -- requests from outside the run loop (signals, the live screen); thread-safe
    def request_stop(self, reason: str = "interrupt") -> None:
        """The first request stops gracefully, the second at once."""
        if self.stop_requests == 0:
            self.stop_reason = reason
        self.stop_requests += 1

    def _pause(self, paused: bool) -> None:
        self.commands.put(("pause", (paused,)))

    def _set_rate(self, g: int, factor: float) -> None:
        self.commands.put(("set_rate", (g, self.rates[g])))

    def _threads(self, g: int) -> int:
        group = self.run.groups[g]
        return group.threads * group.processes + self.added[g]

    def add_thread(self, g: int) -> str:
        group = self.run.groups[g]
        if self.stop_at is not None or self.start_s is None:
            return "t: the run is not in progress"
        if group.clients:
            return f"t: {group.name} runs --clients {group.clients}: start it with more"
        if group.role == "Subscriber":
            return f"t: a subscriber that joins late misses what was published before, so " \
                   f"the delivery check would count loss; start {group.name} with more -nt"
        if any(plan.exclusive.get(g) for plan in self.plans):
            return f"t: {group.name} is the only receiver on {group.destination} and checks " \
                   "each producer's sequence, which a second receiver would break; start it " \
                   "with -nt 2 or more to add receivers live"
        self.commands.put(("add_thread", (g,)))
        self.added[g] += 1
        return f"{group.name}: thread added ({group.threads * group.processes + self.added[g]}" \
               " in all)"

    def _apply_commands(self) -> None:
        while True:
            try:
                name, args = self.commands.get_nowait()
            except queue.Empty:
                return
            if name == "release":
                targets = self.cells
            elif name == "add_thread":
                holders = [c for c in self.cells if args[0] in c.plan.group_indexes]
                targets = [holders[(self.added[args[0]] - 1) % len(holders)]]
            else:
                targets = self.cells
            for cell in targets:
                cell.command(name, *args)
            event: dict[str, Any] = {"time": time.time() - (self.start_s or 0), "action": name}
            if name == "pause":
                event["paused"] = args[0]
            elif name == "release":
                event["backlog"] = self.stats.fill.now if self.stats.fill else 0
            else:
                event["group"] = self.run.groups[args[0]].name
                if name == "set_rate":
                    event["rate_per_thread"] = args[1]
            self.events.append(event)
            record = event_record(self.run_id, self.run.node, **event)
            for sink in self.sinks:
                sink.event(record)

    # -- the run
    def execute(self) -> RunResult:
        """prepare() then measure(), with Ctrl-C and SIGTERM asking for the stop."""
        self.prepare()
        with Signals(self.request_stop):
            return self.measure()

    def prepare(self) -> None:
        """Start every cell and connect every worker; raises StartFailure if one cannot."""
        try:
            for cell in self.cells:
                cell.launch()
            for cell in self.cells:
                cell.prepare()
        except StartFailure:
            for cell in self.cells:
                cell.kill()
            self.manifest["status"] = "failed to start"
            write_json_atomic(self.run_dir / "manifest.json", self.manifest)
            raise

    def measure(self) -> RunResult:
        """Run the prepared cells to the end and write the run directory."""
        self._begin()
        progress = _Progress(live={p.process_index for p in self.plans})
        while len(progress.done) < len(self.cells):
            if self.stop_requests >= 2:
                progress.stopped_by, progress.exit_code = "second interrupt", 130
                for cell in self.cells:
                    cell.stop()
                    cell.kill()
                break
            self._steer(progress, time.time())
            try:
                report = self.reports.get(timeout=self._next_look(progress, time.time()))
            except queue.Empty:
                continue
            self._receive(report, progress)
        self._emit_complete(progress, flush=True)
        for cell in self.cells:
            cell.join(2.0)
        return self._finish(progress)

    def _begin(self) -> None:
        """Start every cell on a common clock a little in the future."""
        run = self.run
        start_ns = self.start_ns = self.start_at_ns or epoch_ns() + int(START_MARGIN_S * 1e9)
        self.start_s = start_ns / 1e9
        where = Where(self.run_dir, self.run_id, run.node, self.start_s)
        self.sinks[:0] = [make(where) for make in RUN_DIR_SINKS]
        self.manifest.update(status="running", start=self.start_s,
                             warmup_end=self.start_s + run.warmup, clock=self.clock)
        write_json_atomic(self.run_dir / "manifest.json", self.manifest)
        self._broker_cpu()
        psutil.cpu_percent(None)
        for cell in self.cells:
            cell.start(start_ns)

    def _steer(self, progress: _Progress, now: float) -> None:
        """Live changes, and the stop: at the run length, on a request, or once every
        producer has sent its -mg messages; then drain, then stop."""
        run = self.run
        assert self.start_s is not None
        if self.stop_at is None:
            self._apply_commands()
            producing = progress.producing
            ahead = now + STOP_MARGIN_S
            if run.duration and ahead >= self.start_s + run.duration:
                self.stop_at, progress.stopped_by = self.start_s + run.duration, "run length"
            elif self.stop_requests == 1:
                self.stop_at, progress.stopped_by = ahead, self.stop_reason
            elif self.ends_by_count and producing and progress.live <= producing.keys() \
                    and sum(producing.values()) == 0:
                # Producers that end by themselves stopped then, not when it was seen: the
                # interval in progress is cut there, a few tens of ms late.
                self.stop_at, progress.stopped_by = progress.ended or now, "message count"
            if self.stop_at is not None:
                self.manifest["producers_stopped"] = self.stop_at
                # A run length cuts exactly where the processes' own timelines already cut.
                stop_ns = int(Timeline.of(run, self.start_ns).stop or 0) \
                    if progress.stopped_by == "run length" else round(self.stop_at * 1e9)
                self._broadcast("drain", stop_ns)
                progress.drain_sent = True
        # Never before the stop itself, which was announced a little ahead: the measured
        # span runs to the stop, however early everything sent was received.
        if progress.drain_sent and not progress.stop_sent and now >= (self.stop_at or now) \
                and (now >= (self.stop_at or now) + run.drain or self._balanced(progress)):
            self._broadcast("stop")
            progress.stop_sent = True

    def _next_look(self, progress: _Progress, now: float) -> float:
        """Seconds until _steer has something to do at a known time (announce the stop at
        the run length, end the drain), at most LOOK_S."""
        due = now + LOOK_S
        assert self.start_s is not None
        if self.stop_at is None and self.run.duration:
            due = min(due, self.start_s + self.run.duration - STOP_MARGIN_S)
        elif progress.drain_sent and not progress.stop_sent and self.stop_at is not None:
            due = min(due, self.stop_at + self.run.drain)
            if now < self.stop_at:  # the drain may end as soon as the stop has come
                due = min(due, self.stop_at)
        return max(due - now, 0.001)

    def _balanced(self, progress: _Progress) -> bool:
        """Whether every destination whose delivery the run checks has received all that
        was sent there (and there is one): the drain need not wait any longer."""
        # Every process's count, the last one of those that ended.
        if any(p.process_index not in progress.balance for p in self.plans):
            return False
        if not self.balanced_drain:
            return False
        for point in self.checked_points:
            sent = sum(b.sent.get(i, 0) for b in progress.balance.values()
                       for i in point.producers)
            received = sum(b.received.get(i, 0) for b in progress.balance.values()
                           for i in point.consumers)
            if received < sent * point.copies:
                return False
        return True

    def _receive(self, report: Report, progress: _Progress) -> None:
        if isinstance(report, BalanceReport):
            progress.balance[report.process] = report
        elif isinstance(report, StatusReport):
            progress.producing[report.process] = report.producing
            progress.ended = max(progress.ended, report.ended_ns / 1e9)
        elif isinstance(report, LogReport):
            self.on_log(f"process {report.process}: {report.message}")
            self.stats.abandoned.extend(report.abandoned)
            if report.failed:
                progress.exit_code = progress.exit_code or 1
        elif isinstance(report, DoneReport):
            progress.done.add(report.process)
            if report.lost is not None:
                self.on_log(report.lost)
                progress.exit_code = progress.exit_code or 1
            # A process that ended produces no more: a producer's process that finished
            # its -mg before another's must not hold the stop back.
            progress.live.discard(report.process)
            progress.producing[report.process] = 0
            progress.finals.setdefault(report.process, -1)
        else:
            records = report_records(report, self.run_id, self.run.node, self.names,
                                     report.start_ns / 1e9, report.phase)
            for sink in self.sinks:
                sink.report(report, records)
            progress.pending.setdefault(report.index, {})[report.process] = report
            progress.producing[report.process] = report.producing
            if report.final:
                progress.finals[report.process] = report.index
                progress.streams.extend(report.streams)
                if report.floor is not None:
                    progress.floors[report.process] = report.floor
            self._emit_complete(progress)

    def _finish(self, progress: _Progress) -> RunResult:
        """The reconciliation, summary.json and the manifest's last word."""
        run = self.run
        if progress.exit_code == 0:
            records = end_records(self.run_id, run.node, self.stats.reconcile(progress.streams))
            for sink in self.sinks:
                sink.end(records)
        for sink in self.sinks:
            sink.close()
        end = time.time()
        summary = self.stats.summary()
        summary.update(run_id=self.run_id, node=run.node, stopped_by=progress.stopped_by,
                       start=self.start_s, end=end)
        if progress.floors:
            summary["floor"] = self.manifest["floor"] = floor_summary(progress.floors)
        for sink in self.sinks:
            sink.summarize(summary)
        write_json_atomic(self.run_dir / "summary.json", summary)
        self.manifest.update(status="complete" if progress.exit_code == 0 else "incomplete",
                             stopped_by=progress.stopped_by, end=end,
                             intervals=self.stats.intervals)
        if self.events:
            self.manifest["events"] = self.events
        write_json_atomic(self.run_dir / "manifest.json", self.manifest)
        return RunResult(self.run_dir, summary, judged_exit(summary, progress.exit_code),
                         progress.stopped_by)

    def _emit_complete(self, progress: _Progress, flush: bool = False) -> None:
        """Merge and show every interval that all processes have reported, in order."""
        assert self.start_s is not None
        processes = {p.process_index for p in self.plans}
        pending = progress.pending
        while progress.next_index in pending:
            index = progress.next_index
            reports = pending[index]
            expected = {p for p in processes if progress.finals.get(p, 1 << 62) >= index}
            if not flush and not expected <= reports.keys():
                break
            given = list(reports.values())
            start = min(r.start_ns for r in given) / 1e9
            broker_cpu = self._broker_cpu()
            machine_cpu = psutil.cpu_percent(None)
            broker = None if broker_cpu is None or self.run.broker_pid is None else \
                (self.run.broker_pid, broker_cpu)
            memory = None
            if broker is not None:
                memory = {"rss": self._broker_rss()}
                if index == 0 and self.broker_rss_start:
                    memory["rss_start"] = self.broker_rss_start
            view = self.stats.merge(index, start - self.start_s, given, broker_cpu,
                                    machine_cpu, memory)
            if self.stats.released:  # --backlog: the destinations hold what was asked
                self.commands.put(("release", ()))
            closed = Closed(index, start, view, given, machine_cpu, broker, memory)
            del pending[index]
            for sink in self.sinks:
                sink.interval(closed)
            progress.next_index += 1


def recorded_options(run: RunSpec) -> dict[str, Any]:
    """The run's options as its manifest keeps them: secrets scrubbed, and what each group's
    transport says of it (its traits), so that reading the run needs no client library."""
    options = scrub(run.to_dict())
    for recorded, group in zip(options["groups"], run.groups, strict=True):
        recorded["traits"] = group.traits_asked()
    return options
