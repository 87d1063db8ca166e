"""Outage accounting: a transport notes when its connection went down and came back; the
worker takes the reconnects and the time spent down every interval."""

from __future__ import annotations

import time


class Outages:
    __slots__ = ("down_since", "ns", "reconnects", "outages")

    def __init__(self) -> None:
        self.reconnects = 0
        self.ns = 0
        self.down_since: int | None = None
        self.outages = 0  # how many times it went down, for telling one outage from the next

    def went_down(self) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic_ns()
            self.outages += 1

    def came_up(self) -> None:
        if self.down_since is not None:
            self.ns += time.monotonic_ns() - self.down_since
            self.down_since = None
            self.reconnects += 1

    def take(self) -> tuple[int, int]:
        """(reconnects, outage ns) since the last call, counting an outage still under way."""
        if self.down_since is not None:
            now = time.monotonic_ns()
            self.ns += now - self.down_since
            self.down_since = now
        taken = self.reconnects, self.ns
        self.reconnects = self.ns = 0
        return taken
