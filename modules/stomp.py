"""STOMP 1.1 / 1.2 through stomp.py, with broker flavours for ActiveMQ, RabbitMQ and Artemis.

The harness's fields travel in one header, `harness: <seq>,<intended ns>,<sent ns>,<crc or
->,<producer id>` (stomp.py escapes and unescapes every header on its own, the latter with a
regular expression, so one header costs a fifth of five); properties are headers too, so
ActiveMQ selectors see them. A
flavour picks the header dialect and the capabilities: RabbitMQ ignores `selector` and
ActiveMQ's durable subscription name without a word, so there they are refused before the run.

Persistent messages are sent with a receipt and the send waits for it, as a JMS persistent
send does: a message is counted as sent only once the broker has it, so a broker restart
cannot make the harness report as lost what it never delivered.

A message the broker delivers again (ActiveMQ and RabbitMQ mark it `redelivered: true`: it
went to a consumer that died or gave it back) counts as `redelivered`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import socket
import ssl
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

import stomp
import stomp.exception
from harness.modules.interface.base import COMMIT_IN_DOUBT, ROLLED_BACK, Capability, TransportError
from harness.modules.interface.message import HEADER, Destination, Message, from_header, header
from harness.modules.interface.optional import Acknowledgements, TemporaryQueues, Transactions
from harness.modules.interface.options import (
    HEARTBEAT_HELP,
    HEARTBEAT_S,
    WEBSOCKET_HELP,
    connect_timeout,
    option,
    websocket_problems,
)
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import (
    client_config_option,
    config_problems,
    library_settings,
    parameters,
)
from harness.modules.kit.network import NetworkTransport
from harness.modules.kit.unheard import Unheard
from stomp.adapter.ws import WSStompConnection


class _ConnectFailures(logging.Handler):
    """stomp.py says why a connection attempt failed (a certificate it could not verify, a
    refused WebSocket upgrade) only in its log, and raises ConnectFailedException: the
    reason is kept here by host and port for the error the run prints."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: dict[tuple[str, int], str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if str(record.msg).lower().startswith("could not connect to host") and \
                isinstance(args, tuple) and len(args) >= 3:
            self.last[(str(args[0]), int(args[1]))] = str(args[2])


_failures = _ConnectFailures()
_stomp_log = logging.getLogger("stomp.py")
_stomp_log.setLevel(logging.WARNING)
# stomp.py logs every failed connection attempt itself; the harness reports failures once.
_stomp_log.propagate = False
_stomp_log.addHandler(_failures)

DEFAULT_PORT = 61613
RECEIPT_TIMEOUT_S = 10.0
# A CONNECT the broker has not answered by then fails (a partition accepts the connection
# and answers nothing; stomp.py would wait for ever).
RECONNECT_EVERY_S = 0.5
ACK_MODES = ("auto", "client", "client-individual")

_BASE = (Capability.QUEUES | Capability.TOPICS | Capability.PERSISTENT
         | Capability.TRANSACTIONS | Capability.REQUEST_REPLY | Capability.PROPERTIES
         | Capability.TTL | Capability.PRIORITY)
FLAVOURS: dict[str, Capability] = {
    "activemq": _BASE | Capability.SELECTORS | Capability.DURABLE | Capability.TEMP_QUEUES,
    "artemis": _BASE | Capability.SELECTORS | Capability.DURABLE,
    "rabbitmq": _BASE | Capability.DURABLE | Capability.TEMP_QUEUES,
    "generic": _BASE,
}


@dataclass(frozen=True)
class StompOptions:
    vhost: str | None = option(None, "Virtual host (STOMP: the CONNECT host header, which "
                               "RabbitMQ wants as /; AMQP: / unless given).",
                               scope="connection")
    heartbeat: float = option(HEARTBEAT_S, HEARTBEAT_HELP, scope="connection", low=0)
    ack: str = option("auto", "Acknowledgement: auto, client (cumulative: every message "
                      "received so far) or client-individual.",
                      scope="connection", side="receive")
    prefetch: int = option(0, "Messages the broker may send ahead of acks (AMQP 0-9-1: "
                           "basic.qos; AMQP 1.0: link credit); 0 = the default (STOMP: the "
                           "broker's; AMQP 0-9-1: no limit; AMQP 1.0: 100).",
                           scope="connection", low=0, side="receive")
    reply_queue: str | None = option(None, "Requestor: fixed reply queue prefix (one queue "
                                     "per thread, <prefix>.<process>.<thread>) instead of "
                                     "temporary queues (AMQP 0-9-1: instead of RabbitMQ's "
                                     "direct reply-to).")
    websocket: str | None = option(None, WEBSOCKET_HELP, scope="connection")
    client_config: tuple[str, ...] = client_config_option()


