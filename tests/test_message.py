"""The payload prefix that carries the harness's fields where a protocol has no headers
(MQTT 3.1.1, Redis, NATS): every field back as it was sent."""

import zlib

import pytest
from harness.modules.interface.message import (
    VIEW_FROM,
    Destination,
    Message,
    frame,
    plain_frame,
    unframe,
)


@pytest.mark.parametrize("size", [0, 256, VIEW_FROM, VIEW_FROM + 1, 100_000])
@pytest.mark.parametrize(("reply", "correlation"), [("", ""), ("replies.7", ""),
                                                    ("", "c-42"), ("inbox.x", "run:p-0-0:9")])
def test_every_field_comes_back_from_the_prefix(size, reply, correlation):
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    sent = Message(body, "run:publisher-1-0", 123456, 1_764_000_000_123_456_789,
                   1_764_000_000_223_456_789, zlib.crc32(body))
    message = unframe(frame(sent, reply, correlation), "topic", ("handle", 5))
    assert bytes(message.body) == body
    # A large body is handed on without a copy.
    assert isinstance(message.body, memoryview) == (size > VIEW_FROM)
    assert (message.producer, message.seq, message.ts, message.sent, message.crc) == \
        (sent.producer, sent.seq, sent.ts, sent.sent, sent.crc)
    assert message.reply_to == (Destination("topic", reply) if reply else None)
    assert message.correlation_id == (correlation or None)
    assert message.handle == ("handle", 5)


def test_a_message_without_a_crc_has_none():
    message = unframe(frame(Message(b"abc", "p", 0, 1, 2)))
    assert message.crc is None and bytes(message.body) == b"abc"


@pytest.mark.parametrize("payload", [b"", b"short", b"XY" + bytes(100)])
def test_a_payload_from_another_client_is_foreign_and_whole(payload):
    message = unframe(payload, "queue", 7)
    assert message.seq == -1 and message.producer == "" and message.body == payload
    assert message.handle == 7 and message.reply_to is None


def test_interleaved_producers_each_get_their_own_id_back():
    # Producer ids are encoded once and kept: each frame must still carry its own.
    ids = ["run:sender-0-0", "run:sender-0-1", "run:publisher-2-0", "é-ü"]
    for seq in range(8):
        producer = ids[seq % len(ids)]
        message = unframe(frame(Message(b"x", producer, seq, 1, 2)))
        assert (message.producer, message.seq) == (producer, seq)


@pytest.mark.parametrize("crc", [None, 0, 0xFFFFFFFF])
def test_a_producer_frames_a_plain_message_as_frame_does(crc):
    """What a producer frames itself (no Message built) is what frame() makes of the same
    message, and every field comes back."""
    body = b"payload" * 40
    sent = Message(body, "run:sender-3-1", 77, 1_764_000_000_000_000_001,
                   1_764_000_000_000_000_002, crc)
    payload = plain_frame(b"run:sender-3-1", 77, sent.ts, sent.sent, crc, body)
    assert payload == frame(sent)
    message = unframe(payload)
    assert (message.producer, message.seq, message.ts, message.sent, message.crc,
            bytes(message.body)) == ("run:sender-3-1", 77, sent.ts, sent.sent, crc, body)
