"""The producer side: produce calls with keys, delivery reports (confirmed, refused or in
doubt), polls while idle, transactions."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from harness.modules.interface.base import COMMIT_IN_DOUBT, ROLLED_BACK, TransportError
from harness.modules.interface.message import Destination, Message, frame, unframe
from harness.modules.interface.settings import Settings
from harness.modules.kafka.common import POLL_EVERY, UNKNOWN, _reason
from harness.modules.kafka.options import KafkaOptions


class Producing:
    """The producer part: produce calls, delivery reports, transactions. The state it uses
    is made in KafkaTransport.__init__."""

    settings: Settings[KafkaOptions]
    o: KafkaOptions

    def _keys(self) -> Callable[[int], bytes | None]:
        mode = self.o.keys
        prefix = f"{self.settings.node}-{self.settings.name}-{self.settings.process}." \
            f"{self.settings.thread}"
        if mode == "producer":
            key = prefix.encode()
            return lambda seq: key
        if mode == "sequence":
            return lambda seq: f"{prefix}:{seq}".encode()
        if mode == "random":
            return lambda seq: os.urandom(8)
        return lambda seq: None

    # -- producing
    def send(self, destination: Destination, message: Message) -> None:
        reply = message.reply_to.name if message.reply_to is not None else ""
        self.send_frame(destination, frame(message, reply, message.correlation_id or ""),
                        message.seq)

    def send_frame(self, destination: Destination, payload: bytes, seq: int) -> None:
        producer = self.producer
        if self.down:
            # librdkafka would queue it for when the broker is back, and it would count as
            # sent though the connection is known lost: it fails, as a send on any transport
            # does while it reconnects.
            producer.poll(0)  # what tells that the broker is back
            if self.down:
                raise TransportError(f"not connected: {self.last_error or 'the broker is down'}")
        try:
            producer.produce(destination.name, payload, self.key_of(seq))
        except BufferError:
            # The client's queue is full: serve reports (which frees it) and try once more.
            producer.poll(0.1)
            try:
                producer.produce(destination.name, payload, self.key_of(seq))
            except BufferError:
                raise TransportError("the client's queue is full (the broker is not taking "
                                     "sends)") from None
        except KafkaException as exc:
            raise TransportError(_reason(exc)) from None
        self.sends += 1
        if self.sends % POLL_EVERY == 0:
            producer.poll(0)

    def _reported(self, error: KafkaError | None, record: Any) -> None:
        if error is None:
            if self.confirming:
                self.feedback.confirm_us.append(int(record.latency() * 1_000_000))
            if self.down:
                self._up()
            return
        seq = unframe(record.value()).seq
        if error.code() in UNKNOWN:
            self.feedback.doubt.append((seq, error.str()))
        elif error.code() == KafkaError._PURGE_QUEUE:
            self.feedback.failed.append((seq, "send", "never sent: still queued at the end"))
        else:
            self.feedback.failed.append((seq, "send", error.str()))

    def flush(self) -> None:
        if self.producer is not None:
            self.producer.poll(0)

    def idle(self, seconds: float) -> None:
        """Waits serving delivery reports, so that each is timed when it comes."""
        if self.producer is None:
            time.sleep(seconds)
            return
        deadline = time.monotonic() + seconds
        # poll() waits whole milliseconds: below one it would not wait at all, and spin.
        while (left := deadline - time.monotonic()) >= 0.001:
            self.producer.poll(left)
        if left > 0:
            time.sleep(left)

    # -- transactions
    def begin(self) -> None:
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            raise TransportError(f"begin: {_reason(exc)}") from None

    def commit(self) -> None:
        try:
            self.producer.commit_transaction(self.o.send_timeout)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    self.producer.abort_transaction(self.o.send_timeout)
                raise TransportError(f"commit refused: {error.str()}", kind=ROLLED_BACK) \
                    from None
            raise TransportError(f"commit: {error.str()}", kind=COMMIT_IN_DOUBT) from None

    def abort(self) -> None:
        try:
            self.producer.abort_transaction(self.o.send_timeout)
        except KafkaException as exc:
            raise TransportError(f"abort: {_reason(exc)}") from None

