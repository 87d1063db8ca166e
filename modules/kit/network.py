"""What the transports built on a client library with a network thread of its own share:
messages arrive on that thread and are either handed to a consumer's measurement at once
(deliver) or queued for the worker's receive()."""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from harness.modules.interface.base import Transport
from harness.modules.interface.message import Message
from harness.modules.interface.optional import Acknowledgements, PushedDelivery
from harness.modules.interface.settings import Settings
from harness.modules.kit.inbox import Inbox


class NetworkTransport(Transport, PushedDelivery):

    def __init__(self, settings: Settings[Any]) -> None:
        super().__init__(settings)
        self.inbox: Inbox[Any] = Inbox()
        self.sink: Callable[[Message], None] | None = None
        self.frames: Callable[[bytes], None] | None = None
        # Set only where no message needs acknowledging (Transport.deliver)
        self.headed: Callable[[str | None, bytes], None] | None = None
        self.sink_lock = threading.Lock()

    @abstractmethod
    def message(self, raw: Any) -> Message:
        """The harness message in what the client library received."""

    def arrived(self, raw: Any) -> None:
        """Called on the library's network thread for every message received."""
        with self.sink_lock:
            sink = self.sink
            if sink is None:
                self.inbox.put(raw)
                return
        sink(self.message(raw))

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[[bytes], None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        # Under the lock arrived() holds while it chooses: once this returns, nothing more
        # goes into the inbox, so the caller can drain it and keep the order.
        with self.sink_lock:
            self.sink = sink
            self.frames = frames
            acks = isinstance(self, Acknowledgements) and self.acknowledges()
            self.headed = None if acks else headed
        return True

    def interrupt(self) -> None:
        self.inbox.interrupt()

    def take(self, timeout: float) -> Message | None:
        raw = self.inbox.get(timeout)
        return None if raw is None else self.message(raw)