# stomp.py's Connection arguments that a flag gives (--client-config refuses them, naming it)
# or that the harness owns: one attempt a connection (it reconnects and counts each outage
# itself), bodies as bytes with their length.
CLIENT_FLAGGED = {"host_and_ports": "--host/--port", "heartbeats": "--heartbeat",
                  "timeout": "--heartbeat", "vhost": "--vhost", "ws_path": "--websocket",
                  "auto_content_length": "--type"}
CLIENT_OWNED = ("prefer_localhost", "try_loopback_connect", "reconnect_sleep_initial",
                "reconnect_sleep_increase", "reconnect_sleep_jitter", "reconnect_sleep_max",
                "reconnect_attempts_max", "auto_decode", "encoding", "ws", "header",
                "binary_mode")


@cache
def client_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """--client-config as stomp.py's Connection keyword arguments; bind_host_port as
    HOST:PORT."""
    values = library_settings(items, parameters(WSStompConnection.__init__),
                              "stomp.py's Connection", CLIENT_FLAGGED, CLIENT_OWNED)
    if "bind_host_port" in values:
        host, _, port = str(values["bind_host_port"]).rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            raise ValueError("bind_host_port: give HOST:PORT (port 0: any)")
        values["bind_host_port"] = (host, int(port))
    return values


class _Listener(stomp.ConnectionListener):
    """Runs on stomp.py's receiver thread: hands frames to the worker, never blocks."""

    def __init__(self, transport: StompTransport) -> None:
        self.transport = transport

    def on_message(self, frame: Any) -> None:
        transport = self.transport
        headed = transport.headed
        if headed is None:
            transport.arrived(frame)
            return
        # A consumer that only measures, and auto acknowledgements
        headers = frame.headers
        transport.redelivered(headers)
        headed(headers.get(HEADER), frame.body)

    def on_receipt(self, frame: Any) -> None:
        event = self.transport.receipts.pop(frame.headers.get("receipt-id"), None)
        if event is not None:
            event.set()

    def on_connected(self, frame: Any) -> None:
        self.transport.answered.set()

    def on_error(self, frame: Any) -> None:
        message = frame.headers.get("message") or (frame.body or b"")[:200]
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        transport = self.transport
        # An error about a frame that asked for a receipt (a persistent send, a subscription)
        # answers that frame: its waiter learns it at once, and no later call is failed
        # for it.
        event = transport.receipts.pop(frame.headers.get("receipt-id"), None)
        if event is not None:
            transport.refusals[frame.headers["receipt-id"]] = str(message).strip()
            event.set()
        else:
            transport.broker_errors.append(str(message).strip())
        transport.answered.set()

    def on_heartbeat(self) -> None:
        unheard = self.transport.unheard
        if unheard is not None:
            unheard.beat()

    def on_heartbeat_timeout(self) -> None:
        # stomp.py has closed the socket of a peer silent past its heart-beats (a partition
        # closes nothing) and stopped its receiver, which tells on_disconnected no more.
        self.on_disconnected()

    def on_disconnected(self) -> None:
        self.transport.answered.set()
        self.transport.connected = False
        if self.transport.conn is not None:  # not our own close()
            self.transport.outages.went_down()
            self.transport.silent()
        for event in list(self.transport.receipts.values()):
            event.set()
        self.transport.interrupt()  # the worker's receive() connects again


