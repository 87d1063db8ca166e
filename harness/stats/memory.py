"""Memory a connection costs: each harness process's resident memory before it made its
clients and at the end, the broker's likewise (with --broker-pid), and the clients connected
at the end; the summary divides the growth by the connections held (--clients, above all
--idle runs that find how many a broker holds)."""

from __future__ import annotations

from typing import Any

# A mark: (interval index, bytes).
Mark = tuple[int, int]


class Memory:
    def __init__(self) -> None:
        # Per process ("node/process") and for the broker: the first and last marks.
        self.first: dict[str, Mark] = {}
        self.last: dict[str, Mark] = {}
        self.connected: Mark = (-1, 0)  # clients connected in the last interval with any

    def mark(self, key: str, index: int, rss: int, start: int = 0) -> None:
        """A reading of rss bytes in interval index; start: one from before the clients."""
        if start:
            self._first(key, (-1, start))
        if rss:
            self._first(key, (index, rss))
            if index >= self.last.get(key, (-1, 0))[0]:
                self.last[key] = (index, rss)

    def _first(self, key: str, mark: Mark) -> None:
        if key not in self.first or mark[0] < self.first[key][0]:
            self.first[key] = mark

    def clients(self, index: int, connected: int) -> None:
        if connected and index >= self.connected[0]:
            self.connected = (index, connected)

    def absorb(self, other: Memory) -> None:
        for key, mark in other.first.items():
            self._first(key, mark)
        for key, mark in other.last.items():
            if mark[0] >= self.last.get(key, (-1, 0))[0]:
                self.last[key] = mark
        if other.connected[0] >= self.connected[0]:
            self.connected = other.connected

    def summary(self) -> dict[str, Any] | None:
        """The clients' and the broker's memory from start to end, and per connection held;
        None where no client was connected at the end or nothing was read."""
        held = self.connected[1]
        if not held or not self.last:
            return None
        out: dict[str, Any] = {"connections": held}
        processes = [key for key in self.last if key != "broker"]
        for side, keys in (("client", processes), ("broker", ["broker"])):
            keys = [k for k in keys if k in self.first and k in self.last]
            if not keys:
                continue
            start = sum(self.first[k][1] for k in keys)
            end = sum(self.last[k][1] for k in keys)
            out[side] = {"start_bytes": start, "end_bytes": end,
                         "bytes_per_connection": (end - start) / held}
        return out
