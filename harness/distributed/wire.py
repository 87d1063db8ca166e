"""The link between a distributed run's driver and each of its nodes: one TCP connection per
node, opened by the node, carrying JSON lines both ways.

Node to driver: hello (with the run's token), clock probes, ready or failed, started, the
reports of each interval as the node's processes give them, what its run files gained
(harness.distributed.shipping), log lines, and end. Driver to
node: clock replies, and the live commands (stop, pause, rate). JSON rather than pickle: the
driver listens on a port that anything on its network can reach, and a token and plain data
keep a stray connection from doing more than being refused.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from harness.stats.reports import GroupPart, IntervalReport

# A send that makes no progress this long fails: the other end is cut off (a partition drops
# packets and closes nothing), and neither the driver's loop nor a node's run may wait on it.
SEND_TIMEOUT_S = 10


def report_to_wire(report: IntervalReport, node: str) -> dict[str, Any]:
    """An interval report as plain data, named by its node. The streams and the floor stay
    behind: the driver shows intervals live, and the exact end comes from the node's files."""
    data = asdict(report)
    data.update(node=node, streams=[], floor=None,
                groups={str(g): part for g, part in data["groups"].items()})
    return data


def report_from_wire(data: dict[str, Any]) -> IntervalReport:
    groups = {int(g): GroupPart(**part) for g, part in data.pop("groups").items()}
    return IntervalReport(**data, groups=groups)


class Link:
    """One end of a node's connection: whole JSON lines, sent from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Bounds sends only: a link may rightly be quiet for long the other way.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", SEND_TIMEOUT_S, 0))
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.lock = threading.Lock()
        self.closed = False
        self.broken = False  # a send failed: a line may be cut, so nothing more is sent

    def send(self, message: dict[str, Any]) -> None:
        """Raises OSError where the other end is gone or takes nothing for SEND_TIMEOUT_S."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if self.broken:
                raise OSError("the link failed before")
            try:
                self.sock.sendall(data)
            except OSError:
                self.broken = True
                raise

    def receive(self) -> dict[str, Any] | None:
        """The next message; None once the other end has closed (or sent garbage)."""
        try:
            line = self.reader.readline()
        except OSError:
            return None
        if not line:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    def messages(self) -> Iterator[dict[str, Any]]:
        while (message := self.receive()) is not None:
            yield message

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):  # the other end closed first
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
