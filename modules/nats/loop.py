"""The event loop, turned on the worker's thread: a turn publishes what is queued and
runs what the socket brought; a wait runs the loop until its timer or an arrival."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.interface.settings import Settings
from harness.modules.kit.turned import TurnedLoop
from harness.modules.nats.common import CALL_TIMEOUT_S, _reason, _Resumed, _wake, nats
from harness.modules.nats.options import NatsOptions


class Turning:
    """The loop part: nats-py's event loop turned on the worker's thread, a turn publishing what
    is queued and running what the socket brought. The state it uses is made in
    NatsTransport.__init__."""

    settings: Settings[NatsOptions]
    o: NatsOptions
    loop: TurnedLoop

    # -- the loop, turned on this thread
    def _run(self, coro: Any, what: str) -> Any:
        try:
            return self.loop.run_until_complete(asyncio.wait_for(coro, CALL_TIMEOUT_S))
        except TimeoutError:
            raise TransportError(f"{what}: no answer within {CALL_TIMEOUT_S:g} s") from None
        except (nats.errors.Error, OSError) as exc:
            raise TransportError(f"{what}: {_reason(exc)}") from None

    def _turn(self, timeout: float) -> None:
        """Publish what is queued, then wait up to timeout for the socket and run what it
        brought. Where there is nothing to publish or fetch (a producer waiting for its next
        send with acknowledgements outstanding, a consumer waiting for messages), the loop
        runs until a timer or an arrival stops it, and no coroutine takes part."""
        if self.queued or self.to_ack or self.pull is not None or self.resuming:
            self._turn_task(timeout)
            return
        loop = self.loop
        if timeout <= 0 or len(self.inbox):
            loop.turn(once=True)  # what the socket holds now
            return
        # Stopped by the timer itself, in the pass that runs it: through a task, the wait's
        # end took two passes more.
        timer = loop.call_later(timeout, loop.stop)
        self.stops_on_arrival = True
        try:
            loop.turn()
        finally:
            self.stops_on_arrival = False
            timer.cancel()

    def _end_wait(self) -> None:
        """What _turn waits for came (a message for receive(), room in the window)."""
        if self.waiter is not None:
            _wake(self.waiter)
        elif self.stops_on_arrival:
            self.loop.stop()

    def _turn_task(self, timeout: float) -> None:
        """A turn by the one task that turns the loop. run_until_complete would make a task a
        turn and go round the loop three times; one long-lived task woken a turn costs less
        (contrib/bench/loop_turn.py compares them with a bare publish loop)."""
        turner = self.turner
        self.turn_for = timeout
        if turner is None or turner.done():
            self.turner = self.loop.create_task(self._turning())
        elif self.kick is not None:
            _wake(self.kick)
        self.loop.turn()
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure

    def _stop_turner(self) -> None:
        """Before the loop closes: a task still pending there would be reported destroyed."""
        turner, self.turner = self.turner, None
        if turner is not None and not turner.done():
            turner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                self.loop.run_until_complete(turner)

    async def _turning(self) -> None:
        loop = self.loop
        while True:
            try:
                await self._wait(self.turn_for)
            except Exception as exc:  # raised by _turn, on the thread that asked
                self.failure = exc
            finally:
                # After what the turn made ready (nats-py's flusher writing what _pump
                # published, the socket polled once): the loop goes round once more.
                loop.call_soon(loop.stop)
            self.kick = loop.create_future()
            await self.kick

    async def _wait(self, timeout: float) -> None:
        """Publish what is queued, then wait up to timeout for a message (a pull consumer:
        fetch one batch)."""
        await self._pump()
        if self.pull is not None and self.subscription is not None:
            await self._fetch(timeout)
        elif timeout > 0 and not len(self.inbox):
            waiter = self.waiter = self.loop.create_future()
            timer = self.loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self.waiter = None

    async def _pump(self) -> None:
        """Publish the queued sends and acknowledgements (on the loop)."""
        if self.resuming:
            resuming, self.resuming = self.resuming, []
            for publish, waiting, seq in resuming:
                try:
                    await _Resumed(publish, waiting)
                except nats.errors.Error as exc:
                    self._failed((seq,), exc)
        if self.to_ack:
            acks, self.to_ack = self.to_ack, []
            for raw in acks:
                # Not contextlib.suppress: a context manager a message is measurable here.
                try:  # noqa: SIM105
                    await raw.ack()
                except nats.errors.Error:
                    pass  # a lost connection: the server delivers the message again
        if not self.queued:
            return
        queued, self.queued = self.queued, []
        nc, js, pending = self.nc, self.js, self.pending
        published = 0
        try:
            if js is None:
                for subject, payload, reply, headers, _, _ in queued:
                    await nc.publish(subject, payload, reply, headers)
                    published += 1
                return
            # The stream is checked in the acknowledgement, not by an expected-stream header
            # on every publish, which nats-py would encode in Python each time.
            for subject, payload, _, headers, seq, sent in queued:
                future = await js.publish_async(subject, payload, headers=headers)
                pending.append((future, seq, sent))
                published += 1
        except nats.errors.Error as exc:
            # Not published (nats-py's buffer for an outage is full, or it gave up): failed.
            # Those before it were published: sent, and JetStream's await their
            # acknowledgement among the pending, so none is counted twice.
            self._failed([seq for *_, seq, _ in queued[published:]], exc)
        finally:
            self._watch_oldest()

