"""The run's clocks.

Within a process every interval is timed with time.monotonic_ns(). Timestamps that cross
processes or machines (carried in messages) are epoch nanoseconds derived from the monotonic
clock through one offset taken at import, so that they never jump with NTP adjustments during
a run and two timestamps taken in the same process differ exactly as the monotonic clock does.
"""

from __future__ import annotations

import time

now_ns = time.monotonic_ns
EPOCH_OFFSET_NS: int = time.time_ns() - time.monotonic_ns()


def epoch_ns() -> int:
    return time.monotonic_ns() + EPOCH_OFFSET_NS


def to_monotonic(epoch: int) -> int:
    return epoch - EPOCH_OFFSET_NS

