"""What a transport learns about its sends after send() returned: the broker's confirmations
(their latency from the actual send) and the sends it refused later (a negative
acknowledgement, a mandatory message returned unroutable, a confirmation lost with the
connection). The worker takes both at every interval boundary, so nothing on the message path
reaches into the statistics."""

from __future__ import annotations

from array import array


class Feedback:
    __slots__ = ("confirm_us", "failed")

    def __init__(self) -> None:
        self.confirm_us: array[int] = array("q")
        # (sequence number, error kind, reason) of each send that failed after it was counted
        self.failed: list[tuple[int, str, str]] = []

    def take(self) -> tuple[array[int], list[tuple[int, str, str]]]:
        taken = self.confirm_us, self.failed
        self.confirm_us, self.failed = array("q"), []
        return taken
