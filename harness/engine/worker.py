"""The worker thread every role builds on: start staggering, interval hand-off, pacing sleeps,
and the flags a cell uses to stop its workers."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.clock import now_ns
from harness.engine.outgoing import Outgoing, outgoing_for
from harness.engine.paced import Paced
from harness.engine.pacing import Schedule
from harness.engine.tally import Tally
from harness.modules.interface.base import Transport, connect
from harness.modules.interface.message import Destination
from harness.modules.interface.optional import ClientLoop, PartitionOrder, Transactions
from harness.modules.interface.roles import ROLES
from harness.plan.steps import burst_share, parse_burst
from harness.stats.recorder import Recorder, Sample
from harness.stats.timeline import Timeline
from harness.stats.verify import SeenSet, SequenceTracker

if TYPE_CHECKING:
    from harness.plan.group import GroupSpec

# How long a blocked receive waits before the worker checks its flags and the interval clock.
POLL_S = 0.05
# Back-off after a transport error, so a dead connection does not turn into a busy loop.
ERROR_PAUSE_S = 0.01


class Control:
    """Flags one cell's workers read on every message: plain attributes, cheaper than Events."""

    def __init__(self, timeline: Timeline, drain_idle_ns: int) -> None:
        # The run's intervals on the monotonic clock; the cell sets the stop when it learns it.
        self.timeline = timeline
        self.drain_idle_ns = drain_idle_ns
        self.producing = True
        # Producers stop by themselves at the run length, not when the controller notices.
        self.produce_until_ns = 1 << 62
        self.consuming = True
        self.draining = False
        self.paused = False  # producers hold (the live screen's p), consumers go on
        # --backlog: consumers that only measure hold until the controller releases them
        self.held = False
        self.rates: dict[int, float] = {}  # per-thread rates changed live, by group index
        # Wakes the cell's collector before its next look: a worker finished, the drain or
        # the stop came.
        self.wake = threading.Event()


Handoff = tuple[tuple[int, int], int, Sample]  # (group index, thread key), interval, sample


class _NoLoop(ClientLoop):
    """A transport without a client loop: nothing to flush, and a producer's wait a sleep."""

    def flush(self) -> None:
        pass


NO_LOOP = _NoLoop()


@dataclass
class WorkerSetup:
    group: GroupSpec
    group_index: int
    process_index: int
    thread_index: int
    node: str
    control: Control
    outbox: deque[Handoff]
    transport: Transport
    body: bytes
    exclusive: bool
    reorder_window_ns: int
    copy: int = 0  # which of the group's processes this is
    seed: int = 0  # the run's --seed
    run_id: str = ""
    # Its destination's delivery is balanced by the controller, which ends the drain when
    # everything sent there arrived; elsewhere a consumer ends it after an idle spell.
    checked: bool = False
    warmup_s: float = 0.0  # the run's warm-up, which a stepped rate's first step takes in
    # Bodies read from files, with their CRCs, sent in turn (harness.plan.payloads)
    payloads: list[tuple[bytes, int]] = field(default_factory=list)


