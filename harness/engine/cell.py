"""A cell: the worker groups that run inside one process, and the thread that folds their
measurements into one set of histograms per interval.

The controller (harness.engine.runner) runs a single cell in its own process, or several cells in
child processes (harness.engine.processes); either way a cell reports through one callback, with
plain dicts that pickle.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hdrh.histogram import HdrHistogram

from harness.clock import EPOCH_OFFSET_NS, now_ns, to_monotonic
from harness.engine.allocator import keep_freed_memory
from harness.engine.clients import Clients
from harness.engine.floor import FloorProbe
from harness.engine.handlers import HANDLERS
from harness.engine.roles import WORKERS
from harness.engine.worker import Control, Handoff, Worker, WorkerSetup
from harness.errors import StartFailure
from harness.modules import transport_class
from harness.modules.interface.base import Transport
from harness.modules.interface.optional import EmbeddedBroker, PushedDelivery
from harness.plan.group import GroupSpec, metrics_for
from harness.plan.payloads import pool, read_payloads
from harness.plan.run import RunSpec, run_steps
from harness.plan.sizes import parse_sizes
from harness.plan.steps import step_at, step_bounds
from harness.plan.topology import endpoints, is_consumer, is_producer
from harness.stats.figures import cpu_shares, role_count
from harness.stats.histogram import empty, encode, fold_many, new_histogram
from harness.stats.recorder import COUNTERS
from harness.stats.reports import (
    BalanceReport,
    DoneReport,
    GroupPart,
    IntervalReport,
    LogReport,
    Report,
    StatusReport,
    StreamEnd,
    add_partitions,
)
from harness.stats.timeline import Timeline

# How long after an interval ends the cell waits for a busy worker's hand-off before
# reporting the interval without it (its data then lands in the next interval).
GRACE_S = 0.25
# How often the collector looks at its workers while it waits for their interval hand-offs
# or, in the drain, for the end. Otherwise it sleeps until the next interval ends, at most
# LOOK_S, unless woken (a worker finished, the drain or the stop came): each look is the
# measuring process's CPU, in its cost per message (contrib/bench/RESULTS.md, "Idle looks").
COLLECT_S = 0.05
LOOK_S = 0.5
BALANCE_EVERY_S = 0.1
PHASE_GRACE_S = 5.0
DRAIN_IDLE_S = 0.5
MIN_CPU_SPAN_S = 0.2
# How long after the stop a thread may take to finish before the cell reports without it.
STOP_GRACE_S = 10.0

Emit = Callable[[Report], None]


def _settle_garbage() -> None:
    """Take what survived so far out of the garbage collector's sight.

    A collection walks every tracked object of the generations it collects. Messages form no
    reference cycles, but while a backlog of them stays in the process (a loopback queue, a
    client library's buffer), the oldest generation's collections walk all of it: pauses of
    60 to 100 ms at 100,000 msg/s into a queue nobody consumed, inside the measurements.
    Frozen objects are never walked again (reference counting still frees them); collecting
    the young generations first keeps their garbage cycles from being frozen too.
    """
    gc.collect(1)
    gc.freeze()


def resident() -> int:
    """This process's resident memory, bytes (0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def message_body(group: GroupSpec) -> bytes:
    """The group's body: a size mix's cut from its largest."""
    if group.sizes:
        group = replace(group, sizes=None, size=parse_sizes(group.sizes).largest)
    if group.body_file and not group.payload_split:
        with open(group.body_file, "rb") as f:
            return f.read()
    # Random rather than repeated bytes, so that a compressing broker or link sees realistic
    # payloads; made once per group, so it costs nothing per message.
    if group.body_type in ("text", "xml"):
        letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
        text = os.urandom(group.size).translate(bytes(letters[i % len(letters)]
                                                      for i in range(256)))
        if group.body_type == "xml":  # a document that every cut of the body begins
            head = b'<?xml version="1.0"?><document><items>'
            text = (head + text)[:group.size]
        return text
    return os.urandom(group.size)


@dataclass
class CellPlan:
    run: RunSpec
    run_id: str
    process_index: int
    group_indexes: list[int]
    exclusive: dict[int, bool] = field(default_factory=dict)
    copy: int = 0  # which of its groups' --processes copies this process is


class _Interval:
    """What the cell has gathered for one interval, per group."""

    def __init__(self, groups: list[int]) -> None:
        self.values: dict[int, dict[str, list[Sequence[int]]]] = {g: {} for g in groups}
        self.counters: dict[int, dict[str, int]] = {g: dict.fromkeys(COUNTERS, 0)
                                                    for g in groups}
        self.reasons: dict[int, dict[str, str]] = {g: {} for g in groups}
        self.notes: dict[int, list[str]] = {g: [] for g in groups}
        # Per group, per thread: its latest per-partition gauges (Sample.partitions).
        self.partitions: dict[int, dict[int, dict[str, tuple[float, int]]]] = {}

    def add(self, group: int, values: dict[str, Sequence[int]],
            counters: dict[str, int], reasons: dict[str, str] | None = None,
            notes: list[str] | None = None, thread: int = 0,
            partitions: dict[str, tuple[float, int]] | None = None) -> None:
        if partitions:
            self.partitions.setdefault(group, {})[thread] = partitions
        for kind, reason in (reasons or {}).items():
            self.reasons[group].setdefault(kind, reason)
        if notes:
            self.notes[group] += notes
        chunks = self.values[group]
        for metric, items in values.items():
            if items:
                chunks.setdefault(metric, []).append(items)
        totals = self.counters[group]
        for name, count in counters.items():
            totals[name] += count


class Cell:
    def __init__(self, plan: CellPlan, emit: Emit) -> None:
        self.plan = plan
        self.emit = emit
        self.run = plan.run
        # Placed at 0 until start() knows the common clock.
        self.control = Control(Timeline.of(self.run, 0), int(DRAIN_IDLE_S * 1e9))
        self.control.held = bool(self.run.backlog)
        self.outbox: deque[Handoff] = deque()
        self.streams: list[StreamEnd] = []
        self.workers: list[Worker] = []
        self.collector: threading.Thread | None = None
        self.bodies: dict[int, bytes] = {}
        # Per group, its bodies read from files, each with its CRC (--payload-dir, -split).
        self.payloads: dict[int, list[tuple[bytes, int]]] = {}
        self.thread_counts: dict[int, int] = {}
        self.floor = FloorProbe()
        self.rss_start = 0
        self.checked = {key: point.checked for key, point in endpoints(self.run).items()}
        steps = run_steps(self.run)
        self.step_ends = step_bounds(steps, self.run.warmup) if steps else []

    def _new_worker(self, g: int) -> Worker:
        group = self.run.groups[g]
        thread = self.thread_counts.get(g, 0)
        self.thread_counts[g] = thread + 1
        if group.clients:
            # Thread t drives clients t, t + -nt, ...: each the role's worker for its
            # client number, never started as a thread.
            clients = [self._setup(g, k) for k in range(thread, group.clients, group.threads)]
            role = WORKERS[group.role]
            return Clients(self._setup(g, thread, clients[0].transport),
                           [role(setup) for setup in clients])
        return (WORKERS.get(group.role) or HANDLERS[group.role])(self._setup(g, thread))

    def _setup(self, g: int, thread: int, transport: Transport | None = None) -> WorkerSetup:
        """What the worker (or client) numbered `thread` of group g is given: a transport
        of its own, unless given one."""
        run = self.run
        group = run.groups[g]
        copy = self.plan.copy
        if transport is None:
            settings = group.settings(run.node, self.plan.process_index, thread, copy)
            transport = transport_class(group.transport)(settings)
        return WorkerSetup(group, g, self.plan.process_index, thread, run.node, self.control,
                           self.outbox, transport, self.bodies[g],
                           self.plan.exclusive.get(g, False), int(run.reorder_window * 1e9),
                           copy, run.seed, self.plan.run_id, self.checked[group.endpoint],
                           run.warmup, self.payloads.get(g, []))

    # -- lifecycle, called by the controller
    def prepare(self) -> None:
        """Create, connect and subscribe every worker; raises StartFailure if one cannot."""
        run = self.run
        self.rss_start = resident()
        keep_freed_memory()
        if run.switch_interval:
            sys.setswitchinterval(run.switch_interval)
        for transport in {transport_class(run.groups[g].transport)
                          for g in self.plan.group_indexes}:
            if issubclass(transport, EmbeddedBroker):
                transport.start_broker(run.options)
        for g in self.plan.group_indexes:
            self.bodies[g] = message_body(run.groups[g])
            group = run.groups[g]
            bodies = pool(group.payload_pool, group.size, group.random_ratio) \
                if group.payload_pool else \
                read_payloads(group.payload_dir, group.body_file, group.payload_split)
            self.payloads[g] = [(body, zlib.crc32(body)) for body in bodies]
            for _ in range(run.groups[g].threads):
                self.workers.append(self._new_worker(g))
        for worker in self.workers:
            try:
                worker.prepare()
            except Exception as exc:
                self._close_all()
                raise StartFailure(f"{worker.group.module} ({worker.group.name}): cannot start: "
                                   f"{exc}") from exc
        gc.collect()
        gc.freeze()  # what start-up loaded, as _settle_garbage does at every interval

    def _close_all(self) -> None:
        """Close every connection opened so far, quietly: the start failed for a reason
        already being reported (an asyncio client left open would print its pending tasks)."""
        for worker in self.workers:
            with contextlib.suppress(Exception):  # the start failure says what went wrong
                worker.close()

    def start(self, start_epoch_ns: int) -> None:
        run, control = self.run, self.control
        start = to_monotonic(start_epoch_ns)
        timeline = control.timeline = Timeline.of(run, start)
        if timeline.stop is not None:
            control.produce_until_ns = int(timeline.stop)
        for worker in self.workers:
            worker.move_to(start)
            if worker.schedule is not None:
                worker.schedule.start = worker.start_time()
        self._cpu_mark = (time.monotonic(), self._cpu_seconds())
        self._cpu_last = 0.0
        self._cpu_reported = self._cpu_mark[1]
        self.floor.start()
        for worker in self.workers:
            worker.start()
        self.collector = threading.Thread(target=self._collect, name="collector", daemon=True)
        self.collector.start()

    def drain(self, stop_epoch_ns: int) -> None:
        """The producers stop at this instant (the controller announces it a little ahead),
        and the interval in progress then ends there: the measured span ends exactly at it."""
        control = self.control
        stop = to_monotonic(stop_epoch_ns)
        timeline = control.timeline
        with timeline.lock:
            if timeline.stop is None or stop < timeline.stop:
                timeline.set_stop(stop)
            for worker in self.workers:
                worker.next_boundary = int(timeline.bounds(worker.interval_index)[1])
        control.produce_until_ns = min(control.produce_until_ns, int(timeline.stop or stop))
        control.draining = True
        # --backlog never reached: the consumers held take what was sent, in the drain.
        control.held = False
        control.wake.set()

    def stop(self) -> None:
        self.control.producing = False
        self.control.consuming = False
        self.control.wake.set()
        for worker in list(self.workers):
            if isinstance(worker.transport, PushedDelivery):
                worker.transport.interrupt()  # a pushed consumer waiting in receive()

    # -- live changes (the live screen's keys), called between start and stop
    def release(self) -> None:
        """--backlog: the destinations hold the backlog asked for; the consumers go."""
        self.control.held = False

    def pause(self, paused: bool) -> None:
        self.control.paused = paused
        for worker in self.workers:
            worker.pending = True

    def set_rate(self, g: int, rate: float) -> None:
        self.control.rates[g] = rate
        for worker in self.workers:
            if worker.key[0] == g and worker.schedule is not None:
                worker.pending = True

    def add_thread(self, g: int) -> None:
        """Start one more worker in group g; it connects on a thread of its own, so that a
        slow broker does not hold up the cell."""
        worker = self._new_worker(g)
        threading.Thread(target=self._start_worker, args=(worker,), daemon=True,
                         name=f"add-{worker.name}").start()

    def _start_worker(self, worker: Worker) -> None:
        try:
            worker.prepare()
        except Exception as exc:
            self.emit(LogReport(self.plan.process_index,
                                f"{worker.group.name}: the added thread cannot start: {exc}"))
            return
        control = self.control
        now = now_ns()
        worker.move_to(now)
        if worker.schedule is not None:
            worker.schedule.retarget(now, control.rates.get(worker.key[0],
                                                            worker.schedule.rate))
        if not (control.producing or not worker.produces()) or not control.consuming:
            worker.transport.close()
            return
        worker.pending = True  # so that it sees a pause in force
        self.workers.append(worker)
        worker.start()

    def join(self, timeout: float | None = None) -> bool:
        if self.collector is not None:
            self.collector.join(timeout)
            return not self.collector.is_alive()
        return True

    # -- the collector thread
    def _collect(self) -> None:
        control = self.control
        groups = self.plan.group_indexes
        pending: dict[int, _Interval] = {}
        index = 0  # the earliest interval not yet reported
        reported_failures: set[str] = set()
        producers = [w for w in self.workers if w.produces()]
        producers_done = not producers
        stop_seen: int | None = None
        next_balance = 0
        timeline = control.timeline
        reported = False  # an interval was reported in the last turn
        while True:
            boundary = timeline.bounds(index)[1]
            # At the end of a phase, wait longer for a worker held up in a send: its samples
            # must not cross into the next phase.
            grace = PHASE_GRACE_S if timeline.phase(index) != timeline.phase(index + 1) \
                else GRACE_S
            wait = (boundary - now_ns()) / 1e9
            if reported and wait <= 0:
                # The next interval ended already (intervals shorter than a look, or a turn
                # that came late): look at once, or the reports fall behind for good.
                wait = 0.0
            elif wait <= 0 or control.draining or stop_seen is not None:
                wait = COLLECT_S
            reported = False
            if wait > 0:
                control.wake.wait(min(wait, LOOK_S))
            control.wake.clear()
            finished = all(w.finished for w in self.workers)
            self._take_handoffs(pending, index, groups)
            # Before the end below, which may come in this same turn: a thread that failed
            # at once (a bad stream name, say) must be heard of.
            for failure in [w.failure for w in self.workers if w.failure]:
                if failure not in reported_failures:
                    reported_failures.add(failure)
                    self.emit(LogReport(self.plan.process_index, failure, failed=True))
            now = now_ns()
            if not control.consuming and stop_seen is None:
                stop_seen = now
            if not finished and stop_seen is not None and \
                    now - stop_seen >= STOP_GRACE_S * 1e9:
                # A thread blocked inside a client library (a broker's flow control holding
                # a send forever) must not hang the run: report what the others measured.
                stuck = [w for w in self.workers if not w.finished]
                for worker in stuck:
                    worker.abandon()
                self._take_handoffs(pending, index, groups)
                self.emit(LogReport(self.plan.process_index,
                                    f"{len(stuck)} thread(s) did not stop within "
                                    f"{STOP_GRACE_S:g} s of the stop, blocked in the client "
                                    "library (e.g. by broker flow control): "
                                    f"{', '.join(w.name for w in stuck[:5])}; what they "
                                    "counted up to their last completed call is counted, the "
                                    "call they are in is not",
                                    abandoned=tuple(w.name for w in stuck)))
                finished = True
            if finished:
                last = max([index, *pending])
                while index < last:
                    self._report(index, pending.pop(index, None) or _Interval(groups), None)
                    index += 1
                self._report(index, pending.pop(index, None) or _Interval(groups), now)
                break
            complete = all(w.done_through >= index for w in self.workers)
            if now >= boundary and (complete or now >= boundary + grace * 1e9):
                self._report(index, pending.pop(index, None) or _Interval(groups), None)
                index += 1
                reported = True
                _settle_garbage()
            if control.draining and producers_done and now >= next_balance:
                next_balance = now + int(BALANCE_EVERY_S * 1e9)
                self.emit(self._balance())
            if not producers_done and all(w.finished for w in producers):
                # Tell the controller now, not at the next interval, so a run that ends by
                # message count does not wait out the interval.
                producers_done = True
                self.emit(StatusReport(self.plan.process_index, 0, EPOCH_OFFSET_NS + max(
                    w.ended_ns for w in producers)))
        self.emit(self._balance())  # the last word on what this process sent and received
        gc.unfreeze()
        self.emit(DoneReport(self.plan.process_index))

    def _take_handoffs(self, pending: dict[int, _Interval], index: int,
                       groups: list[int]) -> None:
        outbox = self.outbox
        while outbox:
            (group, thread), interval, sample = outbox.popleft()
            for end in sample.streams or ():
                self.streams.append(StreamEnd(group, thread, self.plan.process_index, **end))
            # A hand-off for an interval already reported goes to the earliest open one.
            interval = max(interval, index)
            slot = pending.get(interval)
            if slot is None:
                slot = pending[interval] = _Interval(groups)
            slot.add(group, sample.values, sample.counters, sample.reasons, sample.notes,
                     thread, sample.partitions)

    def _balance(self) -> BalanceReport:
        sent: dict[int, int] = {}
        received: dict[int, int] = {}
        for worker in list(self.workers):
            g = worker.key[0]
            role = self.run.groups[g].role
            if is_producer(role):
                sent[g] = sent.get(g, 0) + worker.kept()
            elif is_consumer(role):
                received[g] = received.get(g, 0) + getattr(worker, "count", 0)
        return BalanceReport(self.plan.process_index, sent, received)

    def _cpu_seconds(self) -> float:
        # The process's CPU time (user and system, every thread) to the nanosecond, as the
        # bare loops of contrib/bench read theirs; psutil's, from /proc, came in 10 ms ticks
        # and cost far more a reading.
        return time.process_time()

    def _cpu_spent_us(self, used: float) -> int:
        """CPU microseconds this process used since the last report (used: its CPU seconds
        now): each counted once over the run, so that summed over intervals it is the
        process's CPU time."""
        spent, self._cpu_reported = used - self._cpu_reported, used
        return round(spent * 1e6)

    def _cpu(self, used: float) -> float:
        """This process's CPU% (of one core) since the last report. Over a short span (the
        last, partial interval) a moment's work would read as a busy process: below
        MIN_CPU_SPAN_S the last value stands."""
        now = time.monotonic()
        wall, before = self._cpu_mark
        if now - wall >= MIN_CPU_SPAN_S:
            self._cpu_last = 100.0 * (used - before) / (now - wall)
            self._cpu_mark = (now, used)
        return self._cpu_last

    def _report(self, index: int, data: _Interval, end_ns: int | None) -> None:
        timeline = self.control.timeline
        start, end = (int(t) for t in timeline.bounds(index))
        if end_ns is not None:
            end = min(max(end_ns, start), end)
        used = self._cpu_seconds()
        report = IntervalReport(self.plan.process_index, os.getpid(), index,
                                start + EPOCH_OFFSET_NS, (end - start) / 1e9, end_ns is not None,
                                self._cpu(used), timeline.phase(index))
        if self.step_ends:
            report.step = step_at(self.step_ends, (start - timeline.start) / 1e9)
        if end_ns is not None:
            report.streams = self.streams
            report.floor = self.floor.stop()
        report.rss = resident()
        if index == 0:
            report.rss_start = self.rss_start
        shares = cpu_shares(self._cpu_spent_us(used), {
            g: role_count(self.run.groups[g].role, data.counters[g])
            for g in self.plan.group_indexes})
        for g in self.plan.group_indexes:
            group = self.run.groups[g]
            histograms: dict[str, str] = {}
            decoded: dict[str, HdrHistogram] = {}
            clamped = 0
            for metric in metrics_for(group):
                chunks = data.values[g].get(metric)
                if chunks:
                    histogram = new_histogram()
                    clamped += fold_many(histogram, chunks)
                    histograms[metric] = encode(histogram)
                else:
                    histograms[metric], histogram = empty()
                decoded[metric] = histogram
            for kind, reason in data.reasons[g].items():
                # The first error of each kind per group per interval, with its reason.
                self.emit(LogReport(self.plan.process_index,
                                    f"{group.name}: {kind} error: {reason} (first this "
                                    f"interval; {data.counters[g]['errors']} errors in it)"))
            for note in data.notes[g]:
                self.emit(LogReport(self.plan.process_index, f"{group.name}: {note}"))
            workers = [w for w in self.workers if w.key[0] == g]
            drivers = [w for w in workers if isinstance(w, Clients)]
            data.counters[g]["cpu_us"] = shares[g]
            report.groups[g] = GroupPart(
                data.counters[g], histograms, clamped, sum(w.up for w in workers),
                len(workers), sum(1 for w in workers if w.produces() and not w.finished),
                add_partitions(data.partitions.get(g, {}).values()),
                sum(len(w.clients) for w in drivers), sum(w.clients_up() for w in drivers))
            report.groups[g].remember(decoded)
        self.emit(report)
