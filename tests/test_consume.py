"""A consumer that only measures takes what came as it came: framed payloads
(consume_frame) or a header's value and a body (consume_header); every other consumer takes
Messages (consume). All must count, time and check a stream alike."""

import time
import zlib
from collections import deque

import pytest
from harness.modules.interface.message import Message, frame, from_header, header, unframe
from harness.modules.loopback import LoopbackTransport, reset_broker

from harness.clock import now_ns
from harness.engine.roles import SETTLE_EVERY, SETTLE_LARGER, Receiver, Subscriber
from harness.engine.worker import Control, WorkerSetup
from harness.plan.group import group_spec
from harness.plan.run import RunSpec, assign_group_names
from harness.stats.timeline import Timeline

NS = 1_000_000_000


def consumer(role, crc=0.0):
    reset_broker()
    group = group_spec({"module": f"loopback.{role}", "destination": "T", "crc": crc})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=60.0)
    start = now_ns()
    setup = WorkerSetup(group, 0, 0, 0, run.node, Control(Timeline.of(run, start), NS),
                        deque(), LoopbackTransport(group.settings(run.node, 0, 0, 0)),
                        bytes(16), role == "Subscriber", NS, run_id="test")
    worker = {"Receiver": Receiver, "Subscriber": Subscriber}[role](setup)
    worker.prepare()
    worker.move_to(start)
    return worker


def stream(prefix):
    """Payloads with every case a consumer tells apart: in order, a gap, a late fill,
    a duplicate, another producer, a corrupt body, a large body, another run's message,
    another program's payloads (short and long)."""
    sent = time.time_ns() - 5_000_000  # 5 ms before now: latencies of about 5,000 us

    def framed(producer, seq, body=b"x" * 100, crc=None):
        crc = zlib.crc32(body) if crc is None else crc
        return frame(Message(body, prefix + producer, seq, sent - 1_000_000, sent, crc),
                     "replies" if seq == 1 else "", "c" if seq == 2 else "")

    return [framed("a", 0), framed("a", 1), framed("a", 3), framed("a", 2), framed("a", 2),
            framed("b", 0), framed("b", 1, b"y" * 50, crc=7), framed("b", 2, bytes(20_000)),
            frame(Message(b"z", "other-run:a", 0, sent, sent)), b"", b"short",
            b"XY" + bytes(100)]


def headed(prefix):
    """The same stream as the transports with headers deliver it: the harness header's value
    (none from another program, or another program's header of that name) and the body."""
    out = []
    for payload in stream(prefix):
        message = unframe(payload)
        out.append((header(message) if message.seq >= 0 else None, bytes(message.body)))
    # "1,2,3,-,..." parses (a producer id may hold commas) and is another run's.
    return [*out, ("1,2,3,-,not,the,harness's", b"q" * 10), ("just-a-word", b"w")]


def as_message(delivery):
    """What the transport would build instead: the Message consume() takes."""
    if len(delivery) == 1:
        return unframe(delivery[0])
    seq, ts, sent, crc, producer = from_header(delivery[0])
    return Message(delivery[1], producer, seq, ts, sent, crc)


@pytest.mark.parametrize("role", ["Subscriber", "Receiver"])
@pytest.mark.parametrize("path, received, foreign, extra_bytes", [
    ("frame", 12, 4, 0), ("header", 14, 6, 11)])
def test_what_came_is_measured_as_messages_are(role, path, received, foreign, extra_bytes):
    by_message, by_path = consumer(role, crc=1.0), consumer(role, crc=1.0)
    before = time.time_ns()  # before the stream is stamped: the window holds every wait
    if path == "frame":
        deliveries = [(p,) for p in stream(by_message.run_prefix)]
        take, sink = by_path.consume_frame, 1
    else:
        deliveries, take, sink = headed(by_message.run_prefix), by_path.consume_header, 2
    assert by_path.sinks()[sink] is not None  # a Subscriber or Receiver takes what came
    for delivery in deliveries:
        by_message.consume(as_message(delivery), now_ns())
        take(*delivery)
    assert by_path.count == len(deliveries)  # counted as they came
    by_path.settle()  # the worker's loop does this (at the latest when it finds nothing)
    after = time.time_ns()
    a, b = by_message.rec, by_path.rec
    counters = ("received", "bytes", "foreign", "corrupt", "duplicated", "reordered", "lost",
                "errors")
    assert {c: getattr(b, c) for c in counters} == {c: getattr(a, c) for c in counters}
    assert (a.received, a.foreign, a.corrupt, a.errors) == (received, foreign, 1, 0)
    assert a.bytes == 100 * 6 + 50 + 20_000 + 1 + 0 + 5 + 102 + extra_bytes
    if role == "Subscriber":  # the only consumer: sequences checked
        assert (a.duplicated, a.reordered) == (1, 1)
        assert by_path.tracker.expected == by_message.tracker.expected
    else:  # competing receivers: what each saw, for the run's check
        assert by_path.seen.bits == by_message.seen.bits
    # Timed from the intended and the actual send: 1 ms apart, both in the window.
    assert len(b.latency) == len(b.service) == len(a.latency) == 8
    for latency, service in zip(b.latency, b.service, strict=True):
        assert latency - service == 1000
        assert 5000 <= service <= 5000 + (after - before) // 1000 + 1000
    assert by_path.count == by_message.count == received


