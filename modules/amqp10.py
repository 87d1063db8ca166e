"""AMQP 1.0 through python-qpid-proton: the standard protocol of the JMS brokers (ActiveMQ,
Artemis, Qpid) and of RabbitMQ's AMQP 1.0 plugin.

Connections and links are made with Proton's BlockingConnection; after that the worker thread
turns Proton's container itself (Container.process), as the amqp transport turns pika's loop:
a send only queues the message on its link, and the thread writes every write_every sends and
before it sleeps, or waits for the broker to settle what it sent.

Settlement: at-least-once by default (the broker settles each message; without --confirm a
send waits for that, as a JMS persistent send does; with --confirm N at most N wait, and the
time to settlement is the confirm metric; a message the broker rejects or releases is a
failed send). --settle at-most-once sends presettled. Receivers get --prefetch messages of
link credit (default 100) and accept each message unless it came presettled.

A flavour picks the addresses: rabbitmq `/queue/NAME` and `/topic/NAME` (its plugin's
amq.topic routing), activemq `queue://NAME` and `topic://NAME`, artemis and generic the name
itself (artemis with the link capability `queue` or `topic`). Selectors travel as the
standard `apache.org:selector-filter:string` filter, durable subscriptions as a durable,
never-expiring source named after --durable-name; both only where the broker applies them.
The harness's fields travel in the application property `harness` (`<seq>,<intended ns>,
<sent ns>,<crc or ->,<producer id>`), --property values as application properties too.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

from harness.modules.interface.base import Capability, TransportError
from harness.modules.interface.message import HEADER, Destination, Message, from_header, header
from harness.modules.interface.optional import Acknowledgements, Declarations, TemporaryQueues
from harness.modules.interface.options import HEARTBEAT_S, cert_login_problems, option
from harness.modules.interface.settings import Settings
from harness.modules.kit.driven import DrivenTransport
from harness.modules.kit.library import library

from harness.clock import now_ns

proton = library("proton", "handlers", "reactor", "utils")

DEFAULT_PORT = 5672
CONNECT_TIMEOUT_S = 10.0
SETTLE_TIMEOUT_S = 10.0
DEFAULT_CREDIT = 100
SETTLE_MODES = ("at-least-once", "at-most-once")

_BASE = Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT | \
    Capability.REQUEST_REPLY | Capability.TEMP_QUEUES | Capability.PROPERTIES | \
    Capability.TTL | Capability.PRIORITY
# Transactions: Proton's blocking API has none, so every flavour refuses -tx.
FLAVOURS: dict[str, Capability] = {
    # RabbitMQ 3.x's plugin ignores selector filters and has no durable subscriptions.
    "rabbitmq": _BASE,
    "activemq": _BASE | Capability.SELECTORS | Capability.DURABLE,
    "artemis": _BASE | Capability.SELECTORS | Capability.DURABLE,
    "generic": _BASE,
}
PREFIXES: dict[str, tuple[str, str]] = {
    "rabbitmq": ("/queue/", "/topic/"),
    "activemq": ("queue://", "topic://"),
    "artemis": ("", ""),
    "generic": ("", ""),
}


@dataclass(frozen=True)
class Amqp10Options:
    prefetch: int = option(0, "", scope="connection", low=0, side="receive")
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0)
    confirm: int = option(0, "", low=0, side="send")
    reply_queue: str | None = option(None, "")
    requeue: bool = option(True, "", negative=True, side="receive")
    # RabbitMQ declares a /queue/ address on a link's attach, durable as the link asks.
    durable: bool = option(True, "", negative=True)
    cert_login: bool = option(False, "", scope="connection")
    settle: str = option("at-least-once", "AMQP 1.0 settlement: at-least-once (the broker "
                         "settles each message) or at-most-once (presettled).",
                         scope="connection")


@cache
def _links() -> Any:
    """proton's classes made ours, once proton is imported: at a link's first use, not at the
    transport's import."""

    class LinkCapability(proton.reactor.LinkOption):
        """Tells Artemis whether an address is a queue (anycast) or a topic (multicast)."""

        def __init__(self, kind: str) -> None:
            self.kind = kind

        def apply(self, link: Any) -> None:
            terminus = link.source if link.is_receiver else link.target
            terminus.capabilities.put_object(proton.symbol(self.kind))

    class DurableNode(proton.reactor.LinkOption):
        """Asks for the node to be kept across a restart (the terminus's durability): RabbitMQ
        declares a `/queue/` address on the link's attach, durable only when asked, and a
        queue that is not loses the persistent messages it held with the node."""

        def apply(self, link: Any) -> None:
            terminus = link.source if link.is_receiver else link.target
            terminus.durability = proton.Terminus.CONFIGURATION

    class Inbound(proton.handlers.MessagingHandler):
        """Runs inside Container.process on the worker thread: each message goes straight to
        the measurement (or the inbox). Proton's own blocking receiver wakes its caller once per
        message, a thread hand-off each."""

        def __init__(self, transport: Amqp10Transport, credit: int) -> None:
            super().__init__(prefetch=credit, auto_accept=False)
            self.transport = transport

        def on_message(self, event: Any) -> None:
            transport = self.transport
            transport.arrivals += 1
            transport.dispatching = True
            try:
                transport.arrived((event.message, event.delivery))
            finally:
                transport.dispatching = False

    states = {proton.Delivery.REJECTED: "rejected", proton.Delivery.RELEASED: "released",
              proton.Delivery.MODIFIED: "modified"}
    return SimpleNamespace(Capability=LinkCapability, DurableNode=DurableNode,
                           Inbound=Inbound, states=states)


