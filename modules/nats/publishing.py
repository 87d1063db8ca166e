"""A producer's side: core publishes driven by hand or queued for a turn, JetStream's
publish acknowledgements taken in order, timed, refused or in doubt."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination, Message, frame
from harness.modules.interface.settings import Settings
from harness.modules.kit.turned import TurnedLoop
from harness.modules.nats.common import (
    ACK_TIMEOUT_S,
    BY_HAND_FIRST,
    PENDING_SIZE,
    _reason,
    in_doubt,
    nats,
)
from harness.modules.nats.options import NatsOptions

from harness.clock import now_ns


class Publishing:
    """The producer part: core publishes driven by hand or queued for a turn, JetStream's
    publish acknowledgements taken in order: timed, refused or in doubt. The state it uses is
    made in NatsTransport.__init__."""

    settings: Settings[NatsOptions]
    o: NatsOptions
    loop: TurnedLoop

    def _failed(self, seqs: Iterable[int], exc: nats.errors.Error) -> None:
        """Sends nats-py refused to publish (closed, or its buffer for an outage is full)."""
        reason = f"send failed: {_reason(exc)}"
        self.feedback.failed.extend((seq, "send", reason) for seq in seqs)

    def _watch_oldest(self) -> None:
        """One done-callback, on the oldest publish awaiting acknowledgement: the server
        acknowledges in order, and asyncio's scheduling of a callback per publish cost more
        than the publish."""
        if self.pending:
            oldest = self.pending[0][0]
            if oldest is not self.watched:
                self.watched = oldest
                oldest.add_done_callback(self._acked)

    def _acked(self, future: asyncio.Future[Any]) -> None:
        """The oldest publish's acknowledgement (or its absence) arrived: take every one
        that has, in order."""
        at = now_ns()
        acks, feedback, stream = self.pending, self.feedback, self.send_stream
        while acks and acks[0][0].done():
            done, seq, sent = acks.popleft()
            if done.cancelled() or isinstance(done.exception(), in_doubt()):
                feedback.doubt.append((seq, "no publish acknowledgement (within "
                                       f"{ACK_TIMEOUT_S:g} s, or the connection was lost)"))
            elif done.exception() is not None:
                feedback.failed.append((seq, "nack", f"the server refused the message: "
                                        f"{_reason(done.exception())}"))
            elif done.result().stream != stream:
                # Its consumers read the run's stream: there, the message is not.
                feedback.failed.append((seq, "nack", f"stored in stream "
                                        f"{done.result().stream}, not {stream}: another "
                                        "stream holds the subject"))
            else:
                feedback.confirm_us.append((at - sent) // 1000)
        self._watch_oldest()
        if len(acks) <= self.room_at:
            # A producer waiting for room in the window has it. One that waits until its
            # next send is due (idle) stays in the loop: leaving and entering it again for
            # every acknowledgement cost more than the acknowledgement.
            self._end_wait()

    def _expire_acks(self) -> None:
        """Give up on acknowledgements older than ACK_TIMEOUT_S (a restarted server may or
        may not have stored the message): they become failed sends."""
        deadline = now_ns() - int(ACK_TIMEOUT_S * 1e9)
        for future, _, sent in list(self.pending):
            if sent > deadline:
                break
            future.cancel()

    # -- messages
    def send(self, destination: Destination, message: Message) -> None:
        reply = message.reply_to.name if message.reply_to is not None else ""
        self.send_frame(destination, frame(message, "", message.correlation_id or ""),
                        message.seq, reply, message.properties)

    def send_frame(self, destination: Destination, payload: bytes, seq: int, reply: str = "",
                   headers: dict[str, str] | None = None) -> None:
        if not self.connected or self.down:
            if self.down:
                self.loop.turn(once=True)  # nats-py's reconnection goes on in the loop
            if self.down:
                # nats-py would hold it for a reconnection that may never come, and it would
                # count as sent: it fails, as a send on any transport does while it
                # reconnects.
                raise TransportError("not connected: the connection was lost (reconnecting)")
            if not self.connected:
                self._check()
        self.unheard.last = seq
        js = self.js
        # The first sends since a write, as a paced producer's are even in a burst; an
        # unthrottled producer's others are queued (with its share of a turn a queued send
        # costs less than a publish driven by hand).
        if js is None and self.unwritten < BY_HAND_FIRST and not self.queued and \
                self.nc.pending_data_size + len(payload) <= PENDING_SIZE // 2:
            # Published now: nats-py's publish, driven to its end on this thread without
            # entering the loop. With room in its buffer it only appends the command and wakes
            # its flusher, so the loop's next pass writes it: a paced send then costs one pass
            # of the loop, not a task's turn (contrib/bench/loop_turn.py). A publish that waits
            # after all is continued by the loop's next turn. Inline, not a method: a paced
            # send runs it with the caches cold.
            self.unwritten += 1  # _sent(None, seq): below BY_HAND_FIRST, never a write_every
            if self.loop_thread != threading.get_ident() or self.shares_thread:
                # The futures nats-py makes outside the loop belong to the current event loop
                # (one of many clients of a thread: whichever client's last set it).
                asyncio.set_event_loop(self.loop)
                self.loop_thread = threading.get_ident()
            publish = self.nc.publish(destination.name, payload, reply, headers)
            try:
                waiting = publish.send(None)
            except StopIteration:
                return
            except nats.errors.Error as exc:
                self._failed((seq,), exc)
                return
            self.resuming.append((publish, waiting, seq))
            return
        if js is not None and self.send_stream is None:
            self.declare(destination)  # again after a reconnect
        # A send time only for JetStream, whose acknowledgement is timed from it.
        self.queued.append((destination.name, payload, reply, headers, seq,
                            0 if js is None else now_ns()))
        if js is not None and len(self.pending) + len(self.queued) >= self.o.inflight:
            # Down to half the window, not by one: a turn of the loop per send would cost
            # more than the publish.
            self._await_acks(self.o.inflight // 2)
        else:
            self._sent(None, seq)

    def _await_acks(self, most: int) -> None:
        """Publish, then turn the loop until at most `most` publishes await acknowledgement."""
        self.unwritten = 0
        self._turn(0)
        self.room_at = most
        try:
            while len(self.pending) + len(self.queued) > most:
                self._expire_acks()
                self._turn(0.005)
        finally:
            self.room_at = -1

    def _write_out(self) -> None:
        self._turn(0)
        if self.pending:
            self._expire_acks()

    def flush(self) -> None:
        self.unwritten = 0
        if not self.connected:
            return
        if self.gauge is not None:  # a consumer held by --backlog flushes, and receives not
            self.gauge.tick()
        if self.queued or self.pending or self.to_ack or self.pull is not None or \
                self.resuming:
            self._write_out()
        else:  # _write_out()'s common case, inline: a paced send runs it with the caches cold
            self.loop.turn(once=True)

