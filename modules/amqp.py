"""AMQP 0-9-1 (RabbitMQ's own protocol) through pika.

Each worker thread drives its own pika SelectConnection: the thread itself turns pika's I/O
loop (IOLoop.poll and process_timeouts, pika's extension API for an external loop) whenever it
sends, receives or waits for the broker, so a message crosses no thread and no queue between
the socket and the measurement. pika's BlockingConnection does the same turning, but writes
every publish out on its own: one process sent about 21,000 msg/s through it and 49,000 msg/s
writing every write_every publishes at once (256-byte messages, RabbitMQ on the same 2 cores).

Queues go through the default exchange unless --exchange names one; topics through a topic
exchange (amq.topic unless --exchange names one), each Subscriber with a queue of its own:
exclusive and auto-deleted, or named after --durable-name and durable for a durable
subscription. The harness's fields travel in one header, `harness: <seq>,<intended ns>,<sent
ns>,<crc or ->,<producer id>`; --property values are headers too, so a headers exchange routes
on them (AMQP 0-9-1 has no selectors: that is its way to filter).

Publisher confirms (--confirm N) keep at most N sends awaiting the broker's confirmation; each
confirmation's time from the send is the `confirm` metric, a negative one is a failed send, and
sends still unconfirmed when the connection is lost count as failed (the broker may or may not
have them). Without confirms a send counts once it is written to the socket.
"""

from __future__ import annotations

import contextlib
import logging
import math
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions
import pika.heartbeat
from harness.modules.interface.base import COMMIT_IN_DOUBT, Capability, TransportError
from harness.modules.interface.message import HEADER, Destination, Message, from_header, header
from harness.modules.interface.optional import (
    Acknowledgements,
    Declarations,
    Multiplexed,
    TemporaryQueues,
    Transactions,
)
from harness.modules.interface.options import HEARTBEAT_S, connect_timeout, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.driven import DrivenTransport
from harness.modules.kit.selector import MicrosecondEpoll
from pika.adapters.select_connection import EPollPoller, IOLoop, SelectConnection
from pika.adapters.utils.connection_workflow import (
    AMQPConnectionWorkflowFailed,
    AMQPConnectorPhaseErrorBase,
)

from harness.clock import now_ns

# pika logs every failed connection attempt and channel error itself; the harness reports
# each failure once, in its own words.
logging.getLogger("pika").setLevel(logging.CRITICAL)



class _PromptHeartbeat(pika.heartbeat.HeartbeatChecker):
    """The broker's silence checked every heartbeat timeout, as the AMQP 0-9-1 specification
    has it (two of the broker's heartbeats missed), not every timeout + 5 s as pika does,
    which at --heartbeat 3 finds a partition only 8 to 16 s after it."""

    def _start_check_timer(self) -> None:
        self._check_interval = self._timeout
        super()._start_check_timer()


# pika makes its checker through the module's attribute, at each connection.
pika.heartbeat.HeartbeatChecker = _PromptHeartbeat  # type: ignore[misc]

DEFAULT_PORT = 5672
RPC_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 10.0
# How long a consumer closing waits for the queue's depth, for the run's last interval.
DEPTH_AT_CLOSE_S = 2.0
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"
ACK_MODES = ("auto", "client", "client-individual")
EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")
QUEUE_TYPES = ("classic", "quorum", "stream")

_BASE = (Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT
         | Capability.TRANSACTIONS | Capability.DURABLE | Capability.REQUEST_REPLY
         | Capability.TEMP_QUEUES | Capability.PROPERTIES | Capability.TTL
         | Capability.PRIORITY)
FLAVOURS = ("rabbitmq", "generic")  # generic: no quorum queues, streams or direct reply-to


@dataclass(frozen=True)
class AmqpOptions:
    vhost: str | None = option(None, "", scope="connection")
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
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


