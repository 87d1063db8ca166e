"""The AMQP 0-9-1 transport's options, flavours and capabilities."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from harness.modules.interface.base import Capability
from harness.modules.interface.options import CERT_LOGIN_HELP, HEARTBEAT_S, option
from harness.modules.kit.client_config import client_config_option, library_settings, parameters

ACK_MODES = ("auto", "client", "client-individual")
EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")
QUEUE_TYPES = ("classic", "quorum", "stream")

_BASE = (Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT
         | Capability.TRANSACTIONS | Capability.DURABLE | Capability.REQUEST_REPLY
         | Capability.TEMP_QUEUES | Capability.PROPERTIES | Capability.TTL
         | Capability.PRIORITY)
FLAVOURS = ("rabbitmq", "generic")  # generic: no quorum queues, streams or direct reply-to
# pika's ConnectionParameters that a flag gives (--client-config refuses them, naming it) or
# that the harness owns: one attempt a connection, its own reconnection counted as outages.
CLIENT_FLAGGED = {"host": "--host", "port": "--port", "virtual_host": "--vhost",
                  "credentials": "--user/--password", "heartbeat": "--heartbeat",
                  "ssl_options": "--tls/--ca/--cert/--key", "client_properties": "--client-id",
                  "socket_timeout": "--heartbeat", "stack_timeout": "--heartbeat"}
CLIENT_OWNED = ("connection_attempts", "retry_delay")


@cache
def client_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """--client-config as pika.ConnectionParameters' keyword arguments."""
    import pika

    return library_settings(items, parameters(pika.ConnectionParameters.__init__),
                            "pika's ConnectionParameters", CLIENT_FLAGGED, CLIENT_OWNED,
                            check=lambda values: pika.ConnectionParameters(**values))


@dataclass(frozen=True)
class AmqpOptions:
    vhost: str | None = option(None, "", scope="connection")
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    client_config: tuple[str, ...] = client_config_option()
    cert_login: bool = option(False, CERT_LOGIN_HELP, scope="connection")
    ack: str = option("auto", "", scope="connection", side="receive")
    prefetch: int = option(0, "", scope="connection", low=0, side="receive")
    reply_queue: str | None = option(None, "")
    exchange: str | None = option(None, "AMQP 0-9-1 exchange to publish to and bind queues to "
                                  "(default: the default exchange for queues, amq.topic for "
                                  "topics); declared unless it is a built-in amq.* one.")
    exchange_type: str = option("", "Type of a declared --exchange: direct, topic, fanout or "
                                "headers (default: topic for topics, direct for queues).")
    routing_key: str | None = option(None, "Routing key to publish with and bind with "
                                     "(default: the destination name).")
    # option() is a dataclasses.field whose default is None, never a shared list.
    bind_arg: list[str] | None = option(None,  # noqa: RUF009 "Binding argument key=value (repeatable), e.g. "
                                        "x-match=all with a headers exchange.", multiple=True)
    queue_type: str = option("classic", "Queue type: classic, quorum or stream (x-queue-type).")
    stream_offset: str = option("next", "Where a stream consumer starts: first, last, next or "
                                "an offset number (x-stream-offset).", side="receive")
    durable: bool = option(True, "Declare named queues and exchanges durable; --no-durable "
                           "for transient ones.", negative=True)
    exclusive: bool = option(False, "Declare named queues exclusive to their connection.")
    auto_delete: bool = option(False, "Declare named queues auto-delete.")
    max_length: int = option(0, "Queue length limit (x-max-length); 0 = none.", low=0)
    queue_arg: list[str] | None = option(None,  # noqa: RUF009 "Queue argument key=value (repeatable), e.g. "
                                         "x-message-ttl=60000; numbers and true/false are "
                                         "typed.", multiple=True)
    confirm: int = option(0, "Publisher confirms: at most N sends awaiting the broker's "
                          "confirmation (RabbitMQ PerfTest's -c), timed as the confirm "
                          "metric; 0 = no confirms. A Responder's replies: each confirmed "
                          "before its request is acknowledged (a refused one gives the "
                          "request back).", low=0, side="send")
    mandatory: bool = option(False, "Publish mandatory: a message no queue takes comes back "
                             "and counts as a failed send.", side="send")
    ack_every: int = option(1, "With --ack client: acknowledge every N messages at once "
                            "(multiple).", low=1, side="receive")
    requeue: bool = option(True, "A Responder whose reply failed gives the request back to "
                           "be delivered again (AMQP 0-9-1: nack with requeue; AMQP 1.0: "
                           "released); --no-requeue drops it or, where the queue has one, "
                           "dead-letters it. A request without reply-to is never requeued. "
                           "Needs acknowledged delivery (AMQP 0-9-1: --ack client or "
                           "client-individual; AMQP 1.0: --settle at-least-once).",
                           negative=True, side="receive")

