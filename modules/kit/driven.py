"""What the transports whose client library's I/O loop the worker thread turns itself (pika's
SelectConnection, Proton's container, nats-py's asyncio loop) share: a send queues, flush()
writes; receive() turns the loop, which hands each message to the measurement on this same
thread or to the inbox; a lost connection is opened again from this thread
(harness.modules.kit.reconnect); and the sends awaiting the broker's confirmation, which become
failed sends when it is lost."""

from __future__ import annotations

import contextlib
import time
from abc import abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Message
from harness.modules.interface.optional import ClientLoop
from harness.modules.interface.settings import Settings
from harness.modules.kit.gauge import Gauge
from harness.modules.kit.network import NetworkTransport
from harness.modules.kit.reconnect import Reconnecting


class DrivenTransport(Reconnecting, NetworkTransport, ClientLoop):
    # Sends queued before they are written out (and before a producer that is behind its
    # schedule writes; one that is ahead writes before it sleeps): a turn of the library's
    # loop per batch, the batch's first message waiting for its last.
    write_every: ClassVar[int] = 64
    inline = True

    def __init__(self, settings: Settings[Any]) -> None:
        super().__init__(settings)
        self.unwritten = 0
        # (delivery handle, sequence number, actual send ns) of sends awaiting confirmation
        self.pending: deque[tuple[Any, int, int]] = deque()
        # Inside the library's dispatch (a Responder replying as a request arrives): nothing
        # may turn the loop again there.
        self.dispatching = False
        # A producer whose sends await confirmation waits in the loop until its next send is
        # due (idle), and that wait must end when asked: the loop waits to the microsecond
        # (harness.modules.kit.selector), which costs every other wait a little.
        self.exact_waits = settings.publishes and self.confirms(settings)
        # One of many clients a thread waits on together (Multiplexed, --clients).
        self.shares_thread = False
        # Asks the broker what waits for this consumer (harness.modules.kit.gauge), where the
        # transport can and the connection is a thread's own.
        self.gauge: Gauge | None = None

    def multiplexed(self) -> None:
        self.shares_thread = True

    def gauge_with(self, ask: Callable[[], None]) -> None:
        """On a new subscription: ask() the broker what waits for it from now on (the
        transport calls feedback.waiting() with the answer); what an earlier subscription
        was told no longer holds."""
        self.feedback.partitions = {}
        self.gauge = None if self.shares_thread else Gauge(ask)

    def arrived(self, raw: Any) -> None:
        # On the thread that turns the loop, inside receive(): deliver() cannot run meanwhile.
        sink = self.sink
        if sink is None:
            self.inbox.put(raw)
        else:
            sink(self.message(raw))

    @abstractmethod
    def _turn(self, timeout: float) -> None:
        """Wait up to timeout for the socket, then run what it brought."""

    @abstractmethod
    def _write_out(self) -> None:
        """Turn the loop until what send() queued is written (or the broker holds it back
        for longer than the transport waits)."""

    def _tend(self) -> None:
        """Between receives: what the transport does beside taking messages."""

    def _sent(self, handle: Any, seq: int) -> None:
        """Count a queued send (seq: its sequence number); write out every write_every, never
        inside a dispatch."""
        if handle is not None:
            self.pending.append((handle, seq, time.monotonic_ns()))
        self.unwritten += 1
        if self.unwritten >= self.write_every and not self.dispatching:
            try:
                self.flush()
            except TransportError as exc:
                raise self.queued_failure(exc, handle, seq) from None

    def queued_failure(self, exc: TransportError, handle: Any, seq: int) -> TransportError:
        """What to raise for a failure in what a send does after it queued its message
        (handle: its entry in pending, or None): that send's outcome is in the feedback,
        awaiting the broker's word in pending (in doubt once the connection is lost) or in
        doubt now (the library held it, and may have written it), never a failure counted
        again. Raised from an except clause: a try costs a send nothing."""
        if exc.reported:
            return exc
        if handle is None:
            self.feedback.doubt.append((seq, f"queued, then the connection failed: {exc}"))
        return TransportError(str(exc), exc.kind, reported=True)

    def idle(self, seconds: float) -> None:
        if self.pending and self.connected and not self.dispatching:
            self._turn(seconds)
        else:
            time.sleep(seconds)

    def _lose_pending(self, reason: str) -> None:
        """The sends still awaiting the broker's word, in doubt: it may have kept them."""
        while self.pending:
            _, seq, _ = self.pending.popleft()
            self.feedback.doubt.append((seq, reason))

    def flush(self) -> None:
        self.unwritten = 0
        if self.gauge is not None:  # a consumer held by --backlog flushes, and receives not:
            self.gauge.tick()       # the broker's answer is read by a turn of its own
            if self.connected:
                self._turn(0)
        if not self.connected:
            with contextlib.suppress(TransportError):
                self._check()
            return
        self._write_out()

    def receive(self, timeout: float) -> Message | None:
        self._ready(timeout)
        if not len(self.inbox):
            if timeout <= 0 and self.sink is not None:
                # Handing over to deliver(): the caller drains what came before; turning
                # the loop would measure newer messages first.
                return None
            self._turn(timeout)
        self._tend()
        if self.gauge is not None:
            self.gauge.tick()
        return self.take(0)