class Worker(Paced, Tally, threading.Thread, ABC):
    """One thread of a group. Subclasses implement prepare() (connect, subscribe) and work()."""

    def __init__(self, setup: WorkerSetup) -> None:
        group = setup.group
        super().__init__(name=f"{group.name}-{setup.process_index}-{setup.thread_index}",
                         daemon=True)
        self.setup = setup
        self.group = group
        self.control = setup.control
        self.transport = transport = setup.transport
        # The optional parts this transport has, asked once.
        self.loop: ClientLoop = transport if isinstance(transport, ClientLoop) else NO_LOOP
        self.transactions = transport if isinstance(transport, Transactions) else None
        self.key = (setup.group_index, setup.thread_index)
        # The thread's name in every run (random draws are seeded from it), and the producer
        # id its messages carry, which holds the run id: messages an earlier run left on a
        # queue are foreign, not duplicates with huge latencies.
        self.stream_name = f"{setup.node}:{group.name}:{setup.process_index}:" \
            f"{setup.thread_index}"
        self.run_prefix = f"{setup.run_id}:"
        self.producer_id = self.run_prefix + self.stream_name
        self.role = ROLES[group.role]
        self.destination = Destination(self.role.kind,
                                       group.destination_for(setup.copy, setup.thread_index))
        self.crc_every = round(1 / group.crc) if group.crc else 0
        self.rec = Recorder()
        n, total = group.thread_number(setup.copy, setup.thread_index), \
            group.streams * group.processes
        # A producer's bodies, properties and stream position (harness.engine.outgoing).
        self.out = outgoing_for(group, setup.body, setup.payloads, self.stream_name, n, total,
                                setup.thread_index) if self.produces() else \
            Outgoing(setup.body, 0)
        # The partition of the message being measured: a payload measured after its
        # receive() carries its own (Consumer.settle); a Message is measured as it comes.
        self.partition = -1
        partition_of = (lambda: self.partition if self.partition >= 0 else
                        transport.partition) if isinstance(transport, PartitionOrder) else None
        self.tracker = (SequenceTracker(self.rec, setup.reorder_window_ns, partition_of)
                        if setup.exclusive else None)
        # Competing receivers of a queue: the run's delivery check unions what each received.
        competing = self.role.measures_only and self.role.kind == "queue" and \
            not setup.exclusive and not group.filtered and group.destination_max is None
        self.seen = SeenSet(self.rec) if competing else None
        self.redelivered_taken = 0  # the transport's redelivered count at the last interval
        self.interval_index = 0
        self.next_boundary = self.control.timeline.bounds(0)[1]
        self.done_through = -1
        self.up = False
        self.ended_ns = 0  # when work() returned
        self.finished = False
        self.abandoned = False  # still in a client call long after the stop (abandon())
        self.failure: str | None = None
        # Live changes from the controller: set Control.rates or Control.paused, then pending,
        # which due_sends() checks once per message.
        self.pending = False
        rate = group.per_thread_rate
        self.schedule: Schedule | None = None
        if rate and self.produces():
            # Thread k of the group's N runs k/N of a gap behind the first.
            phase = (n - 1) % total / total
            # Steps from the start of the run (this thread starts -wi later).
            steps = group.thread_steps(setup.warmup_s)
            burst = None
            if group.burst:
                size, every = parse_burst(group.burst)
                burst = (burst_share(size, total, n - 1), every)
            self.schedule = Schedule(self.start_time(), rate, group.ramp, group.poisson,
                                     seed=f"{setup.seed}:{self.stream_name}", phase=phase,
                                     steps=steps, burst=burst)

    def produces(self) -> bool:
        return self.role.produces

    def prepare(self) -> None:
        self.outage_counted = 0
        connect(self.transport, self.session)

    def session(self) -> None:
        """What the worker makes on its connection before the run (declarations, a
        subscription): retried with the connection by --connect-retry."""

    @abstractmethod
    def work(self) -> None:
        """The role's loop, run on this thread once the run starts."""

    # -- the frame around work()
    def start_time(self) -> int:
        return int(self.control.timeline.start) + \
            self.setup.thread_index * self.group.thread_interval_ms * 1_000_000

    def run(self) -> None:
        try:
            if self.sleep_until(self.start_time(), while_flag="producing" if self.produces()
                                else "consuming"):
                self.up = True
                if self.transactions is not None and self.group.transacted:
                    self.begin()
                self.work()
        except Exception as exc:  # a bug or an unexpected client failure: report, never hang
            self.failure = f"{type(exc).__name__}: {exc}"
            self.rec.errors += 1  # the cell logs the failure itself
        finally:
            self.ended_ns = now_ns()
            self.up = False
            try:
                self.close()
            except Exception as exc:
                self.failure = self.failure or f"close: {exc}"
            if self.tracker is not None:
                self.tracker.finish()
            if not self.abandoned:
                self.hand_off_last()
            self.done_through = 1 << 62
            self.finished = True
            self.control.wake.set()

    def close(self) -> None:
        self.transport.close()

    def abandon(self) -> None:
        """Called by the cell for a thread still in a client call long after the stop: what
        it counted up to its last completed call is handed off in its place (the call it is
        in, and anything after, is not counted). Its thread is blocked, so its counts hold
        still while they are taken."""
        self.abandoned = True
        self.hand_off_last()

    def hand_off_last(self) -> None:
        """The thread's last counts and where its streams stood, to the cell."""
        self.take_outage()
        self.setup.outbox.append((self.key, self.interval_index,
                                  self.rec.take()._replace(streams=self.stream_end())))

    def kept(self) -> int:
        """A producer's sends so far that did not fail."""
        return self.out.kept()

    def stream_end(self) -> list[dict[str, object]]:
        """Where this thread's streams stood at the end (harness.stats.reports.StreamEnd's
        fields but its place): one, or none where it has nothing to say; a thread of many
        clients, one for each client."""
        if self.produces() and not self.role.consumes:
            if self.abandoned:  # its position is in the blocked call's hands: not known
                return []
            return [self.out.stream_end(self.producer_id)]
        if self.tracker is not None:
            return [{"positions": dict(self.tracker.expected),
                     "lost": {p: sorted(s) for p, s in self.tracker.lost.items() if s}}]
        if self.seen is not None:
            return [{"positions": {}, "seen": {p: bytes(b) for p, b in self.seen.bits.items()}}]
        return []

    def flush(self, at: int) -> None:
        """Hand this interval's buffer to the cell and move to the interval that holds `at`
        (now, or a producer's next intended send time)."""
        if self.tracker is not None:
            self.tracker.expire(at)
        self.take_outage()
        self.setup.outbox.append((self.key, self.interval_index, self.rec.take()))
        self.move_to(at, self.interval_index + 1)

    def move_to(self, at: int, least: int = 0) -> None:
        timeline = self.control.timeline
        with timeline.lock:
            index = max(timeline.index_at(at), least)
            self.interval_index = index
            self.next_boundary = int(timeline.bounds(index)[1])
            self.done_through = index - 1
            phase = timeline.phase(index)
        self.mark_span(phase)

    def mark_span(self, phase: str) -> None:
        """Where the measured span begins and ends in the numbers this thread sends: the
        broker's later word on a send counts against the span it was made in (untaken)."""
        self.out.mark_span(phase)
