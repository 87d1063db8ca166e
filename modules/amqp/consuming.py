"""The consumer side: subscriptions, messages taken in on the worker's thread, acknowledgements
(one by one, every N, or refused back), the queue's depth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.modules.amqp.common import DIRECT_REPLY_TO, _reason, pika
from harness.modules.amqp.options import AmqpOptions
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import HEADER, Destination, Message, from_header
from harness.modules.interface.settings import Settings


class Consuming:
    """The consumer part: subscriptions, messages and their acknowledgements. The state it
    uses is made in AmqpTransport.__init__."""

    settings: Settings[AmqpOptions]
    o: AmqpOptions

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        # Waiting for a reply's confirmation turns pika's loop, which a reply sent inside
        # its dispatch may not: such a Responder pulls.
        return not self.confirm_each and super().deliver(sink, None, headed)

    def _subscribe(self, destination: Destination) -> None:
        s, o = self.settings, self.o
        arguments = None
        if destination.name.startswith(DIRECT_REPLY_TO):
            queue, auto_ack = destination.name, True  # direct reply-to takes no acks
        else:
            auto_ack = self.auto_ack
            if destination.kind == "topic":
                exchange = self._exchange("topic")
                if s.durable_name:
                    queue = self._queue(f"{s.durable_name}{s.process}.{s.thread}", True, False,
                                        False)
                else:
                    queue = self._queue("", False, True, True)
            elif s.asks:
                queue = self._queue(destination.name, False, True, True)
                exchange = ""
            else:
                queue = self._named_queue(destination.name)
                exchange = self._exchange("queue") if o.exchange else ""
            if exchange:
                key = o.routing_key if o.routing_key is not None else destination.name
                self._rpc(lambda cb: self.channel.queue_bind(
                    queue, exchange, key, self.bind_args, callback=cb),
                    f"bind {queue} to {exchange}")
            if o.queue_type == "stream":
                offset = o.stream_offset
                arguments = {"x-stream-offset": int(offset) if offset.isdigit() else offset}
        self._rpc(lambda cb: self.channel.basic_consume(
            queue, self._on_message, auto_ack=auto_ack, arguments=arguments, callback=cb),
            f"consume from {queue}")
        # The queue's depth, but for a Requestor's replies and a stream (whose count is what
        # it keeps, read or not).
        if not s.asks and queue != DIRECT_REPLY_TO and o.queue_type != "stream":
            self.depth_asks, self.depth_queue = 0, queue
            self.gauge_with(self._ask_depth)

    def _ask_depth(self, again: bool = False) -> None:
        """A passive queue.declare: its answer says how many messages the queue holds ready
        (not those delivered and awaiting acknowledgement). One at a time, unless again: a
        broker slow to answer is not asked again meanwhile."""
        if (self.depth_asks and not again) or not self.connected:
            return
        self.depth_asks += 1
        channel, queue = self.channel, self.depth_queue

        def answered(frame: Any) -> None:
            if channel is self.channel:
                self.depth_asks -= 1
                self.feedback.waiting(queue, frame.method.message_count)

        channel.queue_declare(queue, passive=True, callback=answered)

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        headed = self.headed
        if headed is not None:  # a consumer that only measures, and auto acknowledgements
            if method.redelivered:
                self.feedback.redelivery()
            headers = properties.headers
            headed(headers.get(HEADER) if headers else None, body)
            return
        if not self.replying:  # only a Responder sends while pika dispatches
            self.arrived((method, properties, body))
            return
        self.dispatching = True
        try:
            self.arrived((method, properties, body))
        finally:
            self.dispatching = False

    def _tend(self) -> None:
        if self.sink is None and self._unwritten():
            self._turn(0)  # a pulling Responder's replies go out before the next request

    def message(self, raw: Any) -> Message:
        method, properties, body = raw
        if method.redelivered:
            self.feedback.redelivery()  # given back, or unacknowledged on a lost channel
        headers = properties.headers
        seq, ts, sent, crc, producer = from_header(headers.get(HEADER) if headers else None)
        reply_to = properties.reply_to
        return Message(body, producer, seq, ts, sent, crc, None, properties.correlation_id,
                       Destination("queue", reply_to) if reply_to else None,
                       properties.delivery_mode == 2, (self.generation, method.delivery_tag))

    def _tag(self, message: Message) -> int | None:
        """The delivery tag to acknowledge or reject, None where there is nothing to do: auto
        acks, or its channel is gone (the broker delivers it again)."""
        if self.auto_ack or message.handle is None:
            return None
        generation, tag = message.handle
        return tag if generation == self.generation and self.connected else None

    def acknowledges(self) -> bool:
        return not self.auto_ack

    def ack(self, message: Message) -> None:
        tag = self._tag(message)
        if tag is None:
            return
        try:
            if self.ack_mode == "client-individual":
                self.channel.basic_ack(tag)
                return
            self.last_tag = message.handle
            self.unacked += 1
            if self.unacked >= self.o.ack_every:
                self.channel.basic_ack(tag, multiple=True)
                self.unacked = 0
                self.last_tag = None
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise TransportError(f"ack failed: {_reason(exc)}") from None

    def reject(self, message: Message, retry: bool) -> None:
        tag = self._tag(message)
        if tag is None:
            return
        try:
            self.channel.basic_nack(tag, multiple=False, requeue=retry and self.o.requeue)
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise TransportError(f"nack failed: {_reason(exc)}") from None

