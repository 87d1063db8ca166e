"""What a transport learns about its sends after send() returned: the broker's confirmations
(their latency from the actual send), the sends it refused later (a negative
acknowledgement, a mandatory message returned unroutable, a send the client library never
wrote), the sends whose outcome a fault hid (in doubt: the connection lost, or no
confirmation in time, after the bytes may have left), and what else the client library
reported on its own. The worker takes them at every interval boundary, so nothing on the
message path reaches into the statistics."""

from __future__ import annotations

import threading
from array import array

# The rate of a partitions entry that is a destination's waiting count (Feedback.waiting):
# the broker says how many wait, not how fast they go.
WAITING = -1.0


class Feedback:
    __slots__ = ("confirm_us", "doubt", "errors", "failed", "partitions", "rebalances",
                 "redelivered", "redelivered_lock")

    def __init__(self) -> None:
        self.confirm_us: array[int] = array("q")
        # (sequence number, error kind, reason) of each send that failed after it was counted
        self.failed: list[tuple[int, str, str]] = []
        # (sequence number, reason) of each send counted whose outcome a fault hid
        self.doubt: list[tuple[int, str]] = []
        # kind -> (count, reason) of what the client library reported on its own (a
        # subscription dropping messages for a slow consumer)
        self.errors: dict[str, tuple[int, str]] = {}
        # Messages the broker delivered again (claimed from a consumer that died). It only
        # grows, and the worker takes what it grew by: a transport may count on the client
        # library's thread (pushed messages) while the worker looks, and, for the moment a
        # consumer switches to pushed delivery, on both threads at once.
        self.redelivered = 0
        self.redelivered_lock = threading.Lock()
        # A consumer group's changes of what this consumer reads (partitions assigned), each
        # as the line of the log that says it; on the worker's own thread (the client
        # library calls back from within the worker's receive).
        self.rebalances: list[str] = []
        # Per partition ("topic[n]") this client sends to or reads, where the client library
        # reports them (every second or so): the rate its sends or its consumer's position
        # advanced by between its last two reports (msg/s), and a consumer's lag (messages
        # on the partition it has not taken; -1: unknown, or a producer's). Replaced whole
        # at each report, on the worker's own thread; the worker reads the latest at each
        # interval boundary. An entry whose rate is WAITING is instead the broker's count of
        # what a destination holds for its consumers (waiting()).
        self.partitions: dict[str, tuple[float, int]] = {}

    def error(self, kind: str, reason: str) -> None:
        count, _ = self.errors.get(kind, (0, reason))
        self.errors[kind] = (count + 1, reason)

    def waiting(self, destination: str, count: int) -> None:
        """The broker said `count` messages wait on `destination` for this consumer (a
        queue's depth, a stream consumer's pending, a consumer group's lag): a count every
        consumer of the destination reads alike, so that many consumers' reports of it are
        merged by the largest, not added. The dict is replaced, never changed in place: the
        cell may read the last one handed over."""
        self.partitions = {**self.partitions, destination: (WAITING, count)}

    def rebalance(self, note: str) -> None:
        """Count a rebalance of the consumer's group, said in the log as `note`."""
        self.rebalances.append(note)

    def redelivery(self) -> None:
        """Count a message the broker delivered again (rare: the lock costs nothing)."""
        with self.redelivered_lock:
            self.redelivered += 1

    def take(self) -> tuple[array[int], list[tuple[int, str, str]], list[tuple[int, str]],
                            dict[str, tuple[int, str]]]:
        taken = self.confirm_us, self.failed, self.doubt, self.errors
        self.confirm_us, self.failed, self.doubt, self.errors = array("q"), [], [], {}
        return taken
