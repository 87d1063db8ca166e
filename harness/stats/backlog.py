"""The backlog: what producers sent (times the fan-out) minus what consumers received,
counted interval by interval from the start of the run; and what was left of it when the
warm-up ended, which the consumers then received inside the measured span."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.spec.run import RunSpec
from harness.spec.topology import endpoints
from harness.stats.figures import kept

if TYPE_CHECKING:  # harness.stats.intervals reads left_over
    from harness.stats.intervals import IntervalView

# The backlog the warm-up left is said where it is at least this many messages and this
# share of what the consumers received while measured: their rate is that much above what
# the producers sent in the same span.
WARMUP_LEFT_LEAST = 10
WARMUP_LEFT_SHARE = 0.01


def flows(run: RunSpec, counters: Mapping[str, Mapping[str, int]]
          ) -> dict[str, tuple[int, int]]:
    """Per destination whose consumers receive everything sent there (str(Endpoint)), of the
    counts given per group name: what its producers sent that the broker kept, times the
    fan-out, and what its consumers received (once each)."""
    out = {}
    for point in endpoints(run).values():
        if not point.checked:
            continue
        sent = received = 0
        for i in point.producers:
            c = counters.get(run.groups[i].name)
            if c is not None:
                sent += kept(c) * point.copies  # type: ignore[arg-type]
        for i in point.consumers:
            c = counters.get(run.groups[i].name)
            if c is not None:
                received += c["received"] - c["duplicated"]
        out[str(point)] = (sent, received)
    return out


def warmup_left(run: RunSpec, warmup: Mapping[str, Mapping[str, int]],
                measured: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Per destination, the backlog the warm-up left (of each group's warm-up counts), where
    it is large enough to lift what the consumers received while measured (of their
    measured counts) above what the producers sent in the same span."""
    received = {point: got for point, (_, got) in flows(run, measured).items()}
    return {point: sent - got for point, (sent, got) in flows(run, warmup).items()
            if sent - got >= max(WARMUP_LEFT_LEAST, WARMUP_LEFT_SHARE * received[point])}


def warmup_note(point: str, left: int) -> str:
    """What a backlog the warm-up left means for the figures, in a line."""
    return (f"{point}: the warm-up left a backlog of {left:,} messages, which its consumers "
            "received while measured: their rate is above what its producers sent in the "
            "same span (a longer warm-up, or a rate the consumers keep up with, leaves none)")


class Backlog:
    """Fed each interval's view in order; `after` gives the backlog at its end."""

    def __init__(self, run: RunSpec) -> None:
        self.run = run
        self.value = 0

    def after(self, view: IntervalView) -> int:
        self.value += sum(sent - received for sent, received in flows(
            self.run, {name: group.counters for name, group in view.groups.items()}).values())
        return self.value
