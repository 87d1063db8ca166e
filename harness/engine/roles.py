"""The six roles, written once for every transport.

Producers (Sender, Publisher, Requestor) follow a schedule of intended send times when a rate
is set and measure from the intended time; consumers (Receiver, Subscriber, Responder) measure
from the timestamps the message carries. Metrics per role, all in microseconds:

- latency: completion measured from the intended send time (coordinated-omission safe);
  for consumers, receipt minus the producer's intended time; for Requestor, the round trip.
- service: the same measured from the actual send.
- delay: actual send minus intended send (paced producers only).
- confirm: actual send to the broker's confirmation (producers on a transport with publisher
  confirms turned on; the transport times it, harness.modules.interface.feedback).
- process: a slow consumer's time on a message (--consumer-latency), after it is measured
  and before it is acknowledged.

A slow consumer (--consumer-rate, --consumer-latency) takes each message on its own thread
(pull, never pushed): one it has not taken stays with the broker or the client library, as
with a real consumer that is busy, and the message's latency is from its intended send to
when the consumer took it.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from harness.clock import EPOCH_OFFSET_NS, now_ns
from harness.engine.worker import ERROR_PAUSE_S, POLL_S, Worker
from harness.modules.interface.base import ROLLED_BACK, TransportError
from harness.modules.interface.message import MAGIC, PREFIX, Message, from_header, plain_frame
from harness.modules.interface.optional import (
    Acknowledgements,
    Declarations,
    FramedSends,
    PushedDelivery,
    TemporaryQueues,
)
from harness.plan.worktime import parse_work_time

_unpack, _SIZE = PREFIX.unpack_from, PREFIX.size
# Messages measured in a batch: one arriving costs only its timestamp, and the measuring runs
# hot, a batch at a time, not cold after each wake-up.
SETTLE_EVERY = 64
# A larger message is measured as it arrives: a batch holds at most SETTLE_EVERY of this size,
# and beside what a large message costs its library, measuring it is little.
SETTLE_LARGER = 8192
# The longest a pushed consumer's thread waits without looking at the flags: each look is a
# wake-up, a consumer's CPU while idle (contrib/bench/RESULTS.md, "Idle looks").
PUSHED_LOOK_S = 0.25

# What a consumer's handle() made of a message: it decides the acknowledgement.
HANDLED, RETRY, REFUSED = "handled", "retry", "refused"


def declare(worker: Worker) -> None:
    """What the worker's destination needs, made before the run where the transport makes
    anything."""
    if isinstance(worker.transport, Declarations):
        worker.transport.declare(worker.destination)


class _Producer(Worker):
    def session(self) -> None:
        declare(self)

    def work(self) -> None:
        group = self.group
        rec, schedule = self.rec, self.schedule
        transport, destination = self.transport, self.destination
        send = transport.send
        send_frame = transport.send_frame if isinstance(transport, FramedSends) else None
        out = self.out
        body, size, crc = out.body, len(out.body), out.crc
        producer, persistent, correlation = self.producer_id, group.persistent, out.correlation
        # A message with nothing but the prefix's fields goes framed, without a Message:
        # building one and framing it from its attributes cost two to three times what
        # framing it from the fields does.
        framed = send_frame is not None and correlation is None and \
            not any(out.property_sets)
        head = producer.encode()
        deck, cards = out.deck, len(out.deck)
        transacted, commit_count = group.transacted, group.commit_count
        offset = EPOCH_OFFSET_NS
        seq = 0
        in_transaction: list[int] = []  # what this transaction sent so far
        for intended, now, properties in self.due_sends(group.messages):
            if cards:
                body, crc = deck[seq % cards]
                size = len(body)
            try:
                if framed:
                    send_frame(destination, plain_frame(head, seq, intended + offset,
                                                        now + offset, crc, body), seq)
                else:
                    send(destination, Message(body, producer, seq, intended + offset,
                                              now + offset, crc, properties, correlation,
                                              None, persistent))
            except TransportError as exc:
                if exc.kind == ROLLED_BACK:  # this send, and the transaction before it
                    self.uncommitted(in_transaction, exc)
                    in_transaction = []
                self.send_failed(seq, size, intended, exc)
                seq += 1
                out.position = seq
                self.sleep_until(now_ns() + int(ERROR_PAUSE_S * 1e9))
                continue
            done = now_ns()
            rec.service.append((done - now) // 1000)
            if schedule is not None:
                rec.delay.append((now - intended) // 1000)
            rec.sent += 1
            rec.bytes += size
            if transacted:
                in_transaction.append(seq)
            seq += 1
            # Kept as it goes: the interval boundary (move_to, inside due_sends) marks
            # where the measured span begins and ends in these numbers.
            out.position = seq
            if transacted and seq % commit_count == 0:
                self.commit(in_transaction)
                in_transaction = []
        if transacted and seq % commit_count:
            self.commit(in_transaction)


class Sender(_Producer):
    """Sends to a queue."""


class Publisher(_Producer):
    """Publishes to a topic."""


class Consumer(Worker):
    """Measures every message it receives. Where the transport has a network thread of its
    own, messages are taken in on that thread as they arrive (push) and this thread only
    watches the flags and the interval clock; otherwise this thread receives them (pull).

    A consumer that only measures takes each message's arrival time and counts it as it
    arrives, and measures it (fields, latency, sequence, CRC) with the next SETTLE_EVERY or at
    the next interval boundary (settle): the same figures, with the measuring run a batch at a
    time instead of cold after every wake-up."""

    def prepare(self) -> None:
        self.ready()
        super().prepare()  # connects and subscribes
        self.parts()

    def ready(self) -> None:
        """What measuring needs, before the connection is made."""
        self.count = 0
        self.last = now_ns()
        self.done = False
        self.lock = threading.Lock()
        # What consume() skips when it has nothing to do: read once, not per message.
        self.expected = self.tracker.expected if self.tracker is not None else None
        self.handles = type(self).handle is not Consumer.handle
        self.commit_every = self.group.commit_count if self.group.transacted else 0
        self.arrivals: list[tuple[int, bytes]] = []
        group = self.group
        self.slow = bool(group.consumer_rate or group.consumer_latency)
        self.gap_ns = 1e9 / group.consumer_rate if group.consumer_rate else 0.0
        if group.consumer_latency:
            # The time is spent in handle(), between the measuring and the acknowledgement.
            self.work_time = parse_work_time(group.consumer_latency).sampler(self.producer_id)
            self.handles = True
            self.handle = self._work_then(self.handle)  # type: ignore[method-assign]

    def _work_then(self, handle: Callable[[Message], str]) -> Callable[[Message], str]:
        work_time, sleep = self.work_time, time.sleep

        def working(message: Message) -> str:
            began = now_ns()
            sleep(work_time())
            self.rec.process.append((now_ns() - began) // 1000)
            return handle(message)
        return working

    def parts(self) -> None:
        """The optional parts this consumer uses, asked once its connection is open: whether
        a transport acknowledges may depend on it (a NATS JetStream context)."""
        t = self.transport
        self.acker = t if isinstance(t, Acknowledgements) and t.acknowledges() else None
        self.pusher = t if isinstance(t, PushedDelivery) else None
        self.inline = self.pusher is not None and self.pusher.inline

    def session(self) -> None:
        self.transport.subscribe(self.destination)

    def sinks(self) -> tuple[Callable[[Message], None], Callable[[bytes], None] | None,
                             Callable[[str | None, bytes], None] | None]:
        """What the transport hands pushed messages to (PushedDelivery.deliver): a Message, or
        where the consumer only measures, what came as it came, a framed payload or a
        header's value and a body (building a Message costs as much as measuring it)."""
        inline = self.inline
        if self.handles:
            return self._measure if inline else self._pushed, None, None
        if inline:
            return self._measure, self.consume_frame, self.consume_header
        return self._pushed, self._pushed_frame, self._pushed_header

    def _pushed(self, message: Message) -> None:
        """On the transport's thread; the lock keeps interval hand-offs whole."""
        with self.lock:
            self._measure(message)

    def _pushed_frame(self, payload: bytes, partition: int = -1) -> None:
        with self.lock:
            self.consume_frame(payload, partition)

    def _pushed_header(self, text: str | None, body: bytes) -> None:
        with self.lock:
            self.consume_header(text, body)

    def _measure(self, message: Message) -> None:
        """A pushed message, where no interval hand-off can run meanwhile: under the lock,
        or on the worker's own thread where the transport delivers inline."""
        if not self.done:
            try:
                self.consume(message, now_ns())
            except Exception as exc:  # never let a failure vanish into a client library
                self.failure = self.failure or f"{type(exc).__name__}: {exc}"
                self.rec.error("consume", exc)

    def work(self) -> None:
        if self.role.measures_only and not self.held():
            return
        receive, consume, lock = self.transport.receive, self.consume, self.lock
        pushed = False
        # Transacted sessions stay on this thread: begin, acks and commits must not interleave.
        pusher = self.pusher
        if pusher is not None and not self.group.transacted and self.push_safe() and \
                not self.slow:
            with lock:  # what arrived before the start is measured first, in order
                if pusher.deliver(*self.sinks()):
                    pushed = not self.inline
                    while (message := receive(0)) is not None:
                        consume(message, now_ns())
        try:
            self._receive(pushed)
        finally:
            with lock:
                self.done = True
                self.settle()  # what arrived last is measured too
        if pusher is not None:
            pusher.deliver(None)
        if self.group.transacted and self.count % self.group.commit_count:
            self.commit()

    def _receive(self, pushed: bool) -> None:
        """Receive until the stop, the -mg count, or an idle spell in the drain. pushed: the
        transport's own thread takes the messages in; this thread only wakes for the next
        interval boundary, at least every PUSHED_LOOK_S, or when the transport interrupts
        its wait (the stop, a lost connection)."""
        control, receive, consume, lock = self.control, self.transport.receive, self.consume, \
            self.lock
        # A transport that hands messages over inside receive() does so on this thread, where
        # each arrival already looked at the interval clock (_arrived, measure): after such
        # a receive there is nothing to check, and no other thread to lock out.
        inline, counted = self.inline, self.count
        # --consumer-rate: message k since the consumer last found nothing waiting is taken
        # no earlier than k gaps after the first (a consumer that waited for messages banks
        # no time to take a burst with).
        gap, taken, first = self.gap_ns, 0, 0
        while control.consuming and not self.done:
            timeout = POLL_S
            if pushed:
                timeout = min(max(self.next_boundary - now_ns(), 0) / 1e9, PUSHED_LOOK_S)
            elif taken and gap:
                due = first + int(taken * gap)
                if now_ns() < due and not self.sleep_until(due, "consuming"):
                    break
            try:
                # Pushed: returns None after the timeout, and reconnects a lost connection.
                message = receive(timeout)
            except TransportError as exc:
                self.receive_failed(exc)  # the transport reconnects
                message = None
                # An error that returns at once (a broker refusing each read) must not
                # spin this thread: the pause a producer makes after a failed send.
                time.sleep(ERROR_PAUSE_S)
            if message is not None:
                if gap:
                    if not taken:
                        first = now_ns()
                    taken += 1
                consume(message, now_ns())
                continue
            taken = 0
            if inline and self.count != counted:
                counted = self.count
                continue
            now = now_ns()
            with lock:
                if self.arrivals:
                    self.settle()
                if now >= self.next_boundary:
                    self.flush(now)
            if control.draining and not self.setup.checked and \
                    now - self.last >= control.drain_idle_ns:
                break

    def consume(self, message: Message, now: int) -> None:
        self.last = now
        seq = message.seq
        if self.measure(message.producer, seq, message.ts, message.sent, len(message.body),
                        now):
            crc_every = self.crc_every
            if crc_every and seq % crc_every == 0 and message.crc is not None \
                    and zlib.crc32(message.body) != message.crc:
                self.rec.corrupt += 1
        outcome = self.handle(message) if self.handles else HANDLED
        acker = self.acker
        if acker is not None:
            try:
                if outcome is HANDLED:
                    acker.ack(message)
                else:
                    acker.reject(message, outcome is RETRY)
            except TransportError as exc:
                # Unacknowledged: the broker redelivers, seen as a duplicate. Once an outage:
                # every message taken before the loss fails its ack the same way.
                self.call_failed("ack", exc)
        count = self.count = self.count + 1
        if self.commit_every and count % self.commit_every == 0:
            self.commit()
        if count == self.group.messages:
            self.done = True

    def consume_frame(self, payload: bytes, partition: int = -1) -> None:
        """consume() for a consumer that only measures, from a payload framed as
        harness.modules.interface.message.frame() frames it, as the transport received it: called
        where the transport hands messages over, which acknowledges them itself. partition:
        where the broker orders per partition (PartitionOrder), the payload's."""
        if not self.done:
            self._arrived((now_ns(), payload) if partition < 0 else
                          (now_ns(), payload, None, partition))

    def consume_header(self, text: str | None, body: bytes) -> None:
        """consume_frame() for a transport whose header HEADER carries the fields
        (harness.modules.interface.message.header()): that header's value (None where the message
        has none) and the body, as the transport received them."""
        if not self.done:
            self._arrived((now_ns(), body, text))

    def _arrived(self, arrival: tuple[Any, ...]) -> None:
        """Count a message that arrived, with its arrival time; measure it with the next
        SETTLE_EVERY, or at the next interval boundary, whichever comes first."""
        now = self.last = arrival[0]
        arrivals = self.arrivals
        arrivals.append(arrival)
        if len(arrivals) >= SETTLE_EVERY or now >= self.next_boundary or \
                len(arrival[1]) > SETTLE_LARGER:
            self.settle()
        count = self.count = self.count + 1
        if count == self.group.messages:
            self.done = True

    def settle(self) -> None:
        """Measure what arrived since the last settle, in order of arrival: where a hand-off
        can run meanwhile, under the lock."""
        arrivals, self.arrivals = self.arrivals, []
        for arrival in arrivals:
            now, payload = arrival[0], arrival[1]
            start = 0
            if len(arrival) == 4:
                self.partition = arrival[3]  # the order check's (SequenceTracker)
            if len(arrival) == 3:
                seq, ts, sent, crc, producer = from_header(arrival[2])
            else:
                try:
                    magic, _, flags, seq, ts, sent, crc, lp, lr, lc = _unpack(payload)
                except struct.error:  # shorter than the prefix: not the harness's
                    magic = None
                if magic == MAGIC:
                    at = _SIZE + lp
                    start, crc = at + lr + lc, crc if flags & 1 else None
                    try:
                        producer = payload[_SIZE:at].decode()
                    except UnicodeDecodeError:  # damaged: no producer of this run
                        producer = ""
                else:
                    producer, seq, ts, sent, crc = "", -1, 0, 0, None
            try:
                if self.measure(producer, seq, ts, sent, len(payload) - start, now):
                    crc_every = self.crc_every
                    if crc_every and crc is not None and seq % crc_every == 0 and \
                            zlib.crc32(memoryview(payload)[start:]) != crc:
                        self.rec.corrupt += 1
            except Exception as exc:  # never let a failure vanish into a client library
                self.failure = self.failure or f"{type(exc).__name__}: {exc}"
                self.rec.error("consume", exc)

    def measure(self, producer: str, seq: int, ts: int, sent: int, size: int,
                now: int) -> bool:
        """Count a message received at now (monotonic ns) and time it from the intended
        (ts) and actual (sent) send times it carries (epoch ns); False where it is not from
        this run's producers (another program, or an earlier run's leftovers): counted as
        foreign, not timed, not sequence-checked."""
        if now >= self.next_boundary:
            self.flush(now)
        rec = self.rec
        rec.received += 1
        rec.bytes += size
        expected = self.expected
        if expected is not None and expected.get(producer) == seq:
            # The next message of a producer the tracker knows, so one of this run's: the
            # common case, without the prefix check (a tenth of what measuring costs).
            expected[producer] = seq + 1
        else:
            if seq < 0 or not producer.startswith(self.run_prefix):
                rec.foreign += 1
                return False
            if expected is not None:
                self.tracker.check(producer, seq, now)  # type: ignore[union-attr]
            elif self.seen is not None:
                self.seen.add(producer, seq)
        arrived = now + EPOCH_OFFSET_NS
        rec.latency.append((arrived - ts) // 1000)
        rec.service.append((arrived - sent) // 1000)
        return True

    def handle(self, message: Message) -> str:
        """What the role does with a message after it is measured: HANDLED (acknowledged),
        RETRY (given back to be delivered again) or REFUSED (given back for good)."""
        return HANDLED

    def push_safe(self) -> bool:
        """Whether handle() may run on the client library's network thread: not if it waits
        for the broker, whose answer would arrive on that same, then blocked, thread."""
        return True


class Receiver(Consumer):
    """Receives from a queue."""


class Subscriber(Consumer):
    """Subscribes to a topic."""


class Responder(Consumer):
    """Receives requests from a queue and replies to each request's reply-to destination."""

    def push_safe(self) -> bool:
        return not self.group.persistent  # a persistent reply waits for the broker's receipt

    def handle(self, message: Message) -> str:
        rec = self.rec
        if message.reply_to is None:
            rec.error("reply", "a request without reply-to")
            return REFUSED  # it never will have one
        reply = Message(message.body, message.producer, message.seq, message.ts, message.sent,
                        message.crc, None, message.correlation_id, None, self.group.persistent)
        try:
            self.transport.send(message.reply_to, reply)
        except TransportError as exc:
            rec.error("reply", exc)
            return RETRY
        rec.sent += 1
        rec.bytes += len(reply.body)
        return HANDLED


class Requestor(Worker):
    """Sends a request with reply-to and correlation id, and waits for its reply in the same
    thread: latency is the round trip."""

    def session(self) -> None:
        declare(self)
        transport = self.transport
        if not isinstance(transport, TemporaryQueues):  # the role table's needs say so first
            raise TransportError(f"{transport.name} has no queue for replies")
        self.reply_to = transport.temporary_queue()
        transport.subscribe(self.reply_to)

    def work(self) -> None:
        group = self.group
        control, rec = self.control, self.rec
        transport = self.transport
        send, receive, destination = transport.send, transport.receive, self.destination
        body, size, crc = self.out.body, len(self.out.body), self.out.crc
        producer, persistent = self.producer_id, group.persistent
        reply_to = self.reply_to
        timeout_ns = int(group.reply_timeout * 1e9)
        offset = EPOCH_OFFSET_NS
        seq = 0
        for intended, now, properties in self.due_sends(group.messages):
            message = Message(body, producer, seq, intended + offset, now + offset, crc,
                              properties, f"{producer}:{seq}", reply_to, persistent)
            try:
                send(destination, message)
                if group.transacted:
                    # The request must be visible before its reply can come back.
                    self.commit()
            except TransportError as exc:
                # A failed request never completes: its latency is at least the time it took
                # to fail, and its number is not used again.
                rec.error(exc.kind or "send", exc)
                self._round_trip(intended, now, now_ns())
                seq += 1
                if not exc.answered:
                    self.sleep_until(now_ns() + int(ERROR_PAUSE_S * 1e9))
                continue
            rec.sent += 1
            rec.bytes += size
            deadline = now + timeout_ns
            # Samples stay in the interval of the request's intended time (due_sends() moves on).
            while True:
                try:
                    reply = receive(POLL_S)
                except TransportError as exc:
                    if exc.answered:  # the broker's own answer: no reply will come
                        if exc.kind == "timeout":  # the transport timed the reply itself
                            rec.timeouts += 1
                        rec.error(exc.kind or "reply", exc)
                        self._round_trip(intended, now, now_ns())
                        break
                    self.receive_failed(exc)
                    reply = None
                done = now_ns()
                if reply is not None:
                    if reply.seq == seq and reply.producer == producer:
                        self._round_trip(intended, now, done)
                        rec.received += 1
                        rec.bytes += len(reply.body)
                        break
                    continue  # a late reply to a request that already timed out
                if done >= deadline or not control.consuming:
                    # Recorded as well as counted: a broker that stops answering must not
                    # look faster than one that answers slowly.
                    rec.timeouts += 1
                    rec.error("timeout", f"no reply within {group.reply_timeout:g} s")
                    self._round_trip(intended, now, done)
                    break
            seq += 1

    def _round_trip(self, intended: int, sent: int, done: int) -> None:
        rec = self.rec
        rec.latency.append((done - intended) // 1000)
        rec.service.append((done - sent) // 1000)
        if self.schedule is not None:
            rec.delay.append((sent - intended) // 1000)


# The thread class that plays each of the six roles of harness.modules.interface.roles.ROLES.
WORKERS: dict[str, type[Worker]] = {
    "Sender": Sender, "Receiver": Receiver, "Publisher": Publisher, "Subscriber": Subscriber,
    "Requestor": Requestor, "Responder": Responder,
}
