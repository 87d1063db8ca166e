"""TurnedLoop.turn(), the nats transport's way into its event loop, behaves as run_forever():
each test runs both ways (lean, and run_forever() itself) on a real event loop."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from harness.modules.kit.turned import TurnedLoop


@pytest.fixture(params=[True, False], ids=["lean", "run_forever"])
def loop(request):
    loop = TurnedLoop()
    assert loop.lean, "this interpreter's event loop lacks what turn() relies on"
    loop.lean = request.param
    yield loop
    loop.close()


def test_a_pass_runs_what_is_ready_inside_the_running_loop(loop) -> None:
    seen = []

    def look() -> None:
        seen.append((asyncio.get_running_loop() is loop, loop.is_running()))

    loop.call_soon(look)
    loop.call_soon(loop.stop)
    loop.call_soon(look)  # after stop(), in the same pass: run_forever() runs it too
    loop.turn()
    assert seen == [(True, True), (True, True)]
    assert not loop.is_running()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    loop.call_later(0.02, loop.stop)
    started = time.monotonic()
    loop.turn()  # a stop is taken once: the next turn runs until its own
    assert time.monotonic() - started >= 0.02


def test_a_single_pass_runs_what_is_ready_and_the_socket_holds_and_waits_for_nothing(
        loop) -> None:
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        seen = []

        def first() -> None:
            seen.append("first")
            loop.call_soon(seen.append, "next pass")

        loop.add_reader(ours.fileno(), lambda: seen.append(ours.recv(100)))
        theirs.send(b"x")
        loop.call_soon(first)
        loop.call_later(1.5, seen.append, "timer")
        loop.call_later(1.5, loop.stop)  # a pass that waited would end here, not hang
        started = time.monotonic()
        loop.turn(once=True)
        assert sorted(seen, key=str) == [b"x", "first"]
        loop.turn(once=True)
        assert seen[2:] == ["next pass"]
        assert time.monotonic() - started < 1.0
        loop.remove_reader(ours.fileno())
    finally:
        ours.close()
        theirs.close()
    loop.call_later(0.02, loop.stop)
    started = time.monotonic()
    loop.turn()  # the single passes left no stop behind: this turn runs until its own
    assert time.monotonic() - started >= 0.02


def test_a_task_goes_on_across_turns_and_a_timer_ends_a_turn_on_time(loop) -> None:
    async def later() -> str:
        await asyncio.sleep(0.03)
        return "done"

    task = loop.create_task(later())
    started = time.monotonic()
    turns = 0
    while not task.done():
        loop.call_later(0.01, loop.stop)
        loop.turn()
        turns += 1
    assert task.result() == "done"
    assert time.monotonic() - started >= 0.03
    assert 3 <= turns <= 5


def test_a_socket_ends_a_waiting_turn_as_data_arrives(loop) -> None:
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        got = []

        def readable() -> None:
            got.append(ours.recv(100))
            loop.stop()

        loop.add_reader(ours.fileno(), readable)
        loop.call_later(0.02, theirs.send, b"x")  # on time, from inside the wait
        timer = loop.call_later(5.0, loop.stop)
        started = time.monotonic()
        loop.turn()
        timer.cancel()
        assert got == [b"x"]
        assert time.monotonic() - started < 1.0
        loop.remove_reader(ours.fileno())
    finally:
        ours.close()
        theirs.close()


def test_a_turn_inside_a_running_loop_is_refused(loop) -> None:
    other = asyncio.new_event_loop()

    async def inside() -> None:
        loop.turn()

    try:
        with pytest.raises(RuntimeError):
            other.run_until_complete(inside())
    finally:
        other.close()
    assert not loop.is_running()


def test_an_interrupt_leaves_the_loop_usable(loop) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    loop.call_soon(interrupt)
    with pytest.raises(KeyboardInterrupt):
        loop.turn()
    assert not loop.is_running()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    ran = []
    loop.call_soon(ran.append, 1)
    loop.call_soon(loop.stop)
    loop.turn()
    assert ran == [1]


def test_a_closed_loop_is_refused(loop) -> None:
    loop.close()
    with pytest.raises(RuntimeError):
        loop.turn()
