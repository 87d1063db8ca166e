"""The Kafka transport's options and capabilities, and --client-config: librdkafka properties
passed through, those the harness sets itself or that would leak a secret refused."""

from __future__ import annotations

from dataclasses import dataclass

from harness.modules.interface.base import Capability
from harness.modules.interface.options import HEARTBEAT_S, option
from harness.modules.kit.client_config import client_config_option, read_items

CAPABILITIES = Capability.QUEUES | Capability.TOPICS | Capability.REQUEST_REPLY | \
    Capability.TEMP_QUEUES
# The client properties a flag of the harness sets (--client-config refuses them: one way to
# set each), and those the harness must own to measure.
FLAGGED = {"acks": "--acks", "enable.idempotence": "--idempotence", "linger.ms": "--linger-ms",
           "queue.buffering.max.ms": "--linger-ms", "batch.size": "--batch-size",
           "compression.type": "--compression", "compression.codec": "--compression",
           "max.in.flight.requests.per.connection": "--max-in-flight",
           "max.in.flight": "--max-in-flight", "delivery.timeout.ms": "--send-timeout",
           "message.timeout.ms": "--send-timeout", "auto.offset.reset": "--offset-reset",
           "isolation.level": "--isolation", "fetch.min.bytes": "--fetch-min-bytes",
           "fetch.wait.max.ms": "--fetch-wait-ms",
           "max.partition.fetch.bytes": "--fetch-max-bytes",
           "max.poll.interval.ms": "--rebalance-timeout", "bootstrap.servers": "--host/--port",
           "group.id": "--consumer-group", "transactional.id": "-tx",
           "enable.auto.commit": "--commit", "sasl.username": "--user",
           "sasl.password": "--password/--password-file"}
OWNED = {"statistics.interval.ms", "on_delivery", "error_cb", "stats_cb", "logger",
         "throttle_cb", "oauth_cb", "on_commit"}


def client_config(items: tuple[str, ...]) -> dict[str, str]:
    """--client-config as librdkafka's properties, as text (librdkafka checks them); from
    an OMB driver file's section, without what its reader made into flags."""
    from harness.modules.kafka.omb_driver import HANDLED

    return read_items(items, FLAGGED, OWNED, HANDLED)
CHOICES = {"acks": ("all", "1", "0"), "compression": ("none", "gzip", "snappy", "lz4", "zstd"),
           "keys": ("none", "producer", "sequence", "random"),
           "offset_reset": ("earliest", "latest"), "commit": ("auto", "sync", "async"),
           "isolation": ("read_committed", "read_uncommitted")}


@dataclass(frozen=True)
class KafkaOptions:
    acks: str = option("all", "Kafka: the acknowledgements a send waits for: 0, 1 or all.",
                       side="send")
    idempotence: bool = option(False, "Kafka: an idempotent producer (enable.idempotence: no "
                               "duplicate on a retry; needs acks all).", side="send")
    linger_ms: float = option(5.0, "Kafka: milliseconds a producer waits to fill a batch "
                              "(linger.ms).", low=0, side="send")
    batch_size: int = option(0, "Kafka: bytes a batch holds at most (batch.size); 0 = the "
                             "client's default.", low=0, side="send")
    compression: str = option("none", "Kafka: batch compression: none, gzip, snappy, lz4 or "
                              "zstd.", side="send")
    max_in_flight: int = option(5, "Kafka: requests a connection may have unanswered "
                                "(max.in.flight.requests.per.connection).", low=1,
                                side="send")
    keys: str = option("none", "Kafka: message keys, which choose the partition: none (the "
                       "client spreads batches), producer (one a producer thread: its "
                       "messages stay in order on one partition), sequence (the producer and "
                       "its sequence number: spread message by message) or random.",
                       side="send")
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    send_timeout: float = option(30.0, "Kafka: seconds a send may wait for its delivery "
                                 "report (delivery.timeout.ms) before it is in doubt.", low=1,
                                 side="send")
    partitions: int = option(1, "Kafka: partitions of a topic the harness creates (its "
                             "producers, or a Subscriber that finds none).", low=1)
    replication: int = option(1, "Kafka: replication factor of a topic the harness creates.",
                              low=1)
    consumer_group: str | None = option(None, "Kafka: the consumer group of Receivers and "
                                        "Responders (default: harness.<topic>).",
                                        side="receive")
    offset_reset: str = option("earliest", "Kafka: where a consumer group with no committed "
                               "offset starts: earliest or latest.", side="receive")
    commit: str = option("auto", "Kafka: how a consumer commits its offsets: auto "
                         "(librdkafka, every 5 s), sync or async (every --commit-every "
                         "messages).", side="receive")
    commit_every: int = option(100, "Kafka: messages between commits (--commit sync or "
                               "async).", low=1, side="receive")
    fetch_min_bytes: int = option(1, "Kafka: bytes a fetch waits for (fetch.min.bytes).",
                                  low=1, side="receive")
    fetch_wait_ms: int = option(500, "Kafka: milliseconds a fetch waits for them "
                                "(fetch.wait.max.ms).", low=0, side="receive")
    fetch_max_bytes: int = option(1048576, "Kafka: bytes a fetch takes at most from a "
                                  "partition (max.partition.fetch.bytes).", low=1,
                                  side="receive")
    rebalance_timeout: float = option(10.0, "Kafka: seconds a group member may go between "
                                      "polls (max.poll.interval.ms); a group forms in a "
                                      "fraction of it.", low=1, side="receive")
    isolation: str = option("read_committed", "Kafka: read_committed (nothing of an open or "
                            "aborted transaction) or read_uncommitted.", side="receive")
    client_config: tuple[str, ...] = client_config_option()
    topic_config: tuple[str, ...] = option(
        (), "Kafka: a setting of the topics the harness creates, KEY=VALUE (the broker's "
        "names: retention.ms=600000, min.insync.replicas=2; an OMB driver's topicConfig), "
        "repeatable.", multiple=True, convert=lambda items: tuple(items or ()))


def topic_config(items: tuple[str, ...]) -> dict[str, str]:
    """--topic-config as CreateTopics' configs; ValueError says what is wrong."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"{item!r}: give KEY=VALUE")
        out[key.strip()] = value.strip()
    return out

