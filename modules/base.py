"""The transport interface every module implements, small enough to read in one screen.

A transport moves harness messages to and from one broker connection. Roles (harness.roles)
are written once against this interface; a transport declares the broker features it has as
capabilities, so that asking for a missing feature fails before the run instead of being
silently ignored.
"""

from __future__ import annotations

import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple


class Capability(enum.Flag):
    QUEUES = enum.auto()
    TOPICS = enum.auto()
    PERSISTENT = enum.auto()
    TRANSACTIONS = enum.auto()
    SELECTORS = enum.auto()
    DURABLE = enum.auto()
    QOS = enum.auto()
    REQUEST_REPLY = enum.auto()
    TEMP_QUEUES = enum.auto()


class Destination(NamedTuple):
    # A plain tuple so that it hashes in C on the per-message path.
    kind: str  # "queue" or "topic"
    name: str


class Message:
    """One message as the harness sees it; each transport maps these fields onto its wire format.

    ts is the intended send time and sent the actual send time, both in epoch nanoseconds
    (harness.clock), so that a receiver in another process or on another machine can compute
    latency from the intended time (coordinated-omission safe) and service time from the send.
    """

    __slots__ = ("body", "producer", "seq", "ts", "sent", "crc", "properties", "correlation_id",
                 "reply_to", "persistent", "handle")

    def __init__(self, body: bytes, producer: str, seq: int, ts: int, sent: int,
                 crc: int | None = None, properties: Mapping[str, str] | None = None,
                 correlation_id: str | None = None, reply_to: Destination | None = None,
                 persistent: bool = False, handle: Any = None) -> None:
        self.body = body
        self.producer = producer
        self.seq = seq
        self.ts = ts
        self.sent = sent
        self.crc = crc
        self.properties = properties
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.persistent = persistent
        # What the transport needs to acknowledge this message; opaque to the roles.
        self.handle = handle


class TransportError(Exception):
    """A failure talking to the broker; workers count it as an error and carry on."""


class Transport(ABC):
    """One connection (and session) to a broker, owned by one worker thread.

    settings holds the worker group's options (harness.config.GroupSpec as a dict: host, port,
    flavour, user, password, tls, ack, qos, ...) and the worker's node, process and thread.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capability]

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self.reconnects = 0
        self.outage_ns = 0
        self._down_since: int | None = None

    @classmethod
    def endpoint(cls, settings: Mapping[str, Any]) -> str:
        """Where these settings connect, for people to read."""
        return cls.name

    @classmethod
    def capabilities_for(cls, settings: Mapping[str, Any]) -> Capability:
        """What this transport can do with these settings (a broker flavour, a protocol
        version); the run is refused before it starts if a role or option needs more."""
        return cls.capabilities

    @classmethod
    def problems(cls, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(flag, problem) for every setting this transport cannot accept."""
        return []

    # -- outage accounting, reported by the workers every interval
    def went_down(self) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic_ns()

    def came_up(self) -> None:
        if self._down_since is not None:
            self.outage_ns += time.monotonic_ns() - self._down_since
            self._down_since = None
            self.reconnects += 1

    def take_outage(self) -> tuple[int, int]:
        """(reconnects, outage ns) since the last call, counting an outage still under way."""
        if self._down_since is not None:
            now = time.monotonic_ns()
            self.outage_ns += now - self._down_since
            self._down_since = now
        taken = self.reconnects, self.outage_ns
        self.reconnects = self.outage_ns = 0
        return taken

    def connect(self) -> None:
        """Connect, retrying --connect-retry times with back-off (0.5 s, 1 s, 2 s ...)."""
        retries = int(self.settings.get("connect_retry") or 0)
        for attempt in range(retries + 1):
            try:
                self.open()
                return
            except TransportError:
                if attempt == retries:
                    raise
                time.sleep(min(0.5 * 2 ** attempt, 10.0))

    @abstractmethod
    def open(self) -> None:
        """One connection attempt; raises TransportError saying why it failed."""

    def client_id(self, stable: bool) -> str | None:
        """--client-id plus this worker's process and thread; when none was given and the
        broker must find this client again (a durable subscription, a persistent session),
        a stable one made from the node and group names, else None."""
        s = self.settings
        prefix = s.get("client_id")
        if prefix is None and stable:
            prefix = f"{s.get('node')}-{s.get('name')}-"
        if prefix is None:
            return None
        return f"{prefix}{s.get('process', 0)}.{s.get('thread', 0)}"

    @abstractmethod
    def send(self, destination: Destination, message: Message) -> None: ...

    @abstractmethod
    def subscribe(self, destination: Destination, *, selector: str | None = None,
                  durable_name: str | None = None, qos: int | None = None) -> None:
        """Start consuming from destination; one subscription per transport instance."""

    @abstractmethod
    def receive(self, timeout: float) -> Message | None:
        """The next message of the subscription, or None after timeout seconds."""

    def deliver(self, sink: Callable[[Message], None] | None) -> bool:
        """Hand every message of the subscription to sink on the transport's own network
        thread, instead of queueing it for receive(); returns False where the transport has
        no thread of its own. A hand-off between threads would add a wake-up to every
        measured latency, and costs more than the measuring does."""
        return False

    def ack(self, message: Message) -> None:
        """Acknowledge a message; transports that only auto-acknowledge keep this no-op."""

    def temporary_queue(self) -> Destination:
        raise TransportError(f"{self.name} has no temporary queues")

    def begin(self) -> None:
        raise TransportError(f"{self.name} has no transactions")

    def commit(self) -> None:
        raise TransportError(f"{self.name} has no transactions")

    def abort(self) -> None:
        raise TransportError(f"{self.name} has no transactions")

    @abstractmethod
    def close(self) -> None: ...
