"""Pushed delivery for a client without a thread of its own (redis-py, confluent-kafka's
consume()): a consumer that only measures is handed the payloads one receive() read, inside
that receive(); others pull Messages."""

from __future__ import annotations

from collections.abc import Callable

from harness.modules.interface.message import Message
from harness.modules.interface.optional import PushedDelivery


class InlineFrames(PushedDelivery):
    inline = True  # deliver()'s frames are handed payloads inside receive()
    frames: Callable[..., None] | None = None  # (payload), or (payload, partition)

    def deliver(self, sink: Callable[[Message], None] | None,
                frames: Callable[..., None] | None = None,
                headed: Callable[[str | None, bytes], None] | None = None) -> bool:
        self.frames = frames
        return frames is not None
