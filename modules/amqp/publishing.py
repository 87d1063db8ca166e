"""The producer side: publishes, publisher confirms in a window (timed, refused or in doubt),
mandatory returns."""

from __future__ import annotations

import time
from typing import Any

from harness.modules.amqp.common import RPC_TIMEOUT_S, _reason, pika
from harness.modules.amqp.options import AmqpOptions
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import HEADER, Destination, Message, from_header, header
from harness.modules.interface.settings import Settings

from harness.clock import now_ns


class Publishing:
    """The producer part: publishes and their confirms. The state it uses is made in
    AmqpTransport.__init__."""

    settings: Settings[AmqpOptions]
    o: AmqpOptions

    # -- messages
    def send(self, destination: Destination, message: Message) -> None:
        if not self.connected:
            self._check()
        route = self.routes.get(destination) or self._route(destination)
        headers = {HEADER: header(message)}
        if message.properties:
            headers.update(message.properties)
        properties = pika.BasicProperties(
            headers=headers, correlation_id=message.correlation_id,
            reply_to=message.reply_to.name if message.reply_to is not None else None,
            delivery_mode=2 if message.persistent else None, expiration=self.expiration,
            priority=self.settings.priority)
        try:
            self.channel.basic_publish(route[0], route[1], message.body, properties,
                                       self.o.mandatory)
        except (pika.exceptions.AMQPError, OSError) as exc:
            self.connected = False
            self.outages.went_down()
            raise TransportError(f"send failed: {_reason(exc)}") from None
        if self.channel_first < 0:
            self.channel_first = message.seq
        self.channel_last = message.seq
        if self.confirm_window:
            self.next_tag += 1
            failed = self.feedback.failed
            before = len(failed)
            self._sent(self.next_tag, message.seq)
            if self.confirm_each:
                self._await_confirms(0)
                if len(failed) > before:
                    _, _, reason = failed.pop()
                    raise TransportError(reason)
            elif len(self.pending) >= self.confirm_window:
                try:
                    self._await_confirms(self.confirm_window - 1)
                except TransportError as exc:
                    raise self.queued_failure(exc, self.next_tag, message.seq) from None
        else:
            self._sent(None, message.seq)

    def _await_confirms(self, most: int) -> None:
        """Turn the loop until at most `most` sends await confirmation."""
        deadline = time.monotonic() + RPC_TIMEOUT_S
        while len(self.pending) > most and self.connected:
            if time.monotonic() > deadline:
                self._lose_pending(f"no confirmation within {RPC_TIMEOUT_S:g} s")
                return
            self._turn(0.05)

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        tag, at = method.delivery_tag, now_ns()
        nack = isinstance(method, pika.spec.Basic.Nack)
        pending, feedback = self.pending, self.feedback
        if not method.multiple and pending and pending[0][0] != tag:
            self.confirmed_early.add(tag)  # out of order: settled when it reaches the front
            if nack:
                seq = next((p[1] for p in pending if p[0] == tag), -1)
                feedback.failed.append((seq, "nack", "the broker refused the message"))
            return
        while pending and (pending[0][0] <= tag or pending[0][0] in self.confirmed_early):
            first, seq, sent = pending.popleft()
            if first in self.confirmed_early:
                self.confirmed_early.discard(first)
                continue
            if nack:
                feedback.failed.append((seq, "nack", "the broker refused the message"))
            else:
                feedback.confirm_us.append((at - sent) // 1000)

    def _returned(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        seq = from_header((properties.headers or {}).get(HEADER))[0]
        self.feedback.failed.append(
            (seq, "returned", f"returned by the broker: {method.reply_code} "
             f"{method.reply_text} (exchange {method.exchange!r}, key {method.routing_key!r})"))

    def _write_out(self) -> None:
        self._turn(0)  # and take in what the broker said meanwhile
        deadline = time.monotonic() + RPC_TIMEOUT_S
        while self._unwritten() and self.connected and time.monotonic() < deadline:
            self._turn(0.01)  # the socket is full: wait for room

