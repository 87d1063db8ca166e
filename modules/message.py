"""What travels through every transport: a destination and a harness message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


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


# Transports with headers (STOMP, AMQP) carry the harness's fields in one of them, named
# HEADER: "<seq>,<intended ns>,<sent ns>,<crc or ->,<producer id>". One header costs a
# client library a fifth of what five would.
HEADER = "harness"


def header(message: Message) -> str:
    crc = "-" if message.crc is None else message.crc
    return f"{message.seq},{message.ts},{message.sent},{crc},{message.producer}"


def from_header(text: str | None) -> tuple[int, int, int, int | None, str]:
    """(seq, intended ns, sent ns, crc, producer id) from HEADER's value; a message without
    it (from another client) gets seq -1."""
    if text is None:
        return -1, 0, 0, None, ""
    seq, ts, sent, crc, producer = text.split(",", 4)
    return int(seq), int(ts), int(sent), None if crc == "-" else int(crc), producer
