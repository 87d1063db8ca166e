"""What one transport instance is given: the group's fields a transport reads, where the
worker runs, and the transport's own options, typed. Built from a worker group
(harness.spec.group.GroupSpec.settings), which holds the defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

OptionsT = TypeVar("OptionsT")  # the transport's options dataclass


@dataclass(frozen=True)
class NoOptions:
    """The options of a transport that declares none."""


@dataclass(frozen=True)
class Settings(Generic[OptionsT]):
    options: OptionsT
    # The group
    module: str
    name: str
    threads: int
    processes: int
    persistent: bool
    transacted: bool
    body_type: str  # bytes, text or xml
    selector: str | None  # per-thread templates already expanded
    durable_name: str | None
    reply_timeout: float  # seconds a Requestor waits for a reply
    # The connection
    host: str
    port: int  # 0: the protocol's default port
    flavour: str  # "": the transport's default
    protocol: str  # "": the transport's default
    user: str | None
    password: str | None = field(repr=False)  # a secret: never printed
    tls: bool
    ca: str | None
    cert: str | None
    key: str | None
    client_id: str | None
    connect_retry: int
    # Where the worker runs
    node: str
    process: int
    thread: int
    # This thread's destination (-d, with -dx or a template evaluated for it): what a
    # transport that connects to its destination (an HTTP URL) reaches at the start.
    destination: str = ""

    @property
    def role(self) -> str:
        return self.module.partition(".")[2]

    @property
    def publishes(self) -> bool:
        """Whether the role sends to its destination (a subject or topic with wildcards
        names what to subscribe to, never where to send)."""
        return self.role in ("Sender", "Publisher", "Requestor")

    def address(self, default_port: int) -> tuple[str, int]:
        return self.host or "127.0.0.1", self.port or default_port


GROUP_FIELDS = tuple(name for name in Settings.__dataclass_fields__
                     if name not in ("options", "node", "process", "thread", "destination"))