class Amqp10Transport(DrivenTransport, Declarations, Acknowledgements, TemporaryQueues):
    confirmations = "settlements (dispositions)"
    name = "amqp10"
    default_port = DEFAULT_PORT
    flavours = tuple(FLAVOURS)
    protocols = ("1.0",)
    description = "AMQP 1.0 via python-qpid-proton"
    capabilities = FLAVOURS["rabbitmq"]
    Options = Amqp10Options
    settings: Settings[Amqp10Options]

    @classmethod
    def capabilities_for(cls, settings: Settings[Any]) -> Capability:
        return FLAVOURS[cls.flavour_of(settings)]

    @classmethod
    def confirms(cls, settings: Settings[Any]) -> bool:
        return bool(settings.options.confirm)

    @classmethod
    def problems(cls, settings: Settings[Amqp10Options]) -> list[tuple[str, str]]:
        out = cert_login_problems(settings.options.cert_login, settings.tls, settings.cert,
                                  settings.user)
        if (settings.protocol or "1.0") != "1.0":
            out.append(("--protocol", "the amqp10 transport speaks 1.0 (amqp speaks 0-9-1)"))
        if settings.options.settle not in SETTLE_MODES:
            out.append(("--settle", f"settlement modes are {', '.join(SETTLE_MODES)}"))
        flavour = cls.flavour_of(settings)
        if settings.selector and flavour == "rabbitmq":
            out.append(("--selector", "RabbitMQ's AMQP 1.0 plugin ignores selector filters; "
                        "give --flavour activemq or artemis for a broker that applies them"))
        if not settings.options.durable and flavour != "rabbitmq":
            out.append(("--no-durable", "only RabbitMQ's plugin declares a queue on a link's "
                        f"attach; {flavour} keeps a queue as the broker defines it"))
        if settings.durable_name and flavour in ("rabbitmq", "generic"):
            out.append(("--durable-name", f"no durable subscriptions on {flavour} over AMQP "
                        "1.0; give --flavour activemq or artemis"))
        if settings.transacted:
            out.append(("-tx", "python-qpid-proton's blocking API has no transactions: "
                        "use the amqp transport (AMQP 0-9-1) or stomp for transacted runs"))
        if not settings.options.requeue and settings.options.settle == "at-most-once":
            out.append(("--no-requeue", "presettled (at-most-once) messages cannot be given "
                        "back: --settle at-least-once"))
        if settings.options.confirm and settings.options.settle == "at-most-once":
            out.append(("--confirm", "presettled (at-most-once) sends are never confirmed"))
        if settings.options.confirm and not settings.publishes:
            out.append(("--confirm", "confirms are for Sender, Publisher and Requestor"))
        return out

    def __init__(self, settings: Settings[Amqp10Options]) -> None:
        super().__init__(settings)
        self.flavour = self.flavour_of(settings)
        self.presettled = settings.options.settle == "at-most-once"
        self.window = settings.options.confirm or 1
        self.timed = bool(settings.options.confirm)
        self.conn: Any = None
        # Each destination's sender, found at once on every send (its address is worked out
        # once, when the link is opened).
        self.senders: dict[Destination, Any] = {}
        self.receiver: Any = None
        self.reply_address: str | None = None
        self.arrivals = 0  # messages received: what a turn waits for

    # -- Proton's container, turned on this thread
    def _turn(self, timeout: float, done: Callable[[], bool] | None = None) -> None:
        """Turn the container until done() (default: anything arrived) or timeout.

        One process() call does one step: dispatch the events there are, or wait on the
        socket for up to the container's timeout (what that wait reads is dispatched by the
        next call), so a turn takes as many calls as it needs; with timeout 0, one round of
        each step (writes out what is queued, reads what is there).
        """
        container = self.conn.container
        arrivals = self.arrivals
        if done is None:
            def done() -> bool:
                return self.arrivals != arrivals
        deadline = time.monotonic() + timeout
        steps = 0
        try:
            while True:
                container.timeout = max(deadline - time.monotonic(), 0.0)
                container.process()
                # Proton's blocking connection only notes a lost transport (process() goes
                # on returning at once, with nothing to do): without this a turn spins
                # until its deadline and a send waits for settlements that cannot come.
                if self.conn.disconnected:
                    raise proton.ProtonException(f"connection lost: {self.conn.disconnected}")
                steps += 1
                if done() or (time.monotonic() >= deadline and steps >= 3):
                    return
        except proton.ProtonException as exc:
            self._lost(exc)
            raise TransportError(_reason(exc)) from None

    def _lost(self, exc: BaseException) -> None:
        if self.connected:
            self.connected = False
            self.outages.went_down()
        self._lose_pending("connection lost before the broker settled the send: "
                           f"{_reason(exc)}")

    def open(self) -> None:
        s = self.settings
        host, port = s.address(DEFAULT_PORT)
        scheme = "amqps" if s.tls else "amqp"
        kwargs: dict[str, Any] = {}
        if s.options.cert_login:
            kwargs.update(sasl_enabled=True, allowed_mechs="EXTERNAL")
        elif s.user is not None:
            kwargs.update(user=s.user, password=s.secret() or "", allow_insecure_mechs=True)
        ssl_domain = None
        if s.tls:
            ssl_domain = proton.SSLDomain(proton.SSLDomain.MODE_CLIENT)
            if s.ca:
                ssl_domain.set_trusted_ca_db(s.ca)
                ssl_domain.set_peer_authentication(proton.SSLDomain.VERIFY_PEER_NAME)
            if s.cert:
                ssl_domain.set_credentials(s.cert, s.key, None)
        container = proton.reactor.Container()
        # A durable subscription is found again by its container id and link name.
        client = self.settings.connection_id(stable=bool(s.durable_name))
        if client:
            container.container_id = client
        try:
            self.conn = proton.utils.BlockingConnection(
                f"{scheme}://{host}:{port}", timeout=CONNECT_TIMEOUT_S, container=container,
                # The idle timeout: the broker sends a frame at least every half of it, and
                # a connection silent for a whole one is lost (a partition).
                ssl_domain=ssl_domain, heartbeat=2 * s.options.heartbeat or None, **kwargs)
        except (proton.ProtonException, OSError) as exc:
            raise TransportError(f"cannot connect to {host}:{port}: {_reason(exc)}") from None
        self.connected = True

    def _reopen(self) -> None:
        self._drop()
        self.open()

    # -- addresses and links
    def _address(self, destination: Destination) -> str:
        name = destination.name
        if destination.kind == "reply" and not name:
            return self.reply_address or ""  # the dynamic node the broker named
        if "/" in name or "://" in name or destination.kind == "reply":
            return name  # a broker-given or full address (a reply-to)
        queue, topic = PREFIXES[self.flavour]
        return (topic if destination.kind == "topic" else queue) + name

    def _link_options(self, kind: str) -> list[Any]:
        options: list[Any] = []
        if self.presettled:
            options.append(proton.reactor.AtMostOnce())
        else:
            options.append(proton.reactor.AtLeastOnce())
        if self.flavour == "artemis" and kind in ("queue", "topic"):
            options.append(_links().Capability(kind))
        if self.flavour == "rabbitmq" and kind == "queue" and self.settings.options.durable:
            # Durable, as the amqp transport declares its queues: the sender's and the
            # receiver's attach declare the same queue, whichever comes first, and a queue
            # declared otherwise (by a client attaching without durability) is refused.
            options.append(_links().DurableNode())
        return options

    def _sender(self, destination: Destination) -> Any:
        sender = self.senders.get(destination)
        if sender is None:
            address = self._address(destination)
            conn = self.conn
            try:
                link = conn.container.create_sender(
                    conn.conn, address, options=self._link_options(destination.kind))
                # A broker may refuse an address by ending the whole session rather than
                # the link (RabbitMQ does, for a missing exchange): Proton's blocking sender
                # would wait for the link until it timed out, on a session already gone.
                conn.wait(lambda: not link.state & proton.Endpoint.REMOTE_UNINIT
                          or self._ended() is not None, msg=f"opening a link to {address}")
                ended = self._ended()
                if ended is not None:
                    raise proton.ProtonException(f"the broker ended the session: {ended}")
                sender = proton.utils.BlockingSender(conn, link)
            except (proton.ProtonException, OSError) as exc:
                if self._ended() is not None:
                    self._lost(exc)  # the receiver went with the session: connect again
                raise TransportError(f"cannot send to {address}: {_reason(exc)}") from None
            self.senders[destination] = sender
        return sender

    def _ended(self) -> str | None:
        """Why the broker ended this connection's session, or None while it lasts."""
        session = self.conn.conn.session_head(0) if self.conn is not None else None
        if session is None or not session.state & proton.Endpoint.REMOTE_CLOSED:
            return None
        condition = session.remote_condition
        return getattr(condition, "description", None) or "no reason given"

    # -- messages
    def declare(self, destination: Destination) -> None:
        self._sender(destination)

    def send(self, destination: Destination, message: Message) -> None:
        if not self.connected:
            self._check()
        link = self._sender(destination).link
        properties = {HEADER: header(message)}
        if message.properties:
            properties.update(message.properties)
        # Only the fields a message has: Proton's Message sets each keyword through a
        # property of its own, a C call or two each.
        out = proton.Message(bytes(message.body), properties=properties)
        if message.correlation_id is not None:
            out.correlation_id = message.correlation_id
        if message.reply_to is not None:
            out.reply_to = self._address(message.reply_to)
        if message.persistent:
            out.durable = True
        if self.settings.ttl:
            out.ttl = self.settings.ttl  # the header's ttl, in seconds here
        if self.settings.priority is not None:
            out.priority = self.settings.priority
        try:
            delivery = link.send(out)
        except (proton.ProtonException, OSError) as exc:
            self._lost(exc)
            raise TransportError(f"send failed: {_reason(exc)}") from None
        self._sent(None if self.presettled else delivery, message.seq)
        if len(self.pending) >= self.window and not self.dispatching:
            # What the broker refused meanwhile is in the feedback, each by its own number.
            try:
                self._settle(self.window - 1)
            except TransportError as exc:
                raise self.queued_failure(exc, delivery, message.seq) from None

    def _settle(self, most: int) -> None:
        """Turn the container until at most `most` sends await the broker's settlement."""
        pending = self.pending
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            at = now_ns()
            while pending and pending[0][0].settled:
                delivery, seq, sent = pending.popleft()
                state = delivery.remote_state
                if state in (proton.Delivery.REJECTED, proton.Delivery.RELEASED,
                             proton.Delivery.MODIFIED):
                    condition = getattr(delivery.remote_condition, "description", None)
                    self.feedback.failed.append(
                        (seq, "settle", f"the broker {_links().states.get(state, 'refused')} the "
                         f"message{': ' + condition if condition else ''}"))
                elif self.timed:
                    self.feedback.confirm_us.append((at - sent) // 1000)
                delivery.settle()
            if len(pending) <= most or not self.connected:
                return
            if time.monotonic() > deadline:
                self._lose_pending(f"not settled within {SETTLE_TIMEOUT_S:g} s")
                return
            self._turn(0.05, lambda: pending[0][0].settled)

    def _write_out(self) -> None:
        self._turn(0)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        # Messages wait on a link until the broker gives credit: that is its flow control.
        while self._queued() and self.connected and time.monotonic() < deadline:
            self._turn(0.01, lambda: not self._queued())
        if self.pending:
            self._settle(len(self.pending))

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        # A Responder's reply may open a link to a new reply address, which waits for the
        # broker: that cannot happen inside the container's dispatch, so it pulls.
        return not self.settings.replies and super().deliver(sink)

    def _queued(self) -> bool:
        return any(s.link.queued for s in self.senders.values())

    def _subscribe(self, destination: Destination) -> None:
        s = self.settings
        credit = s.options.prefetch or DEFAULT_CREDIT
        options = self._link_options(destination.kind)
        name = None
        if s.selector:
            options.append(proton.reactor.Selector(s.selector))
        if s.durable_name:
            options.append(proton.reactor.DurableSubscription())
            name = f"{s.durable_name}{s.process}.{s.thread}"
        dynamic = destination.kind == "reply" and destination.name == ""
        address = None if dynamic else self._address(destination)
        try:
            self.receiver = self.conn.create_receiver(
                address, credit=credit, dynamic=dynamic, name=name, options=options,
                handler=_links().Inbound(self, credit))
        except (proton.ProtonException, OSError) as exc:
            raise TransportError(f"cannot receive from {address or 'a temporary queue'}: "
                                 f"{_reason(exc)}") from None
        if dynamic:
            self.reply_address = self.receiver.link.remote_source.address

    def _tend(self) -> None:
        if self.pending:
            self._settle(len(self.pending))  # what settled meanwhile, without waiting
        if not len(self.inbox) and self.connected and (ended := self._ended()) is not None:
            # Proton's blocking connection does not notice an ended session; its links,
            # the receiver's too, are gone with it.
            self._lost(proton.ProtonException(ended))
            raise TransportError(f"the broker ended the session: {ended}")

    def message(self, raw: Any) -> Message:
        raw, delivery = raw
        # Delivered before (released, or unsettled on a lost session): RabbitMQ's plugin says
        # so by first-acquirer alone, the specification by delivery-count.
        if raw.delivery_count or (self.flavour == "rabbitmq" and not raw.first_acquirer):
            self.feedback.redelivery()
        properties = raw.properties
        fields = properties.get(HEADER) if properties else None
        seq, ts, sent, crc, producer = from_header(None if fields is None else str(fields))
        body = raw.body
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, bytes):
            body = bytes(body or b"")
        reply_to = raw.reply_to
        correlation = raw.correlation_id
        return Message(body, producer, seq, ts, sent, crc, None,
                       None if correlation is None else str(correlation),
                       Destination("reply", reply_to) if reply_to else None, raw.durable,
                       delivery)

    def ack(self, message: Message) -> None:
        self._settle_received(message, proton.Delivery.ACCEPTED, "accept")

    def reject(self, message: Message, retry: bool) -> None:
        # Released: not processed, the broker may deliver it again; rejected: invalid,
        # dropped or dead-lettered.
        if retry and self.settings.options.requeue:
            self._settle_received(message, proton.Delivery.RELEASED, "release")
        else:
            self._settle_received(message, proton.Delivery.REJECTED, "reject")

    def _settle_received(self, message: Message, outcome: Any, what: str) -> None:
        delivery = message.handle
        if delivery is None or delivery.settled:
            return  # it came presettled: nothing to settle
        try:
            delivery.update(outcome)
            delivery.settle()
        except (proton.ProtonException, OSError) as exc:
            self._lost(exc)
            raise TransportError(f"{what} failed: {_reason(exc)}") from None

    def temporary_queue(self) -> Destination:
        s = self.settings
        if s.options.reply_queue:
            return Destination("queue", f"{s.options.reply_queue}.{s.process}.{s.thread}")
        if self.flavour == "rabbitmq":
            # RabbitMQ 3.x's plugin makes no dynamic nodes; a receiver on an exchange
            # address gets a queue of its own that goes with the link.
            return Destination("reply", f"/exchange/amq.direct/harness.reply."
                                        f"{uuid.uuid4().hex[:16]}")
        return Destination("reply", "")  # a dynamic node: the broker names it

    def _drop(self) -> None:
        conn, self.conn = self.conn, None
        self.receiver = None
        self.senders.clear()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        if self.conn is None:
            return
        if self.connected:
            with contextlib.suppress(TransportError):
                self.flush()
                if self.pending:
                    self._settle(0)
        self._lose_pending("closed before the broker settled the send")
        self.connected = False
        self._drop()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace("\n", " ")
