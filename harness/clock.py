"""The run's clocks.

Within a process every interval is timed with time.monotonic_ns(). Timestamps that cross
processes or machines (carried in messages) are epoch nanoseconds derived from the monotonic
clock through one offset taken at import, so that they never jump with NTP adjustments during
a run and two timestamps taken in the same process differ exactly as the monotonic clock does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

now_ns = time.monotonic_ns
OFFSET_TRIES = 9


def offset_ns(monotonic: Callable[[], int] = time.monotonic_ns,
              wall: Callable[[], int] = time.time_ns, tries: int = OFFSET_TRIES) -> int:
    """Epoch minus monotonic nanoseconds, from the wall clock read between two monotonic
    readings, of the tries the one whose readings lie closest together. Read once, a thread
    preempted between the two clocks (tens of milliseconds on a loaded machine) would shift
    every timestamp this process makes and every latency it measures by as much."""
    best_span, best = -1, 0
    for _ in range(tries):
        before = monotonic()
        epoch = wall()
        after = monotonic()
        span = after - before
        if best_span < 0 or span < best_span:
            best_span, best = span, epoch - (before + after) // 2
    return best


EPOCH_OFFSET_NS: int = offset_ns()


def epoch_ns() -> int:
    return time.monotonic_ns() + EPOCH_OFFSET_NS


def to_monotonic(epoch: int) -> int:
    return epoch - EPOCH_OFFSET_NS

