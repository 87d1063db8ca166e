"""The clients' connection: librdkafka's settings common to producer and consumer, the producer
made, errors and the broker found up or down."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from harness.modules.interface.base import TransportError
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import (
    ADMIN_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    DOWN,
    LOG,
    STATS_MS,
    _reason,
)
from harness.modules.kafka.options import KafkaOptions, client_config


class Connection:
    """The connection part: librdkafka's common settings, the producer, errors. The state it
    uses is made in KafkaTransport.__init__."""

    settings: Settings[KafkaOptions]
    o: KafkaOptions

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
                         "sasl.password": s.secret() or ""})
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

    def _up(self) -> None:
        if self.down:
            self.down = False
            self.outages.came_up()