def typed(value: str) -> Any:
    """An argument's value as RabbitMQ wants it: x-max-length=10 is a number, not text."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    with contextlib.suppress(ValueError):
        return int(value)
    return value


def pairs(items: list[str] | None) -> dict[str, Any]:
    out = {}
    for item in items or ():
        key, _, value = item.partition("=")
        out[key.strip()] = typed(value)
    return out


def _noop() -> None:
    pass


def _poller_fd(conn: Any) -> int:
    """The descriptor of the epoll a pika connection's IOLoop waits on; -1 without one.
    pika has no public way to it: its IOLoop keeps the poller, and the poller its epoll."""
    poll = getattr(getattr(conn.ioloop, "_poller", None), "_poll", None)
    return poll.fileno() if poll is not None else -1


class _Poller(EPollPoller):
    @staticmethod
    def _create_poller() -> MicrosecondEpoll:
        return MicrosecondEpoll()


class _IOLoop(IOLoop):
    """pika's IOLoop waiting to the microsecond (harness.modules.kit.selector), for a producer
    with confirms. pika has no public way to give its poller; these two hooks are the ones
    its own pollers use."""

    @staticmethod
    def _get_poller(get_wait_seconds: Callable[[], float | None],
                    process_timeouts: Callable[[], None]) -> EPollPoller:
        return _Poller(get_wait_seconds, process_timeouts)


BROKER_EXCHANGES = {"amq.direct": "direct", "amq.topic": "topic", "amq.fanout": "fanout",
                    "amq.headers": "headers", "amq.match": "headers"}


class AmqpTransport(DrivenTransport, Declarations, Acknowledgements, Transactions,
                    TemporaryQueues, Multiplexed):
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

    # -- pika's I/O loop, turned on this thread
    def _turn(self, timeout: float) -> None:
        """Wait up to timeout for the socket, then run what arrived and what fell due."""
        io = self.conn.ioloop
        timer = io.call_later(max(timeout, 0.0), _noop)  # poll() waits no longer
        try:
            io.poll()
            io.process_timeouts()
        finally:
            io.remove_timeout(timer)

    # -- many clients on one thread (--clients): each connection's loop is turned where the
    # worker's wait finds its poller readable (an epoll descriptor is, while one of its own
    # is ready)
    consumer_clients = True

    def fileno(self) -> int:
        return _poller_fd(self.conn) if self.conn is not None and self.connected else -1

    def readable(self) -> None:
        if self.conn is not None and self.connected and not self.dispatching:
            self._turn(0)

    def _until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.close_reason is not None and not self.connected:
                raise TransportError(f"{what}: {self.close_reason}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"{what}: no answer within {timeout:g} s")
            self._turn(min(remaining, 0.05))

    def _rpc(self, start: Callable[[Callable[..., None]], None], what: str) -> Any:
        """Start a broker call with a callback, then turn the loop until it answers."""
        answers: list[Any] = []
        start(lambda *args: answers.append(args[-1] if args else None))
        self._until(lambda: bool(answers), RPC_TIMEOUT_S, what)
        return answers[0]

    def _unwritten(self) -> int:
        # pika keeps no public count of what waits in its write buffer; its transport does.
        transport = getattr(self.conn, "_transport", None)
        return transport.get_write_buffer_size() if transport is not None else 0

    # -- connection
    def _parameters(self) -> pika.ConnectionParameters:
        s, o = self.settings, self.o
        host, port = s.address(DEFAULT_PORT)
        credentials = pika.PlainCredentials(s.user, s.password or "") if s.user is not None \
            else pika.ConnectionParameters.DEFAULT_CREDENTIALS
        ssl_options = None
        if s.tls:
            context = ssl.create_default_context(cafile=s.ca)
            if s.cert:
                context.load_cert_chain(s.cert, s.key)
            ssl_options = pika.SSLOptions(context, host)
        client = self.settings.connection_id(stable=False)
        return pika.ConnectionParameters(
            host, port, o.vhost or "/", credentials, ssl_options=ssl_options,
            heartbeat=math.ceil(o.heartbeat), connection_attempts=1,
            # A connection attempt into a partition waits no longer than the liveness check
            # would: a worker reconnecting when the run stops is not held past it.
            socket_timeout=connect_timeout(o.heartbeat),
            stack_timeout=connect_timeout(o.heartbeat),
            client_properties={"connection_name": client} if client else None)

    def open(self) -> None:
        s = self.settings
        host, port = s.address(DEFAULT_PORT)
        result: dict[str, Any] = {}
        self.close_reason = None
        conn = SelectConnection(
            self._parameters(),
            on_open_callback=lambda c: result.setdefault("open", c),
            on_open_error_callback=lambda c, exc: result.setdefault("error", exc),
            on_close_callback=self._connection_closed,
            custom_ioloop=_IOLoop() if self.exact_waits and MicrosecondEpoll else None)
        conn.ioloop.activate_poller()
        self.conn = conn
        deadline = time.monotonic() + connect_timeout(self.settings.options.heartbeat)
        while not result and time.monotonic() < deadline:
            self._turn(0.05)
        if "open" not in result:
            self._abandon()
            exc = result.get("error")
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}")
        self.connected = True
        try:
            self._open_channel()
        except TransportError as exc:
            self.close()
            raise TransportError(f"cannot open a channel on {host}:{port}: {exc}") from None

    def _open_channel(self) -> None:
        o = self.o
        channel = self._rpc(lambda cb: self.conn.channel(on_open_callback=cb), "channel")
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_return_callback(self._returned)
        self.channel = channel
        self.generation += 1
        self.declared.clear()  # what a new channel must declare again
        self.routes.clear()
        self.next_tag = 0  # confirmation tags are the channel's own too
        self.confirmed_early.clear()
        self.last_tag = None
        self.unacked = 0
        if o.prefetch:
            self._rpc(lambda cb: channel.basic_qos(prefetch_count=o.prefetch, callback=cb),
                      "basic.qos")
        if self.confirm_window:
            self._rpc(lambda cb: channel.confirm_delivery(self._confirmed, callback=cb),
                      "confirm.select")
        if self.settings.transacted:
            self._rpc(lambda cb: channel.tx_select(callback=cb), "tx.select")

    def _connection_closed(self, conn: Any, reason: Exception) -> None:
        if conn is not self.conn:
            return
        was = self.connected
        self.connected = False
        self.close_reason = _reason(reason)
        if was and not self.closing:
            self.outages.went_down()
        self._lose_pending("connection lost before the broker confirmed the send")

    def _channel_closed(self, channel: Any, reason: Exception) -> None:
        if channel is not self.channel:
            return
        self.close_reason = _reason(reason)
        if not self.closing and self.connected:
            # A channel error (a declaration the broker refused, an unknown delivery tag):
            # the connection goes with it, and the next call reconnects.
            self.connected = False
            self.outages.went_down()
            with contextlib.suppress(Exception):
                self.conn.close()
        self._lose_pending("channel closed before the broker confirmed the send")

    def _abandon(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.ioloop.close()

    def _reopen(self) -> None:
        self._abandon()
        self.open()

    # -- topology
    def _exchange(self, kind: str) -> str:
        o = self.o
        name = o.exchange or ("amq.topic" if kind == "topic" else "")
        if name and not name.startswith("amq.") and ("exchange", name) not in self.declared:
            exchange_type = o.exchange_type or ("topic" if kind == "topic" else "direct")
            self._rpc(lambda cb: self.channel.exchange_declare(
                name, exchange_type, durable=o.durable, callback=cb),
                f"declare exchange {name}")
            self.declared.add(("exchange", name))
        return name

    def _queue(self, name: str, durable: bool, exclusive: bool, auto_delete: bool) -> str:
        if ("queue", name) in self.declared:
            return name
        frame = self._rpc(lambda cb: self.channel.queue_declare(
            name, durable=durable, exclusive=exclusive, auto_delete=auto_delete,
            arguments=self.queue_args or None, callback=cb), f"declare queue {name or '(new)'}")
        name = frame.method.queue
        self.declared.add(("queue", name))
        return name

    def _named_queue(self, name: str) -> str:
        o = self.o
        return self._queue(name, o.durable, o.exclusive, o.auto_delete)

    def _route(self, destination: Destination) -> tuple[str, str]:
        """(exchange, routing key) a send to destination goes by, declaring what it needs."""
        if self.replying:
            return "", destination.name
        o = self.o
        exchange = self._exchange(destination.kind)
        if not exchange and destination.kind == "queue":
            # Through the default exchange a message for a queue nobody declared yet would
            # be dropped: the sender declares it, as a consumer would.
            self._named_queue(destination.name)
        key = o.routing_key if o.routing_key is not None else destination.name
        self.routes[destination] = route = (exchange, key)
        return route

    def declare(self, destination: Destination) -> None:
        if destination not in self.routes:
            self._route(destination)

    # -- messages
    def send(self, destination: Destination, message: Message) -> None:
        if not self.connected:
            self._check()
        route = self.routes.get(destination) or self._route(destination)
        headers = {HEADER: header(message)}
        if message.properties:
            headers.update(message.properties)
        properties = pika.BasicProperties(
            headers=headers, correlation_id=message.correlation_id,
            reply_to=message.reply_to.name if message.reply_to is not None else None,
            delivery_mode=2 if message.persistent else None, expiration=self.expiration,
            priority=self.settings.priority)
        try:
            self.channel.basic_publish(route[0], route[1], message.body, properties,
                                       self.o.mandatory)
        except (pika.exceptions.AMQPError, OSError) as exc:
            self.connected = False
            self.outages.went_down()
            raise TransportError(f"send failed: {_reason(exc)}") from None
        if self.confirm_window:
            self.next_tag += 1
            failed = self.feedback.failed
            before = len(failed)
            self._sent(self.next_tag, message.seq)
            if self.confirm_each:
                self._await_confirms(0)
                if len(failed) > before:
                    _, _, reason = failed.pop()
                    raise TransportError(reason)
            elif len(self.pending) >= self.confirm_window:
                self._await_confirms(self.confirm_window - 1)
        else:
            self._sent(None, message.seq)

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        # Waiting for a reply's confirmation turns pika's loop, which a reply sent inside
        # its dispatch may not: such a Responder pulls.
        return not self.confirm_each and super().deliver(sink, None, headed)

    def _await_confirms(self, most: int) -> None:
        """Turn the loop until at most `most` sends await confirmation."""
        deadline = time.monotonic() + RPC_TIMEOUT_S
        while len(self.pending) > most and self.connected:
            if time.monotonic() > deadline:
                self._lose_pending(f"no confirmation within {RPC_TIMEOUT_S:g} s")
                return
            self._turn(0.05)

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        tag, at = method.delivery_tag, now_ns()
        nack = isinstance(method, pika.spec.Basic.Nack)
        pending, feedback = self.pending, self.feedback
        if not method.multiple and pending and pending[0][0] != tag:
            self.confirmed_early.add(tag)  # out of order: settled when it reaches the front
            if nack:
                seq = next((p[1] for p in pending if p[0] == tag), -1)
                feedback.failed.append((seq, "nack", "the broker refused the message"))
            return
        while pending and (pending[0][0] <= tag or pending[0][0] in self.confirmed_early):
            first, seq, sent = pending.popleft()
            if first in self.confirmed_early:
                self.confirmed_early.discard(first)
                continue
            if nack:
                feedback.failed.append((seq, "nack", "the broker refused the message"))
            else:
                feedback.confirm_us.append((at - sent) // 1000)

    def _returned(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        seq = from_header((properties.headers or {}).get(HEADER))[0]
        self.feedback.failed.append(
            (seq, "returned", f"returned by the broker: {method.reply_code} "
             f"{method.reply_text} (exchange {method.exchange!r}, key {method.routing_key!r})"))

    def _write_out(self) -> None:
        self._turn(0)  # and take in what the broker said meanwhile
        deadline = time.monotonic() + RPC_TIMEOUT_S
        while self._unwritten() and self.connected and time.monotonic() < deadline:
            self._turn(0.01)  # the socket is full: wait for room

    def _subscribe(self, destination: Destination) -> None:
        s, o = self.settings, self.o
        arguments = None
        if destination.name.startswith(DIRECT_REPLY_TO):
            queue, auto_ack = destination.name, True  # direct reply-to takes no acks
        else:
            auto_ack = self.auto_ack
            if destination.kind == "topic":
                exchange = self._exchange("topic")
                if s.durable_name:
                    queue = self._queue(f"{s.durable_name}{s.process}.{s.thread}", True, False,
                                        False)
                else:
                    queue = self._queue("", False, True, True)
            elif s.asks:
                queue = self._queue(destination.name, False, True, True)
                exchange = ""
            else:
                queue = self._named_queue(destination.name)
                exchange = self._exchange("queue") if o.exchange else ""
            if exchange:
                key = o.routing_key if o.routing_key is not None else destination.name
                self._rpc(lambda cb: self.channel.queue_bind(
                    queue, exchange, key, self.bind_args, callback=cb),
                    f"bind {queue} to {exchange}")
            if o.queue_type == "stream":
                offset = o.stream_offset
                arguments = {"x-stream-offset": int(offset) if offset.isdigit() else offset}
        self._rpc(lambda cb: self.channel.basic_consume(
            queue, self._on_message, auto_ack=auto_ack, arguments=arguments, callback=cb),
            f"consume from {queue}")
        # The queue's depth, but for a Requestor's replies and a stream (whose count is what
        # it keeps, read or not).
        if not s.asks and queue != DIRECT_REPLY_TO and o.queue_type != "stream":
            self.depth_asks, self.depth_queue = 0, queue
            self.gauge_with(self._ask_depth)

    def _ask_depth(self, again: bool = False) -> None:
        """A passive queue.declare: its answer says how many messages the queue holds ready
        (not those delivered and awaiting acknowledgement). One at a time, unless again: a
        broker slow to answer is not asked again meanwhile."""
        if (self.depth_asks and not again) or not self.connected:
            return
        self.depth_asks += 1
        channel, queue = self.channel, self.depth_queue

        def answered(frame: Any) -> None:
            if channel is self.channel:
                self.depth_asks -= 1
                self.feedback.waiting(queue, frame.method.message_count)

        channel.queue_declare(queue, passive=True, callback=answered)

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        headed = self.headed
        if headed is not None:  # a consumer that only measures, and auto acknowledgements
            if method.redelivered:
                self.feedback.redelivery()
            headers = properties.headers
            headed(headers.get(HEADER) if headers else None, body)
            return
        if not self.replying:  # only a Responder sends while pika dispatches
            self.arrived((method, properties, body))
            return
        self.dispatching = True
        try:
            self.arrived((method, properties, body))
        finally:
            self.dispatching = False

    def _tend(self) -> None:
        if self.sink is None and self._unwritten():
            self._turn(0)  # a pulling Responder's replies go out before the next request

    def message(self, raw: Any) -> Message:
        method, properties, body = raw
        if method.redelivered:
            self.feedback.redelivery()  # given back, or unacknowledged on a lost channel
        headers = properties.headers
        seq, ts, sent, crc, producer = from_header(headers.get(HEADER) if headers else None)
        reply_to = properties.reply_to
        return Message(body, producer, seq, ts, sent, crc, None, properties.correlation_id,
                       Destination("queue", reply_to) if reply_to else None,
                       properties.delivery_mode == 2, (self.generation, method.delivery_tag))

    def _tag(self, message: Message) -> int | None:
        """The delivery tag to acknowledge or reject, None where there is nothing to do: auto
        acks, or its channel is gone (the broker delivers it again)."""
        if self.auto_ack or message.handle is None:
            return None
        generation, tag = message.handle
        return tag if generation == self.generation and self.connected else None

    def acknowledges(self) -> bool:
        return not self.auto_ack

    def ack(self, message: Message) -> None:
        tag = self._tag(message)
        if tag is None:
            return
        try:
            if self.ack_mode == "client-individual":
                self.channel.basic_ack(tag)
                return
            self.last_tag = message.handle
            self.unacked += 1
            if self.unacked >= self.o.ack_every:
                self.channel.basic_ack(tag, multiple=True)
                self.unacked = 0
                self.last_tag = None
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise TransportError(f"ack failed: {_reason(exc)}") from None

    def reject(self, message: Message, retry: bool) -> None:
        tag = self._tag(message)
        if tag is None:
            return
        try:
            self.channel.basic_nack(tag, multiple=False, requeue=retry and self.o.requeue)
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise TransportError(f"nack failed: {_reason(exc)}") from None

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


def _reason(exc: Any) -> str:
    """What went wrong, in the broker's words where it gave some."""
    if exc is None:
        return "no answer"
    if isinstance(exc, pika.exceptions.ChannelClosedByBroker | pika.exceptions.
                  ConnectionClosedByBroker):
        return f"{exc.reply_code} {exc.reply_text}"
    # pika's connection workflow wraps the cause (a refused socket, a certificate that does
    # not verify) in an exception per attempt, each wrapping the phase's own.
    if isinstance(exc, AMQPConnectionWorkflowFailed) and exc.exceptions:
        return _reason(exc.exceptions[-1])
    if isinstance(exc, AMQPConnectorPhaseErrorBase) and exc.exception is not None:
        return _reason(exc.exception)
    if isinstance(exc, pika.exceptions.AMQPConnectionError) and exc.args:
        inner = exc.args[0]
        if isinstance(inner, BaseException) and inner is not exc:
            return _reason(inner)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__
