"""What the transports built on a client library with a network thread of its own share:
messages arrive on that thread and are either handed to a consumer's measurement at once
(deliver) or queued for the worker's receive()."""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from harness.transports.base import Transport
from harness.transports.inbox import Inbox
from harness.transports.message import Message


class NetworkTransport(Transport):
    default_port: ClassVar[int]
    default_flavour: ClassVar[str]

    @classmethod
    def endpoint(cls, settings: Mapping[str, Any]) -> str:
        flavour = settings.get("flavour") or cls.default_flavour
        host = settings.get("host") or "127.0.0.1"
        return f"{cls.name} {flavour}@{host}:{settings.get('port') or cls.default_port}"

    def __init__(self, settings: Mapping[str, Any]) -> None:
        super().__init__(settings)
        self.inbox: Inbox[Any] = Inbox()
        self.sink: Callable[[Message], None] | None = None
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

    def deliver(self, sink: Callable[[Message], None] | None) -> bool:
        # Under the lock arrived() holds while it chooses: once this returns, nothing more
        # goes into the inbox, so the caller can drain it and keep the order.
        with self.sink_lock:
            self.sink = sink
        return True

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

    def take(self, timeout: float) -> Message | None:
        raw = self.inbox.get(timeout)
        return None if raw is None else self.message(raw)
