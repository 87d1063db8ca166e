"""The bare producer loop: how message_path.py and transports.py send as the harness's
producers do (paced, or unthrottled with writes every 64 sends), in one place for both."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable

# --poisson (transports.py): paced producers draw exponential gaps (bare loops and harness
# alike)
POISSON = [False]


def gaps(rate: float) -> Callable[[], float]:
    """The gap before each paced send, in seconds: fixed, or with --poisson exponential
    with the same mean."""
    if POISSON[0]:
        return functools.partial(random.expovariate, rate)
    return functools.partial(float, 1 / rate)


def produce(send: Callable[[], object], write_out: Callable[[], object], start: float,
            end: float, rate: float, sleep: Callable[[float], object] = time.sleep) -> int:
    """Send until end, counting the sends in the window from start. Unthrottled, what is
    queued is written every 64 sends; paced at `rate`, each send is made when due and what is
    queued is written before the loop sleeps, as the harness's producers do."""
    gap = gaps(rate) if rate else None
    count = queued = 0
    due = time.monotonic()
    while (now := time.monotonic()) < end:
        if gap is not None:
            if due > now:
                write_out()
                queued = 0
                sleep(max(due - time.monotonic(), 0))
            due += gap()
        send()
        count += now >= start
        queued += 1
        if queued == 64:
            queued = 0
            write_out()
    write_out()
    return count
