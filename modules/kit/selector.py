"""Waiting on sockets to the microsecond, for the client libraries' I/O loops.

epoll_wait takes whole milliseconds, and Python rounds a wait up to the next one. A producer
paced at 4,000 sends a second waits in its loop for confirmations until its next send is due
(250 us at most), and it slept a whole millisecond whenever none came: its sends went out late,
the harness's own delay reported as the broker's latency (an amqp.Sender with confirms on a
quorum queue at 4,000/s: 230 us late at the median instead of 86). Here the part of a wait short
of a whole millisecond is waited in select() on the epoll descriptor itself, which is readable as
soon as a descriptor registered with it is ready, and select() takes microseconds. That costs
0.4 us a wait, so only such producers wait so (DrivenTransport.exact_waits).
"""

from __future__ import annotations

import select
import selectors
import time
from collections.abc import Callable
from typing import Any, TypeVar

# select() takes descriptors below this; an epoll descriptor above it waits as epoll does.
FD_SETSIZE = 1024
# Asked of epoll for whole milliseconds, a hair under: Python rounds a wait up.
_UNDER_S = 1e-6

Events = TypeVar("Events", bound=list[Any])


def wait(poll: Callable[[float], Events], fileno: int, timeout: float) -> Events:
    """poll(timeout), which waits on the epoll descriptor fileno in whole milliseconds, made to
    wait timeout seconds to the microsecond."""
    ms = int(timeout * 1e3)
    if ms:
        deadline = time.monotonic() + timeout
        ready = poll(ms / 1e3 - _UNDER_S)
        timeout = deadline - time.monotonic()
        if ready or timeout <= 0:
            return ready
    if fileno >= FD_SETSIZE:
        return poll(timeout)
    if not select.select((fileno,), (), (), timeout)[0]:
        # Nothing came: no poll(0) to hear so (a paced producer's waits mostly end by its
        # timer), a system call less a wait.
        return []  # type: ignore[return-value]
    return poll(0)


if hasattr(select, "epoll"):
    class MicrosecondSelector(selectors.EpollSelector):
        """An asyncio event loop's selector."""

        def select(self, timeout: float | None = None
                   ) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is None or timeout <= 0:
                return super().select(timeout)
            return wait(super().select, self.fileno(), timeout)

    class MicrosecondEpoll:
        """select.epoll (which cannot be subclassed) as pika's epoll poller uses it."""

        def __init__(self) -> None:
            self.epoll = select.epoll()
            self.register = self.epoll.register
            self.modify = self.epoll.modify
            self.unregister = self.epoll.unregister
            self.close = self.epoll.close
            self.fileno = self.epoll.fileno

        def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
            if timeout is None or timeout <= 0:
                return self.epoll.poll(timeout)
            return wait(self.epoll.poll, self.epoll.fileno(), timeout)

else:  # kqueue (macOS, the BSDs) waits to the nanosecond: the libraries' own loops will do
    MicrosecondSelector = selectors.DefaultSelector  # type: ignore[misc, assignment]
    MicrosecondEpoll = None  # type: ignore[misc, assignment]