class StompTransport(NetworkTransport, Acknowledgements, Transactions, TemporaryQueues):
    name = "stomp"
    default_port = DEFAULT_PORT
    flavours = tuple(FLAVOURS)
    protocols = ("1.2", "1.1")
    description = "STOMP 1.1/1.2 via stomp.py"
    capabilities = FLAVOURS["activemq"]
    Options = StompOptions
    settings: Settings[StompOptions]

    @classmethod
    def capabilities_for(cls, settings: Settings[Any]) -> Capability:
        return FLAVOURS[cls.flavour_of(settings)]

    @classmethod
    def problems(cls, settings: Settings[StompOptions]) -> list[tuple[str, str]]:
        out = config_problems(settings.options.client_config, client_settings)
        if (settings.protocol or cls.protocols[0]) not in cls.protocols:
            out.append(("--protocol", f"STOMP versions are {' and '.join(sorted(cls.protocols))}"))
        if settings.options.ack not in ACK_MODES:
            out.append(("--ack", f"STOMP acknowledgement modes are {', '.join(ACK_MODES)}"))
        out += websocket_problems(settings.options.websocket)
        if settings.options.websocket and settings.protocol == "1.1":
            out.append(("--websocket", "STOMP over WebSockets speaks 1.2 (stomp.py's "
                        "WebSocket connection): leave --protocol 1.1 out"))
        return out

    def __init__(self, settings: Settings[StompOptions]) -> None:
        super().__init__(settings)
        self.flavour = self.flavour_of(settings)
        self.receipts: dict[str, threading.Event] = {}
        self.refusals: dict[str, str] = {}  # receipt -> the broker's error answering it
        self.transaction_open = False  # from the first begin(): every send is in one
        self.broker_errors: list[str] = []
        self.connected = False
        self.answered = threading.Event()  # the broker answered a CONNECT, or the socket went
        self.conn: Any = None
        self.transaction: str | None = None
        self.subscription: tuple[Destination, dict[str, str], str] | None = None
        self.ack_mode = "client-individual" if settings.transacted else settings.options.ack
        self.client = self.settings.connection_id(stable=bool(settings.durable_name))
        self._ids = itertools.count(1)
        self._last_attempt = 0.0
        # A producer's frames without a receipt since the broker's last heart-beats: in
        # doubt if the connection is found dead (with heart-beats on; without, a connection
        # dies loudly or not at all as far as the harness can tell).
        self.unheard = Unheard() if settings.sends_only and settings.options.heartbeat \
            else None

    def silent(self) -> None:
        """The connection is gone: its frames no heart-beat answered for are in doubt."""
        if self.unheard is not None:
            self.unheard.lost(self.feedback, "a frame without a receipt written to a "
                              "connection then found dead: read or not")

    def open(self) -> None:
        s = self.settings
        host, port = s.address(DEFAULT_PORT)
        beat = round(s.options.heartbeat * 1000)
        connection_type = stomp.Connection11 if s.protocol == "1.1" else stomp.Connection12
        over: dict[str, Any] = {}
        if s.options.websocket:
            # Binary frames: a body is bytes, which a text frame must not carry.
            connection_type, over = WSStompConnection, {"ws_path": s.options.websocket,
                                                         "binary_mode": True}
        # Without content-length a JMS broker delivers a frame as a TextMessage.
        conn = connection_type([(host, port)], heartbeats=(beat, beat), vhost=s.options.vhost,
                               auto_decode=False, reconnect_attempts_max=1,
                               timeout=connect_timeout(s.options.heartbeat),
                               auto_content_length=s.body_type != "text", **over,
                               **client_settings(s.options.client_config))
        if s.tls:
            conn.set_ssl(for_hosts=[(host, port)], key_file=s.key, cert_file=s.cert,
                         ca_certs=s.ca, ssl_version=ssl.PROTOCOL_TLS_CLIENT)
        conn.set_listener("harness", _Listener(self))
        headers = {"client-id": self.client} if self.client else {}
        self.answered.clear()
        try:
            conn.connect(s.user, s.secret(), wait=False, headers=headers)
            if not self.answered.wait(connect_timeout(s.options.heartbeat)):
                with contextlib.suppress(Exception):
                    conn.transport.running = False
                    conn.transport.disconnect_socket()
                raise TransportError(f"cannot connect to {host}:{port}: no answer to CONNECT "
                                     f"within {connect_timeout(s.options.heartbeat):g} s")
        except stomp.exception.ConnectFailedException:
            detail = self.broker_errors.pop() if self.broker_errors else \
                _failures.last.pop((host, port), None) or "refused or unreachable"
            raise TransportError(f"cannot connect to {host}:{port}: {detail}") from None
        except (stomp.exception.StompException, OSError) as exc:
            detail = self.broker_errors.pop() if self.broker_errors else \
                (str(exc) or type(exc).__name__)
            raise TransportError(f"cannot connect to {host}:{port}: {detail}") from None
        if not conn.is_connected():
            # Without an ERROR frame, the server closed a connection it had taken without
            # a word of STOMP: another protocol's port, most likely (AMQP's answers CONNECT
            # with its own header and closes).
            detail = self.broker_errors.pop() if self.broker_errors else \
                "the server took the connection and closed it without answering CONNECT " \
                "(is this a STOMP port?)"
            raise TransportError(f"cannot connect to {host}:{port}: {detail}")
        # stomp.py leaves Nagle's algorithm on: small frames would wait for delayed ACKs
        # (tens of milliseconds) and the harness would report that as broker latency.
        sock = getattr(conn.transport, "socket", None)
        if sock is not None and s.options.websocket:
            # A broker's MESSAGE frames come in text frames (RabbitMQ's web_stomp, unless
            # told web_stomp.ws_frame = binary) whatever bytes the body holds:
            # websocket-client would refuse a body that is not UTF-8 and close the socket.
            sock.frame_buffer.skip_utf8_validation = True
            sock.cont_frame.skip_utf8_validation = True
            sock = sock.sock  # websocket-client's WebSocket: the socket beneath
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if s.options.heartbeat:
                # A send into a partition blocks once the socket's buffer is full, holding
                # stomp.py's lock, and with it the heart-beat thread that would find the
                # partition: a send waits two heart-beats at most, then fails.
                limit = 2 * s.options.heartbeat
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack(
                    "ll", int(limit), int(limit % 1 * 1e6)))
        self.conn = conn
        self.connected = True

    def _reconnect(self) -> None:
        """Reconnect (at most every RECONNECT_EVERY_S) and resubscribe, or raise."""
        # Down from the moment it is found down (an ack that failed before the listener heard
        # of the loss), before the back-off below refuses a call: the worker counts one error
        # an outage only while the transport says it is in one.
        self.outages.went_down()
        now = time.monotonic()
        if now - self._last_attempt < RECONNECT_EVERY_S:
            raise TransportError("not connected")
        self._last_attempt = now
        if self.conn is not None:
            # Closed, not disconnected: a DISCONNECT would wait for an answer the lost
            # connection never brings.
            with contextlib.suppress(Exception):
                self.conn.transport.running = False
                self.conn.transport.disconnect_socket()
        self.transaction = None
        self.open()
        if self.subscription is not None and not self._auto_subscribed(self.subscription[0]):
            self._subscribe(*self.subscription)
        self.outages.came_up()
        if self.transaction_open:
            # A transaction of the new connection's, so that no send goes out of one; what
            # the old one held is gone.
            self.transaction = self._begun()
            raise TransportError("the connection was lost, the transaction with it",
                                 kind=ROLLED_BACK)

    def _check(self) -> None:
        if self.broker_errors:
            raise TransportError(f"broker error: {self.broker_errors.pop(0)}")
        if not self.connected:
            self._reconnect()

    def _receipt(self, headers: dict[str, Any]) -> threading.Event:
        receipt = f"r{next(self._ids)}"
        headers["receipt"] = receipt
        event = self.receipts[receipt] = threading.Event()
        return event

    def _confirmed(self, event: threading.Event, headers: dict[str, Any]) -> bool:
        if event.wait(RECEIPT_TIMEOUT_S) and self.connected and \
                headers["receipt"] not in self.refusals:
            return True
        self.receipts.pop(headers["receipt"], None)
        return False

    def _subscribe(self, destination: Destination, headers: dict[str, str], ack: str) -> None:
        """Subscribe and wait for the broker's receipt, so that a topic subscription exists
        before any publisher starts, as a JMS consumer's creation is synchronous."""
        frame_headers = {k: v for k, v in headers.items() if k != "id"}
        event = self._receipt(frame_headers)
        self.conn.subscribe(self._name(destination), id=headers["id"], ack=ack,
                            headers=frame_headers)
        if not self._confirmed(event, frame_headers):
            detail = self.refusals.pop(frame_headers["receipt"], None) or (
                self.broker_errors.pop(0) if self.broker_errors else "no receipt")
            raise TransportError(f"subscribe to {destination.name} failed: {detail}")

    @staticmethod
    @functools.lru_cache(maxsize=4096)  # formatted once: a send looks its name up
    def _name(destination: Destination) -> str:
        if destination.name.startswith("/"):
            return destination.name  # a broker-given name such as /remote-temp-queue/...
        return f"/{'topic' if destination.kind == 'topic' else 'queue'}/{destination.name}"

    # -- messages
    def send(self, destination: Destination, message: Message) -> None:
        if self.broker_errors or not self.connected:
            self._check()
        if self.transaction is None and self.transaction_open:
            self.begin()  # the last begin failed: never a send outside a transaction
        headers = {HEADER: header(message)}
        if message.properties:
            headers.update(message.properties)
        if message.correlation_id is not None:
            headers["correlation-id"] = message.correlation_id
        if message.reply_to is not None:
            headers["reply-to"] = self._name(message.reply_to)
        if self.transaction is not None:
            headers["transaction"] = self.transaction
        s = self.settings
        if s.ttl:
            # RabbitMQ's STOMP takes a time to live (AMQP's expiration); the JMS brokers an
            # instant, the JMS expiration, in epoch milliseconds.
            if self.flavour == "rabbitmq":
                headers["expiration"] = str(round(s.ttl * 1000))
            else:
                headers["expires"] = str(round((time.time() + s.ttl) * 1000))
        if s.priority is not None:
            headers["priority"] = str(s.priority)
        # RabbitMQ refuses persistent:false on a queue its subscriber declared: leave it out.
        event = None
        if message.persistent:
            headers["persistent"] = "true"
            if self.transaction is None:
                event = self._receipt(headers)
        try:
            self.conn.send(self._name(destination), message.body, headers=headers)
        except (stomp.exception.StompException, OSError) as exc:
            lost = self._lost("send", exc)
            self.silent()
            raise lost from None
        if event is None and self.unheard is not None and self.transaction is None:
            self.unheard.last = message.seq
        if event is not None and not self._confirmed(event, headers):
            refused = self.refusals.pop(headers["receipt"], None)
            if refused is not None:  # sent, and answered with an error: refused, not kept
                self.feedback.failed.append((message.seq, "refused",
                                             f"the broker refused it: {refused}"))
                return
            # The frame left and no receipt came (the connection went, or the broker is
            # silent): the broker may have kept it, so it is in doubt, not failed.
            reason = "no receipt for a persistent send" + (
                "" if self.connected else ": the connection was lost")
            self.feedback.doubt.append((message.seq, reason))
            raise TransportError(reason, reported=True)

    def subscribe(self, destination: Destination) -> None:
        s = self.settings
        selector = s.selector
        durable = s.durable_name
        headers: dict[str, str] = {"id": f"sub-{uuid.uuid4().hex[:8]}"}
        if selector:
            headers["selector"] = selector
        if durable:
            name = f"{durable}{s.process}.{s.thread}"
            if self.flavour == "rabbitmq":
                # RabbitMQ names the durable queue after the subscription id.
                headers.update({"id": name, "durable": "true", "auto-delete": "false"})
            elif self.flavour == "artemis":
                headers["durable-subscription-name"] = name
            else:
                headers["activemq.subscriptionName"] = name
        if s.options.prefetch:
            key = "prefetch-count" if self.flavour == "rabbitmq" else "activemq.prefetchSize"
            headers[key] = str(s.options.prefetch)
        self.subscription = (destination, headers, self.ack_mode)
        if self._auto_subscribed(destination):
            return
        self._check()
        self._subscribe(destination, headers, self.ack_mode)

    def _auto_subscribed(self, destination: Destination) -> bool:
        # RabbitMQ subscribes a reply-to temporary queue by itself on first use.
        return self.flavour == "rabbitmq" and destination.name.startswith("/temp-queue/")

    def receive(self, timeout: float) -> Message | None:
        if self.broker_errors or not self.connected:
            try:
                self._check()
            except TransportError:
                time.sleep(timeout)
                raise
        return self.take(timeout)

    def message(self, frame: Any) -> Message:
        h = frame.headers
        reply_to = h.get("reply-to")
        seq, ts, sent, crc, producer = from_header(h.get(HEADER))
        self.redelivered(h)
        return Message(frame.body, producer, seq, ts, sent, crc, None, h.get("correlation-id"),
                       Destination("queue", reply_to) if reply_to else None,
                       h.get("persistent") == "true",
                       (h.get("ack") or h.get("message-id"), h.get("subscription"), self.conn))

    def redelivered(self, headers: dict[str, str]) -> None:
        if headers.get("redelivered") == "true":
            self.feedback.redelivery()

    def acknowledges(self) -> bool:
        return self.ack_mode != "auto"

    def ack(self, message: Message) -> None:
        if self.ack_mode == "auto" or message.handle is None:
            return
        ack_id, subscription, conn = message.handle
        if conn is not self.conn:
            # Delivered on a connection since lost: the broker delivers it again (an ack on
            # the new connection would be its error, one a message).
            return
        try:
            if isinstance(self.conn, stomp.Connection11):
                self.conn.ack(ack_id, subscription, transaction=self.transaction)
            else:
                self.conn.ack(ack_id, transaction=self.transaction)
        except (stomp.exception.StompException, OSError) as exc:
            raise self._lost("ack", exc) from None

    def temporary_queue(self) -> Destination:
        s = self.settings
        if s.options.reply_queue:
            return Destination("queue", f"{s.options.reply_queue}.{s.process}.{s.thread}")
        return Destination("queue", f"/temp-queue/harness-{uuid.uuid4().hex[:12]}")

    # -- transactions
    def begin(self) -> None:
        self.transaction_open = True
        try:
            self._check()
        except TransportError as exc:
            if exc.kind != ROLLED_BACK:
                raise
            return  # begun on the new connection; nothing was sent in the old one since
        self.transaction = self._begun()

    def _begun(self) -> str:
        """A transaction begun: a socket lost under the BEGIN is the connection lost (the
        thread's next send begins one again), not the thread's end."""
        try:
            return self.conn.begin()
        except (stomp.exception.StompException, OSError) as exc:
            raise self._lost("begin", exc) from None

    def _lost(self, call: str, exc: BaseException, kind: str | None = None) -> TransportError:
        """A frame the socket did not carry: the connection is lost (an outage, counted once)
        and the call fails, saying why."""
        self.connected = False
        self.outages.went_down()
        return TransportError(f"{call} failed: {exc or type(exc).__name__}", kind=kind)

    def commit(self) -> None:
        transaction, self.transaction = self.transaction, None
        if transaction is None or not self.connected:
            self._check()  # raises ROLLED_BACK once connected again
            raise TransportError("commit: the connection was lost, the transaction with it",
                                 kind=ROLLED_BACK)
        self._check()  # the broker's errors
        # A receipt, as a JMS commit waits for the broker: without it a commit the
        # connection lost just after would count its sends as kept.
        headers: dict[str, Any] = {}
        event = self._receipt(headers)
        try:
            self.conn.commit(transaction, headers=headers)
        except (stomp.exception.StompException, OSError) as exc:
            self.receipts.pop(headers["receipt"], None)
            raise self._lost("commit", exc, ROLLED_BACK) from None
        if not self._confirmed(event, headers):
            refused = self.refusals.pop(headers["receipt"], None)
            raise TransportError(f"the broker answered the commit with an error: {refused}"
                                 if refused else "no receipt for the commit",
                                 kind=COMMIT_IN_DOUBT)

    def abort(self) -> None:
        transaction, self.transaction = self.transaction, None
        if transaction is not None and self.connected:
            try:
                self.conn.abort(transaction)
            except (stomp.exception.StompException, OSError) as exc:
                raise self._lost("abort", exc) from None

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and conn.is_connected():
            with contextlib.suppress(Exception):
                conn.disconnect()
        self.connected = False
