"""What one transport instance is given: the group's fields a transport reads, where the
worker runs, and the transport's own options, typed. Built from a worker group
(harness.plan.group.GroupSpec.settings), which holds the defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from harness.modules.interface.roles import ROLES

OptionsT = TypeVar("OptionsT")  # the transport's options dataclass


@dataclass(frozen=True)
class NoOptions:
    """The options of a transport that declares none."""


# --password-file's content by path: (modification time and size, the secret), shared by the
# process's connections.
_SECRETS: dict[str, tuple[tuple[int, int], str]] = {}


def current_secret(path: str, given: str | None) -> str | None:
    try:
        stat = os.stat(path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        known = _SECRETS.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        with open(path, encoding="utf-8") as file:
            secret = file.read().strip()
    except (OSError, UnicodeDecodeError):
        return given
    _SECRETS[path] = (stamp, secret)
    return secret


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
    # The local address this connection is made from (--source-addresses), where given.
    source_address: str | None = None
    # Each message's time to live in seconds (0: none) and priority (None: the broker's
    # default), where the capabilities say the transport sends them.
    ttl: float = 0.0
    priority: int | None = None
    # The file the password came from (--password-file), read again when it changes.
    password_file: str | None = None

    def secret(self) -> str | None:
        """The password as it stands at this connection: --password-file's content, read
        again where the file changed since (a token rotated during a long run is taken at
        the next connection); else the password given. A file gone (on a remote node) leaves
        the password read at the start."""
        if self.password_file is None:
            return self.password
        return current_secret(self.password_file, self.password)

    @property
    def role(self) -> str:
        return self.module.partition(".")[2]

    # What the role does, from the role table: a transport asks these, never a role's name.
    @property
    def publishes(self) -> bool:
        """Whether the role sends to its destination on its own schedule (Sender, Publisher,
        Requestor; a subject or topic with wildcards names what to subscribe to, never where
        to send)."""
        return ROLES[self.role].produces

    @property
    def sends_only(self) -> bool:
        """A producer that receives nothing (Sender, Publisher)."""
        return ROLES[self.role].sends_only

    @property
    def consumes(self) -> bool:
        """Whether it receives (a Requestor its replies, a Responder its requests)."""
        return ROLES[self.role].consumes

    @property
    def measures_only(self) -> bool:
        """A consumer that sends nothing back (Receiver, Subscriber)."""
        return ROLES[self.role].measures_only

    @property
    def on_topic(self) -> bool:
        """Whether its destination is a topic (Publisher, Subscriber), not a queue."""
        return ROLES[self.role].kind == "topic"

    @property
    def competes(self) -> bool:
        """A consumer of a queue, which other consumers of it share (Receiver, Responder)."""
        role = ROLES[self.role]
        return role.consumes and role.kind == "queue" and not role.asks

    @property
    def asks(self) -> bool:
        """It sends requests and waits for their replies (Requestor)."""
        return ROLES[self.role].asks

    @property
    def replies(self) -> bool:
        """It answers each request to its reply-to (Responder)."""
        return ROLES[self.role].replies

    def connection_id(self, stable: bool) -> str | None:
        """--client-id plus this worker's process and thread; when none was given and the
        broker must find this client again (a durable subscription, a persistent session),
        a stable one made from the node and group names, else None."""
        prefix = self.client_id
        if prefix is None and stable:
            prefix = f"{self.node}-{self.name}-"
        if prefix is None:
            return None
        return f"{prefix}{self.process}.{self.thread}"

    def address(self, default_port: int) -> tuple[str, int]:
        return self.host or "127.0.0.1", self.port or default_port


GROUP_FIELDS = tuple(name for name in Settings.__dataclass_fields__
                     if name not in ("options", "node", "process", "thread", "destination",
                                     "source_address"))
