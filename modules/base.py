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

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from harness.transports.capability import Capability
from harness.transports.feedback import Feedback
from harness.transports.message import Destination, Message
from harness.transports.options import Option, declared
from harness.transports.outage import Outages
from harness.transports.roles import Role
from harness.transports.settings import NoOptions, Settings

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
    """One connection (and session) to a broker, owned by one worker thread."""

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capability]
    # The options only this transport takes: a frozen dataclass whose fields are declared
    # with harness.transports.options.option(); `options` lists them for the option table.
    Options: ClassVar[type] = NoOptions
    options: ClassVar[tuple[Option, ...]] = ()
    # The broker lives inside each process (one per process, empty at every start).
    embedded: ClassVar[bool] = False
    # The broker dialects it speaks (--flavour), its default first; none: it speaks to one
    # kind of server and --flavour is refused.
    flavours: ClassVar[tuple[str, ...]] = ()
    # Where it connects when --port is 0 (the --port help lists them); 0: nowhere. With
    # --tls, tls_port where it differs.
    default_port: ClassVar[int] = 0
    tls_port: ClassVar[int] = 0
    # deliver()'s sink is called only inside receive(), on the thread that calls it (the
    # library's loop is turned there): the consumer needs no lock around it.
    inline: ClassVar[bool] = False

    @classmethod
    def plays(cls, role: Role) -> bool:
        """Whether it plays this role where its capabilities allow it: all of them, unless
        it says fewer (HTTP: the client's side only)."""
        return True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.options = declared(cls.Options)

    def __init__(self, settings: Settings[Any]) -> None:
        self.settings = settings
        self.outages = Outages()
        self.feedback = Feedback()

    def client_id(self, stable: bool) -> str | None:
        """--client-id plus this worker's process and thread; when none was given and the
        broker must find this client again (a durable subscription, a persistent session),
        a stable one made from the node and group names, else None."""
        s = self.settings
        prefix = s.client_id
        if prefix is None and stable:
            prefix = f"{s.node}-{s.name}-"
        if prefix is None:
            return None
        return f"{prefix}{s.process}.{s.thread}"

    @classmethod
    def flavour_of(cls, settings: Settings[Any]) -> str:
        """The flavour these settings pick (the default where none was given); "" where the
        transport has none."""
        return settings.flavour or (cls.flavours[0] if cls.flavours else "")

    @classmethod
    def endpoint(cls, settings: Settings[Any]) -> str:
        """Where these settings connect, for people to read."""
        return cls.name

    @classmethod
    def capabilities_for(cls, settings: Settings[Any]) -> Capability:
        """What it can do with these settings (a broker flavour, a protocol version)."""
        return cls.capabilities

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

    @classmethod
    def problems(cls, settings: Settings[Any]) -> list[tuple[str, str]]:
        """(flag, problem) for every setting this transport cannot accept."""
        return []

    def connect(self) -> None:
        """open(), retried --connect-retry times with back-off (0.5 s, 1 s, 2 s ...)."""
        retries = self.settings.connect_retry
        for attempt in range(retries + 1):
            try:
                return self.open()
            except TransportError:
                if attempt == retries:
                    raise
                time.sleep(min(0.5 * 2 ** attempt, 10.0))

    @abstractmethod
    def open(self) -> None:
        """One connection attempt; raises TransportError saying why it failed."""

    def declare(self, destination: Destination) -> None:
        """Make ready what sending to destination needs (a queue, an exchange, a stream)
        before the run, so that a broker's refusal fails the start, not every send; raises
        TransportError. Most transports need nothing."""

    @abstractmethod
    def send(self, destination: Destination, message: Message) -> None: ...

    def send_frame(self, destination: Destination, payload: bytes, seq: int) -> None:
        """send() for a transport whose payloads carry the harness's fields in front of the
        body (harness.transports.message.frame), of a message with nothing else to carry (no
        properties, correlation id or reply destination): the producer frames it
        (plain_frame) and builds no Message. seq: its sequence number, for the failures the
        transport reports. Only where sends_frames(): a transport that carries the fields
        otherwise (headers, a Message of its own) has no use for a frame, and a generic
        fall-back here would have to unframe it into a Message, the cost this call avoids."""
        raise NotImplementedError(f"{type(self).__name__} takes no frames: call send()")

    def sends_frames(self) -> bool:
        """Whether the producer may call send_frame() for a message with nothing but the
        prefix's fields."""
        return type(self).send_frame is not Transport.send_frame

    @abstractmethod
    def subscribe(self, destination: Destination) -> None:
        """Start consuming from destination (one subscription per transport instance), with
        the group's selector, durable name and acknowledgement settings."""

    @abstractmethod
    def receive(self, timeout: float) -> Message | None:
        """The next message of the subscription, or None after timeout seconds."""

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        """Hand every message to sink on the transport's own network thread instead of
        queueing it for receive() (a hand-off would add a wake-up to every measured
        latency); False where the transport has no thread of its own. frames and headed,
        given by a consumer that only measures, take what came instead of a Message to sink:
        a transport whose payloads carry the harness's prefix
        (harness.transports.message.frame) may hand frames each payload, and then
        acknowledges the message itself; one whose header HEADER carries the fields may hand
        headed that header's value and the body of each message it need not acknowledge."""
        return False

    def interrupt(self) -> None:
        """From another thread: make a receive() that waits for a pushed transport's inbox
        return now (the run stops, the connection was lost). Others return by their timeout."""

    def flush(self) -> None:
        """Write out what send() queued and tend the connection: a producer calls it before
        it sleeps. Transports that write in send() keep this no-op."""

    def idle(self, seconds: float) -> None:
        """A producer's wait between sends: transports that hear from the broker only while
        they read turn their loop meanwhile, so that a confirmation is timed when it
        arrives, not at the next send."""
        time.sleep(seconds)

    def ack(self, message: Message) -> None:
        """Acknowledge a message; transports that only auto-acknowledge keep this no-op."""

    def reject(self, message: Message, retry: bool) -> None:
        """Give back a message the role could not handle (a Responder whose reply failed):
        the broker delivers it again if retry (the failure may pass) and the transport's
        --requeue allow it, else drops or dead-letters it. A transport that cannot give a
        message back acknowledges it: left unacknowledged, it would hold a prefetch slot
        until the connection ends."""
        self.ack(message)

    def acknowledges(self) -> bool:
        """Whether ack() and reject() have anything to do once subscribed: a consumer calls
        neither where they would not (automatic acknowledgement), two calls a message."""
        return type(self).ack is not Transport.ack or type(self).reject is not Transport.reject

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
