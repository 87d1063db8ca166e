"""Kafka through confluent-kafka (librdkafka, the client most Kafka users run, with the lowest
cost a message from Python).

- Sender / Receiver: a topic read by one consumer group (--consumer-group, default
  harness.<topic>): the receivers compete, each partition read by one of them. A group with no
  committed offset starts at --offset-reset (earliest: what was sent before it joined is
  read, as a queue keeps it).
- Publisher / Subscriber: each Subscriber reads every partition itself from the topic's end
  when it subscribed (assigned by hand, no group: a group of one would wait for its first
  rebalance), so each sees every message published after it subscribed.
- Requestor / Responder: requests on a topic read by the Responders' group; each Requestor
  its replies on a topic of its own (one partition, deleted when it closes), named in the
  request's frame with the correlation id.

A send is produce() with a delivery report: the time from the send to the report is the
confirm metric (acks 1 or all; with acks 0 the report says only that the client wrote it, so
no confirm is timed). A report with an error the broker gave is a failed send with its reason;
one the client gave because the outcome is unknown (the message timed out, or was in flight
when the connection closed) is in doubt. librdkafka reconnects by itself: its "all brokers
down" starts an outage, the next delivery or fetch ends it. Producers serve their reports
between sends and while they wait (ClientLoop). Topics the harness sends to or reads are
created when missing, with --partitions and --replication.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from harness.modules.interface.base import (
    COMMIT_IN_DOUBT,
    ROLLED_BACK,
    Capability,
    Transport,
    TransportError,
)
from harness.modules.interface.message import Destination, Message, frame, unframe
from harness.modules.interface.optional import (
    Acknowledgements,
    ClientLoop,
    Declarations,
    FramedSends,
    PartitionOrder,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.options import HEARTBEAT_S, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.inline import InlineFrames

DEFAULT_PORT = 9092
CAPABILITIES = Capability.QUEUES | Capability.TOPICS | Capability.REQUEST_REPLY | \
    Capability.TEMP_QUEUES
BATCH = 500  # messages a consume() takes at most
POLL_EVERY = 64  # sends between serving delivery reports
ADMIN_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0
ASSIGN_TIMEOUT_S = 15.0
CLOSE_TIMEOUT_S = 10.0
# A member the broker hears nothing from for this long leaves its group (Kafka's default is
# 45 s: a receiver killed mid-run would hold its partitions that long).
SESSION_MS = 6000
METADATA_REFRESH_MS = 1000
# How often librdkafka reports its statistics (per-partition rates and lag): the worker reads
# the latest at each interval boundary.
STATS_MS = 1000
# librdkafka's errors that say the outcome of a send is unknown, not that the broker refused
# it: the send is in doubt.
UNKNOWN = {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
           KafkaError._PURGE_INFLIGHT, KafkaError.REQUEST_TIMED_OUT,
           KafkaError.NETWORK_EXCEPTION, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
DOWN = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}
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


# librdkafka writes its log to stderr unless given a logger: every failed connection attempt
# would be a line in the run's output. What matters of it reaches error_cb (an outage, or the
# reason a start failed) and is said once.
LOG = logging.getLogger("harness.modules.kafka")
LOG.addHandler(logging.NullHandler())
LOG.propagate = False
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


class KafkaTransport(Transport, Declarations, FramedSends, InlineFrames, ClientLoop,
                     Acknowledgements, Transactions, TemporaryQueues, PartitionOrder):
    name = "kafka"
    default_port = DEFAULT_PORT
    description = "Kafka via confluent-kafka (librdkafka): topics, consumer groups"
    capabilities = CAPABILITIES
    # Transactions are a producer's; a consumer reads what they committed.
    producer_capabilities = Capability.TRANSACTIONS
    Options = KafkaOptions
    settings: Settings[KafkaOptions]

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

    def _common(self) -> dict[str, Any]:
        s = self.settings
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap,
                                "error_cb": self._error, "logger": LOG}
        heartbeat_ms = int(self.o.heartbeat * 1000)
        if heartbeat_ms:
            # The liveness check: a request unanswered for two heartbeats closes the
            # connection (socket.max.fails is 1), which a partition would otherwise hold a
            # minute; a fetch's own wait is not silence. A connection attempt the network
            # drops is given up after one, and the broker is then down (error_cb: all
            # brokers down), so that the outage shows two or three heartbeats in.
            conf["socket.timeout.ms"] = max(2 * heartbeat_ms, self.o.fetch_wait_ms + 1000)
            conf["socket.connection.setup.timeout.ms"] = max(heartbeat_ms, 1000)
        client_id = s.connection_id(stable=False)
        if client_id:
            conf["client.id"] = client_id
        if s.user is not None:
            conf.update({"security.protocol": "SASL_SSL" if s.tls else "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": s.user,
                         "sasl.password": s.password or ""})
        elif s.tls:
            conf["security.protocol"] = "SSL"
        if s.tls:
            for key, value in (("ssl.ca.location", s.ca), ("ssl.certificate.location", s.cert),
                               ("ssl.key.location", s.key)):
                if value:
                    conf[key] = value
        # The user's properties last: they may change what the harness chose (sasl.mechanism
        # SCRAM-SHA-512 beside --user and --password, security.protocol, client.id), never
        # what a flag of its own sets (client_config refuses those).
        conf.update(client_config(self.o.client_config))
        return conf

    def _keys(self) -> Callable[[int], bytes | None]:
        mode = self.o.keys
        prefix = f"{self.settings.node}-{self.settings.name}-{self.settings.process}." \
            f"{self.settings.thread}"
        if mode == "producer":
            key = prefix.encode()
            return lambda seq: key
        if mode == "sequence":
            return lambda seq: f"{prefix}:{seq}".encode()
        if mode == "random":
            return lambda seq: os.urandom(8)
        return lambda seq: None

    # -- connection
    def open(self) -> None:
        """The admin client, which asks the broker for its metadata: a broker that is not
        there fails here, at the start, as on every transport."""
        self.admin = AdminClient(self._common())
        try:
            self.admin.list_topics(timeout=CONNECT_TIMEOUT_S)
        except KafkaException as exc:
            self.admin.poll(0)  # serves error_cb
            self.admin = None
            # librdkafka's own words on the connection ("Connection refused") came to
            # error_cb; the exception says only that no metadata came.
            reason = self.last_error or _reason(exc)
            raise TransportError(f"cannot connect to {self.bootstrap}: {reason}") from None
        if self.settings.publishes or self.settings.replies:
            self._producer()

    def _producer(self) -> None:
        o, s = self.o, self.settings
        conf = {**self._common(), "acks": o.acks, "enable.idempotence": o.idempotence,
                "linger.ms": o.linger_ms, "compression.type": o.compression,
                "max.in.flight.requests.per.connection": o.max_in_flight,
                "delivery.timeout.ms": int(o.send_timeout * 1000),
                # A produce request waits this long for its answer (not socket.timeout.ms):
                # the same liveness check as every other request.
                **({"request.timeout.ms": max(int(2000 * o.heartbeat), 1000)}
                   if o.heartbeat else {}),
                # One callback for every delivery report, not a callable bound per send to
                # carry its number and send time (an allocation on every send): librdkafka
                # times each message from produce() to the broker's answer itself, and a
                # failed one's number is in its frame.
                "on_delivery": self._reported,
                "statistics.interval.ms": STATS_MS, "stats_cb": self._producer_stats}
        if o.batch_size:
            conf["batch.size"] = o.batch_size
        if s.transacted:  # exactly once: a transactional producer is an idempotent one
            conf["transactional.id"] = s.connection_id(stable=True) or str(uuid.uuid4())
            conf["enable.idempotence"] = True
        try:
            self.producer = Producer(conf)
        except KafkaException as exc:
            raise TransportError(f"the producer: {_reason(exc)}") from None
        if s.transacted:
            try:
                self.producer.init_transactions(ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                raise TransportError(f"{self.bootstrap} cannot start a transaction: "
                                     f"{_reason(exc)}") from None

    def _error(self, error: KafkaError) -> None:
        """librdkafka's own errors (on the thread that polls): an outage starts."""
        self.last_error = error.str()
        if error.code() in DOWN and not self.down:
            self.down = True
            self.outages.went_down()

    def _producer_stats(self, text: str) -> None:
        self._stats(text, False)

    def _consumer_stats(self, text: str) -> None:
        self._stats(text, True)

    def _stats(self, text: str, consumer: bool) -> None:
        """librdkafka's statistics (every STATS_MS, served by poll() or consume() on the
        worker's thread): per partition of this client, the rate its sends (txmsgs) or its
        consumer's position (app_offset) advanced by since the last report, and a consumer's
        lag (_lag)."""
        try:
            stats = json.loads(text)
            now = stats["ts"]  # librdkafka's monotonic clock, microseconds
            topics = stats["topics"]
        except (ValueError, KeyError, TypeError):
            return
        if self.down and any(b.get("state") == "UP" and b.get("nodeid", -1) >= 0
                             for b in stats.get("brokers", {}).values()):
            self._up()  # connected again: said by the statistics when no message says it
        seen, mine = self.seen, {}
        for topic, detail in topics.items():
            for number, p in detail.get("partitions", {}).items():
                if number == "-1" or (consumer and not p.get("desired")):
                    continue  # librdkafka's unassigned partition, or one no longer ours
                value = p.get("app_offset" if consumer else "txmsgs", -1)
                key = f"{topic}[{number}]"
                rate, before = 0.0, seen.get(key)
                if before is not None and value >= before[1] >= 0 and now > before[0]:
                    rate = (value - before[1]) * 1e6 / (now - before[0])
                seen[key] = (now, value)
                lag = -1
                if consumer:
                    end = p.get("ls_offset" if self.o.isolation == "read_committed"
                                else "hi_offset", -1)
                    lag = _lag(end, value, p.get("committed_offset", -1))
                mine[key] = (rate, lag)
        self.partitions[consumer] = mine
        self._gauges()

    def _gauges(self) -> None:
        self.feedback.partitions = {**self.partitions[False], **self.partitions[True]}

    def _final_lag(self) -> None:
        """Each partition's lag as the consumer closes, from what the client holds (its
        positions, the end offsets of its last fetches): the last report may be a second
        old, and the run's last interval says what was left."""
        with contextlib.suppress(KafkaException, RuntimeError):
            for tp in self.consumer.position(self.consumer.assignment()):
                key = f"{tp.topic}[{tp.partition}]"
                if key in self.partitions[True]:
                    _, end = self.consumer.get_watermark_offsets(tp, cached=True)
                    rate = self.partitions[True][key][0]
                    self.partitions[True][key] = (rate, _lag(end, tp.offset, -1))
            self._gauges()

    def _up(self) -> None:
        if self.down:
            self.down = False
            self.outages.came_up()

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

    # -- topics
    def declare(self, destination: Destination) -> None:
        self._topic(destination.name, self.o.partitions)

    def _topic(self, name: str, partitions: int) -> None:
        if name in self.created:
            return
        future = self.admin.create_topics([NewTopic(name, partitions,
                                                    self.o.replication)])[name]
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

    # -- producing
    def send(self, destination: Destination, message: Message) -> None:
        reply = message.reply_to.name if message.reply_to is not None else ""
        self.send_frame(destination, frame(message, reply, message.correlation_id or ""),
                        message.seq)

    def send_frame(self, destination: Destination, payload: bytes, seq: int) -> None:
        producer = self.producer
        if self.down:
            # librdkafka would queue it for when the broker is back, and it would count as
            # sent though the connection is known lost: it fails, as a send on any transport
            # does while it reconnects.
            producer.poll(0)  # what tells that the broker is back
            if self.down:
                raise TransportError(f"not connected: {self.last_error or 'the broker is down'}")
        try:
            producer.produce(destination.name, payload, self.key_of(seq))
        except BufferError:
            # The client's queue is full: serve reports (which frees it) and try once more.
            producer.poll(0.1)
            try:
                producer.produce(destination.name, payload, self.key_of(seq))
            except BufferError:
                raise TransportError("the client's queue is full (the broker is not taking "
                                     "sends)") from None
        except KafkaException as exc:
            raise TransportError(_reason(exc)) from None
        self.sends += 1
        if self.sends % POLL_EVERY == 0:
            producer.poll(0)

    def _reported(self, error: KafkaError | None, record: Any) -> None:
        if error is None:
            if self.confirming:
                self.feedback.confirm_us.append(int(record.latency() * 1_000_000))
            if self.down:
                self._up()
            return
        seq = unframe(record.value()).seq
        if error.code() in UNKNOWN:
            self.feedback.doubt.append((seq, error.str()))
        elif error.code() == KafkaError._PURGE_QUEUE:
            self.feedback.failed.append((seq, "send", "never sent: still queued at the end"))
        else:
            self.feedback.failed.append((seq, "send", error.str()))

    def flush(self) -> None:
        if self.producer is not None:
            self.producer.poll(0)

    def idle(self, seconds: float) -> None:
        """Waits serving delivery reports, so that each is timed when it comes."""
        if self.producer is None:
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        # poll() waits whole milliseconds: below one it would not wait at all, and spin.
        while (left := deadline - time.monotonic()) >= 0.001:
            self.producer.poll(left)
        if left > 0:
            time.sleep(left)

    # -- transactions
    def begin(self) -> None:
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            raise TransportError(f"begin: {_reason(exc)}") from None

    def commit(self) -> None:
        try:
            self.producer.commit_transaction(self.o.send_timeout)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    self.producer.abort_transaction(self.o.send_timeout)
                raise TransportError(f"commit refused: {error.str()}", kind=ROLLED_BACK) \
                    from None
            raise TransportError(f"commit: {error.str()}", kind=COMMIT_IN_DOUBT) from None

    def abort(self) -> None:
        try:
            self.producer.abort_transaction(self.o.send_timeout)
        except KafkaException as exc:
            raise TransportError(f"abort: {_reason(exc)}") from None

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


def _lag(end: int, position: int, committed: int) -> int:
    """Messages on a partition the consumer has not taken yet: its end offset (the last
    stable one under read_committed) minus the consumer's position, or minus its committed
    offset before it has taken any; -1 where neither is known. Not minus the committed
    offset throughout: under auto commit that trails the position by up to five seconds,
    and would show a lag where nothing waits."""
    done = position if position >= 0 else committed
    return max(end - done, 0) if end >= 0 and done >= 0 else -1


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc) or type(exc).__name__
