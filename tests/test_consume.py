"""A consumer that only measures takes framed payloads as they came (consume_frame); every
other consumer takes Messages (consume). Both must count, time and check a stream alike."""

import time
import zlib
from collections import deque

import pytest
from harness.transports.loopback import LoopbackTransport, reset_broker
from harness.transports.message import Message, frame, unframe

from harness.clock import now_ns
from harness.engine.roles import Receiver, Subscriber
from harness.engine.worker import Control, WorkerSetup
from harness.spec.group import group_spec
from harness.spec.run import RunSpec, assign_group_names
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


@pytest.mark.parametrize("role", ["Subscriber", "Receiver"])
def test_framed_payloads_are_measured_as_messages_are(role):
    by_message, by_frame = consumer(role, crc=1.0), consumer(role, crc=1.0)
    payloads = stream(by_message.run_prefix)
    assert by_frame.sinks()[1] is not None  # a Subscriber or Receiver takes frames
    before = time.time_ns()
    for payload in payloads:
        by_message.consume(unframe(payload), now_ns())
        by_frame.consume_frame(payload)
    after = time.time_ns()
    a, b = by_message.rec, by_frame.rec
    counters = ("received", "bytes", "foreign", "corrupt", "duplicated", "reordered", "lost")
    assert {c: getattr(b, c) for c in counters} == {c: getattr(a, c) for c in counters}
    assert (a.received, a.foreign, a.corrupt) == (12, 4, 1)
    assert a.bytes == 100 * 6 + 50 + 20_000 + 1 + 0 + 5 + 102
    if role == "Subscriber":  # the only consumer: sequences checked
        assert (a.duplicated, a.reordered) == (1, 1)
        assert by_frame.tracker.expected == by_message.tracker.expected
    else:  # competing receivers: what each saw, for the run's check
        assert by_frame.seen.bits == by_message.seen.bits
    # Timed from the intended and the actual send: 1 ms apart, both in the window.
    assert len(b.latency) == len(b.service) == len(a.latency) == 8
    for latency, service in zip(b.latency, b.service, strict=True):
        assert latency - service == 1000
        assert 5000 <= service <= 5000 + (after - before) // 1000 + 1000
    assert by_frame.count == by_message.count == 12


def test_a_framed_consumer_stops_at_its_message_count():
    worker = consumer("Subscriber")
    worker.group.messages = 3
    for payload in stream(worker.run_prefix):
        worker.consume_frame(payload)
    assert worker.done and worker.rec.received == 3


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
    assert responder.sinks()[1] is None  # it needs the reply-to a Message carries

