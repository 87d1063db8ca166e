"""Schedules of intended send times.

A schedule yields the k-th intended send time as an absolute monotonic nanosecond value
computed from the start, never by adding to the previous one, so a late send never shifts
the later ones and the schedule does not drift. Workers sleep until the intended time
(never spin: a spinning thread starves the others of the interpreter lock) and measure
latency from it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

# Intended times drawn BATCH at a time: a paced send runs next_ns() with the caches cold after
# a sleep, where each call costs several times what it does in a loop, and a Poisson draw was
# three calls; drawn ahead, a paced send's path to its sleep is several times shorter
# (contrib/bench/RESULTS.md).
BATCH = 64


class Schedule:
    """Intended send times for one worker at `rate` messages a second.

    ramp: seconds over which the rate rises linearly from 0 to `rate`.
    poisson: exponentially distributed gaps with the same mean (Poisson arrivals).
    phase: the share of one gap (0 to 1) by which this schedule runs behind its start, so
    that the N threads of a group, given phases 0, 1/N, ... (N-1)/N, send evenly spread
    instead of in bursts of N at the same instant.
    seed: the Poisson gaps' random seed (any hashable; strings seed the same in every run).
    """

    __slots__ = ("_start", "rate", "ramp_ns", "poisson", "phase", "k", "_next", "_rng",
                 "_ramp_msgs", "_drawn")

    def __init__(self, start_ns: int, rate: float, ramp: float = 0.0, poisson: bool = False,
                 seed: int | str | None = None, phase: float = 0.0) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._start = start_ns
        self.rate = rate
        self.ramp_ns = int(ramp * 1e9)
        self.poisson = poisson
        self.phase = phase
        self.k = 0  # the times drawn so far
        self._next = float(start_ns)
        self._rng = random.Random(seed)
        # Messages sent during the ramp: the area under the rate line.
        self._ramp_msgs = rate * ramp / 2.0
        self._drawn: Iterator[int] = iter(())

    @property
    def start(self) -> int:
        return self._start

    @start.setter
    def start(self, start_ns: int) -> None:
        """Move the schedule, the times drawn ahead with it."""
        shift = start_ns - self._start
        self._start = start_ns
        self._drawn = iter([t + shift for t in self._drawn])

    def _offset_ns(self, k: float) -> float:
        """Nanoseconds after start at which cumulative sends reach k."""
        if self.ramp_ns and k < self._ramp_msgs:
            # N(t) = rate * t^2 / (2 * ramp)  =>  t = sqrt(2 * ramp * k / rate)
            return math.sqrt(2.0 * (self.ramp_ns / 1e9) * k / self.rate) * 1e9
        return self.ramp_ns + (k - self._ramp_msgs) * 1e9 / self.rate

    def next_ns(self) -> int:
        """The intended time of the next message."""
        t = next(self._drawn, None)
        if t is None:
            self._drawn = iter(self._draw(BATCH))
            t = next(self._drawn)
        return t

    def _draw(self, n: int) -> list[int]:
        """The next n intended times."""
        k, start, times = self.k, self._start, []
        self.k = k + n
        if not self.poisson:
            if not self.ramp_ns:  # _offset_ns's steady case, inline
                rate, phase = self.rate, self.phase
                return [start + int((i + phase) * 1e9 / rate) for i in range(k, k + n)]
            return [start + int(self._offset_ns(i + self.phase)) for i in range(k, k + n)]
        # Poisson: the arrival count advances by exponential steps in "message" units, and
        # the ramp maps counts to times, so ramp-up and Poisson compose.
        step, offset = self._rng.expovariate, self._offset_ns
        for i in range(k, k + n):
            if i == 0:
                self._next = self.phase
            else:
                self._next += step(1.0)
            times.append(start + int(offset(self._next)))
        return times

    def retarget(self, now_ns: int, rate: float) -> None:
        """Continue at a new rate from now, without a burst to catch up."""
        self._start = now_ns
        self.rate = rate
        self.ramp_ns = 0
        self._ramp_msgs = 0.0
        self.k = 0
        self._next = 0.0
        self._drawn = iter(())
