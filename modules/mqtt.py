"""MQTT 3.1.1 and 5 through paho-mqtt, with flavours for Mosquitto, ActiveMQ and RabbitMQ.

MQTT 3.1.1 has no message headers, so the harness's fields travel in a small binary prefix of
every payload (below), on every protocol version alike: the body after it is -ms bytes. On
MQTT 5 a request carries its reply topic and correlation id as the protocol's response topic
and correlation data; on 3.1.1 they travel in the prefix (the reply-topic convention).

A producer that only sends (Sender, Publisher) drives paho's network loop from its own worker
thread through paho's public loop_read / loop_write / loop_misc: publish() only queues, and
flush() writes the queue out every WRITE_EVERY messages and before the worker sleeps. With
paho's own loop thread (loop_start) every publish wakes that thread through a socket pair,
which about tripled what a message cost the client. Consumers and Requestor keep paho's thread:
it takes each message in as it arrives.

Queues (Sender, Receiver) are shared subscriptions, `$share/harness/<queue>`, where the broker
has them (Mosquitto); elsewhere those roles are refused. A Responder without shared
subscriptions must be the only one on its request topic.

Payload prefix, network byte order:
    magic b"HN", version 1, flags (bit 0: crc present), seq (int64), intended send time
    (int64, epoch ns), actual send time (int64, epoch ns), crc32 (uint32), then the lengths
    (uint16) of producer id, reply topic and correlation id, then those three UTF-8 strings.
"""

from __future__ import annotations

import contextlib
import math
import select
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

import paho.mqtt.client as paho
from harness.modules.interface.base import Capability, TransportError
from harness.modules.interface.message import Destination, Message, frame, unframe
from harness.modules.interface.optional import (
    ClientLoop,
    FramedSends,
    Multiplexed,
    TemporaryQueues,
)
from harness.modules.interface.options import (
    HEARTBEAT_S,
    WEBSOCKET_HELP,
    option,
    websocket_problems,
)
from harness.modules.interface.settings import Settings
from harness.modules.kit.client_config import (
    client_config_option,
    config_problems,
    library_settings,
)
from harness.modules.kit.network import NetworkTransport
from harness.modules.kit.selector import FD_SETSIZE
from harness.modules.kit.unheard import Unheard
from paho.mqtt.exception import MQTTException
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from harness.clock import now_ns

DEFAULT_PORT = 1883
CONNECT_TIMEOUT_S = 10.0
SUBSCRIBE_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 10.0
# Messages paho may hold beyond the in-flight window before a send waits (flow control).
QUEUED_PER_INFLIGHT = 50
QUEUE_WAIT_S = 10.0
SHARE_GROUP = "harness"
WRITE_EVERY = 64  # publishes a driven producer queues before it writes them out
MISC_EVERY_S = 1.0  # how often a driven producer checks the keep-alive
# One of many clients of a thread reconnects within this (a TCP connect that waits longer
# is a network that drops packets) ...
SHARED_CONNECT_S = 1.0
# ... and once one attempt has so waited, the thread's next attempts wait this long: each
# would hold every client of the thread as long (a partition), where against a broker that
# is back they take a millisecond each.
_stalled = threading.local()
RECONNECT_EVERY_S = 0.5

_BASE = Capability.TOPICS | Capability.REQUEST_REPLY | Capability.TEMP_QUEUES
# flavour: (capabilities, protocol versions, default version, highest QoS)
FLAVOURS: dict[str, tuple[Capability, tuple[str, ...], str, int]] = {
    # 3.1.1 by default everywhere: paho parses MQTT 5 properties in Python, which about
    # halves what one process can receive.
    "mosquitto": (_BASE | Capability.QUEUES, ("3.1.1", "5"), "3.1.1", 2),
    "activemq": (_BASE, ("3.1.1",), "3.1.1", 2),
    # RabbitMQ 3.10's plugin speaks 3.1.1 only and downgrades QoS 2 to 1.
    "rabbitmq": (_BASE, ("3.1.1",), "3.1.1", 1),
    "generic": (_BASE, ("3.1.1", "5"), "3.1.1", 2),
}


