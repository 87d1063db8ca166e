"""The worker thread every role builds on: start staggering, interval hand-off, pacing sleeps,
and the flags a cell uses to stop its workers."""

from __future__ import annotations

import random
import threading
import time
import zlib
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.clock import now_ns
from harness.engine.pacing import Schedule
from harness.modules.interface.base import COMMIT_IN_DOUBT, Transport, TransportError, connect
from harness.modules.interface.message import Destination
from harness.modules.interface.optional import ClientLoop, PartitionOrder, Transactions
from harness.modules.interface.roles import ROLES
from harness.plan.payloads import drawn
from harness.plan.sizes import DECK, parse_sizes
from harness.plan.steps import burst_share, parse_burst
from harness.plan.template import cycle, expand
from harness.stats.recorder import Recorder, Sample
from harness.stats.timeline import Timeline
from harness.stats.verify import SeenSet, SequenceTracker

if TYPE_CHECKING:
    from harness.plan.group import GroupSpec

# How long a blocked receive waits before the worker checks its flags and the interval clock.
POLL_S = 0.05
# Longest single sleep while pacing, so that stop requests are seen promptly.
MAX_SLEEP_S = 0.05
# Messages counted one by one as unsent at the stop, at most (a producer stalled for long at a
# high rate is behind by more than this; the rest are not counted).
MAX_UNSENT = 10_000_000
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


