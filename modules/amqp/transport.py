"""The AMQP 0-9-1 transport: its parts (loop, connection, topology, publishing, consuming)
composed, what it refuses before a run, its state, transactions and close."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from harness.modules.amqp.common import (
    BROKER_EXCHANGES,
    CLOSE_TIMEOUT_S,
    DEFAULT_PORT,
    DEPTH_AT_CLOSE_S,
    DIRECT_REPLY_TO,
    pairs,
    pika,
)
from harness.modules.amqp.connection import Connection
from harness.modules.amqp.consuming import Consuming
from harness.modules.amqp.loop import Turning
from harness.modules.amqp.options import (
    _BASE,
    ACK_MODES,
    EXCHANGE_TYPES,
    FLAVOURS,
    QUEUE_TYPES,
    AmqpOptions,
    client_settings,
)
from harness.modules.amqp.publishing import Publishing
from harness.modules.amqp.topology import Topology
from harness.modules.interface.base import COMMIT_IN_DOUBT, TransportError
from harness.modules.interface.message import Destination
from harness.modules.interface.optional import (
    Acknowledgements,
    Declarations,
    Multiplexed,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.options import cert_login_problems
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import config_problems
from harness.modules.kit.driven import DrivenTransport


class AmqpTransport(Turning, Connection, Topology, Publishing, Consuming, DrivenTransport,
                    Declarations, Acknowledgements, Transactions, TemporaryQueues,
                    Multiplexed):
    confirmations = "publisher confirms"
    name = "amqp"
    default_port = DEFAULT_PORT
    flavours = FLAVOURS
    protocols = ("0-9-1",)
    files = 2  # the socket, and the epoll pika's loop waits on
    description = "AMQP 0-9-1 via pika (RabbitMQ's own protocol)"
    capabilities = _BASE
    Options = AmqpOptions
    settings: Settings[AmqpOptions]

    @classmethod
    def problems(cls, settings: Settings[AmqpOptions]) -> list[tuple[str, str]]:
        o = settings.options
        flavour = cls.flavour_of(settings)
        out = []
        if (settings.protocol or "0-9-1") != "0-9-1":
            out.append(("--protocol", "the amqp transport speaks 0-9-1 (amqp10 speaks 1.0)"))
        if settings.selector:
            out.append(("--selector", "AMQP 0-9-1 has no selectors; filter with a headers "
                        "exchange instead: --exchange NAME --exchange-type headers "
                        "--bind-arg x-match=all --bind-arg KEY=VALUE"))
        out.extend(config_problems(o.client_config, client_settings))
        out.extend(cert_login_problems(o.cert_login, settings.tls, settings.cert, settings.user))
        if o.ack not in ACK_MODES:
            out.append(("--ack", f"acknowledgement modes are {', '.join(ACK_MODES)}"))
        if o.exchange_type and o.exchange_type not in EXCHANGE_TYPES:
            out.append(("--exchange-type", f"exchange types are {', '.join(EXCHANGE_TYPES)}"))
        if o.exchange_type and not o.exchange:
            out.append(("--exchange-type", "types an exchange named with --exchange"))
        if o.routing_key is not None and not o.exchange and \
                not settings.on_topic:
            out.append(("--routing-key", "routes through an exchange named with --exchange; "
                        "the default exchange routes to the queue -d names"))
        # The broker's own exchanges are never declared, so a type given for one is not
        # checked by the broker: check it here.
        own = BROKER_EXCHANGES.get(o.exchange or "")
        if o.exchange_type and own and o.exchange_type != own:
            out.append(("--exchange-type", f"{o.exchange} is the broker's own {own} exchange"))
        if o.queue_type not in QUEUE_TYPES:
            out.append(("--queue-type", f"queue types are {', '.join(QUEUE_TYPES)}"))
        for flag, items in (("--queue-arg", o.queue_arg), ("--bind-arg", o.bind_arg)):
            for item in items or ():
                if "=" not in item or not item.partition("=")[0].strip():
                    out.append((flag, f"{item!r} is not key=value"))
        if o.stream_offset not in ("first", "last", "next") and \
                not o.stream_offset.isdigit():
            out.append(("--stream-offset", "is first, last, next or an offset number"))
        if o.queue_type != "classic":
            if flavour != "rabbitmq":
                out.append(("--queue-type", f"{o.queue_type} queues are RabbitMQ's"))
            if o.exclusive or o.auto_delete or not o.durable:
                out.append(("--queue-type", f"{o.queue_type} queues are durable, never "
                            "exclusive or auto-delete"))
            if settings.on_topic and settings.consumes and not settings.durable_name:
                out.append(("--queue-type", f"a Subscriber's {o.queue_type} queue needs a "
                            "name: give --durable-name"))
        consumes = settings.consumes and not settings.asks
        if o.queue_type == "stream" and consumes and \
                (o.ack == "auto" or not o.prefetch) and not settings.transacted:
            out.append(("--queue-type", "a stream consumer needs --ack client or "
                        "client-individual and --prefetch N"))
        if o.ack == "auto" and o.prefetch and consumes and not settings.transacted:
            out.append(("--prefetch", "limits unacknowledged deliveries, and with --ack auto "
                        "there are none (the broker ignores it): add --ack client or "
                        "client-individual"))
        if o.ack == "client" and o.prefetch and o.ack_every > o.prefetch:
            out.append(("--ack-every", f"{o.ack_every} is more than --prefetch {o.prefetch}: "
                        "the consumer would wait for messages the broker holds back until "
                        "it acknowledges"))
        if not o.requeue and o.ack == "auto":
            out.append(("--no-requeue", "needs acknowledgements: --ack client or "
                        "client-individual (auto-acknowledged messages cannot be given back)"))
        if o.confirm and settings.measures_only:
            out.append(("--confirm", "confirms are for Sender, Publisher, Requestor and "
                        "Responder (its replies)"))
        if o.confirm and settings.transacted:
            out.append(("--confirm", "a channel is either transactional or in confirm "
                        "mode, not both (drop -tx or --confirm)"))
        if settings.asks and not o.reply_queue and flavour != "rabbitmq":
            out.append(("--reply-queue", "direct reply-to is RabbitMQ's: give a reply queue "
                        "prefix"))
        return out

    @classmethod
    def confirms(cls, settings: Settings[AmqpOptions]) -> bool:
        return bool(settings.options.confirm)

    @classmethod
    def filters(cls, settings: Settings[AmqpOptions]) -> bool:
        o = settings.options
        return bool(o.bind_arg) or o.routing_key is not None or o.exchange_type == "headers"

    @classmethod
    def endpoint(cls, settings: Settings[Any]) -> str:
        return super().endpoint(settings) + (settings.options.vhost or "")

    def __init__(self, settings: Settings[AmqpOptions]) -> None:
        super().__init__(settings)
        o = settings.options
        self.o = o
        # --ttl as AMQP's expiration: milliseconds, as text
        self.expiration = str(round(settings.ttl * 1000)) if settings.ttl else None
        self.conn: Any = None
        self.channel: Any = None
        self.generation = 0  # the channel's number: delivery tags are a channel's own
        # The sends the channel carried, by sequence number (first -1: none yet): what a
        # broker that closes it refusing access (403) refused.
        self.channel_first = -1
        self.channel_last = -1
        self.channel_refused = False  # closed by the broker refusing access (_check)
        self.closing = False
        self.close_reason: str | None = None
        self.replying = settings.replies  # replies go by the default exchange
        self.ack_mode = "client-individual" if settings.transacted and o.ack == "auto" \
            else o.ack
        self.auto_ack = self.ack_mode == "auto"
        self.routes: dict[Destination, tuple[str, str]] = {}
        self.declared: set[tuple[str, str]] = set()
        self.unacked = 0  # --ack client: messages since the last (multiple) ack
        self.last_tag: tuple[int, int] | None = None
        self.confirm_window = o.confirm
        # A Responder acknowledges a request only once the broker confirmed its reply: a
        # reply refused (nacked, returned) or lost gives the request back instead.
        self.confirm_each = bool(o.confirm) and settings.replies
        self.next_tag = 0
        self.confirmed_early: set[int] = set()
        self.queue_args = pairs(o.queue_arg)
        if o.queue_type != "classic":
            self.queue_args["x-queue-type"] = o.queue_type
        if o.max_length:
            self.queue_args["x-max-length"] = o.max_length
        self.bind_args = pairs(o.bind_arg) or None

    def temporary_queue(self) -> Destination:
        s, o = self.settings, self.o
        if o.reply_queue:
            return Destination("queue", f"{o.reply_queue}.{s.process}.{s.thread}")
        return Destination("queue", DIRECT_REPLY_TO)

    # -- transactions: a transactional channel is always in one (tx.select at open)
    def commit(self) -> None:
        self._ready_to_commit()
        try:
            self._rpc(lambda cb: self.channel.tx_commit(callback=cb), "tx.commit")
        except TransportError as exc:  # asked, and no answer came: committed or not
            raise TransportError(str(exc), kind=COMMIT_IN_DOUBT) from None

    def abort(self) -> None:
        if self.connected:
            with contextlib.suppress(TransportError, pika.exceptions.AMQPError):
                self._rpc(lambda cb: self.channel.tx_rollback(callback=cb), "tx.rollback")

    def close(self) -> None:
        conn = self.conn
        if conn is None:
            return
        if self.connected:
            with contextlib.suppress(TransportError, pika.exceptions.AMQPError, OSError):
                if self.last_tag is not None and self.last_tag[0] == self.generation:
                    self.channel.basic_ack(self.last_tag[1], multiple=True)
                    self.last_tag = None
                self.flush()
                if self.pending:
                    self._await_confirms(0)
                if self.gauge is not None:  # what was left, for the run's last interval
                    self._ask_depth(again=True)
                    self._until(lambda: not self.depth_asks, DEPTH_AT_CLOSE_S, "queue depth")
        self.closing = True
        try:
            if self.connected:
                with contextlib.suppress(Exception):
                    conn.close()
                deadline = time.monotonic() + CLOSE_TIMEOUT_S
                while self.connected and time.monotonic() < deadline:
                    self._turn(0.05)
        finally:
            self.connected = False
            self._lose_pending("closed before the broker confirmed the send")
            self._abandon()
            self.closing = False

