"""The consumer side: the consumer group's subscription and assignments, messages taken in
batches, offsets committed as asked, the consumer closed."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination, Message, unframe
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import (
    ADMIN_TIMEOUT_S,
    ASSIGN_TIMEOUT_S,
    BATCH,
    METADATA_REFRESH_MS,
    SESSION_MS,
    STATS_MS,
    _reason,
)
from harness.modules.kafka.options import KafkaOptions


class Consuming:
    """The consumer part: the group's subscription, messages, offsets. The state it uses is
    made in KafkaTransport.__init__."""

    settings: Settings[KafkaOptions]
    o: KafkaOptions

    # -- consuming
    def subscribe(self, destination: Destination) -> None:
        s, o = self.settings, self.o
        name = destination.name
        self.kind = destination.kind
        # A Subscriber, a Requestor's replies: every partition, from its end. A group's
        # members wait for the topic its producers create, with their --partitions.
        own = not s.competes
        conf = {**self._common(),
                "group.id": (o.consumer_group or f"harness.{name}") if not own else
                f"harness-own-{uuid.uuid4().hex[:12]}",
                "enable.auto.commit": not own and o.commit == "auto",
                "auto.offset.reset": o.offset_reset,
                "fetch.min.bytes": o.fetch_min_bytes, "fetch.wait.max.ms": o.fetch_wait_ms,
                "max.partition.fetch.bytes": o.fetch_max_bytes,
                "isolation.level": o.isolation,
                "max.poll.interval.ms": int(o.rebalance_timeout * 1000),
                # A group subscribed before its producers created the topic sees it within
                # a second (librdkafka's default looks again after 5 minutes).
                "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
                "session.timeout.ms": min(int(o.rebalance_timeout * 1000), SESSION_MS),
                "statistics.interval.ms": STATS_MS, "stats_cb": self._consumer_stats}
        self.consumer = Consumer(conf)
        try:
            if own:
                self._assign_at_end(name)
            else:
                self.consumer.subscribe([name], on_assign=self._assigned)
        except KafkaException as exc:
            raise TransportError(f"subscribe to {name}: {_reason(exc)}") from None

    def _assigned(self, _: Any, partitions: list[TopicPartition]) -> None:
        """The group's new assignment (librdkafka calls back from within receive())."""
        numbers = ", ".join(str(p.partition) for p in sorted(partitions,
                                                              key=lambda p: p.partition))
        topics = ", ".join(sorted({p.topic for p in partitions}))
        self.feedback.rebalance(f"rebalance: partitions {numbers} of {topics} assigned"
                                if partitions else "rebalance: no partition assigned")

    def _assign_at_end(self, name: str) -> None:
        """Every partition of the topic, from its end now: what is published after this
        returns is read."""
        deadline = time.monotonic() + ASSIGN_TIMEOUT_S
        while True:
            topic = self.consumer.list_topics(name, timeout=ADMIN_TIMEOUT_S).topics.get(name)
            if topic is not None and topic.error is None and topic.partitions:
                break
            if time.monotonic() > deadline:
                raise TransportError(f"topic {name} does not exist")
            self._topic(name, self.o.partitions)
        assigned = []
        for partition in sorted(topic.partitions):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(name, partition),
                                                          timeout=ADMIN_TIMEOUT_S)
            assigned.append(TopicPartition(name, partition, high))
        self.consumer.assign(assigned)

    def receive(self, timeout: float) -> Message | None:
        if self.producer is not None:
            self.producer.poll(0)  # a Responder's replies' reports
        if not self.buffer:
            try:
                fetched = self.consumer.consume(BATCH, timeout)
            except KafkaException as exc:
                raise TransportError(_reason(exc)) from None
            for record in fetched:
                error = record.error()
                if error is None:
                    self.buffer.append(record)
                elif error.code() != KafkaError._PARTITION_EOF:
                    self.feedback.error("fetch", error.str())
            if not self.buffer:
                return None
            self._up()
        buffer, frames = self.buffer, self.frames
        if frames is not None:
            taken = len(buffer)
            while buffer:
                record = buffer.popleft()
                frames(record.value(), record.partition())  # for the order check
            if self.acknowledges():
                self._taken(taken)
            return None
        record = buffer.popleft()
        self.partition = record.partition()
        return unframe(record.value(), "queue", record)

    def acknowledges(self) -> bool:
        return self.settings.competes and self.o.commit != "auto"

    def ack(self, message: Message) -> None:
        self._taken(1)

    def _taken(self, count: int) -> None:
        """Commit where --commit-every messages were taken since the last commit."""
        before = self.received
        self.received += count
        if self.received // self.o.commit_every > before // self.o.commit_every:
            try:
                self.consumer.commit(asynchronous=self.o.commit == "async")
            except KafkaException as exc:
                raise TransportError(f"commit: {_reason(exc)}") from None

    def _close_consumer(self, consumer: Any) -> None:
        """close() commits and leaves the group: two requests, each waiting for a broker that
        a partition keeps away until it times out. With the broker known down it is given
        two heartbeats on a thread of its own, then left, so that the worker stops in time
        (the broker ends the membership at the session timeout anyway)."""
        def close() -> None:
            with contextlib.suppress(KafkaException, RuntimeError):
                consumer.close()
        if not self.down or not self.o.heartbeat:
            close()
            return
        closing = threading.Thread(target=close, daemon=True, name="kafka-consumer-close")
        closing.start()
        closing.join(2 * self.o.heartbeat)