@dataclass(frozen=True)
class MqttOptions:
    heartbeat: float = option(HEARTBEAT_S, "", scope="connection", low=0, high=65535)
    qos: int = option(0, "MQTT QoS 0, 1 or 2.", scope="connection", low=0)
    retain: bool = option(False, "MQTT retained messages.", scope="connection", side="send")
    clean: bool = option(True, "MQTT clean start; --no-clean keeps a persistent session.",
                         scope="connection", negative=True)
    session_expiry: int = option(0, "MQTT 5 session expiry in seconds (with --no-clean).",
                                 scope="connection", low=0)
    inflight: int = option(20, "Sends awaiting the broker's acknowledgement at once: MQTT's "
                           "in-flight window (QoS 1 and 2), NATS JetStream's publish acks.",
                           scope="connection", low=1, high=65535, side="send")
    websocket: str | None = option(None, WEBSOCKET_HELP, scope="connection")
    client_config: tuple[str, ...] = client_config_option()


# paho's Client(), connect() and settable properties that a flag gives (--client-config
# refuses them, naming it) or that the harness owns (its callbacks measure; its own connect
# timeout). What is left: connect()'s bind_port, and MQTT 5's CONNECT properties as
# properties.NAME (paho's names: properties.ReceiveMaximum=100).
CLIENT_FLAGGED = {"client_id": "--client-id", "clean_session": "--no-clean",
                  "clean_start": "--no-clean", "protocol": "--protocol",
                  "transport": "--websocket", "host": "--host", "port": "--port",
                  "keepalive": "--heartbeat", "bind_address": "--source-addresses",
                  "username": "--user", "password": "--password",
                  "max_inflight_messages": "--inflight", "max_queued_messages": "--inflight",
                  "properties.SessionExpiryInterval": "--session-expiry"}
CLIENT_OWNED = ("callback_api_version", "userdata", "reconnect_on_failure", "manual_ack",
                "properties", "connect_timeout", "logger")
_CONNECT = Properties(PacketTypes.CONNECT)
CONNECT_PROPERTIES = tuple(f"properties.{name.replace(' ', '')}"
                           for name, number in _CONNECT.names.items()
                           if PacketTypes.CONNECT in _CONNECT.properties[number][1])


@cache
def client_settings(items: tuple[str, ...]) -> dict[str, Any]:
    """--client-config as connect()'s keyword arguments, and properties.NAME as MQTT 5
    CONNECT properties (a UserProperty's value KEY=VALUE)."""
    values = library_settings(items, {"bind_port": 0, **dict.fromkeys(CONNECT_PROPERTIES)},
                              "paho's connect()", CLIENT_FLAGGED, CLIENT_OWNED,
                              check=connect_properties)
    if "bind_port" in values and not 0 <= values["bind_port"] <= 65535:
        raise ValueError(f"bind_port: {values['bind_port']} is not a port")
    return values


def connect_properties(values: dict[str, Any], properties: Properties | None = None
                       ) -> Properties | None:
    """The properties.NAME settings on a CONNECT's properties (paho checks each)."""
    for key, value in values.items():
        if key.startswith("properties."):
            if properties is None:
                properties = Properties(PacketTypes.CONNECT)
            name = key.partition(".")[2]
            if name == "UserProperty":
                value = tuple(str(value).partition("=")[::2])
            try:
                setattr(properties, name, value)
            except MQTTException as exc:
                raise ValueError(str(exc)) from None
    return properties


def _topic_problems(settings: Settings[Any]) -> list[str]:
    """What the broker would refuse: a wildcard in a topic published to, or one that is not
    a whole level (+) or the last level (#) of a filter."""
    topic = settings.destination
    if settings.publishes and ("+" in topic or "#" in topic):
        return [f"{topic!r}: {settings.role} publishes; wildcards (+ and #) are for "
                "subscribing"]
    levels = topic.split("/")
    for i, level in enumerate(levels):
        if ("+" in level and level != "+") or ("#" in level and (level != "#" or
                                                                 i != len(levels) - 1)):
            return [f"{topic!r}: '+' is a whole level and '#' the whole last level"]
    return []


