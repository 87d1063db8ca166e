"""The backlog: what producers sent (times the fan-out) minus what consumers received,
counted interval by interval from the start of the run; and what was left of it when the
warm-up ended, which the consumers then received inside the measured span."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.plan.run import RunSpec
from harness.plan.topology import endpoints
from harness.stats.figures import kept
from harness.stats.views import IntervalView

# The backlog the warm-up left is said where it is at least this many messages and this
# share of what the consumers received while measured: their rate is that much above what
# the producers sent in the same span.
WARMUP_LEFT_LEAST = 10
WARMUP_LEFT_SHARE = 0.01


def flows(run: RunSpec, counters: Mapping[str, Mapping[str, int]], unit: str = "messages"
          ) -> dict[str, tuple[int, int]]:
    """Per destination whose consumers receive everything sent there (str(Endpoint)), of the
    counts given per group name: what its producers sent that the broker kept, times the
    fan-out, and what its consumers received (once each); in bytes, what the producers sent
    times the fan-out and what the consumers received."""
    out = {}
    for point in endpoints(run).values():
        if not point.checked:
            continue
        sent = received = 0
        for i in point.producers:
            c = counters.get(run.groups[i].name)
            if c is not None:
                sent += (kept(c) if unit == "messages" else c["bytes"]) * \
                    point.copies  # type: ignore[arg-type]
        for i in point.consumers:
            c = counters.get(run.groups[i].name)
            if c is not None:
                received += c["received"] - c["duplicated"] if unit == "messages" else \
                    c["bytes"]
        out[str(point)] = (sent, received)
    return out


def warmup_left(run: RunSpec, warmup: Mapping[str, Mapping[str, int]],
                measured: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Per destination, the backlog the warm-up left (of each group's warm-up counts), where
    it is large enough to lift what the consumers received while measured (of the measured
    phase's counts, the drain's not among them) above what the producers sent in the same
    span."""
    span = flows(run, measured)
    return {point: sent - got for point, (sent, got) in flows(run, warmup).items()
            if sent - got >= max(WARMUP_LEFT_LEAST, WARMUP_LEFT_SHARE * span[point][1])
            # A consumer slower than its producers (--consumer-rate) leaves a backlog that
            # lifts nothing.
            and span[point][1] > span[point][0]}


def warmup_note(point: str, left: int) -> str:
    """What a backlog the warm-up left means for the figures, in a line."""
    return (f"{point}: the warm-up left a backlog of {left:,} messages, which its consumers "
            "received while measured: their rate is above what its producers sent in the "
            "same span (a longer warm-up, or a rate the consumers keep up with, leaves none)")


def abandoned_note(threads: list[str]) -> str:
    """What threads left in a client call after the stop mean for the figures, in a line."""
    shown = ", ".join(threads[:5]) + (f" and {len(threads) - 5} more" if len(threads) > 5
                                      else "")
    return (f"abandoned: {shown} did not stop (blocked in a client call); what each counted "
            "up to its last completed call is in the totals, in the interval it was "
            "abandoned in (its group's measured rate may be low, and a receiver's above it)")


class Backlog:
    """Fed each interval's view in order; `after` gives the backlog at its end."""

    def __init__(self, run: RunSpec) -> None:
        self.run = run
        self.value = 0

    def after(self, view: IntervalView) -> int:
        self.value += sum(sent - received for sent, received in flows(
            self.run, {name: group.counters for name, group in view.groups.items()}).values())
        return self.value


# Drained: the backlog back to this share of what it was when the consumers were released.
DRAINED_SHARE = 0.01


class FillAndDrain:
    """--backlog: each interval's change of the backlog (in the goal's unit) and messages
    received, by index, so that partial merges add up; the consumers' release is the end of
    the first interval by which the backlog reached the goal (what the controller watches
    for), the drain's end the first after it at DRAINED_SHARE of the backlog then."""

    def __init__(self, run: RunSpec, goal: int, unit: str) -> None:
        self.run, self.goal, self.unit = run, goal, unit
        # index -> (start s, length s, change in unit, messages received)
        self.intervals: dict[int, tuple[float, float, int, int]] = {}
        self.now = 0  # the backlog after the intervals merged in order (the live run's)
        self.reached = False

    def add(self, index: int, start: float, length: float,
            counters: Mapping[str, Mapping[str, int]]) -> bool:
        """One interval; True where the backlog reached the goal with it (once)."""
        messages = flows(self.run, counters)
        counted = messages if self.unit == "messages" else flows(self.run, counters, self.unit)
        change = sum(s - r for s, r in counted.values())
        received = sum(r for _, r in messages.values())
        self.intervals[index] = (start, length, change, received)
        self.now += change
        if not self.reached and self.now >= self.goal:
            self.reached = True
            return True
        return False

    def absorb(self, other: FillAndDrain) -> None:
        self.intervals.update(other.intervals)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"goal": self.goal, "unit": self.unit}
        ordered = sorted(self.intervals.values())
        if not ordered:
            return out
        first = ordered[0][0]
        level, released, taken = 0, None, 0
        for start, length, change, received in ordered:
            level += change
            end = start + length
            if released is None:
                if level >= self.goal:
                    released = end
                    out.update(released_at=end - first, fill_seconds=end - first,
                               at_release=level)
                continue
            taken += received
            if level <= DRAINED_SHARE * out["at_release"]:
                seconds = end - released
                out.update(drain_seconds=seconds, drained_at=end - first,
                           drain_rate=taken / seconds if seconds > 0 else None)
                break
        out["at_end"] = level
        return out
