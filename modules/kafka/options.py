"""The Kafka transport's options and capabilities, and --client-config: librdkafka properties
passed through, those the harness sets itself or that would leak a secret refused."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.modules.interface.base import Capability
from harness.modules.interface.options import HEARTBEAT_S, option

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
SECRET = re.compile(r"password|secret|token|\.pem$|key\.pem|jaas", re.IGNORECASE)
OWNED = {"statistics.interval.ms", "on_delivery", "error_cb", "stats_cb", "logger",
         "throttle_cb", "oauth_cb", "on_commit"}


def client_config(items: tuple[str, ...]) -> dict[str, str]:
    """--client-config as a mapping: KEY=VALUE items and @FILE .properties files (KEY=VALUE
    or KEY: VALUE lines; # and ! comments). ValueError names what is wrong."""
    out: dict[str, str] = {}
    for item in items:
        if item.startswith("@"):
            from harness.textfiles import read_text

            lines = [(f"{item[1:]} line {n}", line.strip()) for n, line in
                     enumerate(read_text(item[1:]).splitlines(), 1)]
        else:  # named by its key alone where it may hold a secret
            shown = repr(item) if not SECRET.search(item) else \
                repr(re.split(r"[=:\s]", item.strip())[0])
            lines = [(shown, item.strip())]
        for where, line in lines:
            if not line or line[0] in "#!":
                continue
            cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            key, value = line[:cut].strip(), line[cut + 1:].strip()
            if cut < 0 or not key:
                raise ValueError(f"{where}: give KEY=VALUE")
            if key in FLAGGED:
                raise ValueError(f"{where}: {key} is set with {FLAGGED[key]}")
            if key in OWNED:
                raise ValueError(f"{where}: the harness sets {key} itself to measure")
            if not item.startswith("@") and SECRET.search(key):
                raise ValueError(f"{key}: a secret is given in a @FILE, never on the "
                                 "command line (every process on the machine can read it, "
                                 "and the run's manifest records the flags)")
            out[key] = value
    return out
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
    client_config: tuple[str, ...] = option(
        (), "Kafka: a client property KEY=VALUE given as it is to every client the group "
        "makes (librdkafka's names, as a producer.config or an OMB driver's producerConfig "
        "has them), or @FILE for a .properties file of them (repeatable).", multiple=True,
        convert=lambda items: tuple(items or ()))

