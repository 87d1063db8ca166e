"""Topics: made with their partitions and replication where missing, a temporary topic for
replies."""

from __future__ import annotations

import uuid

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from harness.modules.interface.base import TransportError
from harness.modules.interface.message import Destination
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import ADMIN_TIMEOUT_S, _reason
from harness.modules.kafka.options import KafkaOptions, topic_config


class Topics:
    """The topics part: topics made where missing. The state it uses is made in
    KafkaTransport.__init__."""

    settings: Settings[KafkaOptions]
    o: KafkaOptions

    # -- topics
    def declare(self, destination: Destination) -> None:
        self._topic(destination.name, self.o.partitions)

    def _topic(self, name: str, partitions: int) -> None:
        if name in self.created:
            return
        future = self.admin.create_topics([NewTopic(
            name, partitions, self.o.replication, config=topic_config(self.o.topic_config))])[name]
        try:
            future.result(ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TransportError(f"create topic {name}: {_reason(exc)}") from None
        self.created.add(name)

    def temporary_queue(self) -> Destination:
        self.reply_topic = f"harness-reply-{uuid.uuid4().hex[:16]}"
        self._topic(self.reply_topic, 1)
        return Destination("queue", self.reply_topic)