def test_a_framed_payload_with_a_damaged_producer_id_is_foreign():
    from harness.modules.interface.message import PREFIX
    worker = consumer("Subscriber")
    payload = stream(worker.run_prefix)[0]
    damaged = payload[:PREFIX.size] + b"\xff" * 5 + payload[PREFIX.size + 5:]
    worker.consume_frame(damaged)
    worker.settle()
    assert (worker.rec.received, worker.rec.foreign, worker.rec.errors) == (1, 1, 0)
    assert worker.failure is None


def test_a_framed_consumer_stops_at_its_message_count():
    worker = consumer("Subscriber")
    worker.group.messages = 3
    for payload in stream(worker.run_prefix):
        worker.consume_frame(payload)
    worker.settle()
    assert worker.done and worker.count == worker.rec.received == 3


def test_what_came_is_measured_a_batch_at_a_time():
    worker = consumer("Subscriber")
    payloads = [frame(Message(b"x", worker.run_prefix + "a", seq, time.time_ns(),
                              time.time_ns())) for seq in range(SETTLE_EVERY + 2)]
    for payload in payloads[:SETTLE_EVERY - 1]:
        worker.consume_frame(payload)
    assert (worker.count, worker.rec.received, len(worker.rec.latency)) == \
        (SETTLE_EVERY - 1, 0, 0)
    worker.consume_frame(payloads[SETTLE_EVERY - 1])  # the batch is full: measured
    assert worker.rec.received == len(worker.rec.latency) == SETTLE_EVERY
    assert worker.tracker.expected == {worker.run_prefix + "a": SETTLE_EVERY}
    assert worker.arrivals == []


def test_a_large_message_is_measured_as_it_arrives():
    worker = consumer("Subscriber")
    sent = time.time_ns()
    worker.consume_frame(frame(Message(b"x", worker.run_prefix + "a", 0, sent, sent)))
    assert worker.rec.received == 0
    worker.consume_frame(frame(Message(bytes(SETTLE_LARGER), worker.run_prefix + "a", 1, sent,
                                       sent)))
    assert worker.rec.received == 2 and worker.arrivals == []


def test_what_came_before_an_interval_boundary_is_measured_in_that_interval():
    worker = consumer("Subscriber")
    sent = time.time_ns()
    first = worker.interval_index
    for seq in range(3):
        worker.consume_frame(frame(Message(b"x", worker.run_prefix + "a", seq, sent, sent)))
    worker.next_boundary = now_ns()  # the interval ends before the next message comes
    worker.consume_frame(frame(Message(b"x", worker.run_prefix + "a", 3, sent, sent)))
    (_, index, sample), = worker.setup.outbox  # the interval handed off
    assert index == first
    assert sample.counters["received"] == len(sample.values["latency"]) == 3
    assert worker.interval_index > first
    assert worker.rec.received == 1  # the fourth, in the next interval


def test_a_consumer_that_handles_messages_takes_no_frames():
    from harness.engine.roles import Responder

    reset_broker()
    group = group_spec({"module": "loopback.Responder", "destination": "Q"})
    assign_group_names([group])
    run = RunSpec(groups=[group], interval=60.0)
    setup = WorkerSetup(group, 0, 0, 0, run.node,
                        Control(Timeline.of(run, now_ns()), NS), deque(),
                        LoopbackTransport(group.settings(run.node, 0, 0, 0)), bytes(16), True,
                        NS, run_id="test")
    responder = Responder(setup)
    responder.prepare()
    assert responder.sinks()[1:] == (None, None)  # it needs the reply-to a Message carries

