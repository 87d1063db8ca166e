"""The embedded broker's own semantics, through the transport interface."""

import threading

import pytest
from harness.modules.interface.base import TransportError
from harness.modules.interface.base import connect as open_connection
from harness.modules.interface.message import Destination, Message
from harness.modules.loopback import LoopbackTransport, reset_broker

from tests.conftest import settings_for

Q = Destination("queue", "q")
T = Destination("topic", "t")


def message(seq):
    return Message(b"body", "p", seq, 0, 0)


@pytest.fixture
def connect():
    reset_broker()
    made = []

    def make(subscribe=None):
        transport = LoopbackTransport(settings_for("loopback.Receiver"))
        open_connection(transport)
        if subscribe is not None:
            transport.subscribe(subscribe)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()


def drain(transport):
    seqs = []
    while (m := transport.receive(0.01)) is not None:
        seqs.append(m.seq)
    return seqs


def test_queue_delivers_in_order_to_competing_consumers_once(connect):
    sender, a, b = connect(), connect(Q), connect(Q)
    for seq in range(10):
        sender.send(Q, message(seq))
    got_a, got_b = drain(a), drain(b)
    assert sorted(got_a + got_b) == list(range(10))


def test_topic_fans_out_to_each_subscriber(connect):
    publisher, a, b = connect(), connect(T), connect(T)
    for seq in range(5):
        publisher.send(T, message(seq))
    assert drain(a) == drain(b) == list(range(5))


def test_nothing_is_visible_before_commit_and_abort_discards(connect):
    sender, receiver = connect(), connect(Q)
    sender.begin()
    sender.send(Q, message(0))
    assert receiver.receive(0.01) is None
    sender.commit()
    assert drain(receiver) == [0]
    sender.begin()
    sender.send(Q, message(1))
    sender.abort()
    assert receiver.receive(0.01) is None


def test_aborted_receive_is_redelivered(connect):
    sender, receiver = connect(), connect(Q)
    for seq in range(3):
        sender.send(Q, message(seq))
    receiver.begin()
    assert [receiver.receive(0.01).seq for _ in range(2)] == [0, 1]
    receiver.abort()
    assert drain(receiver) == [0, 1, 2]


def test_blocked_consumer_wakes_when_a_message_arrives(connect):
    sender, receiver = connect(), connect(Q)
    got = []
    thread = threading.Thread(target=lambda: got.append(receiver.receive(5.0)))
    thread.start()
    sender.send(Q, message(7))
    thread.join(2.0)
    assert got and got[0].seq == 7


def test_temporary_queues_are_distinct(connect):
    transport = connect()
    assert transport.temporary_queue() != transport.temporary_queue()


def test_one_subscription_per_transport(connect):
    transport = connect(Q)
    with pytest.raises(TransportError):
        transport.subscribe(T)


def test_a_full_destination_holds_the_sender_back_then_fails_it(connect, monkeypatch):
    import harness.modules.loopback as loopback
    monkeypatch.setattr(loopback, "CAPACITY", 5)
    monkeypatch.setattr(loopback, "FULL_TIMEOUT_S", 0.2)
    sender, receiver = connect(), connect(Q)
    for seq in range(5):
        sender.send(Q, message(seq))
    with pytest.raises(TransportError, match="full"):
        sender.send(Q, message(5))
    # Space made by a consumer lets a blocked sender through.
    threading.Timer(0.05, receiver.receive, args=(0.01,)).start()
    sender.send(Q, message(5))
    assert drain(receiver) == [1, 2, 3, 4, 5]
