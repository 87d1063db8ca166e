"""pika's I/O loop, turned on the worker's thread: a turn waits for the socket and runs what
arrived and what fell due; many clients a thread turn a connection's loop where its poller
is readable."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.modules.amqp.common import RPC_TIMEOUT_S, _noop, _poller_fd
from harness.modules.amqp.options import AmqpOptions
from harness.modules.interface.base import TransportError
from harness.modules.interface.settings import Settings


class Turning:
    """The loop part: pika's I/O loop turned on the worker's thread. The state it uses is
    made in AmqpTransport.__init__."""

    settings: Settings[AmqpOptions]
    o: AmqpOptions

    # -- pika's I/O loop, turned on this thread
    def _turn(self, timeout: float) -> None:
        """Wait up to timeout for the socket, then run what arrived and what fell due."""
        io = self.conn.ioloop
        timer = io.call_later(max(timeout, 0.0), _noop)  # poll() waits no longer
        try:
            io.poll()
            io.process_timeouts()
        finally:
            io.remove_timeout(timer)

    # -- many clients on one thread (--clients): each connection's loop is turned where the
    # worker's wait finds its poller readable (an epoll descriptor is, while one of its own
    # is ready)
    consumer_clients = True

    def fileno(self) -> int:
        return _poller_fd(self.conn) if self.conn is not None and self.connected else -1

    def readable(self) -> None:
        if self.conn is not None and self.connected and not self.dispatching:
            self._turn(0)

    def _until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.close_reason is not None and not self.connected:
                raise TransportError(f"{what}: {self.close_reason}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"{what}: no answer within {timeout:g} s")
            self._turn(min(remaining, 0.05))

    def _rpc(self, start: Callable[[Callable[..., None]], None], what: str) -> Any:
        """Start a broker call with a callback, then turn the loop until it answers."""
        answers: list[Any] = []
        start(lambda *args: answers.append(args[-1] if args else None))
        self._until(lambda: bool(answers), RPC_TIMEOUT_S, what)
        return answers[0]

    def _unwritten(self) -> int:
        # pika keeps no public count of what waits in its write buffer; its transport does.
        transport = getattr(self.conn, "_transport", None)
        return transport.get_write_buffer_size() if transport is not None else 0

