"""What travels through every transport: a destination and a harness message."""

from __future__ import annotations

import struct
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
    it, or with another program's header of that name, gets seq -1."""
    if text is not None:
        try:
            seq, ts, sent, crc, producer = text.split(",", 4)
            return int(seq), int(ts), int(sent), None if crc == "-" else int(crc), producer
        except ValueError:
            pass
    return -1, 0, 0, None, ""


# Transports without headers (MQTT 3.1.1, Redis pub/sub) or where headers cost more than the
# body (core NATS parses them in Python) carry the harness's fields in front of the body:
# magic, version, flags, seq, intended ns, sent ns, crc, then the producer id, reply
# destination and correlation id, each preceded by its length.
PREFIX = struct.Struct("!2sBBqqqIHHH")
MAGIC = b"HN"
_pack, _unpack, _SIZE = PREFIX.pack, PREFIX.unpack_from, PREFIX.size
# Bodies longer than this are handed on as views of the payload, not copies.
VIEW_FROM = 8192


# Each producer id's bytes, encoded once: a producer frames every message under one id.
_producer_bytes: dict[str, bytes] = {}


def frame(message: Message, reply: str = "", correlation: str = "") -> bytes:
    producer = _producer_bytes.get(message.producer)
    if producer is None:
        if len(_producer_bytes) >= 4096:  # ids of runs long over (a long sweep in one process)
            _producer_bytes.clear()
        producer = _producer_bytes[message.producer] = message.producer.encode()
    crc = message.crc
    if not reply and not correlation:  # a plain send: two pieces fewer to join
        return plain_frame(producer, message.seq, message.ts, message.sent, crc, message.body)
    reply_bytes = reply.encode() if reply else b""
    corr = correlation.encode() if correlation else b""
    return b"".join((_pack(MAGIC, 1, crc is not None, message.seq, message.ts, message.sent,
                           crc or 0, len(producer), len(reply_bytes), len(corr)),
                     producer, reply_bytes, corr, message.body))


def plain_frame(producer: bytes, seq: int, ts: int, sent: int, crc: int | None,
                body: bytes) -> bytes:
    """frame() of a message with no reply destination and no correlation id, from its fields
    (producer: its id encoded): what a producer hands Transport.send_frame()."""
    return b"".join((_pack(MAGIC, 1, crc is not None, seq, ts, sent, crc or 0, len(producer),
                           0, 0), producer, body))


def unframe(payload: bytes, reply_kind: str = "queue", handle: Any = None) -> Message:
    """The message in a framed payload, with its reply destination (a reply_kind) and
    correlation id; a payload without the frame (from another client) gets seq -1."""
    if len(payload) >= _SIZE:
        magic, _, flags, seq, ts, sent, crc, lp, lr, lc = _unpack(payload)
        if magic == MAGIC:
            at = _SIZE + lp
            producer = payload[_SIZE:at].decode()
            reply_to = corr = None
            if lr:
                reply_to = Destination(reply_kind, payload[at:at + lr].decode())
                at += lr
            if lc:
                corr = payload[at:at + lc].decode()
                at += lc
            # A small body is copied (cheaper than a view's two objects); a large one viewed.
            body = payload[at:] if len(payload) - at <= VIEW_FROM else memoryview(payload)[at:]
            return Message(body, producer, seq, ts, sent, crc if flags & 1 else None, None,
                           corr, reply_to, False, handle)
    return Message(payload, "", -1, 0, 0, None, None, None, None, False, handle)
