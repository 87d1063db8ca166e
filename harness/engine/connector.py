"""The connection attempts of one thread's clients (--clients): made on the thread itself
while connections are quick, and on connector threads, up to CONNECTS_AT_ONCE at a time,
while they are slow, so that a broker slow to answer, or far away, holds one connection and
not the clients behind it. Each attempt is timed from its open() to the broker's answer."""

from __future__ import annotations

import contextlib
import os
import select
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from harness.clock import now_ns

FAR = 1 << 62
# Connection attempts a thread has under way at once: the connect rate paces when each
# begins; these bound how many a slow handshake (a remote broker, TLS, one that does not
# answer) keeps waiting together.
CONNECTS_AT_ONCE = 32
# ... and another begins beside those under way only once the oldest has taken this long
# (waiting on the broker or the network): where connections are quick, one at a time costs
# least and times each without the others' contention.
SLOW_CONNECT_NS = 10_000_000


class Connector:
    """Opens client i with `opener(i)`, on the asking thread (timed_here) or on a connector
    thread (start, then take once `opened` holds it); `woken` is readable when an attempt
    on a connector thread has ended."""

    def __init__(self, name: str, opener: Callable[[int], None]) -> None:
        self.name, self.opener = name, opener
        self.pool: ThreadPoolExecutor | None = None
        # Attempts under way on the connector threads (client index -> its attempt and when
        # it was begun, monotonic ns; oldest first), and those that ended, in order.
        self.opening: dict[int, tuple[Future[tuple[int, int]], int]] = {}
        self.opened: deque[int] = deque()
        # Whether the last attempt took less than SLOW_CONNECT_NS: the next is then made on
        # the asking thread, as a hand-off to a connector thread would cost more than it
        # waits.
        self.quick = True
        self.woken = os.eventfd(0, os.EFD_NONBLOCK)

    def here(self) -> bool:
        """Whether the next attempt is made on the asking thread."""
        return self.quick and not self.opening

    def begin_at(self, at: int) -> int:
        """When the next attempt may begin, at or after `at`: FAR while CONNECTS_AT_ONCE are
        under way; with some under way, once the oldest has taken SLOW_CONNECT_NS."""
        opening = self.opening
        if len(opening) >= CONNECTS_AT_ONCE:
            return FAR
        if opening:
            return max(at, next(iter(opening.values()))[1] + SLOW_CONNECT_NS)
        return at

    def timed_here(self, i: int) -> tuple[int, int]:
        """Client i opened on this thread: when it began and ended (monotonic ns); raises
        what opening raised."""
        began = now_ns()
        try:
            self.opener(i)
        finally:
            up = now_ns()
            self.quick = up - began < SLOW_CONNECT_NS
        return began, up

    def start(self, i: int) -> None:
        """Client i's attempt begun on a connector thread."""
        if self.pool is None:
            self.pool = ThreadPoolExecutor(CONNECTS_AT_ONCE,
                                           thread_name_prefix=f"{self.name}-connect")
        begun = now_ns()
        future = self.pool.submit(self._timed, i)
        self.opening[i] = (future, begun)
        future.add_done_callback(lambda _: self._ended(i))

    def _timed(self, i: int) -> tuple[int, int]:
        """On a connector thread: nothing of the client but its open() is touched there."""
        began = now_ns()
        self.opener(i)
        return began, now_ns()

    def _ended(self, i: int) -> None:
        self.opened.append(i)
        os.eventfd_write(self.woken, 1)

    def take(self, i: int) -> tuple[int, int]:
        """When client i's ended attempt began and ended; raises what it raised."""
        future, begun = self.opening.pop(i)
        try:
            began, up = future.result()
        except BaseException:
            self.quick = now_ns() - begun < SLOW_CONNECT_NS
            raise
        self.quick = up - began < SLOW_CONNECT_NS
        return began, up

    def wait(self, timeout: float) -> int | None:
        """The next client whose attempt ended, waiting up to timeout for one (when the
        thread has nothing else to do); None if none did."""
        if not self.opened:
            select.select([self.woken], [], [], max(timeout, 0))
            self.heard()
        return self.opened.popleft() if self.opened else None

    def heard(self) -> None:
        """The wake-up read: the attempts that ended are in `opened`."""
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self.woken)

    def stop(self, close: Callable[[int], None]) -> None:
        """At the end: wait for the attempts under way (each within its transport's connect
        timeout) and close what they opened and no one took."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for i, (future, _) in self.opening.items():
            if future.exception() is None:
                with contextlib.suppress(Exception):
                    close(i)
        self.opening.clear()
        self.opened.clear()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # closed already (a start that failed)
            os.close(self.woken)