class Worker(threading.Thread, ABC):
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
        self.body = setup.body
        self.body_crc = zlib.crc32(setup.body)
        # With sizes that vary, a deck of bodies drawn for this thread, dealt in turn: (body,
        # crc); with bodies from files, those.
        self.deck: list[tuple[bytes, int]] = list(setup.payloads)
        if group.payload_pool:
            self.deck = drawn(self.deck, self.stream_name, max(DECK, 4 * len(self.deck)))
        sizes: list[int] = []
        if group.size_mix:  # a scenario's
            draw = random.Random(self.stream_name)
            sizes = draw.choices([z for z, _ in group.size_mix],
                                 [w for _, w in group.size_mix], k=DECK)
        elif group.sizes:
            sizes = parse_sizes(group.sizes).deck(self.stream_name)
        if sizes:
            cut = {z: setup.body[:z] for z in set(sizes)}
            crcs = {z: zlib.crc32(b) for z, b in cut.items()}
            self.deck = [(cut[z], crcs[z]) for z in sizes]
        self.crc_every = round(1 / group.crc) if group.crc else 0
        self.rec = Recorder()
        n, total = group.thread_number(setup.copy, setup.thread_index), \
            group.streams * group.processes
        # The property sets this thread sends in turn (one unless a value cycles: {1..10}).
        self.property_sets: list[dict[str, str] | None] = \
            list(cycle(group.properties, n, total)) if group.properties else [None]
        correlation = group.correlation_id
        if correlation and "{{" in correlation:
            self.correlation: str | None = expand(correlation, n, total)
        else:
            self.correlation = f"{correlation}{setup.thread_index}" if correlation else None
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
        self.failed: list[int] = []  # a producer's numbers whose send failed
        self.doubt: list[int] = []  # and whose outcome a fault hid
        self.redelivered_taken = 0  # the transport's redelivered count at the last interval
        self.interval_index = 0
        self.next_boundary = self.control.timeline.bounds(0)[1]
        self.done_through = -1
        self.up = False
        self.ended_ns = 0  # when work() returned
        self.finished = False
        self.abandoned = False  # still in a client call long after the stop (abandon())
        self.stream_position = 0  # a producer's messages sent, for the end-of-run balance
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

    def receive_failed(self, exc: TransportError) -> None:
        self.call_failed("receive", exc)

    def call_failed(self, kind: str, exc: TransportError) -> None:
        """Count a call on the transport that raised as an error, but once per outage: while
        the connection is down every poll, flush and wait fails, as many times as the loop
        turns, and the outage has counters of its own (reconnects, outage_ms). What the
        failure did to sends already made is the transport's to report (its feedback)."""
        outages = self.transport.outages
        if outages.down_since is not None:
            if outages.outages == self.outage_counted:
                return
            self.outage_counted = outages.outages
        self.rec.error(kind, exc)

    def flush_sends(self) -> None:
        """What is queued goes out before the thread sleeps; a failure is counted, and the
        thread goes on (the next send reconnects)."""
        try:
            self.loop.flush()
        except TransportError as exc:
            self.call_failed("flush", exc)

    def wait(self, seconds: float) -> None:
        """A producer's wait between sends, in the transport's loop where it has one; if the
        transport fails, counted, and the time waited all the same."""
        try:
            self.loop.idle(seconds)
        except TransportError as exc:
            self.call_failed("idle", exc)
            time.sleep(seconds)

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
                    self.transactions.begin()
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
        return self.stream_position - len(self.failed)

    def stream_end(self) -> list[dict[str, object]]:
        """Where this thread's streams stood at the end (harness.stats.reports.StreamEnd's
        fields but its place): one, or none where it has nothing to say; a thread of many
        clients, one for each client."""
        if self.produces() and not self.role.consumes:
            if self.abandoned:  # its position is in the blocked call's hands: not known
                return []
            return [{"positions": {self.producer_id: self.stream_position},
                     "failed": {self.producer_id: self.failed} if self.failed else {},
                     "doubt": {self.producer_id: self.doubt} if self.doubt else {}}]
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

    def take_outage(self) -> None:
        """What the transport noted since the last interval: outages, and what the broker
        said of earlier sends (confirmation times, sends it refused after all)."""
        rec, transport = self.rec, self.transport
        reconnects, outage_ns = transport.outages.take()
        rec.reconnects += reconnects
        rec.outage_ms += outage_ns // 1_000_000
        feedback = transport.feedback
        if feedback.confirm_us or feedback.failed or feedback.doubt or feedback.errors:
            confirm_us, failed, doubt, errors = feedback.take()
            rec.confirm.extend(confirm_us)
            for seq, kind, reason in failed:
                rec.error(kind, reason)
                rec.refused += 1
                self.failed.append(seq)
            # Not errors: the fault that hid their outcome is (an outage, counted once).
            rec.in_doubt += len(doubt)
            self.doubt.extend(seq for seq, _ in doubt)
            if doubt and "in doubt" not in rec.reasons:
                rec.reasons["in doubt"] = f"{len(doubt)} sends: {doubt[0][1]}"
            for kind, (count, reason) in errors.items():
                rec.error(kind, reason)
                rec.errors += count - 1
        if feedback.rebalances:
            rec.rebalances += len(feedback.rebalances)
            rec.notes += feedback.rebalances
            feedback.rebalances = []
        if feedback.partitions:
            rec.partitions = feedback.partitions
        redelivered = feedback.redelivered
        if redelivered != self.redelivered_taken:
            rec.redelivered += redelivered - self.redelivered_taken
            self.redelivered_taken = redelivered

    def send_failed(self, seq: int, size: int, intended: int, exc: TransportError) -> None:
        """Count send number seq, of size bytes, that raised."""
        rec = self.rec
        if exc.reported:
            # Its outcome is in the transport's feedback, with the sends it had queued: sent,
            # as they were; the fault counted once an outage.
            rec.sent += 1
            rec.bytes += size
            self.call_failed(exc.kind or "send", exc)
        else:
            # The number is not used again (the broker may have taken the message): the
            # reconciliation takes it out of consumers' losses.
            rec.error(exc.kind or "send", exc)
            self.failed.append(seq)
        if self.schedule is not None:  # never sent: delayed at least until it failed
            rec.delay.append((now_ns() - intended) // 1000)

    def uncommitted(self, sent: list[int], exc: TransportError) -> None:
        """A producer's sends in a transaction that was not committed: refused (the broker
        kept none of them), or in doubt where a fault hid the commit's outcome."""
        rec = self.rec
        if exc.kind == COMMIT_IN_DOUBT:
            rec.in_doubt += len(sent)
            self.doubt.extend(sent)
            rec.reasons.setdefault("in doubt", f"{len(sent)} sends: {exc}")
        else:
            rec.refused += len(sent)
            self.failed.extend(sent)

    def sleep_until(self, due: int, while_flag: str = "producing") -> bool:
        """Sleep until due (monotonic ns), handing off intervals on the way; False if told
        to stop first."""
        control = self.control
        while getattr(control, while_flag):
            now = now_ns()
            if now >= due:
                # Woken past a boundary that lies after `due`: the send belongs to the
                # interval of `due` (its intended time), not to the one it woke in.
                return True
            if now >= self.next_boundary:
                self.flush(now)
            self.wait(min(due - now, self.next_boundary - now, MAX_SLEEP_S * 1e9) / 1e9)
        return False

    def pace(self, intended: int, now: int, left: int = MAX_UNSENT) -> tuple[int, int] | None:
        """Wait until the send drawn for `intended` is due: (intended, actual) monotonic ns,
        or None to stop. Unthrottled, the intended time is the actual one."""
        until = self.control.produce_until_ns
        if intended >= until:
            return None
        if intended > now:
            self.flush_sends()
            if not self.sleep_until(intended):
                return None  # stopped at once: nothing was due yet
            now = now_ns()
        elif now >= until:
            self.unsent(intended, until, left)
            return None
        # A sample belongs to the interval of its intended time, so that a producer held up
        # in a send does not carry its samples into the next phase.
        if intended >= self.next_boundary:
            self.flush(intended)
        return intended, now

    def due_sends(self, limit: int) -> Iterator[tuple[int, int, dict[str, str] | None]]:
        """(intended, actual, properties) of each send as it falls due, until the producers
        are told to stop or `limit` sends (0: no limit) were due."""
        property_sets = self.property_sets
        turns = len(property_sets)
        control, schedule = self.control, self.schedule
        clock = now_ns
        loop = self.loop
        most_ns = int(MAX_SLEEP_S * 1e9)
        count, stop = 0, limit or -1
        while count != stop:
            if not control.producing:
                return
            if self.pending and not self._apply_pending():
                return
            now = clock()
            intended = now if schedule is None else schedule.next_ns()
            # Due now, in this interval, before the stop: the common case, without a call.
            if not (intended <= now < control.produce_until_ns
                    and intended < self.next_boundary):
                if now < intended < control.produce_until_ns and intended < self.next_boundary:
                    # Ahead of the schedule, due in this interval: pace() and sleep_until()
                    # inline. A paced send runs this after a sleep, with the caches cold,
                    # where each call and attribute costs several times what it does in a loop.
                    try:
                        loop.flush()  # what is queued goes out before the thread sleeps
                        while now < intended:
                            loop.idle(min(intended - now, most_ns) / 1e9)
                            if not control.producing:
                                return  # stopped at once: nothing was due yet
                            now = clock()
                    except TransportError as exc:  # counted; the rest of the wait as pace()'s
                        self.call_failed("flush", exc)
                        if not self.sleep_until(intended):
                            return
                        now = clock()
                else:
                    due = self.pace(intended, now, stop - count if limit else MAX_UNSENT)
                    if due is None:
                        return
                    intended, now = due
            yield intended, now, property_sets[count % turns]
            count += 1

    def unsent(self, first: int, stop: int, most: int = MAX_UNSENT) -> None:
        """The messages due before the stop that a late producer never sent: counted, and
        their delay (for a Requestor also their latency) recorded as at least the time from
        their intended send to the stop, so that a stalled broker cannot look fast."""
        schedule, rec = self.schedule, self.rec
        assert schedule is not None
        stop = min(stop, self.control.produce_until_ns)
        intended, count = first, 0
        most = min(most, MAX_UNSENT)  # never more than the -mg still to send
        while intended < stop and count < most:
            waited = (stop - intended) // 1000
            rec.delay.append(waited)
            if self.role.consumes:
                rec.latency.append(waited)
            count += 1
            intended = schedule.next_ns()
        rec.unsent += count

    def _apply_pending(self) -> bool:
        """Hold while paused, then take up a new rate; False if told to stop meanwhile.

        After a pause or a rate change the schedule starts again from now: the messages not
        sent while paused were never due, so they are not sent in a burst nor counted late.
        """
        self.pending = False
        control = self.control
        resumed = False
        while control.paused:
            now = now_ns()
            if not control.producing or now >= control.produce_until_ns:
                return False
            if now >= self.next_boundary:
                self.flush(now)
            self.hold()
            resumed = True
        self.take_rate(control.rates.get(self.key[0]), resumed)
        return True

    def held(self) -> bool:
        """--backlog: while the consumers are held, hand off empty intervals and keep the
        connection (hold()); False if told to stop meanwhile."""
        control = self.control
        while control.held:
            if not control.consuming:
                return False
            now = now_ns()
            if now >= self.next_boundary:
                self.flush(now)
            self.hold()
        return True

    def hold(self) -> None:
        """A turn of a pause: what is queued goes out, and the thread sleeps a little."""
        self.flush_sends()
        time.sleep(MAX_SLEEP_S)

    def take_rate(self, rate: float | None, resumed: bool) -> None:
        """The schedule again from now, at rate (None: its own), where the rate changed or a
        pause ended."""
        schedule = self.schedule
        if schedule is not None:
            rate = schedule.rate if rate is None else rate
            if rate != schedule.rate or resumed:
                schedule.retarget(now_ns(), rate)

    def commit(self, sent: list[int] | None = None) -> None:
        """Commit and begin the next transaction; a failure (the connection lost, and the
        transaction with it) is counted once an outage, and the thread goes on. sent: a
        producer's numbers sent in the transaction, which a failed commit did not keep."""
        transactions = self.transactions
        assert transactions is not None  # -tx is refused where there are none
        try:
            transactions.commit()
            self.rec.commits += 1
        except TransportError as exc:
            self.call_failed("commit", exc)
            if sent and not exc.reported:
                self.uncommitted(sent, exc)
        try:
            transactions.begin()
        except TransportError as exc:
            self.call_failed("begin", exc)
