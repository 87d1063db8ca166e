"""The optional parts of the transport interface. A transport that has one subclasses it
beside Transport and implements its methods; the engine asks `isinstance` once, when a
worker starts, and never calls a part a transport does not have. A transport that has none
of them is still whole: it connects, sends, subscribes, receives and closes."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from harness.modules.interface.message import Destination, Message


class Declarations(ABC):
    """What sending to a destination needs, made before the run (a queue, an exchange, a
    stream), so that a broker's refusal fails the start, not every send."""

    @abstractmethod
    def declare(self, destination: Destination) -> None:
        """Raises TransportError saying what the broker refused."""


class FramedSends(ABC):
    """Payloads that carry the harness's fields in front of the body
    (harness.modules.interface.message.frame): a producer whose message has nothing else to
    carry (no properties, correlation id or reply destination) frames it itself and builds
    no Message."""

    @abstractmethod
    def send_frame(self, destination: Destination, payload: bytes, seq: int) -> None:
        """send() of a framed payload; seq: its sequence number, for the failures the
        transport reports."""


class PushedDelivery(ABC):
    """Messages handed to the consumer on the client library's own thread instead of queued
    for receive(): a hand-off would add a wake-up to every measured latency."""

    # The sink is called only inside receive(), on the thread that calls it (the library's
    # loop is turned there): the consumer needs no lock around it.
    inline: ClassVar[bool] = False

    @abstractmethod
    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        """Hand every message to sink from now on (None: stop); False where these settings
        have no thread to hand them from. frames and headed, given by a consumer that only
        measures, take what came instead of a Message: a transport whose payloads carry the
        harness's prefix may hand frames each payload, and then acknowledges the message
        itself; one whose header HEADER carries the fields may hand headed that header's
        value and the body of each message it need not acknowledge."""

    def interrupt(self) -> None:
        """From another thread: make a receive() waiting for a pushed message return now
        (the run stops, the connection was lost)."""


class Acknowledgements(ABC):
    """A consumer acknowledges each message (or gives it back) after handling it."""

    @abstractmethod
    def ack(self, message: Message) -> None: ...

    def reject(self, message: Message, retry: bool) -> None:
        """Give back a message the role could not handle (a Responder whose reply failed):
        the broker delivers it again if retry (the failure may pass) and the transport's
        --requeue allow it, else drops or dead-letters it. One that cannot give a message
        back acknowledges it: left unacknowledged, it would hold a prefetch slot until the
        connection ends."""
        self.ack(message)

    def acknowledges(self) -> bool:
        """Whether ack() and reject() have anything to do with these settings (not with
        automatic acknowledgement): a consumer calls neither where they would not."""
        return True


class Transactions(ABC):
    """A producer's sends in transactions of -cc messages (-tx)."""

    @abstractmethod
    def begin(self) -> None: ...

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def abort(self) -> None: ...


class TemporaryQueues(ABC):
    """A queue of the connection's own, for a Requestor's replies."""

    @abstractmethod
    def temporary_queue(self) -> Destination: ...


class ClientLoop(ABC):
    """A client that hears from the broker only while it is turned: a producer turns it
    between sends."""

    @abstractmethod
    def flush(self) -> None:
        """Write out what send() queued and tend the connection: called before a producer
        sleeps."""

    def idle(self, seconds: float) -> None:
        """A producer's wait between sends, turning the loop meanwhile, so that a
        confirmation is timed when it arrives, not at the next send."""
        time.sleep(seconds)


class Multiplexed(ABC):
    """Connections that many clients of one worker thread share the thread's wait on
    (--clients): the worker waits on every client's socket at once and turns only the
    client whose socket has something to read; after a send, and at least every second, it
    calls the client's flush() (ClientLoop: write out, keep alive, reconnect), which a
    Multiplexed transport has."""

    @abstractmethod
    def fileno(self) -> int:
        """The socket to wait on; -1 while there is none (not connected, or nothing to
        wait for)."""

    @abstractmethod
    def readable(self) -> None:
        """Read and handle what the socket brought (acknowledgements, keep-alive answers);
        a lost connection is an outage the next flush() reconnects."""

    # Whether a consumer that only measures (a Receiver, a Subscriber) can be a client too:
    # its messages handed over inside readable() (PushedDelivery, inline).
    consumer_clients: ClassVar[bool] = False

    @classmethod
    def multiplexes(cls, settings: Any) -> bool:
        """Whether the role of these settings can be one of many clients of a thread."""
        return bool(settings.sends_only or (cls.consumer_clients and settings.measures_only))

    @classmethod
    def multiplexed_roles(cls) -> str:
        """Which roles multiplexes() takes, for people to read."""
        return "Sender, Publisher, Receiver and Subscriber" if cls.consumer_clients else \
            "Sender and Publisher"

    def multiplexed(self) -> None:
        """Said once, before open(), by a worker that waits on this connection's socket
        with others': what arrives is read in readable(), so flush() need not look."""


class EmbeddedBroker(ABC):
    """A broker inside each process, not a server: the groups of such a transport run
    together in the same processes (--processes copies of them all), each process with a
    broker of its own, new and empty at every start."""

    @classmethod
    @abstractmethod
    def start_broker(cls, options: dict[str, Any]) -> None:
        """This process's broker for a new run; options: the run-wide options (the run's
        `options`, by name), the transport's own among them."""


PARTS = (Declarations, FramedSends, PushedDelivery, Acknowledgements, Transactions,
         TemporaryQueues, ClientLoop, Multiplexed, EmbeddedBroker)


class PartitionOrder:
    """A broker that keeps order per partition only (Kafka): a message is reordered only
    against earlier messages of its producer on the same partition. `partition` is the
    partition of the message receive() last returned, or of the payload frames() is being
    handed."""

    partition: int = -1
