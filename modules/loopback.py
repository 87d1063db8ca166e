"""The embedded in-process broker: queues with competing consumers, topics with fan-out,
request/reply over temporary queues, and transactions.

It lives inside one process (one broker per process) so that the main job runs without a
server and so that the harness can measure its own floor. The hand-off is a deque append
and popleft, which CPython makes atomic; consumers block on a condition only when their
queue is empty. For tests it injects faults (drop, duplicate, reorder, corrupt, and hang: the
send never returns, as a broker's flow control may hold one) on the n-th message sent to a
destination.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from harness.modules.interface.base import Capability, Transport, TransportError
from harness.modules.interface.message import Destination, Message
from harness.modules.interface.optional import (
    EmbeddedBroker,
    Multiplexed,
    PushedDelivery,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.options import option
from harness.modules.interface.settings import Settings
from harness.modules.kit.inbox import Full, Inbox

FAULT_ACTIONS = ("drop", "duplicate", "reorder", "corrupt", "hang")


def parse_fault(text: str) -> tuple[str, str, int]:
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in FAULT_ACTIONS or not parts[2].isdigit() \
            or int(parts[2]) < 1:
        raise ValueError(f"{text!r} is not ACTION:DESTINATION:N with ACTION one of "
                         f"{', '.join(FAULT_ACTIONS)} and N >= 1")
    return parts[0], parts[1], int(parts[2])


@dataclass(frozen=True)
class LoopbackOptions:
    """Run-wide: one broker serves every loopback group of a process."""

    loopback_capacity: float = option(
        0.0, "Simulate a broker that serves this many msg/s in all (one FIFO server, "
        "messages queue behind it); 0 = as fast as the hand-off.", scope="run", low=0)
    loopback_delay: float = option(
        0.0, "Milliseconds the simulated broker adds to every message (a fixed service or "
        "network time).", scope="run", low=0)
    faults: tuple[tuple[str, str, int], ...] | None = option(
        None, "Loopback fault ACTION:DESTINATION:N, ACTION one of "
        f"{', '.join(FAULT_ACTIONS)}, N the n-th message sent there (repeatable; for tests).",
        key="inject", scope="run", multiple=True,
        convert=lambda items: tuple(parse_fault(f) for f in items or []))


# Messages a queue (or one topic subscriber) holds before senders are held back, as a real
# broker's producer flow control would; without it an unconsumed destination fills memory.
CAPACITY = 1_000_000
# How long a send waits for space before it fails with a TransportError.
FULL_TIMEOUT_S = 1.0


def _queue() -> Inbox[Message]:
    return Inbox(CAPACITY, FULL_TIMEOUT_S)


class _Topic:
    __slots__ = ("subscribers",)

    def __init__(self) -> None:
        self.subscribers: tuple[Inbox[Message], ...] = ()

    def put(self, message: Message) -> None:
        for queue in self.subscribers:
            queue.put(message)


class _Faulty:
    """Wraps a destination's route and applies the planned fault to the n-th message (1-based)."""

    def __init__(self, route: Inbox[Message] | _Topic, plan: dict[int, str]) -> None:
        self.route = route
        self.plan = plan
        self.count = 0
        self.held: Message | None = None
        self.lock = threading.Lock()

    def put(self, message: Message) -> None:
        with self.lock:
            self.count += 1
            action = self.plan.get(self.count)
            if action != "hang":
                self._apply(action, message)
                return
        threading.Event().wait()  # outside the lock: the destination's other senders go on

    def _apply(self, action: str | None, message: Message) -> None:
        if action == "drop":
            return
        if action == "reorder":
            self.held = message
            return
        if action == "corrupt":
            message = _corrupted(message)
        self.route.put(message)
        if action == "duplicate":
            self.route.put(message)
        if self.held is not None and action != "reorder":
            held, self.held = self.held, None
            self.route.put(held)