class MqttTransport(NetworkTransport, FramedSends, ClientLoop, Multiplexed, TemporaryQueues):
    confirmations = "acknowledgements (PUBACK, PUBCOMP)"
    name = "mqtt"
    default_port = DEFAULT_PORT
    binds = True
    flavours = tuple(FLAVOURS)
    protocols = ("3.1.1", "5")  # which a flavour speaks: FLAVOURS
    description = "MQTT 3.1.1/5 via paho-mqtt"
    capabilities = FLAVOURS["mosquitto"][0]
    Options = MqttOptions
    settings: Settings[MqttOptions]

    @classmethod
    def capabilities_for(cls, settings: Settings[Any]) -> Capability:
        capabilities, _, default, _ = FLAVOURS[cls.flavour_of(settings)]
        if (settings.protocol or default) == "5":  # a message expiry interval
            capabilities |= Capability.TTL
        return capabilities

    @classmethod
    def problems(cls, settings: Settings[MqttOptions]) -> list[tuple[str, str]]:
        name = cls.flavour_of(settings)
        options = settings.options
        capabilities, versions, default, top_qos = FLAVOURS[name]
        out = []
        version = settings.protocol or default
        if version not in versions:
            out.append(("--protocol", f"MQTT on {name} speaks {' and '.join(versions)}"))
        if not 0 <= options.qos <= top_qos:
            out.append(("--qos", f"MQTT QoS on {name} is 0 to {top_qos}"))
        refused = config_problems(options.client_config, client_settings)
        out.extend(refused)
        if not refused and version != "5" and any(
                key.startswith("properties.") for key in client_settings(options.client_config)):
            out.append(("--client-config", "properties.NAME are MQTT 5's: add --protocol 5"))
        if options.session_expiry and (version != "5" or options.clean):
            out.append(("--session-expiry", "needs MQTT 5 and --no-clean"))
        if settings.ttl and version != "5":
            out.append(("--ttl", "a message expiry is MQTT 5's: add --protocol 5"))
        elif settings.ttl and settings.ttl != int(settings.ttl):
            out.append(("--ttl", "MQTT 5's message expiry is in whole seconds"))
        if settings.replies and not capabilities & Capability.QUEUES and \
                settings.threads * settings.processes > 1:
            out.append(("-nt", f"{name} has no shared subscriptions: run one Responder, or "
                        "every responder would answer every request"))
        out.extend(("-d", problem) for problem in _topic_problems(settings))
        out += websocket_problems(options.websocket)
        return out

    def __init__(self, settings: Settings[MqttOptions]) -> None:
        super().__init__(settings)
        self.flavour = self.flavour_of(settings)
        capabilities, _, default, _ = FLAVOURS[self.flavour]
        self.shared = bool(capabilities & Capability.QUEUES)
        self.v5 = (settings.protocol or default) == "5"
        self.qos = settings.options.qos
        self.retain = settings.options.retain
        # --ttl: every publish's message expiry interval (MQTT 5 properties)
        self.expiry: Any = None
        if self.v5 and settings.ttl:
            self.expiry = Properties(PacketTypes.PUBLISH)
            self.expiry.MessageExpiryInterval = int(settings.ttl)
        self.clean = settings.options.clean
        self.client: Any = None
        self.connected = threading.Event()
        self.connect_error: str | None = None
        self.drops = 0  # connections the broker closed (or lost), as the reason for a wait
        self.subscription: tuple[str, int] | None = None
        self.last_publish: Any = None
        self.suback: dict[int, tuple[threading.Event, list[Any]]] = {}
        self.suback_lock = threading.Lock()
        self.driven = settings.sends_only
        # A producer's QoS 1 and 2 publishes each wait for the broker's PUBACK (PUBCOMP):
        # its message id -> (sequence number, when it was published), until it comes. One
        # that never comes is in doubt at the close, never quietly sent.
        self.confirming = self.confirms(settings)
        self.unacked: dict[int, tuple[int, int]] = {}
        # A QoS 0 producer's publishes since the broker was last heard (paho pings a
        # client that hears nothing each keep-alive): in doubt if the connection is found
        # dead, never quietly sent. Without a keep-alive nothing is ever heard.
        self.unheard = Unheard() if self.driven and self.qos == 0 and \
            settings.options.heartbeat else None
        self.reads_in_flush = True  # not where the worker waits on the socket (multiplexed)
        self.unwritten = 0
        self.next_misc = 0.0
        self.last_attempt = 0.0

    # -- paho callbacks (on paho's network thread)
    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                    properties: Any) -> None:
        if reason.is_failure:
            self.connect_error = str(reason)
            return
        # paho leaves Nagle's algorithm on; small packets would wait for delayed ACKs.
        sock = client.socket()
        sock = getattr(sock, "_socket", sock)  # over WebSockets: paho's wrapper's socket
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.subscription is not None and not flags.session_present:
            client.subscribe(*self.subscription)
        if self.client is not None:  # a reconnect, not the first connection
            self.outages.came_up()
        self.connected.set()

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any,
                    properties: Any) -> None:
        """The broker acknowledged a publish (on the worker's thread: a producer drives
        paho's loop itself)."""
        entry = self.unacked.pop(mid, None)
        if entry is None:
            return
        seq, sent = entry
        if getattr(reason, "is_failure", False):  # MQTT 5: the broker took it and refused it
            self.feedback.failed.append((seq, "refused", f"the broker refused it: {reason}"))
        else:
            self.feedback.confirm_us.append((now_ns() - sent) // 1000)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                       properties: Any) -> None:
        if self.connected.is_set():
            self.connected.clear()
            self.drops += 1
            if self.client is not None:  # not our own close()
                self.outages.went_down()
                if self.unheard is not None:
                    self.unheard.lost(self.feedback, "a QoS 0 publish written to a "
                                      "connection then found dead: read or not")

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        frames = self.frames
        if frames is not None:
            frames(message.payload)
        else:
            self.arrived(message)

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, reasons: Any,
                      properties: Any) -> None:
        with self.suback_lock:
            waiting = self.suback.pop(mid, None)
        if waiting is not None:
            waiting[1].extend(reasons)
            waiting[0].set()

    # -- connection
    def open(self) -> None:
        s, options = self.settings, self.settings.options
        host, port = s.address(DEFAULT_PORT)
        client_id = s.connection_id(stable=not self.clean) or f"harness-{uuid.uuid4().hex[:16]}"
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id,
                             protocol=paho.MQTTv5 if self.v5 else paho.MQTTv311,
                             clean_session=None if self.v5 else self.clean,
                             transport="websockets" if options.websocket else "tcp")
        if options.websocket:
            client.ws_set_options(path=options.websocket)
        client.on_connect = self._on_connect
        if not self.reads_in_flush:
            client.connect_timeout = SHARED_CONNECT_S  # its reconnections (_reconnect)
        if self.confirming:
            client.on_publish = self._on_publish
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        if s.user is not None:
            client.username_pw_set(s.user, s.secret())
        if s.tls:
            client.tls_set(ca_certs=s.ca, certfile=s.cert, keyfile=s.key)
        if self.driven:
            # publish() then queues instead of writing: flush() writes (paho's API for an
            # external event loop).
            client.on_socket_register_write = _ignore
        if self.unheard is not None:
            _watch_pings(client, self.unheard)
        client.max_inflight_messages_set(options.inflight)
        client.max_queued_messages_set(options.inflight * QUEUED_PER_INFLIGHT)
        client.reconnect_delay_set(0.2, 2)
        properties = None
        if self.v5 and options.session_expiry:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = options.session_expiry
        extra = client_settings(options.client_config)
        bind_port = extra.get("bind_port", 0)
        try:
            if self.v5:
                client.connect(host, port, math.ceil(options.heartbeat), clean_start=self.clean,
                               properties=connect_properties(extra, properties),
                               bind_address=s.source_address or "", bind_port=bind_port)
            else:
                client.connect(host, port, math.ceil(options.heartbeat),
                               bind_address=s.source_address or "", bind_port=bind_port)
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot connect to {host}:{port}: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None
        if not self.driven:
            client.loop_start()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not self._await_connack(client, 0.05):
            if self.connect_error or time.monotonic() > deadline:
                if not self.driven:
                    client.loop_stop()
                client.disconnect()
                raise TransportError(f"cannot connect to {host}:{port}: "
                                     f"{self.connect_error or 'no CONNACK'}")
        self.client = client

    def _await_connack(self, client: Any, timeout: float) -> bool:
        if self.driven:
            rc = _turn(client, timeout)
            if rc != paho.MQTT_ERR_SUCCESS and not self.connected.is_set():
                # The broker closed the connection (at its connection limit, say): no
                # CONNACK will come, and waiting for one would hold the thread's other
                # clients until the timeout.
                self.connect_error = self.connect_error or \
                    "the server closed the connection before a CONNACK (a broker at its " \
                    f"connection limit, or not an MQTT port?) ({paho.error_string(rc)})"
            return self.connected.is_set()
        return self.connected.wait(timeout)

    # -- a driven producer's network loop (on the worker thread)
    @classmethod
    def confirms(cls, settings: Settings[MqttOptions]) -> bool:
        # A producer's (its own loop's) QoS 1 and 2 publishes; a requestor's or responder's
        # are acknowledged on paho's thread, and stay counted at the send.
        return settings.options.qos >= 1 and settings.sends_only

    def flush(self) -> None:
        client = self.client
        if not self.driven or client is None:
            return
        self.unwritten = 0
        if not self.connected.is_set():
            self._reconnect(client)
            return
        rc = client.loop_write()
        # A producer of its own thread waits for room in a full socket (its sends are
        # held back as the broker's are); one of many clients on a thread goes on, its
        # socket written again at the next tend: waiting would hold every other client
        # (through a partition, until the keep-alive gives up).
        while rc == paho.MQTT_ERR_SUCCESS and self.reads_in_flush and client.want_write():
            rc = _turn(client, 0.01)
        if rc == paho.MQTT_ERR_SUCCESS and self.reads_in_flush:
            rc = client.loop_read()  # acknowledgements and ping responses
        now = time.monotonic()
        if rc == paho.MQTT_ERR_SUCCESS and now >= self.next_misc:
            self.next_misc = now + MISC_EVERY_S
            client.loop_misc()

    def idle(self, seconds: float) -> None:
        # Waiting on the socket for the acknowledgements still to come times each one when
        # it arrives, not at the next send.
        client = self.client
        if self.unacked and self.driven and client is not None and self.connected.is_set():
            _turn(client, seconds)
        else:
            time.sleep(seconds)

    # -- many clients on one thread (--clients)
    consumer_clients = True

    def fileno(self) -> int:
        client = self.client
        sock = client.socket() if client is not None and self.driven else None
        return -1 if sock is None else sock.fileno()

    def multiplexed(self) -> None:
        # Driven from the worker's thread, a consumer too: messages are handed over inside
        # readable(), on that thread.
        self.driven = True
        self.inline = True
        self.reads_in_flush = False

    def readable(self) -> None:
        client = self.client
        # A lost connection: paho's on_disconnect, then flush() reconnects. What reading
        # queued (a subscriber's acknowledgements) goes out at once.
        # Connected or not yet: a reconnection's CONNACK is read here too (_reconnect).
        if client is not None and client.socket() is not None and \
                client.loop_read() == paho.MQTT_ERR_SUCCESS and client.want_write():
            client.loop_write()

    def _reconnect(self, client: Any) -> None:
        """Connect again (at most every RECONNECT_EVERY_S); paho sends the QoS 1 and 2
        messages still unacknowledged once it is back."""
        now = time.monotonic()
        if now - self.last_attempt < RECONNECT_EVERY_S:
            return
        shared = not self.reads_in_flush  # one of many clients of this thread
        if shared and now < getattr(_stalled, "until", 0.0):
            return
        if shared and client.socket() is not None and \
                now - self.last_attempt < max(self.settings.options.heartbeat, 2.0):
            return  # connected, its CONNACK on the way (readable() reads it)
        self.last_attempt = now
        s = self.settings
        if s.user is not None and s.password_file is not None:
            client.username_pw_set(s.user, s.secret())  # rotated since the last connection
        try:
            client.reconnect()
        except (OSError, ValueError):
            if shared and time.monotonic() - now >= SHARED_CONNECT_S / 2:
                _stalled.until = time.monotonic() + max(self.settings.options.heartbeat, 1.0)
            return
        if shared:
            client.loop_write()  # the CONNECT; its CONNACK comes through readable()
            return
        deadline = now + CONNECT_TIMEOUT_S
        while not self._await_connack(client, 0.05) and time.monotonic() < deadline and \
                client.socket() is not None:
            pass

    # -- messages
    def _topic(self, destination: Destination, subscribing: bool) -> str:
        if subscribing and destination.kind == "queue" and self.shared:
            return f"$share/{SHARE_GROUP}/{destination.name}"
        return destination.name

    def send(self, destination: Destination, message: Message) -> None:
        properties = None
        reply = message.reply_to.name if message.reply_to is not None else ""
        correlation = message.correlation_id or ""
        if self.v5 and (reply or correlation):
            properties = Properties(PacketTypes.PUBLISH)
            if reply:
                properties.ResponseTopic = reply
            if correlation:
                properties.CorrelationData = correlation.encode()
            if self.expiry is not None:
                properties.MessageExpiryInterval = self.expiry.MessageExpiryInterval
        self.send_frame(destination, frame(message, reply, correlation), message.seq,
                        properties)

    def send_frame(self, destination: Destination, payload: bytes, seq: int,
                   properties: Any = None) -> None:
        qos = self.qos
        if properties is None:
            properties = self.expiry
        info = self.client.publish(destination.name, payload, qos, self.retain, properties)
        if info.rc == paho.MQTT_ERR_QUEUE_SIZE:
            # More than the in-flight window allows is waiting: hold the sender back.
            deadline = time.monotonic() + QUEUE_WAIT_S
            while info.rc == paho.MQTT_ERR_QUEUE_SIZE:
                if not self.connected.is_set() and self.driven:
                    self.flush()  # connects again (at most every RECONNECT_EVERY_S)
                if not self.connected.is_set():
                    # Nothing will free the window before a reconnection: waiting would
                    # hold the thread (every client of it) for nothing.
                    raise TransportError("not connected, and the in-flight window is full")
                if time.monotonic() > deadline:
                    raise TransportError("MQTT publish queue full")
                if self.driven:
                    self.flush()
                    _turn(self.client, 0.0005)
                else:
                    time.sleep(0.0005)
                info = self.client.publish(destination.name, payload, qos, self.retain,
                                           properties)
        self.last_publish = info
        if self.unheard is not None and info.rc == paho.MQTT_ERR_SUCCESS:
            self.unheard.last = seq
        if self.confirming and info.rc in (paho.MQTT_ERR_SUCCESS, paho.MQTT_ERR_NO_CONN):
            self.unacked[info.mid] = (seq, now_ns())
        if self.driven:
            self.unwritten += 1
            if self.unwritten >= WRITE_EVERY or not self.connected.is_set():
                self.flush()
        if info.rc == paho.MQTT_ERR_NO_CONN and qos == 0:
            raise TransportError("not connected")  # QoS 1 and 2 are kept and sent on reconnect
        if info.rc not in (paho.MQTT_ERR_SUCCESS, paho.MQTT_ERR_NO_CONN):
            raise TransportError(f"publish failed: {paho.error_string(info.rc)}")

    def subscribe(self, destination: Destination) -> None:
        topic = self._topic(destination, subscribing=True)
        self.subscription = (topic, self.qos)
        event: threading.Event = threading.Event()
        reasons: list[Any] = []
        drops = self.drops
        # Held across subscribe() so the SUBACK callback cannot run before we wait for it.
        with self.suback_lock:
            result, mid = self.client.subscribe(*self.subscription)
            if result != paho.MQTT_ERR_SUCCESS or mid is None:
                raise TransportError(f"subscribe to {topic} failed: "
                                     f"{paho.error_string(result)}")
            self.suback[mid] = (event, reasons)
        if self.driven:  # no loop thread: turn the loop here until the SUBACK
            deadline = time.monotonic() + SUBSCRIBE_TIMEOUT_S
            while not event.is_set() and time.monotonic() < deadline:
                _turn(self.client, 0.05)
        if not event.wait(0 if self.driven else SUBSCRIBE_TIMEOUT_S):
            raise TransportError(f"subscribe to {topic}: no SUBACK{self._closed_since(drops)}")
        if any(getattr(r, "is_failure", False) for r in reasons):
            raise TransportError(f"subscribe to {topic} refused: {reasons[0]}")

    def _closed_since(self, drops: int) -> str:
        """Why an answer may not have come: the connections closed meanwhile, and the client
        id where one closing the other is what a broker does for two clients with one id."""
        closed = self.drops - drops
        if not closed:
            return ""
        client_id = self.client._client_id.decode() if self.client is not None else "?"
        return (f": the broker closed the connection {closed} time{'s' * (closed > 1)} "
                f"meanwhile (client id {client_id}: a broker closes a client when another "
                "connects with its id; two runs at once need their own --client-id or group "
                "names)")

    def receive(self, timeout: float) -> Message | None:
        return self.take(timeout)

    def message(self, raw: Any) -> Message:
        message = unframe(raw.payload, "topic")
        if self.v5 and raw.properties is not None:
            # MQTT 5's own fields, where the sender set them, over the prefix's.
            reply = getattr(raw.properties, "ResponseTopic", None)
            if reply:
                message.reply_to = Destination("topic", reply)
            data = getattr(raw.properties, "CorrelationData", None)
            if data:
                message.correlation_id = data.decode()
        return message

    def temporary_queue(self) -> Destination:
        return Destination("topic", f"harness/reply/{uuid.uuid4().hex[:16]}")

    def close(self) -> None:
        # Let QoS 1 and 2 publishes finish their handshakes first: disconnecting mid-flight
        # would lose what the harness already counted as sent.
        client = self.client
        if self.driven and client is not None:
            self.flush()
            deadline = time.monotonic() + CLOSE_TIMEOUT_S
            if not self.reads_in_flush and time.monotonic() - client._last_bytes_received > \
                    max(self.settings.options.heartbeat, 1.0):
                # One of many clients, its broker silent past a keep-alive (a partition the
                # keep-alive has not yet declared): waiting, each client in turn, would hold
                # the stop many times over; what is unacknowledged is in doubt.
                deadline = 0.0
            while self.connected.is_set() and time.monotonic() < deadline and (
                    client.want_write() or (self.qos and self.last_publish is not None and
                    not self.last_publish.is_published())):
                _turn(client, 0.05)
        elif self.last_publish is not None and self.qos and self.connected.is_set():
            with contextlib.suppress(RuntimeError, ValueError):
                self.last_publish.wait_for_publish(CLOSE_TIMEOUT_S)
        for seq, _ in self.unacked.values():
            self.feedback.doubt.append((seq, "no acknowledgement (PUBACK) from the broker "
                                             "before the close"))
        self.unacked.clear()
        self.client = None
        if client is not None:
            client.disconnect()
            if self.driven:
                client.loop_write()  # the DISCONNECT
            else:
                client.loop_stop()


