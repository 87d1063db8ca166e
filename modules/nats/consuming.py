"""A consumer's side: subscriptions (core, JetStream push and pull), messages taken in
on the loop's thread, their acknowledgements, the broker's pending count."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination, Message, unframe
from harness.modules.interface.settings import Settings
from harness.modules.kit.turned import TurnedLoop
from harness.modules.nats.common import NO_RESPONDERS, QUEUE_GROUP, api, nats
from harness.modules.nats.options import NatsOptions


class Consuming:
    """The consumer part: subscriptions (core, JetStream push and pull), messages taken in on
    the worker's thread, their acknowledgements, the broker's pending count. The state it uses
    is made in NatsTransport.__init__."""

    settings: Settings[NatsOptions]
    o: NatsOptions
    loop: TurnedLoop

    def _subscribe(self, destination: Destination) -> None:
        s, o = self.settings, self.o
        subject = destination.name
        queue = QUEUE_GROUP if s.competes else ""
        limit = {"pending_msgs_limit": o.pending_limit} if o.pending_limit else {}
        if self.js is None:
            measure_only = s.measures_only
            cb = self._on_measured if measure_only else self._on_message
            self.sub = self._run(self.nc.subscribe(subject, queue=queue, cb=cb, **limit),
                                 f"subscribe to {subject}")
            return
        stream = self._ensure_stream(subject)
        if s.competes and s.measures_only:
            durable = s.durable_name or f"{QUEUE_GROUP}-{stream}"
        elif s.durable_name:
            durable = f"{s.durable_name}{s.process}-{s.thread}".replace(".", "_")
        else:
            durable = None
        self.acks_on_arrival = o.ack == "auto"
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.EXPLICIT, max_ack_pending=o.prefetch or None,
            ack_wait=o.ack_wait or None,
            deliver_policy=api.DeliverPolicy.ALL if durable else api.DeliverPolicy.NEW)
        if durable:
            self._check_durable(stream, durable)
        if o.pull_batch:
            self.pull = self._run(self.js.pull_subscribe(
                subject, durable=durable, stream=stream, config=config, **limit),
                f"pull consumer on {stream}")
        else:
            # nats-py names a queue subscription's durable consumer after its deliver group.
            group = durable if queue else None
            self.sub = self._run(self.js.subscribe(
                subject, queue=group, durable=durable, stream=stream, cb=self._on_message,
                manual_ack=True, config=config, **limit), f"consumer on {stream}")
        self.info_asks = 0
        self.gauge_with(self._ask_pending)

    def _ask_pending(self) -> None:
        """The consumer's info, asked by a task of the loop: its num_pending is how many
        messages of the stream it has not been delivered. One at a time."""
        consumer = self.pull or self.sub
        if self.info_asks or not self.connected or consumer is None:
            return
        self.info_asks += 1
        self.loop.create_task(consumer.consumer_info()).add_done_callback(self._pending)

    def _pending(self, task: asyncio.Task[Any]) -> None:
        self.info_asks -= 1
        if task.done() and not task.cancelled() and task.exception() is None:
            info = task.result()
            self.feedback.waiting(f"{info.stream_name} {info.name}", info.num_pending or 0)

    async def _on_message(self, raw: Any) -> None:
        frames = self.frames
        if frames is not None:  # a JetStream consumer that only measures
            if not raw.reply.startswith(self.first_delivery):
                self._delivered_before(raw.reply)
            frames(raw.data)
            if not self.acks_on_arrival:
                self.to_ack.append(raw)
        else:
            self.dispatching = True
            try:
                self.arrived(raw)
            finally:
                self.dispatching = False
        if self.acks_on_arrival:
            # Here rather than queued for _pump: a list and a call fewer a message.
            try:  # noqa: SIM105
                await raw.ack()
            except nats.errors.Error:
                pass  # a lost connection: the server delivers the message again
        if self.queued or self.to_ack:
            await self._pump()
        if self.sink is None:
            self._wake_receive()

    async def _on_measured(self, raw: Any) -> None:
        """A core subscription's message where nothing is sent back (no reply, no ack)."""
        frames = self.frames
        if frames is not None:
            frames(raw.data)
            return
        self.arrived(raw)
        if self.sink is None:
            self._wake_receive()

    def _wake_receive(self) -> None:
        """A message went into the inbox (none is measured on the loop): receive() waits."""
        if len(self.inbox):
            self._end_wait()

    async def _fetch(self, timeout: float) -> None:
        try:
            batch = await self.pull.fetch(self.o.pull_batch, timeout=max(timeout, 0.001))
        except (nats.errors.TimeoutError, TimeoutError):
            return
        except nats.errors.Error:
            return  # a lost connection: nats-py reconnects, the next fetch asks again
        for raw in batch:
            await self._on_message(raw)

    def message(self, raw: Any) -> Message:
        data = raw.data
        # A status comes without a body; a harness message never does (its prefix).
        if not data and raw.headers and raw.headers.get("Status") == NO_RESPONDERS:
            raise TransportError("no responders: nothing subscribes to "
                                 f"{self.settings.destination}", kind="no responders",
                                 answered=True)
        message = unframe(data, "queue", raw)
        reply = raw.reply
        if self.js is None:
            if reply:
                message.reply_to = Destination("queue", reply)
        elif not reply.startswith(self.first_delivery):
            self._delivered_before(reply)
        return message

    def _delivered_before(self, reply: str) -> None:
        """Count a JetStream message the server delivered before (another consumer gave up on
        it), from its ack subject: $JS.ACK.<stream>.<consumer>.<deliveries>.<...> or, with a
        domain, $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<deliveries>.<...>. Called where
        the subject does not begin as first_delivery, which it then becomes for this
        consumer: one startswith a message, not a split of the subject (nats-py's
        Msg.metadata parses every field)."""
        tokens = reply.split(".")
        at = 4 if len(tokens) == 9 else 6
        self.first_delivery = ".".join(tokens[:at]) + ".1."
        if tokens[at] != "1":
            self.feedback.redelivery()

    def acknowledges(self) -> bool:
        return self.js is not None and self.o.ack != "auto"

    def ack(self, message: Message) -> None:
        if self.js is not None and self.o.ack != "auto" and message.handle is not None:
            self.to_ack.append(message.handle)

