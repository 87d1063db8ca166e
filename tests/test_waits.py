"""Waits in the client libraries' I/O loops end when asked: a producer with confirmations
outstanding waits there until its next send is due, often for less than a millisecond, and
epoll alone would keep it to the next whole one (its sends late by the harness's own doing)."""

import os
import resource
import select
import selectors
import socket
import statistics
import time
from collections.abc import Callable

import pytest
from harness.modules import transport_class
from harness.modules.interface.base import connect
from harness.modules.kit.selector import FD_SETSIZE, MicrosecondEpoll, MicrosecondSelector, wait

from tests.conftest import settings_for

ASKED_S = 0.0003
# epoll would take 1 ms at least; a wake-up on these machines is about 80 us late.
WITHIN_S = 0.0008


def median_wait(turn: Callable[[float], object], times: int = 21) -> float:
    took = []
    for _ in range(times):
        start = time.perf_counter()
        turn(ASKED_S)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def selector_wait() -> tuple[Callable[[float], list], socket.socket, Callable[[], None]]:
    ours, theirs = socket.socketpair()
    selector = MicrosecondSelector()
    selector.register(ours, selectors.EVENT_READ)

    def close() -> None:
        selector.close()
        ours.close()
    return selector.select, theirs, close


def epoll_wait() -> tuple[Callable[[float], list], socket.socket, Callable[[], None]]:
    ours, theirs = socket.socketpair()
    epoll = MicrosecondEpoll()
    epoll.register(ours.fileno(), select.EPOLLIN)

    def close() -> None:
        epoll.close()
        ours.close()
    return epoll.poll, theirs, close


@pytest.mark.parametrize("make", [selector_wait, epoll_wait], ids=["asyncio", "pika"])
def test_a_wait_ends_when_asked_and_at_once_when_a_socket_is_ready(make):
    poll, theirs, close = make()
    try:
        assert ASKED_S <= median_wait(poll) < WITHIN_S
        # Longer than a millisecond: the whole milliseconds in epoll, the rest after.
        start = time.perf_counter()
        assert poll(0.0024) == []
        assert 0.0024 <= time.perf_counter() - start < 0.0024 + WITHIN_S - ASKED_S
        theirs.send(b"x")
        start = time.perf_counter()
        assert len(poll(5.0)) == 1
        assert time.perf_counter() - start < 0.1
        assert len(poll(ASKED_S)) == 1  # less than a millisecond: select(), then epoll
    finally:
        close()
        theirs.close()


def test_an_epoll_descriptor_select_cannot_take_waits_as_epoll_does():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = FD_SETSIZE + 10
    if soft <= high:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, high + 1), hard))
    epoll = select.epoll()
    os.dup2(epoll.fileno(), high)  # select() on it would raise "filedescriptor out of range"
    try:
        start = time.perf_counter()
        assert wait(epoll.poll, high, ASKED_S) == []
        assert time.perf_counter() - start >= ASKED_S
    finally:
        os.close(high)
        epoll.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("module, options", [
    ("amqp.Sender", {"confirm": 20}),
    ("nats.Publisher", {"jetstream": True}),
], ids=["pika", "nats-py"])
def test_a_producer_with_confirmations_waits_in_its_loop_as_long_as_asked(brokers, module,
                                                                        options):
    # The turn a producer's idle() takes while confirmations are outstanding.
    transport = transport_class(module.split(".")[0])(settings_for(module, **options))
    connect(transport)
    try:
        assert ASKED_S <= median_wait(transport._turn) < WITHIN_S
    finally:
        transport.close()