def _ignore(*args: Any) -> None:
    pass


def _watch_pings(client: Any, unheard: Unheard) -> None:
    """A PINGRESP answers for every publish written before its PINGREQ (one ordered
    stream). paho has no callback for either: its two handlers, wrapped on this client."""
    send, answered = client._send_pingreq, client._handle_pingresp

    def pingreq() -> Any:
        unheard.mark()
        return send()

    def pingresp() -> Any:
        unheard.proved()
        return answered()

    client._send_pingreq, client._handle_pingresp = pingreq, pingresp


def _turn(client: Any, timeout: float) -> int:
    """One turn of paho's loop on the calling thread: wait up to timeout for the socket,
    read what arrived, write what is queued, keep the connection alive."""
    sock = client.socket()
    if sock is None:
        return paho.MQTT_ERR_NO_CONN
    want_write = client.want_write()
    try:
        if sock.fileno() < FD_SETSIZE:
            readable, writable, _ = select.select([sock], [sock] if want_write else [], [],
                                                  timeout)
        else:  # one of thousands of clients' sockets (--clients): past select()'s reach
            poller = select.poll()
            poller.register(sock, select.POLLIN | (select.POLLOUT if want_write else 0))
            events = poller.poll(timeout * 1e3)
            mask = events[0][1] if events else 0
            readable = mask & (select.POLLIN | select.POLLERR | select.POLLHUP)
            writable = mask & select.POLLOUT
    except (OSError, ValueError):
        return paho.MQTT_ERR_CONN_LOST
    rc = client.loop_read() if readable else paho.MQTT_ERR_SUCCESS
    if rc == paho.MQTT_ERR_SUCCESS and writable:
        rc = client.loop_write()
    if rc == paho.MQTT_ERR_SUCCESS:
        rc = client.loop_misc()
    return rc
