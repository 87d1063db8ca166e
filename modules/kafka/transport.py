"""The Kafka transport: its parts (connection, topics, producing, consuming, gauges) composed,
what it refuses before a run, its state and its close."""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Any

from confluent_kafka import KafkaException, Producer
from harness.modules.interface.base import Capability, Transport
from harness.modules.interface.optional import (
    Acknowledgements,
    ClientLoop,
    Declarations,
    FramedSends,
    PartitionOrder,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import ADMIN_TIMEOUT_S, CLOSE_TIMEOUT_S, DEFAULT_PORT, LOG
from harness.modules.kafka.connection import Connection
from harness.modules.kafka.consuming import Consuming
from harness.modules.kafka.gauges import Gauges
from harness.modules.kafka.omb_driver import read_driver
from harness.modules.kafka.options import (
    CAPABILITIES,
    CHOICES,
    KafkaOptions,
    client_config,
    topic_config,
)
from harness.modules.kafka.producing import Producing
from harness.modules.kafka.topics import Topics
from harness.modules.kit.inline import InlineFrames


class KafkaTransport(Connection, Topics, Producing, Consuming, Gauges, Transport,
                     Declarations, FramedSends, InlineFrames, ClientLoop, Acknowledgements,
                     Transactions, TemporaryQueues, PartitionOrder):
    confirmations = "delivery reports"
    name = "kafka"
    default_port = DEFAULT_PORT
    description = "Kafka via confluent-kafka (librdkafka): topics, consumer groups"
    capabilities = CAPABILITIES
    # Transactions are a producer's; a consumer reads what they committed.
    producer_capabilities = Capability.TRANSACTIONS
    Options = KafkaOptions
    settings: Settings[KafkaOptions]
    # An OpenMessaging Benchmark driver file's settings (harness run --omb-driver).
    omb_driver = staticmethod(read_driver)

    @classmethod
    def confirms(cls, settings: Settings[KafkaOptions]) -> bool:
        return settings.options.acks != "0"

    @classmethod
    def problems(cls, settings: Settings[KafkaOptions]) -> list[tuple[str, str]]:
        o = settings.options
        out = []
        for name, allowed in CHOICES.items():
            value = getattr(o, name)
            if value not in allowed:
                out.append((f"--{name.replace('_', '-')}", f"{value!r}: use one of "
                            f"{', '.join(allowed)}"))
        if settings.selector:
            out.append(("--selector", "Kafka has no selectors: give the messages to select "
                        "a topic of their own"))
        if settings.persistent:
            out.append(("-pp", "Kafka keeps every message by the topic's retention, not per "
                        "message: choose acks (--acks all) and --replication instead"))
        if o.idempotence and o.acks != "all":
            out.append(("--idempotence", "needs --acks all"))
        if o.client_config:
            try:
                given = client_config(o.client_config)
                # librdkafka checks every name and value as a client is made: a producer
                # with no broker to reach connects to nothing.
                Producer({**given, "logger": LOG}).flush(0)
            except (ValueError, KafkaException) as exc:
                reason = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
                out.append(("--client-config", reason))
        try:
            topic_config(o.topic_config)
        except ValueError as exc:
            out.append(("--topic-config", str(exc)))
        if o.idempotence and o.max_in_flight > 5:
            out.append(("--max-in-flight", "at most 5 with --idempotence"))
        if settings.transacted and not settings.sends_only:
            out.append(("-tx", "Kafka transactions are a producer's: a consumer reads what "
                        "they committed (--isolation read_committed)"))
        if settings.transacted and o.acks != "all":
            out.append(("-tx", "a transactional producer needs --acks all"))
        if o.consumer_group and not settings.competes:
            out.append(("--consumer-group", "names the group of a Receiver or Responder; a "
                        "Subscriber reads every partition itself"))
        return out

    def __init__(self, settings: Settings[KafkaOptions]) -> None:
        super().__init__(settings)
        self.o = settings.options
        host, port = settings.address(DEFAULT_PORT)
        self.bootstrap = f"{host}:{port}"
        self.producer: Any = None
        self.consumer: Any = None
        self.admin: Any = None
        self.created: set[str] = set()
        self.confirming = self.o.acks != "0"
        self.key_of = self._keys()
        self.sends = 0
        self.buffer: deque[Any] = deque()
        self.kind = "queue"
        self.received = 0
        self.reply_topic: str | None = None
        self.down = False
        self.last_error = ""
        # Per-partition statistics: (time, txmsgs or position) last reported, per
        # "topic[n]"; the latest gauges per client (producer: False, consumer: True).
        self.seen: dict[str, tuple[int, int]] = {}
        self.partitions: dict[bool, dict[str, tuple[float, int]]] = {False: {}, True: {}}

    def close(self) -> None:
        if self.producer is not None:
            # A broker known lost answers nothing: what is unreported is in doubt at once.
            self.producer.flush(0 if self.down else CLOSE_TIMEOUT_S)
            # What is still unreported: purged, each reported as in doubt or failed.
            self.producer.purge()
            self.producer.poll(0)
            self.producer = None
        if self.consumer is not None:
            self._final_lag()
            self._close_consumer(self.consumer)
            self.consumer = None
        if self.reply_topic is not None and self.admin is not None:
            with contextlib.suppress(Exception):
                self.admin.delete_topics([self.reply_topic])[self.reply_topic].result(
                    ADMIN_TIMEOUT_S)
            self.reply_topic = None

