"""The transport interface every module implements.

A transport moves harness messages to and from one broker connection. Roles
(harness.engine.roles) are written once against it; a transport declares the broker features
it has as capabilities and the options only it takes, so that asking for a missing feature
fails before the run instead of being silently ignored.

The failure-path contract. Every call a role makes during a run (send, flush, idle, receive,
ack, commit) returns or raises TransportError; it never ends the thread. A lost connection is
an outage: the transport notes it (outages: went_down, came_up), and its next call reconnects,
at most every reconnect.RECONNECT_EVERY_S. Each send ends one way only: sent (send returned;
what the broker says of it later goes to the feedback: confirmed, refused, or in doubt where a
fault hid its outcome), or failed (send raised: it never left, and the role counts it once).
A send that raises for sends it had queued, its own among them, reports them all in the
feedback and raises with reported=True, so that the role counts none of them a second time.
The worker counts a failure of any other call once per outage. A producer's transaction lost
with its connection is said by the first call after (send or commit) raising kind
ROLLED_BACK: the role counts the transaction's sends refused (the broker kept none); a commit
whose outcome a fault hid raises kind COMMIT_IN_DOUBT: its sends are in doubt.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from harness.modules.interface.capability import Capability
from harness.modules.interface.feedback import Feedback
from harness.modules.interface.message import Destination, Message
from harness.modules.interface.options import Option, declared
from harness.modules.interface.outage import Outages
from harness.modules.interface.roles import Role
from harness.modules.interface.settings import NoOptions, Settings

# TransportError kinds that speak of a producer's open transaction (see the contract above).
ROLLED_BACK = "rolled back"
COMMIT_IN_DOUBT = "commit in doubt"


class TransportError(Exception):
    """A failure talking to the broker; workers count it as an error and carry on.

    kind names the error where the transport knows better than the role ("HTTP 503");
    answered: the server did answer (an error status), so the worker need not back off; from
    a Requestor's receive, the request's answer (no reply will follow). reported: raised by
    a send, the failure of sends it had queued, that send's among them, which the transport
    put in its feedback (failed or in doubt): the role counts that send as sent, as the
    others were, and counts nothing of its own, so that each failure is counted once."""

    def __init__(self, message: str, kind: str | None = None, answered: bool = False,
                 reported: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.answered = answered
        self.reported = reported


class Transport(ABC):
    """One connection (and session) to a broker, owned by one worker thread: the required
    core. A transport says what it is (the declarations below) and implements five methods:
    open, send, subscribe, receive, close. What a broker has beyond that (declarations before
    the run, framed sends, pushed delivery, acknowledgements, transactions, temporary queues,
    a client loop) is an optional part (harness.modules.interface.optional) it subclasses."""

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capability]
    # What only a producer that only sends can do with it (transactions that batch sends,
    # where a consumer's read cannot wait inside one).
    producer_capabilities: ClassVar[Capability] = Capability(0)
    # The options only this transport takes: a frozen dataclass whose fields are declared
    # with harness.modules.interface.options.option(); `options` lists them for the table.
    Options: ClassVar[type] = NoOptions
    options: ClassVar[tuple[Option, ...]] = ()
    # The broker dialects it speaks (--flavour), its default first; none: it speaks to one
    # kind of server and --flavour is refused.
    flavours: ClassVar[tuple[str, ...]] = ()
    # The protocol versions it speaks (--protocol), its default first; none: --protocol is
    # refused.
    protocols: ClassVar[tuple[str, ...]] = ()
    # Where it connects when --port is 0 (the --port help lists them); 0: nowhere. With
    # --tls, tls_port where it differs.
    default_port: ClassVar[int] = 0
    tls_port: ClassVar[int] = 0
    # What the broker's word on a send is called in this protocol, for the `confirm` metric's
    # line (from a send to that word).
    confirmations: ClassVar[str] = "confirmations"
    # Whether it connects from the local address it is given (Settings.source_address,
    # --source-addresses); where not, the option is refused.
    binds: ClassVar[bool] = False
    # Open files one connection holds in the harness's process (its socket, and what its
    # client library opens beside it), for the open-file limit's check before the run.
    files: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.options = declared(cls.Options)

    def __init__(self, settings: Settings[Any]) -> None:
        self.settings = settings
        self.outages = Outages()
        self.feedback = Feedback()

    # -- the required core
    @abstractmethod
    def open(self) -> None:
        """One connection attempt; raises TransportError saying why it failed."""

    @abstractmethod
    def send(self, destination: Destination, message: Message) -> None: ...

    @abstractmethod
    def subscribe(self, destination: Destination) -> None:
        """Start consuming from destination (one subscription per transport instance), with
        the group's selector, durable name and acknowledgement settings."""

    @abstractmethod
    def receive(self, timeout: float) -> Message | None:
        """The next message of the subscription, or None after timeout seconds."""

    @abstractmethod
    def close(self) -> None: ...

    # -- what it says about a group's settings, before the run (each has a default)
    @classmethod
    def plays(cls, role: Role) -> bool:
        """Whether it plays this role where its capabilities allow it: all of them, unless
        it says fewer (HTTP: the client's side only)."""
        return True

    @classmethod
    def problems(cls, settings: Settings[Any]) -> list[tuple[str, str]]:
        """(flag, problem) for every setting this transport cannot accept."""
        return []

    @classmethod
    def capabilities_for(cls, settings: Settings[Any]) -> Capability:
        """What it can do with these settings (a broker flavour, a protocol version): its
        capabilities, and a producer that only sends those of producer_capabilities."""
        if settings.sends_only:
            return cls.capabilities | cls.producer_capabilities
        return cls.capabilities

    @classmethod
    def flavour_of(cls, settings: Settings[Any]) -> str:
        """The flavour these settings pick (the default where none was given); "" where the
        transport has none."""
        return settings.flavour or (cls.flavours[0] if cls.flavours else "")

    @classmethod
    def endpoint(cls, settings: Settings[Any]) -> str:
        """Where these settings connect, for people to read: `<name> <flavour>@host:port`."""
        default = cls.tls_port if settings.tls and cls.tls_port else cls.default_port
        if not default and not settings.port:
            return cls.name
        host, port = settings.address(default)
        flavour = cls.flavour_of(settings)
        text = f"{cls.name} {flavour}@{host}:{port}" if flavour else f"{cls.name}@{host}:{port}"
        path = getattr(settings.options, "websocket", None)  # over WebSockets, at this path
        return f"{text} {'wss' if settings.tls else 'ws'}:{path}" if path else text

    @classmethod
    def filters(cls, settings: Settings[Any]) -> bool:
        """Whether a group with these settings routes by more than its destination's name
        (a binding's key or arguments), so that its consumers may see part of a stream."""
        return False

    @classmethod
    def confirms(cls, settings: Settings[Any]) -> bool:
        """Whether the broker confirms each send with these settings (AMQP publisher
        confirms, JetStream publish acknowledgements): the time to it is the confirm
        metric."""
        return False


def connect(transport: Transport, then: Callable[[], None] | None = None) -> None:
    """open() and then what the caller makes on the new connection (declarations, a
    subscription), retried together --connect-retry times with back-off (0.5 s, 1 s, 2 s
    ...): a broker that is starting, or under load, can refuse any of them for a while (a
    quorum queue's consume that times out inside RabbitMQ is a connection error, 541)."""
    retries = transport.settings.connect_retry
    for attempt in range(retries + 1):
        opened = False
        try:
            transport.open()
            opened = True
            if then is not None:
                then()
            return
        except TransportError:
            if attempt == retries:
                raise
            if opened:  # the retry opens a new connection
                with contextlib.suppress(Exception):
                    transport.close()
            time.sleep(min(0.5 * 2 ** attempt, 10.0))