def _corrupted(message: Message) -> Message:
    """A copy of message with one bit of its body flipped."""
    body = bytearray(message.body or b"\0")
    body[len(body) // 2] ^= 0x01
    return Message(bytes(body), message.producer, message.seq, message.ts, message.sent,
                   message.crc, message.properties, message.correlation_id, message.reply_to,
                   message.persistent)


class _Server:
    """A simulated broker's capacity: one FIFO server for the whole broker. A message
    finishes service 1/capacity seconds after the one before it (or after it arrives, if the
    server is idle), plus a fixed delay; a dispatcher thread hands each to its destination
    when it is done. Above capacity the backlog, and with it latency, grows without bound,
    as in a real saturated broker."""

    def __init__(self, capacity: float, delay_s: float) -> None:
        self.service_ns = int(1e9 / capacity) if capacity else 0
        self.delay_ns = int(delay_s * 1e9)
        self.free_at = 0
        self.pending: deque[tuple[int, Any, Message]] = deque()
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.running = True
        threading.Thread(target=self._dispatch, name="loopback-server", daemon=True).start()

    def put(self, route: Any, message: Message) -> None:
        with self.lock:
            now = time.monotonic_ns()
            self.free_at = max(now, self.free_at) + self.service_ns
            self.pending.append((self.free_at + self.delay_ns, route, message))
            if len(self.pending) == 1:
                self.wake.set()

    def _dispatch(self) -> None:
        pending = self.pending
        while self.running:
            if not pending:
                self.wake.wait(0.05)
                self.wake.clear()
                continue
            due, route, message = pending[0]
            wait = due - time.monotonic_ns()
            if wait > 0:
                time.sleep(min(wait / 1e9, 0.005))
                continue
            pending.popleft()
            route.put(message)

    def stop(self) -> None:
        self.running = False


class _Served:
    """A destination's route behind the simulated server."""

    __slots__ = ("route", "server")

    def __init__(self, route: Any, server: _Server) -> None:
        self.route = route
        self.server = server

    def put(self, message: Message) -> None:
        self.server.put(self.route, message)


class Broker:
    """The per-process broker; every LoopbackTransport in a process shares it."""

    def __init__(self, capacity: float = 0.0, delay_s: float = 0.0) -> None:
        self.server = _Server(capacity, delay_s) if capacity or delay_s else None
        self.lock = threading.Lock()
        self.queues: dict[str, Inbox[Message]] = {}
        self.topics: dict[str, _Topic] = {}
        self.routes: dict[Destination, Any] = {}
        self.faults: dict[str, dict[int, str]] = {}
        self.temp_ids = itertools.count(1)

    def inject(self, action: str, destination: str, nth: int) -> None:
        if action not in FAULT_ACTIONS:
            raise ValueError(f"unknown fault {action!r}; use one of {', '.join(FAULT_ACTIONS)}")
        with self.lock:
            self.faults.setdefault(destination, {})[nth] = action
            for key in [k for k in self.routes if k.name == destination]:
                del self.routes[key]

    def queue(self, name: str) -> Inbox[Message]:
        with self.lock:
            return self._queue(name)

    def _queue(self, name: str) -> Inbox[Message]:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = _queue()
        return queue

    def route(self, destination: Destination) -> Any:
        route = self.routes.get(destination)
        if route is not None:
            return route
        with self.lock:
            if destination.kind == "topic":
                route = self.topics.setdefault(destination.name, _Topic())
            else:
                route = self._queue(destination.name)
            plan = self.faults.get(destination.name)
            if plan:
                route = _Faulty(route, plan)
            if self.server is not None:
                route = _Served(route, self.server)
            self.routes[destination] = route
            return route

    def subscribe_topic(self, name: str) -> Inbox[Message]:
        queue = _queue()
        with self.lock:
            topic = self.topics.setdefault(name, _Topic())
            topic.subscribers = (*topic.subscribers, queue)
        return queue

    def unsubscribe_topic(self, name: str, queue: Inbox[Message]) -> None:
        with self.lock:
            topic = self.topics.get(name)
            if topic is not None:
                topic.subscribers = tuple(q for q in topic.subscribers if q is not queue)



_broker = Broker()
_broker_lock = threading.Lock()


def broker() -> Broker:
    return _broker


def reset_broker(capacity: float = 0.0, delay_s: float = 0.0) -> Broker:
    """A fresh broker for the next run in this process (runs must not see each other's
    messages); capacity (msg/s) and delay simulate a real broker's service."""
    global _broker
    with _broker_lock:
        if _broker.server is not None:
            _broker.server.stop()
        _broker = Broker(capacity, delay_s)
    return _broker


# What a consumer client takes a readable() at most: a backlog of a million must not keep its
# thread from the other clients and from the interval's end.
TAKE_AT_MOST = 1000


class LoopbackTransport(Transport, EmbeddedBroker, Transactions, TemporaryQueues, PushedDelivery,
                        Multiplexed):
    name = "loopback"
    description = "embedded in-process broker (no server; one broker per process)"
    Options = LoopbackOptions

    @classmethod
    def start_broker(cls, options: dict[str, Any]) -> None:
        given = {key: options[key] for key in ("loopback_capacity", "loopback_delay", "faults")
                 if key in options}
        o = LoopbackOptions(**given)
        started = reset_broker(o.loopback_capacity, o.loopback_delay / 1000)
        for action, destination, nth in o.faults or ():
            started.inject(action, destination, nth)

    @classmethod
    def endpoint(cls, settings: Settings[Any]) -> str:
        return "loopback (embedded)"
    capabilities = (Capability.QUEUES | Capability.TOPICS | Capability.TRANSACTIONS
                    | Capability.REQUEST_REPLY | Capability.TEMP_QUEUES
                    | Capability.PROPERTIES)

    @classmethod
    def problems(cls, settings: Settings[Any]) -> list[tuple[str, str]]:
        s = settings
        given = (("--host", s.host != "127.0.0.1"), ("--port", s.port), ("--user", s.user),
                 ("--protocol", s.protocol), ("--tls", s.tls), ("--client-id", s.client_id),
                 ("--connect-retry", s.connect_retry))
        return [(flag, "the loopback broker is inside each process: there is no connection "
                 "to set up") for flag, value in given if value]

    def __init__(self, settings: Settings[Any]) -> None:
        super().__init__(settings)
        self._broker = _broker
        self._inbox: Inbox[Message] | None = None
        self._topic: str | None = None
        self._tx_sends: list[tuple[Destination, Message]] | None = None
        self._tx_received: list[Message] = []
        # One of many clients of a thread (--clients): a consumer watches its inbox through
        # an eventfd, and hands what it takes to the sink on that thread.
        self.inline = False
        self._fd = -1
        self._sink: Any = None

    def open(self) -> None:
        self._broker = _broker

    def send(self, destination: Destination, message: Message) -> None:
        if self._tx_sends is not None:
            self._tx_sends.append((destination, message))
            return
        try:
            self._broker.route(destination).put(message)
        except Full:
            raise TransportError(f"loopback destination {destination.name} is full "
                                 f"({CAPACITY:,} messages): nothing consumes it fast enough"
                                 ) from None

    def subscribe(self, destination: Destination) -> None:
        if self._inbox is not None:
            raise TransportError("loopback transport already has a subscription")
        if destination.kind == "topic":
            self._inbox = self._broker.subscribe_topic(destination.name)
            self._topic = destination.name
        else:
            self._inbox = self._broker.queue(destination.name)
        if self.inline:
            self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._inbox.watch(self._fd)

    def receive(self, timeout: float) -> Message | None:
        message = self._inbox.get(timeout)  # type: ignore[union-attr]
        if message is not None and self._tx_sends is not None:
            self._tx_received.append(message)
        return message

    def temporary_queue(self) -> Destination:
        return Destination("queue", f"temp.{next(self._broker.temp_ids)}")

    # Many clients on one thread: a send is handed to the broker as it is made, and nothing
    # comes back to wait for; a consumer waits on its inbox's eventfd.
    consumer_clients = True

    def multiplexed(self) -> None:
        self.inline = True

    def deliver(self, sink: Any, frames: Any = None, headed: Any = None) -> bool:
        # A consumer thread receives as ever: only a client's messages are handed over.
        if not self.inline:
            return False
        self._sink = sink
        return True

    def fileno(self) -> int:
        return self._fd

    def readable(self) -> None:
        inbox, sink, fd = self._inbox, self._sink, self._fd
        if inbox is None or sink is None:
            return
        with contextlib.suppress(BlockingIOError):  # rung by nothing since: look all the same
            os.eventfd_read(fd)
        taken = 0
        while True:
            while taken < TAKE_AT_MOST and (message := inbox.get(0)) is not None:
                sink(message)
                taken += 1
            if taken >= TAKE_AT_MOST:
                os.eventfd_write(fd, 1)  # more to take: readable again, after the others
                return
            if inbox.arm():
                return

    def begin(self) -> None:
        self._tx_sends = []
        self._tx_received = []

    def commit(self) -> None:
        sends, self._tx_sends = self._tx_sends, None
        self._tx_received = []
        for destination, message in sends or ():
            self._broker.route(destination).put(message)

    def abort(self) -> None:
        self._tx_sends = None
        received, self._tx_received = self._tx_received, []
        if received and self._inbox is not None:
            self._inbox.put_front(received)

    def close(self) -> None:
        if self._fd >= 0:
            if self._inbox is not None:
                self._inbox.unwatch(self._fd)
            os.close(self._fd)
            self._fd = -1
        if self._topic is not None and self._inbox is not None:
            self._broker.unsubscribe_topic(self._topic, self._inbox)
        self._inbox = None
