"""A run's intervals in time: whole statistics intervals, cut at the end of the warm-up and at
the producers' stop, so that no interval straddles two phases and a measured span is exactly
the seconds from the end of the warm-up to the stop.

Each phase is divided into statistics intervals from its own beginning: with -ss 3, -sw 1 and
-rl 5, the intervals are [0, 1) warm-up, [1, 4) and [4, 5) measured, then [5, 8), ... drain.
The stop may be learnt during the run (an interrupt, the last producer done): intervals that
began before it keep their index, and the one in progress ends at the stop.

Times are integers (monotonic or epoch nanoseconds) or floats (seconds): the arithmetic is the
same.
"""

from __future__ import annotations

import math
import threading

from harness.plan.run import RunSpec

WARMUP, MEASURE, DRAIN = "warmup", "measure", "drain"


class Timeline:
    def __init__(self, start: float, interval: float, warmup: float,
                 stop: float | None = None) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.start = start
        self.interval = interval
        self.warmup = warmup
        self.stop: float | None = None
        # Held while a stop is set or a worker moves to its next interval, so that a worker
        # never misses the stop's cut.
        self.lock = threading.Lock()
        if stop is not None:
            self.set_stop(stop)

    @classmethod
    def of(cls, run: RunSpec, start_ns: int) -> Timeline:
        """A run's timeline in integer nanoseconds from start_ns, stopping at its run length
        (if it has one)."""
        stop = start_ns + round(run.duration * 1e9) if run.duration else None
        return cls(start_ns, round(run.interval * 1e9), round(run.warmup * 1e9), stop)

    def set_stop(self, stop: float) -> None:
        """The producers' stop (absolute, on the same clock as start)."""
        self.stop = max(stop, self.start)

    def _segments(self) -> list[tuple[float, float, str]]:
        """(begin, end, phase) of each non-empty phase, as offsets from the start."""
        stop = math.inf if self.stop is None else self.stop - self.start
        warm_end = min(self.warmup, stop)
        out = []
        if warm_end > 0:
            out.append((0, warm_end, WARMUP))
        if stop > warm_end:
            out.append((warm_end, stop, MEASURE))
        if stop < math.inf:
            out.append((stop, math.inf, DRAIN))
        return out

    def _locate(self, index: int) -> tuple[float, float, str]:
        first = 0
        for begin, end, phase in self._segments():
            count = math.inf if end == math.inf else math.ceil((end - begin) / self.interval)
            if index < first + count:
                low = begin + (index - first) * self.interval
                return low, min(low + self.interval, end), phase
            first += int(count)
        raise IndexError(index)

    def bounds(self, index: int) -> tuple[float, float]:
        """Where interval `index` begins and ends (absolute); with the stop not yet known, a
        measured interval ends at its full length."""
        low, high, _ = self._locate(index)
        return self.start + low, self.start + high

    def phase(self, index: int) -> str:
        return self._locate(index)[2]

    def index_at(self, t: float) -> int:
        """The interval that holds instant t (absolute); 0 before the start."""
        offset = t - self.start
        if offset <= 0:
            return 0
        first = 0
        for begin, end, _ in self._segments():
            if offset < end:
                return first + int((offset - begin) // self.interval)
            first += math.ceil((end - begin) / self.interval)
        raise AssertionError("the drain never ends")
