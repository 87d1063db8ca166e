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
from typing import Any

# Intended times drawn BATCH at a time: a paced send runs next_ns() with the caches cold after
# a sleep, where each call costs several times what it does in a loop, and a Poisson draw was
# three calls; drawn ahead, a paced send's path to its sleep is several times shorter
# (contrib/bench/RESULTS.md).
BATCH = 64


# An intended time that never comes: after a last step of rate 0.
NEVER_S = 1e9
INF = float("inf")


class Schedule:
    """Intended send times for one worker at `rate` messages a second.

    ramp: seconds over which the rate rises linearly from 0 to `rate`.
    steps: instead of rate and ramp, the rate in steps (harness.plan.steps.RateStep: this
    worker's rate, each step's length from the start, a ramp from the step before); after
    the last the rate stays.
    poisson: exponentially distributed gaps with the same mean (Poisson arrivals).
    phase: the share of one gap (0 to 1) by which this schedule runs behind its start, so
    that the N threads of a group, given phases 0, 1/N, ... (N-1)/N, send evenly spread
    instead of in bursts of N at the same instant.
    seed: the Poisson gaps' random seed (any hashable; strings seed the same in every run).
    burst: (messages, every seconds): besides the rate, that many messages due at once every
    so often (the first one period after the start), not spread by the phase: the group's
    threads burst together.

    The k-th message's time is where the count of messages, the integral of the rate from
    the start, reaches k (plus the phase): exact across ramps and steps, so a step changes
    the gaps from its first instant and owes nothing to the step before.
    """

    __slots__ = ("_start", "rate", "poisson", "phase", "k", "_next", "_rng", "_segments",
                 "_at", "_drawn", "_burst", "_burst_next")

    def __init__(self, start_ns: int, rate: float, ramp: float = 0.0, poisson: bool = False,
                 seed: int | str | None = None, phase: float = 0.0,
                 steps: list[Any] | None = None,
                 burst: tuple[int, float] | None = None) -> None:
        if rate <= 0 and not steps:
            raise ValueError("rate must be positive")
        self._start = start_ns
        self.rate = rate
        self.poisson = poisson
        self.phase = phase
        self.k = 0  # the times drawn so far
        self._next = float(start_ns)
        self._rng = random.Random(seed)
        # (begin s, messages by then, rate at its begin, rate at its end, seconds) of each
        # part of the schedule, the last for ever; None: one steady rate (the common case).
        self._segments = _segments(rate, ramp, steps) if ramp or steps else None
        self._at = 0  # the segment the last time drawn fell in
        self._drawn: Iterator[int] = iter(())
        # (messages, period ns) of the bursts, and when the next is due (absolute ns)
        self._burst = (burst[0], int(burst[1] * 1e9)) if burst and burst[0] else None
        self._burst_next = start_ns + self._burst[1] if self._burst else 0

    @property
    def start(self) -> int:
        return self._start

    @start.setter
    def start(self, start_ns: int) -> None:
        """Move the schedule, the times drawn ahead with it."""
        shift = start_ns - self._start
        self._start = start_ns
        self._drawn = iter([t + shift for t in self._drawn])
        self._burst_next += shift

    def _offset_ns(self, k: float) -> float:
        """Nanoseconds after start at which cumulative sends reach k (k never goes down)."""
        segments, at = self._segments, self._at
        assert segments is not None
        while at + 1 < len(segments) and k >= segments[at + 1][1]:
            at += 1
        self._at = at
        begin, before, r0, r1, seconds = segments[at]
        n = k - before
        if r0 == r1:
            return (begin + n / r0) * 1e9 if r0 else NEVER_S * 1e9
        # Within a linear ramp, count(t) = r0 t + (r1 - r0) t^2 / (2 T); its root, in the
        # form that stays exact where r0 is 0 and where the rate falls.
        if n <= 0:
            return begin * 1e9
        a = (r1 - r0) / (2.0 * seconds)
        return (begin + 2.0 * n / (r0 + math.sqrt(r0 * r0 + 4.0 * a * n))) * 1e9

    def next_ns(self) -> int:
        """The intended time of the next message."""
        t = next(self._drawn, None)
        if t is None:
            times = self._draw(BATCH)
            if self._burst is not None:
                times = self._with_bursts(times)
            self._drawn = iter(times)
            t = next(self._drawn)
        return t

    def _with_bursts(self, times: list[int]) -> list[int]:
        """times with the bursts due up to the last of them (at most a batch's worth of
        bursts where the rate sends nothing for ever)."""
        size, period = self._burst  # type: ignore[misc]
        last = times[-1] if times[-1] - self._start < NEVER_S * 1e9 else None
        added = 0
        while (self._burst_next <= last) if last is not None else added < BATCH:
            times += [self._burst_next] * size
            self._burst_next += period
            added += 1
        return sorted(times)

    def _draw(self, n: int) -> list[int]:
        """The next n intended times."""
        k, start, times = self.k, self._start, []
        self.k = k + n
        if not self.poisson:
            if self._segments is None:  # _offset_ns's steady case, inline
                rate, phase = self.rate, self.phase
                return [start + int((i + phase) * 1e9 / rate) for i in range(k, k + n)]
            return [start + int(self._offset_ns(i + self.phase)) for i in range(k, k + n)]
        # Poisson: the arrival count advances by exponential steps in "message" units, and
        # the ramp maps counts to times, so ramp-up and Poisson compose.
        step = self._rng.expovariate
        steady = self._segments is None
        for i in range(k, k + n):
            if i == 0:
                self._next = self.phase
            else:
                self._next += step(1.0)
            times.append(start + int(self._next * 1e9 / self.rate if steady
                                     else self._offset_ns(self._next)))
        return times

    def retarget(self, now_ns: int, rate: float) -> None:
        """Continue at a new rate from now, without a burst to catch up (ramps and steps
        left behind)."""
        self._start = now_ns
        self.rate = rate
        self._segments = None
        self._at = 0
        self.k = 0
        self._next = 0.0
        self._drawn = iter(())
        if self._burst is not None:
            self._burst_next = now_ns + self._burst[1]


def _segments(rate: float, ramp: float, steps: list[Any] | None
              ) -> list[tuple[float, float, float, float, float]]:
    out: list[tuple[float, float, float, float, float]] = []
    if not steps:
        out.append((0.0, 0.0, 0.0, rate, ramp))
        out.append((ramp, rate * ramp / 2.0, rate, rate, INF))
        return out
    at = count = 0.0
    before = 0.0 if steps[0].ramp else steps[0].rate
    for step in steps:
        if step.ramp:
            out.append((at, count, before, step.rate, step.ramp))
            count += (before + step.rate) / 2.0 * step.ramp
            at += step.ramp
        held = step.seconds - step.ramp
        if held > 0:
            out.append((at, count, step.rate, step.rate, held))
            count += step.rate * held
            at += held
        before = step.rate
    out.append((at, count, before, before, INF))
    return out
